"""The catalogue of known exact parameter symmetries, as :class:`GroupAction` s, and its registry.

Each entry is an :class:`~paramsym.actions.exact.ExactAction` on named tensors of a
:class:`~paramsym.params.ParameterBlock` (biases included) with ``kind``, ``dimension``
(continuous) and ``order`` (discrete) — one module per concept:

=========================  ========================================  ==================  ===========================
kind                       class (module)                            dimension           order
=========================  ========================================  ==================  ===========================
``hidden_basis``           :class:`HiddenBasisAction` (linear)       h²                  —
``linear_chain``           :class:`LinearChainAction` (linear)       Σ h_i²              —
``rescaling``              :class:`RescalingAction` (linear)         h                   —
``key_bias_translation``   :class:`KeyBiasTranslation` (translation) d_K (= E for MHA)   —
``value_bias_shift``       :class:`ValueBiasShift` (translation)     d_V (= E for MHA)   —
``norm_scale``             :class:`NormScaleAction` (normalization)  h                   —
``ov_redistribution``      :class:`OVRedistributionAction`           (|C| − 1) d²        —
``hidden_permutation``     :class:`HiddenPermutationAction`          0                   h!
``head_permutation``       :class:`HeadPermutationAction`            0                   H!
``sign_flip``              :class:`SignFlipAction`                   0                   2^h
=========================  ========================================  ==================  ===========================

:func:`catalogue` lists them as ``(kind, class, description)`` — the description says where the
symmetry applies and how it acts — for a census that walks a model.
"""

from __future__ import annotations

from .exact import ExactAction, permutation_matrix, random_permutations
from .linear import (
    HOMOGENEOUS,
    HiddenBasisAction,
    LinearChainAction,
    RescalingAction,
    check_homogeneous,
)
from .normalization import NormScaleAction
from .permutation import HeadPermutationAction, HiddenPermutationAction, SignFlipAction
from .redistribution import OVRedistributionAction, qk_clusters
from .translation import KeyBiasTranslation, ValueBiasShift

_ENTRIES: tuple[tuple[type[ExactAction], str], ...] = (
    (HiddenBasisAction,
     "GL(h) change of hidden basis between two linear layers with no activation between them (nn.Linear → "
     "nn.Linear): (V, b, U) ↦ (gV, gb, Ug⁻¹); dimension h²."),
    (LinearChainAction,
     "GL(h_1)×…×GL(h_{L−1}) on a chain of L linear layers with no activations: W_i ↦ g_i W_i g_{i−1}⁻¹, "
     "b_i ↦ g_i b_i; dimension Σ h_i²."),
    (RescalingAction,
     "positive rescaling of the hidden units between nn.Linear layers separated by a positively homogeneous "
     "activation (ReLU, LeakyReLU of any slope, PReLU): (V[j], b[j], U[:, j]) ↦ (d_j V[j], d_j b[j], U[:, j]/d_j); "
     "dimension h."),
    (KeyBiasTranslation,
     "softmax shift: b_k ↦ b_k + c for any c when keys are W_k x + b_k with no position-dependent map after "
     "the bias (nn.MultiheadAttention with bias, BERT/GPT-2 key biases; not rotary, not add_zero_attn); "
     "dimension = key dimension (embed_dim)."),
    (ValueBiasShift,
     "value shift absorbed by the output bias: b_v ↦ b_v + c, b_o ↦ b_o − W_o c (attention weights sum to 1; "
     "nn.MultiheadAttention with biases, BERT/GPT-2/NeoX value and output biases; not add_zero_attn); dimension = "
     "value dimension."),
    (NormScaleAction,
     "per-channel scale moved from a normalisation layer's affine weight/bias (nn.LayerNorm, nn.RMSNorm) into "
     "the linear layer(s) that alone read its output: (γ, β, W) ↦ (Dγ, Dβ, WD⁻¹); dimension h."),
    (OVRedistributionAction,
     "RMHSA heads with equal QK matrices M_h (a cluster C, see qk_clusters): R_h ↦ R_h + Δ_h with "
     "Σ_C Δ_h = 0 keeps the summed OV map; dimension (|C| − 1)·d² per cluster."),
    (HiddenPermutationAction,
     "permutation of the hidden units between two nn.Linear layers with any elementwise activation: "
     "(V, b, U) ↦ (PV, Pb, UPᵀ); discrete, order h!."),
    (HeadPermutationAction,
     "permutation of the heads of an attention layer (nn.MultiheadAttention: q/k/v rows, biases, output columns; "
     "RMHSA: M_h, R_h); discrete, order H!."),
    (SignFlipAction,
     "sign flips of hidden units whose later layer is linear in them (a gated FFN's up rows: down(σ(gate x) ⊙ up x)) "
     "or with an odd activation: (V[j], b[j], U[:, j]) ↦ (−V[j], −b[j], −U[:, j]); discrete, order 2^h."),
)


def catalogue() -> list[tuple[str, type[ExactAction], str]]:
    """The catalogue: ``[(kind, action class, description)]``, one row per exact symmetry kind.

    ``kind`` equals ``cls.kind``; the description states where it applies (the predicate a
    census checks), the action formula and the dimension/order.
    """
    return [(cls.kind, cls, text) for cls, text in _ENTRIES]


__all__ = [
    "ExactAction", "HOMOGENEOUS", "HeadPermutationAction", "HiddenBasisAction", "HiddenPermutationAction",
    "KeyBiasTranslation", "LinearChainAction", "NormScaleAction", "OVRedistributionAction", "RescalingAction", "SignFlipAction",
    "ValueBiasShift",
    "catalogue", "check_homogeneous", "permutation_matrix", "qk_clusters", "random_permutations",
]
