"""What ``paramsym align --census-groups`` aligns over: the census's groups of a model, traced once.

A composition of two areas (the census traces the model's symmetry spaces; alignment consumes
them), so it lives in the kinds layer above both, not in the command line.
"""

from __future__ import annotations

__all__ = ["CENSUS_SYMMETRIES", "census_plan"]

CENSUS_SYMMETRIES = ("permutation", "rotation", "attention")


def census_plan(model, seed: int = 0, symmetries=None) -> dict:
    """What ``--census-groups`` aligns ``model``'s checkpoints over, traced once on a float64 copy.

    ``symmetries``: a subset of :data:`CENSUS_SYMMETRIES` with ``permutation`` (default
    ``permutation, attention``). Returns ``{"spec": PermutationSpec, "attention": [AttentionLayout
    per layer] or [], "rotation": StreamRotation or None, "symmetries": [...]}``. ``rotation`` applies to models
    whose stream norms are all RMS-type without bias and whose output is read by a linear map (an
    LM head): :func:`paramsym.census.rotation.rotate_residual` (``M = I``: the canonical form,
    :func:`paramsym.census.canonical.canonical_form`) folds the norm scales. LayerNorm models are
    refused here (their canonical form has RMS norms: not a checkpoint of their class once rotated).

    Raises:
        ConfigError: an unknown or empty ``symmetries``, or one without ``permutation``.
        SymmetryNotApplicableError: a requested group the model does not have (with the reason).
        TraceError: the tracer cannot follow the model.
    """
    import copy

    import torch

    from ..alignment.checkpoints import StreamRotation
    from ..census.canonical import norm_centring
    from ..census.permspec import spec_from_spaces
    from ..census.rotation import rotate_residual
    from ..census.spaces import derive_spaces
    from ..census.walk import _output, default_inputs
    from ..errors import ConfigError, SymmetryNotApplicableError
    from ..models.adapters import require_eager

    asked = None if symmetries is None else [s.strip() for s in symmetries if s.strip()]
    for s in asked or []:
        if s not in CENSUS_SYMMETRIES:
            raise ConfigError(f"--symmetries with --census-groups: unknown {s!r}; choose from "
                              f"{', '.join(CENSUS_SYMMETRIES)} (comma-separated).")
    if asked is not None and "permutation" not in asked:
        raise ConfigError(f"--symmetries with --census-groups must include permutation; received {','.join(asked)!r}.")
    gen = lambda: torch.Generator().manual_seed(seed)  # noqa: E731
    work = require_eager(copy.deepcopy(model)).double().eval()
    inputs = default_inputs(work, gen())
    with torch.no_grad():
        sp = derive_spaces(work, inputs, _output)
    # sub-blocks: heads and FFN units inside fused tensors (GPT-2 c_attn, Phi-3 qkv_proj) are aligned too
    spec = spec_from_spaces(sp, {k: v.detach() for k, v in model.named_parameters()}, sub_blocks=True)
    plan = {"spec": spec, "attention": [], "rotation": None, "symmetries": ["permutation"]}
    if asked is not None and "rotation" in asked:
        centred = sorted(n for n, c in norm_centring(work, sp).items() if c)  # OLMo's parameter-free ones too
        if centred:  # the canonical form swaps LayerNorm for nn.RMSNorm: not a checkpoint of this class once rotated
            raise SymmetryNotApplicableError(
                f"--symmetries rotation does not apply to this {type(model).__name__} yet: its stream norms {centred[:2]}… "
                "are LayerNorms, whose canonical form (paramsym.census.canonical.canonical_form) replaces them by RMS "
                "norms, so a rotated model is no longer a save_pretrained checkpoint of this class. Drop it from "
                "--symmetries.")
        try:
            folded, _ = rotate_residual(work, inputs, _output, gen(), M=torch.eye(sp.hidden_size, dtype=torch.float64),
                                     spaces=sp)
        except SymmetryNotApplicableError as e:
            raise SymmetryNotApplicableError(f"--symmetries rotation does not apply to this "
                                             f"{type(model).__name__}: {e} Drop it from --symmetries.") from None
        else:
            with torch.no_grad():
                spf = derive_spaces(folded, inputs, _output)
            norms = {n for info in spf.norms.values() for n in (info.weight, info.bias) if n}
            eye = torch.eye(sp.hidden_size, dtype=torch.float64)

            def fold(m):
                return rotate_residual(m, default_inputs(m, gen()), _output, gen(), M=eye, spaces=sp)[0]

            fparams = {k: v.detach() for k, v in folded.named_parameters()}
            plan["rotation"] = StreamRotation(fold, {n: ax for n, ax in spf.stream if n not in norms},
                                              spec_from_spaces(spf, fparams))
            plan["symmetries"].append("rotation")
    if asked is None or "attention" in asked:
        plan["attention"] = [layer.attention for layer in sp.layout.layers]
        plan["symmetries"].append("attention")
    return plan
