"""Training of the ``hamiltonian`` preset's model with atomic, resumable checkpoints.

The trained model is cached in the run directory: ``checkpoint/`` (safetensors tensors of the
model and the Adam moments + ``state.json`` with the epoch, loss history and a fingerprint of
the training configuration) is written every ``train.checkpoint_every`` epochs and at the end,
and ``model.safetensors`` holds the final weights. Running the preset again into the same
directory resumes an interrupted training or reuses the finished model; a checkpoint made with
a different training configuration is refused (:class:`~paramsym.errors.RunDirError`) rather
than overwritten.
"""

from __future__ import annotations

import json
import time
from typing import Any

import torch

from ....config import to_dict
from ....errors import RunDirError
from ....models.hamiltonian import SeparableHamiltonian, generate_trajectories, train_hamiltonian
from ....runs.rundir import RunDir, save_tensors
from .config import HamiltonianConfig


def fingerprint(cfg: HamiltonianConfig) -> str:
    """What the training trajectory depends on (seed, training data, model, optimiser), as JSON.

    ``train.epochs`` is excluded (asking for more epochs continues a cached run), and so are the
    settings that only affect the analysis (``system.analysis_alphas``, ``n_test_initial``) or
    the speed (``checkpoint_every``).
    """
    train = to_dict(cfg.train)
    for key in ("checkpoint_every", "epochs"):
        train.pop(key)
    system = to_dict(cfg.system)
    for key in ("analysis_alphas", "n_test_initial"):
        system.pop(key)
    return json.dumps({"seed": cfg.seed, "system": system, "model": to_dict(cfg.model), "train": train},
                      sort_keys=True)


def _pack(model: SeparableHamiltonian, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    tensors = {f"model.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    for i, st in opt.state_dict()["state"].items():
        for name, val in st.items():
            tensors[f"adam.{i}.{name}"] = torch.as_tensor(val).detach().clone().reshape(-1) if name == "step" \
                else val.detach().clone()
    return tensors


def _unpack(tensors: dict[str, torch.Tensor], model: SeparableHamiltonian, opt: torch.optim.Optimizer) -> None:
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict[int, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("adam."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v.reshape(()) if name == "step" else v
    sd = opt.state_dict()
    sd["state"] = state
    opt.load_state_dict(sd)


def train_or_load(cfg: HamiltonianConfig, out: RunDir, *, progress: bool = True) -> tuple[SeparableHamiltonian, dict[str, Any]]:
    """Train the model (or resume / reuse the one cached in ``out``); returns ``(model, info)``.

    Reproducible: the data and the initialisation come from ``torch.Generator().manual_seed(
    cfg.seed)``; a resumed run continues bit-for-bit (model and Adam state are restored).
    """
    dtype = torch.float32 if cfg.train.dtype == "float32" else torch.float64
    gen = torch.Generator().manual_seed(cfg.seed)
    s = cfg.system
    data = generate_trajectories(s.train_alphas, s.n_initial, s.num_steps, s.dt, generator=gen,
                                 q_radius=s.q_radius, p_radius=s.p_radius, dtype=dtype)
    model = SeparableHamiltonian(cfg.model.width, cfg.model.depth, generator=gen, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    fp = fingerprint(cfg)
    history: list[float] = []
    start = 0
    ck = out.load_checkpoint()
    if ck is not None:
        tensors, state = ck
        if state.get("fingerprint") != fp:
            raise RunDirError(
                f"{out.path} holds a Hamiltonian checkpoint trained with a different configuration "
                "(seed/system/model/train); pass a fresh --out directory, or the same settings "
                "to reuse it."
            )
        start = int(state["step"])
        if start > cfg.train.epochs:
            raise RunDirError(
                f"{out.path} holds a model trained for {start} epochs, more than the requested "
                f"train.epochs={cfg.train.epochs}; pass --set train.epochs={start} to reuse it or a "
                "fresh --out directory."
            )
        _unpack(tensors, model, opt)
        history = list(state.get("history", []))
    resumed_from = start
    t0 = time.perf_counter()

    def save(epoch_done: int) -> None:
        out.save_checkpoint(_pack(model, opt), {"step": epoch_done, "fingerprint": fp, "history": history,
                                                "done": epoch_done >= cfg.train.epochs})

    def callback(epoch: int, loss: float) -> None:
        history.append(loss)
        if (epoch + 1) % cfg.train.checkpoint_every == 0 and epoch + 1 < cfg.train.epochs:
            save(epoch + 1)

    if start < cfg.train.epochs:
        train_hamiltonian(model, data, epochs=cfg.train.epochs, lr=cfg.train.lr, l1=cfg.train.l1,
                          horizon=cfg.train.horizon, stride=cfg.train.stride, progress=progress,
                          callback=callback, optimizer=opt, start_epoch=start)
        save(cfg.train.epochs)
        save_tensors(out.file("model.safetensors"), model.state_dict(), metadata={"fingerprint": fp})
    out.write_json("history.json", {"loss": history})
    info = {
        "epochs": cfg.train.epochs,
        "resumed_from_epoch": resumed_from,
        "cached": resumed_from >= cfg.train.epochs,
        "seconds": time.perf_counter() - t0,
        "initial_loss": history[0] if history else None,
        "final_loss": history[-1] if history else None,
        "n_trajectories": int(data.alpha.numel()),
        "params_kinetic": sum(p.numel() for p in model.kinetic.parameters()),
        "params_potential": sum(p.numel() for p in model.potential.parameters()),
    }
    return model, info
