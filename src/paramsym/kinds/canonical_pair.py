"""Two Hugging Face models put into canonical form for alignment with the stream's orthogonal group.

A composition of two areas — the census's canonical form
(:func:`paramsym.census.canonical.canonical_form`, the traced stream axes of
:func:`paramsym.census.spaces.derive_spaces`) feeding the alignment's ``orthogonal`` and
``refined`` stages (:class:`paramsym.alignment.orthogonal.CanonicalPair`) — so it lives in the
kinds layer above both.

:func:`canonical_pair` refuses, before any work and with nothing written: models of different
classes, configurations or tensor shapes, one tied and one untied LM head
(:class:`~paramsym.errors.ArchitectureMismatchError`), NaN or inf weights
(:class:`~paramsym.errors.NonFiniteError`), and the canonical form's own refusals
(:class:`~paramsym.errors.SymmetryNotApplicableError`: post-norm models, base models, ...).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["canonical_pair", "canonical_pair_of", "is_tied"]


def is_tied(model: nn.Module) -> bool:
    """Whether ``model``'s LM head shares its weight with the input embedding."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return head is not None and emb is not None and head.weight is getattr(emb, "weight", None)


def _inputs(model: nn.Module, inputs: Tensor | Mapping[str, Any]) -> dict[str, Any]:
    """A batch tensor becomes ``{first argument of forward: tensor}`` (``input_ids``, ``pixel_values``);
    floating tensors in float64, as the models of the pair (token ids as they are)."""
    if not isinstance(inputs, Mapping):
        inputs = {next(iter(inspect.signature(model.forward).parameters)): inputs}
    return {k: v.double() if isinstance(v, Tensor) and v.is_floating_point() else v for k, v in inputs.items()}


def _check_pair(model_a: nn.Module, model_b: nn.Module) -> None:
    from ..alignment.arch import check_same_architecture
    from ..errors import ArchitectureMismatchError, ConfigError, NonFiniteError

    for side, m in (("A", model_a), ("B", model_b)):
        if not isinstance(m, nn.Module):
            raise ConfigError(f"model {side} must be a torch nn.Module (a Hugging Face model); received {type(m).__name__}.")
    if type(model_a) is not type(model_b):
        raise ArchitectureMismatchError(f"A is a {type(model_a).__name__} and B a {type(model_b).__name__}; alignment "
                                        "needs two models of the same architecture.")
    ta, tb = is_tied(model_a), is_tied(model_b)
    if ta != tb:
        raise ArchitectureMismatchError(f"A's LM head is {'tied to' if ta else 'untied from'} its input embedding and B's "
                                        f"is {'tied' if tb else 'untied'}; alignment needs both tied or both untied "
                                        "(set tie_word_embeddings equal in both configurations).")
    for side, m in (("A", model_a), ("B", model_b)):
        bad = [n for n, p in m.named_parameters() if not bool(torch.isfinite(p).all())]
        if bad:
            raise NonFiniteError(f"model {side} holds NaN or inf in {bad[:3]} ({len(bad)} tensors); alignment needs "
                                 "finite weights: check the checkpoint.")
    check_same_architecture({k: v.detach() for k, v in model_a.named_parameters()},
                            {k: v.detach() for k, v in model_b.named_parameters()})


def _match_biases(ma: nn.Module, mb: nn.Module) -> None:
    """Give a linear map without a bias a zero one where the other model's canonical form has one
    (a norm bias folds into a bias-free reader only when it is nonzero), so both hold one set of tensors."""
    mods_b = dict(mb.named_modules())
    for name, m in ma.named_modules():
        other = mods_b.get(name)
        if not isinstance(m, nn.Linear) or not isinstance(other, nn.Linear):
            continue
        for x, y in ((m, other), (other, m)):
            if x.bias is None and y.bias is not None:
                x.bias = nn.Parameter(torch.zeros_like(y.bias))


