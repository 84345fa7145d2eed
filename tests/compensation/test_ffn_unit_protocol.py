"""The one FFN-unit module (:mod:`paramsym.actions.ffn_unit`) and the paper's protocol of
``paramsym compensate --learned`` on a tiny Hugging Face model built from a config (issue 17).

The learned run trains a few steps on a 2-layer BERT saved with ``save_pretrained``; its JSON
figures are recomputed here independently: the block is written into the model's float32
tensors by hand (not through the target's installer), motion is the entrywise median read back
from the installed tensors, and the stored-weight composition is formed from tensors read back
after each installation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_checks import refused, run_cli

from paramsym.actions.ffn_unit import (
    EVAL_KEYS,
    check_rho,
    evaluate_action,
    incoming_size,
    motion_beta,
    prepare,
    symmetric_tangent,
)
from paramsym.errors import ConfigError, ShapeError, UnknownArchitectureError

transformers = pytest.importorskip("transformers")

LAYER, UNIT, TOKENS = 1, 3, 4


def tiny_bert(seed: int = 0):
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return transformers.BertModel(cfg).eval()




def test_symmetric_tangent_preserves_the_boundary_output_to_first_order() -> None:
    """J u = 0 for the tangent (dense float64 Jacobian by autograd as the reference); the incoming
    part alone changes the output."""
    u = prepare(tiny_bert(), layer=LAYER, unit=UNIT, batch={"input_ids": torch.arange(3, 3 + TOKENS)[None]})
    T = u.target
    n = incoming_size(T)
    delta = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    tangent = symmetric_tangent(T, delta)
    J = torch.autograd.functional.jacobian(T, T.theta0.double())  # q × p, dense
    only_in = torch.zeros_like(tangent)
    only_in[:n] = delta
    assert torch.equal(tangent[:n], delta)
    assert float((J @ tangent).norm()) <= 1e-10 * float((J @ only_in).norm())
    assert float((J @ only_in).norm()) > 0 and float(tangent[n:].abs().max()) > 0  # compensators do move
    beta, info = motion_beta(T, motion=1e-3, rho=0.5, margin=2.0)
    # β = margin · motion / (0.6 ρ r): the prediction inverts to the requested entrywise motion
    assert math.isclose(0.6 * 0.5 * beta * info["entry_ratio"], 2e-3, rel_tol=1e-12)


def _install(model, theta: torch.Tensor, j: int, B: list[int], d: int) -> None:
    """Write the block (W_in[j], b_in[j], W_out[:, B] row-major) into the float32 model by hand."""
    lay = model.encoder.layer[LAYER]
    with torch.no_grad():
        lay.intermediate.dense.weight[j] = theta[:d].float()
        lay.intermediate.dense.bias[j] = theta[d].float()
        lay.output.dense.weight[:, B] = theta[d + 1:].reshape(d, len(B)).float()


def _read(model, j: int, B: list[int]) -> torch.Tensor:
    lay = model.encoder.layer[LAYER]
    return torch.cat([lay.intermediate.dense.weight[j], lay.intermediate.dense.bias[j:j + 1],
                      lay.output.dense.weight[:, B].reshape(-1)]).detach().double()


@pytest.mark.parametrize("kind", ["direct", "flow"])
def test_learned_compensate_json_figures_recomputed_from_installed_weights(tmp_path: Path, capsys, monkeypatch,
                                                                          kind: str) -> None:
    """Both action kinds: the direct map (the paper's) and the flow (a group action by construction)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = tiny_bert()
    model.save_pretrained(tmp_path / "bert")
    out = tmp_path / "run"
    rc, stdout, err = run_cli(capsys, ["compensate", "--model", tmp_path / "bert", "--layer", LAYER, "--unit", UNIT,
                                    "--tokens", TOKENS, "--learned", "--action", kind, "--steps", "3", "--json",
                                    "--quiet", "--out", out])
    assert rc == 0, err
    d = json.loads(stdout)
    for key in (*EVAL_KEYS, "train_cpu_seconds", "beta"):
        assert isinstance(d[key], float) and math.isfinite(d[key]), key
    assert d["rho"] == 0.5 and d["samples"] == 32 and d["train_cpu_seconds"] > 0
    assert "train_cpu_seconds" not in json.loads((out / "metrics.json").read_text())  # times: timing.json only
    assert d["motion_median"] > 0  # the learned action moves the weights

    # the same unit, the trained action, the evaluation's elements (documented draw: seed --seed 0)
    from paramsym.discovery.run import load_learned_action
    from paramsym.kinds.compensate import CompensateConfig, _prefix
    from paramsym.models.loading import load_model  # the one loader (a save_pretrained directory)

    cfg = CompensateConfig(model=str(tmp_path / "bert"), layer=LAYER, unit=UNIT, tokens=TOKENS, learned=True)
    host = load_model(cfg.model, quiet=True).float().eval()
    assert len(d["compensators"]) == 2 * TOKENS  # the learned action's default: 2N compensators
    setup = prepare(host, layer=LAYER, unit=UNIT, batch=_prefix(cfg, host), compensators=2 * TOKENS)
    assert setup.compensators == d["compensators"]
    action = load_learned_action(out / ("discovery-hybrid" + ("-flow" if kind == "flow" else "")),
                                 setup.target).double().eval()
    assert action.kind == kind and d["action"] == kind
    grp = action.group
    gen = torch.Generator().manual_seed(0)
    g1 = grp.matrices(grp.sample(32, 0.5, exact_factors=1, generator=gen)).double()
    g2 = grp.matrices(grp.sample(32, 0.5, exact_factors=1, generator=gen)).double()

    j, B, dm = UNIT, setup.compensators, 16
    base = _read(host, j, B)
    motions, comps = [], []
    with torch.no_grad():
        for i in range(32):
            work = load_model(cfg.model, quiet=True).float().eval()
            _install(work, action.act_many(g1[i:i + 1], base[None])[0], j, B, dm)
            th1 = _read(work, j, B)  # float32 as stored
            rel = (th1 - base).abs()[base != 0] / base.abs()[base != 0]
            motions.append(float(rel.median()))
            _install(work, action.act_many(g2[i:i + 1], th1[None])[0], j, B, dm)
            th2 = _read(work, j, B)
            _install(work, action.act_many((g2[i] @ g1[i])[None], base[None])[0], j, B, dm)
            th12 = _read(work, j, B)
            comps.append(float((th12 - th2).norm() / ((th1 - base).norm() + (th2 - th1).norm())))
    assert math.isclose(d["motion_median"], float(np.median(motions)), rel_tol=1e-6)
    assert math.isclose(d["composition_error"], float(np.median(comps)), rel_tol=1e-6)
    assert math.isclose(d["composition_error_p95"], float(np.percentile(comps, 95)), rel_tol=1e-6)
    if kind == "flow":
        # a group action by construction: in float64 its composition error is RK4's truncation error,
        # O(N⁻⁴) in the steps N per flow: ≤ 1e-6 with N = 16, and 16× finer than N = 4 by far more than 16×
        def composition(steps: int) -> float:
            action.flow_steps = steps
            with torch.no_grad():
                t1 = action.act_many(g1, base.expand(32, -1))
                t2 = action.act_many(g2, t1)
                t12 = action.act_many(g2 @ g1, base.expand(32, -1))
            rel = (t12 - t2).norm(dim=-1) / ((t1 - base).norm(dim=-1) + (t2 - t1).norm(dim=-1))
            return float(rel.max())

        trained_steps = action.flow_steps
        coarse, fine = composition(4), composition(16)
        assert fine <= 1e-6 and fine * 50 <= coarse, (coarse, fine)
        action.flow_steps = trained_steps
    # the same figures through the library on the same elements (the installer path)
    ev = evaluate_action(setup.target, action, elements=(g1, g2))
    assert math.isclose(ev["motion_median"], d["motion_median"], rel_tol=1e-9)
    assert ev["ratio_random"] == pytest.approx(ev["drift_random"] / ev["drift_relative"], rel=1e-12)


# -- bad input: named errors, one line, nothing written ------------------------------------------------


@pytest.fixture()
def saved(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny_bert().save_pretrained(tmp_path / "bert")
    dead = tiny_bert()
    with torch.no_grad():  # every unit of layer 1 but UNIT has a zero feature: no compensator can absorb
        keep = dead.encoder.layer[LAYER].intermediate.dense
        w, b = keep.weight[UNIT].clone(), keep.bias[UNIT].clone()
        keep.weight.zero_()
        keep.bias.zero_()
        keep.weight[UNIT], keep.bias[UNIT] = w, b
    dead.save_pretrained(tmp_path / "dead")
    return tmp_path


def test_singular_compensators_are_refused(saved: Path, capsys) -> None:
    refused(capsys, ["compensate", "--model", "dead", "--layer", LAYER, "--unit", UNIT, "--tokens", TOKENS, "--out",
                     "o"], "ConvergenceError", f"--unit {UNIT} of layer {LAYER}", "condition number")
    assert not (saved / "o").exists()


@pytest.mark.parametrize("rho", ["0", "-0.5", "nan"])
def test_bad_rho_is_refused(saved: Path, capsys, rho: str) -> None:
    refused(capsys, ["compensate", "--model", "bert", "--layer", LAYER, "--unit", UNIT, "--learned", f"--rho={rho}",
                     "--out", "o"], "--rho")
    assert not (saved / "o").exists()


def test_bad_rho_is_refused_by_the_library() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="rho must be a finite number > 0"):
            check_rho(bad)
    from paramsym.experiments.discovery.transformer.run import TransformerDiscoveryConfig

    with pytest.raises(ConfigError, match="rho"):
        TransformerDiscoveryConfig(rho=float("nan")).validate()


def test_layer_out_of_range_is_refused(saved: Path, capsys) -> None:
    refused(capsys, ["compensate", "--model", "bert", "--layer", "7", "--unit", UNIT, "--learned", "--out", "o"],
            "ShapeError", "--layer 7", "0..1")
    assert not (saved / "o").exists()
    with pytest.raises(ShapeError, match="--layer 2 is out of range"):
        prepare(tiny_bert(), layer=2, unit=0, batch={"input_ids": torch.arange(3, 7)[None]})


def test_model_without_an_ffn_adapter_is_refused(saved: Path, capsys) -> None:
    cfg = transformers.DistilBertConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2, hidden_dim=32,
                                        max_position_embeddings=16)
    transformers.DistilBertModel(cfg).save_pretrained(saved / "distil")
    refused(capsys, ["compensate", "--model", "distil", "--layer", "0", "--unit", "0", "--learned", "--out", "o"],
            "UnknownArchitectureError", "distilbert")
    assert not (saved / "o").exists()
    with pytest.raises(UnknownArchitectureError, match="model_type"):
        prepare(torch.nn.Linear(2, 2), layer=0, unit=0, batch={"input_ids": torch.zeros(1, 2, dtype=torch.long)})



