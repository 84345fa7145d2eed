"""Named blocks for the affine solver (``paramsym affine --preset NAME``).

Each preset builds a float64 :class:`~paramsym.targets.Target` (a reference network, its whole
parameter set as the block, a fixed Gaussian batch) and an ansatz, from an explicit generator.
``expected`` is the dimension theory predicts ([Discovery] §6.1, Appendix F):

========================  ============================================  ===========  ==========
preset                    block                                         ansatz       expected
========================  ============================================  ===========  ==========
``linear2x2``             ``U V`` (2×2 factors), x ∈ R²                 full (72)    gl(2): 4
``linear3x2``             ``W3 W2 W1`` (2×2 factors)                    full (156)   2·gl(2): 8
``relu242``               bias-free ReLU (2, 4, 2)                      full (272)   4 (commuting)
``relu2881``              bias-free ReLU (2, 8, 8, 1), p = 88           full (7,832) 16
``leakyrelu-bias``        LeakyReLU (3, 5, 2) with biases               full (1,056) 5 (hidden units)
``tanh-mlp``              tanh (3, 4, 2) with biases                    full (702)   0
``attention-d8h2``        bias-free MHA, width 8, 2 heads               row maps     2·(4²+4²) = 64
``attention-d8h2-bias``   MHA with biases                               row maps+    64 + 8 + 8 = 80
========================  ============================================  ===========  ==========

Attention ansatz (no head structure assumed): one 8×8 matrix on the rows of each of the query,
key and value parts of ``in_proj_weight`` (with biases: jointly on the rows of
``[W | b]``), one 8×8 matrix on the columns of ``out_proj.weight`` (256 unknowns). The bias
variant adds translations of both biases and the linear map ``out_proj.weight → out_proj.bias``
(800 unknowns): the key bias drops out of the softmax (8 translations) and a value-bias shift
``δ`` is absorbed by ``δb_o = −W_o δ`` (8 more).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..errors import check_seed
from ..models.reference import attention_layer, reference_mlp
from ..presets import Preset, PresetTable
from ..targets import Target
from .ansatz import Ansatz, CrossMap, RowMaps, Translations

__all__ = ["AFFINE_PRESETS", "build_preset", "expected_dimension", "preset_samples"]


def _preset(name: str, summary: str, expected: int, build: Callable[[torch.Generator], tuple[Target, Ansatz]],
            samples: int | None = None) -> Preset:
    """An affine preset: ``load()`` returns ``build(generator) -> (target, ansatz)``; ``info["expected"]``
    is the dimension theory predicts; ``fields["samples"]`` a sample count known to suffice."""
    return Preset(name, "affine", "paramsym affine --preset " + name, summary,
                  fields={} if samples is None else {"samples": samples}, info={"expected": expected},
                  load=lambda: build)


def _mlp_target(widths, act, bias, n, gen, name):
    model = reference_mlp(widths, act, bias=bias, generator=gen).to(torch.float64)
    if bias:  # reference networks have zero biases: draw them, so the biases are generic
        with torch.no_grad():
            for nm, prm in model.named_parameters():
                if nm.endswith("bias"):
                    prm.copy_(0.5 * torch.randn(prm.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(n, widths[0], generator=gen, dtype=torch.float64)
    target = Target(model, None, x, name=name)
    return target, Ansatz.full(target.p)


def _attention(bias: bool, gen: torch.Generator) -> tuple[Target, Ansatz]:
    d, heads = 8, 2
    layer = attention_layer(d, heads, bias=bias, generator=gen)
    x = torch.randn(2, 6, d, generator=gen, dtype=torch.float64)
    target = Target(layer, None, (x, x, x), name=f"attention-d{d}h{heads}" + ("-bias" if bias else ""))
    block = target.block
    qkv = [range(0, d), range(d, 2 * d), range(2 * d, 3 * d)]
    rows = {"in_proj_weight": 0, "in_proj_bias": 0} if bias else {"in_proj_weight": 0}
    terms = [RowMaps(block, rows, qkv, label="query/key/value row maps (8×8 each)"),
             RowMaps(block, {"out_proj.weight": 1}, label="output-projection column map (8×8)")]
    if bias:
        terms += [Translations(block, ["in_proj_bias", "out_proj.bias"]),
                  CrossMap(block, ["out_proj.weight"], ["out_proj.bias"])]
    return target, Ansatz(target.p, terms)


AFFINE_PRESETS: PresetTable = PresetTable("affine preset", [
    _preset("linear2x2", "two-layer linear U V, 2×2 factors: gl(2)", 4,
            lambda g: _mlp_target([2, 2, 2], "identity", False, 16, g, "linear2x2")),
    _preset("linear3x2", "three-layer linear chain of 2×2 factors: gl(2) ⊕ gl(2)", 8,
            lambda g: _mlp_target([2, 2, 2, 2], "identity", False, 16, g, "linear3x2")),
    _preset("relu242", "bias-free ReLU (2,4,2): 4 commuting rescalings", 4,
            lambda g: _mlp_target([2, 4, 2], "relu", False, 32, g, "relu242")),
    _preset("relu2881", "bias-free ReLU (2,8,8,1), 88 parameters: 16 rescalings", 16,
            lambda g: _mlp_target([2, 8, 8, 1], "relu", False, 32, g, "relu2881")),
    _preset("leakyrelu-bias", "LeakyReLU (3,5,2) with biases: one rescaling per hidden unit", 5,
            lambda g: _mlp_target([3, 5, 2], "leaky_relu", True, 32, g, "leakyrelu-bias")),
    _preset("tanh-mlp", "tanh (3,4,2) with biases: no continuous symmetry", 0,
            lambda g: _mlp_target([3, 4, 2], "tanh", True, 32, g, "tanh-mlp")),
    _preset("attention-d8h2", "bias-free multi-head attention, width 8, 2 heads: "
            "per-head gl(4) ⊕ gl(4)", 64, lambda g: _attention(False, g)),
    _preset("attention-d8h2-bias", "attention with biases: + key-bias and value-bias "
            "translations", 80, lambda g: _attention(True, g), samples=96),
])


def expected_dimension(name: str) -> int:
    """The dimension theory predicts for preset ``name``."""
    return int(AFFINE_PRESETS.get_preset(name).info["expected"])


def preset_samples(name: str) -> int | None:
    """A sample count known to suffice for preset ``name`` (``None``: the solver's automatic count)."""
    return AFFINE_PRESETS.get_preset(name).fields.get("samples")


def build_preset(name: str, seed: int = 0) -> tuple[Target, Ansatz]:
    """The target and ansatz of preset ``name`` (seeded)."""
    return AFFINE_PRESETS.get_preset(name).load()(torch.Generator().manual_seed(check_seed(seed)))