def canonical_pair(model_a: nn.Module, model_b: nn.Module, inputs: Tensor | Mapping[str, Any],
                   n_classes: int | None = None):
    """A and B in canonical form with the stream axes and the canonical architecture.

    Args:
        model_a, model_b: two HF models of one architecture with an LM head or a classifier
            (pre-norm: the GPT-2/NeoX/Llama families the census traces, and Vision Transformers,
            ``ViTForImageClassification``, whose patch convolution, CLS token and position
            embeddings write the stream).
        inputs: a batch for tracing and verifying the canonical form (a tensor — passed as the
            forward's first argument — or a mapping of keyword arguments).
        n_classes: the first ``n_classes`` outputs are the logits (see
            :func:`paramsym.alignment.arch.hf_architecture`).

    Returns:
        :class:`paramsym.alignment.orthogonal.CanonicalPair` (float64; LM head untied; norm
        weights excluded from the stream axes; the permutation groups from the census's spec of
        the canonical model, without the stream's ``P_res``).

    Raises:
        ArchitectureMismatchError: different classes, shapes, or tied vs untied heads.
        NonFiniteError: NaN or inf weights.
        SymmetryNotApplicableError: the canonical form's refusals.
    """
    from ..alignment.arch import hf_architecture
    from ..alignment.checkpoints import spec_groups
    from ..alignment.orthogonal import CanonicalPair
    from ..census.canonical import canonical_form, norm_centring
    from ..census.permspec import spec_from_spaces
    from ..census.spaces import derive_spaces
    from ..census.walk import _output
    from ..models.adapters import require_eager

    _check_pair(model_a, model_b)
    tied = is_tied(model_a)
    work = [require_eager(copy.deepcopy(m)).double().eval() for m in (model_a, model_b)]
    batch = _inputs(work[0], inputs)
    with torch.no_grad():
        sp = derive_spaces(work[0], batch, _output)
    can_a, can_b = (canonical_form(m, batch, _output, untie=True) for m in work)
    _match_biases(can_a, can_b)
    with torch.no_grad():
        spc = derive_spaces(can_a, batch, _output)
    norms = {n for info in spc.norms.values() for n in (info.weight, info.bias) if n}
    axes = {n: ax for n, ax in spc.stream if n not in norms}
    arch = hf_architecture(can_a, n_classes=n_classes, layout=spc.layout)  # the census's layout: no adapter needed
    pa = {k: v.detach().clone() for k, v in can_a.named_parameters()}
    pb = {k: v.detach().clone() for k, v in can_b.named_parameters()}
    # the census's permutation groups (GQA key/value heads, fused tensors); O(D) holds the stream's own
    groups = [g for g in spec_groups(spec_from_spaces(spc, pa, sub_blocks=True), pa) if g.kind != "residual_permutation"]
    return CanonicalPair(arch, pa, pb, axes, {"tied": tied, "hidden_size": sp.hidden_size,
                                              "centred": any(norm_centring(work[0], sp).values()),
                                              "stream_tensors": len(axes), "groups": [g.name for g in groups]},
                         groups)


def canonical_pair_of(arch, a: Mapping[str, Tensor], b: Mapping[str, Tensor], data):
    """:func:`canonical_pair` of two parameter sets of the Hugging Face architecture ``arch``
    (``arch.module``, loaded with ``a`` and ``b`` in float64), traced on the first 8 training inputs
    of ``data``; the canonical architecture scores the positions ``arch`` scores (a language model:
    every position).

    Raises:
        ConfigError: ``arch`` is not a Hugging Face model (an MLP chain has no canonical form).
        the errors of :func:`canonical_pair`.
    """
    from ..errors import ConfigError

    if getattr(arch, "module", None) is None:
        raise ConfigError(f"the stages canonical, orthogonal and refined need a Hugging Face transformer (a pre-norm "
                          f"model the census traces: GPT-2/NeoX/Llama families, ViT); this is a {arch.kind} model. "
                          "Drop them from --stages.")
    models = []
    for p in (a, b):
        m = copy.deepcopy(arch.module).eval()
        m.load_state_dict({k: v.double() for k, v in p.items()}, strict=False)
        models.append(m)
    pair = canonical_pair(models[0], models[1], data.x_train[:8], n_classes=arch.info.get("n_classes"))
    pair.arch.info["positions"] = arch.info.get("positions", "last")  # a language model: loss over every position
    return pair