def test_learned_compensate_resumes_an_interrupted_training(tmp_path: Path, capsys, monkeypatch) -> None:
    """The training sub-run is saved under the problem's own name (``compensate-bert``); a resume must
    resolve the same configuration, or the interrupted training is refused as stale. The interruption
    here: the files a run killed after its last checkpoint leaves (no metrics or provenance yet); the
    slow kill-and-resume test in tests/e2e/test_run_kinds.py kills a real process mid-training."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny_bert().save_pretrained(tmp_path / "bert")
    out = tmp_path / "run"
    argv = ["compensate", "--model", tmp_path / "bert", "--layer", LAYER, "--unit", UNIT, "--tokens", TOKENS,
            "--learned", "--steps", "3", "--checkpoint-every", "1", "--json", "--quiet", "--out", out]
    rc, first, err = run_cli(capsys, argv)
    assert rc == 0, err
    sub = out / "discovery-hybrid"
    assert json.loads((sub / "config.json").read_text())["problem"]["preset"] == "compensate-bert"
    for f in (out / "metrics.json", sub / "metrics.json", sub / "provenance.json"):
        f.unlink()
    rc, again, err = run_cli(capsys, ["compensate", "--resume", out, "--json", "--quiet"])
    assert rc == 0, err
    starts = json.loads((sub / "env.json").read_text())["starts"]
    assert [s.get("resumed_from_step") for s in starts] == [None, 3]  # continued from its checkpoint
    assert json.loads(again)["motion_median"] == json.loads(first)["motion_median"]
