"""Key-bias translations: the softmax shift symmetry of attention.

Per head, the attention logits of query ``i`` are ``ℓ_ij = s ⟨q_i, k_j⟩`` with keys
``k_j = W_k x_j + b_k``. Adding any vector ``c`` to the key bias changes them to
``ℓ_ij + s ⟨q_i, c⟩``: the change depends on the query but is the same for every key ``j``, and
``softmax_j(ℓ_ij + a_i) = softmax_j(ℓ_ij)``. So ``b_k ↦ b_k + c`` leaves the layer's output
unchanged, for every ``c`` in the key space: group ``(R^{d_K}, +)`` with ``d_K`` the total key
dimension (``Σ_h d_k = embed_dim`` for ``nn.MultiheadAttention``), acting by translation.
Masks keep it exact (masked keys get weight 0 either way); it is *not* a symmetry when a
position-dependent map acts on keys after the bias (rotary embeddings: ``R_j (W_k x_j + b_k)``
shifts the logits by ``⟨q_i, R_j c⟩``, which depends on j), nor with an appended key that does
not carry the bias (``add_zero_attn``); an appended learned key (``add_bias_kv``'s ``bias_k``)
must move with it.

:class:`ValueBiasShift` is the value-side twin: shifting every value by ``c`` is absorbed by the
output bias, ``δb_o = −W_o c`` (attention weights sum to 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ..errors import ActionError, ShapeError, UnsupportedLayerError
from ..params import ParameterBlock
from .exact import ExactAction, translation_basis, translation_of
from .layout import entry, locate, refuse_untouched, replace


class KeyBiasTranslation(ExactAction):
    """``b_k ↦ b_k + c`` (and every extra learned key ``k_extra ↦ k_extra + c``), ``c ∈ R^{d_K}``.

    Group: translations ``R^{d_K}`` as unipotent matrices ``g = [[I, c], [0, 1]]`` of size
    ``d_K + 1`` (``c = g[:d_K, d_K]``; :func:`~paramsym.actions.exact.translation_basis`),
    abelian, dimension ``d_K``. Invariance: see the module docstring (every logit of a query
    shifts by the same ``s ⟨q_i, c⟩``).

    Args:
        block: exactly the key-bias entries (and the extra keys); e.g. for a packed
            ``in_proj_bias`` of length ``3E`` the selection ``"attn.in_proj_bias[E:2E]"``.
        key_bias: name of the tensor holding the key bias.
        positions: ``(start, stop)`` flat positions of the key bias inside ``key_bias`` (default:
            the whole tensor), e.g. ``(E, 2E)`` for ``in_proj_bias`` or GPT-2's ``c_attn.bias``.
        extra_keys: names of learned key vectors appended after projection (shape ``(..., d_K)``,
            e.g. ``bias_k`` of ``nn.MultiheadAttention(add_bias_kv=True)``): each moves by ``c``.
        heads: number of heads (reported as ``per_head = d_K / heads``; not needed for the action).

    Raises:
        ShapeError: a name not in the block, a partial selection, bad positions.
        ActionError: the block holds entries the action would leave untouched (e.g. the query
            and value thirds of ``in_proj_bias``).
    """

    kind = "key_bias_translation"

    def __init__(self, block: ParameterBlock, key_bias: str, *, positions: tuple[int, int] | None = None,
                 extra_keys: Sequence[str] = (), heads: int = 1):
        super().__init__()
        cls = "KeyBiasTranslation"
        e = entry(block, key_bias, cls)
        numel = int(torch.Size(e.shape).numel())
        start, stop = (0, numel) if positions is None else (int(positions[0]), int(positions[1]))
        if not 0 <= start < stop <= numel:
            raise ShapeError(f"{cls}: positions ({start}, {stop}) do not lie inside {key_bias!r} of {numel} entries.")
        self.k = stop - start
        self.locs = [locate(block, key_bias, torch.arange(start, stop), cls)]
        for name in extra_keys:
            ex = entry(block, name, cls)
            if ex.shape[-1] != self.k:
                raise ShapeError(f"{cls}: extra key {name!r} has shape {ex.shape}; its last dimension must be the key "
                                 f"dimension {self.k}.")
            self.locs.append(locate(block, name, None, cls))
        self.extra = [int(torch.Size(entry(block, n, cls).shape[:-1]).numel()) for n in extra_keys]
        refuse_untouched(cls, block, self.locs,
                         f"It moves the key bias {key_bias!r}[{start}:{stop}] (and extra keys {list(extra_keys)}) only.")
        if heads < 1 or self.k % heads:
            raise ShapeError(f"{cls}: heads={heads} must divide the key dimension {self.k}.")
        self.heads, self.per_head = int(heads), self.k // int(heads)
        self.size, self.dimension, self.p = self.k + 1, self.k, block.size

    @classmethod
    def for_mha(cls, block: ParameterBlock, mha: nn.MultiheadAttention, prefix: str = "") -> KeyBiasTranslation:
        """The key-bias translation of an ``nn.MultiheadAttention`` named ``prefix`` in the model.

        The block must be ``prefix.in_proj_bias[E:2E]`` (plus ``prefix.bias_k`` with ``add_bias_kv``).

        Raises:
            UnsupportedLayerError: no ``in_proj_bias`` (``bias=False``), or ``add_zero_attn``
                (the zero key is not shifted, so the symmetry is broken).
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise ActionError(f"KeyBiasTranslation.for_mha needs an nn.MultiheadAttention; received {type(mha).__name__}.")
        if mha.in_proj_bias is None:
            raise UnsupportedLayerError("KeyBiasTranslation: this nn.MultiheadAttention has no in_proj_bias (bias=False); "
                                        "there is no key bias to translate.")
        if mha.add_zero_attn:
            raise UnsupportedLayerError("KeyBiasTranslation: add_zero_attn=True appends a zero key that the key bias does "
                                        "not reach, so shifting the bias changes the output; no key-bias symmetry.")
        p = f"{prefix}." if prefix else ""
        E = mha.embed_dim
        extra = [f"{p}bias_k"] if mha.bias_k is not None else []
        return cls(block, f"{p}in_proj_bias", positions=(E, 2 * E), extra_keys=extra, heads=mha.num_heads)

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return translation_basis(self.k, dtype)

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        c = torch.randn(n, self.k, generator=generator, dtype=self._probe.dtype)
        c = c / c.norm(dim=-1, keepdim=True) * rho * (0.2 + 0.8 * torch.rand(n, 1, generator=generator, dtype=c.dtype))
        g = torch.eye(self.k + 1, dtype=c.dtype).repeat(n, 1, 1)
        g[:, : self.k, self.k] = c
        return g

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        c = translation_of(g).to(theta.dtype)
        parts = [(self.locs[0], theta[self.locs[0]] + c)]
        for loc, reps in zip(self.locs[1:], self.extra):
            parts.append((loc, (theta[loc].reshape(reps, self.k) + c).reshape(-1)))
        return replace(theta, parts)


class ValueBiasShift(ExactAction):
    """``b_v ↦ b_v + c``, ``b_o ↦ b_o − W_o c`` (``W_o`` read, not moved), ``c ∈ R^{d_V}``.

    Attention weights of a query sum to 1, so shifting every value by ``c`` shifts each head's
    output by ``c`` (its part of it), and the output projection adds ``W_o c``, which the output
    bias absorbs: ``W_o (Σ_j a_ij (v_j + c)) + b_o − W_o c = W_o Σ_j a_ij v_j + b_o``. With
    grouped-query attention a value head feeds ``group_size`` query heads, so ``c`` of value head
    ``j`` enters through the output columns of every query head of its group:
    ``δb_o = −Σ_{h ∈ group j} W_o[:, h] c_j``. Not a symmetry when some query attends to no key
    (all keys masked) or with an appended zero value (``add_zero_attn``).

    Group: translations ``R^{d_V}`` (unipotent ``[[I, c], [0, 1]]``, as :class:`KeyBiasTranslation`);
    the action is affine in θ with a linear part that reads ``W_o``: compositions add the ``c``.

    Args:
        block: exactly the value bias, the output weight and the output bias (whole tensors).
        value_bias: name of ``b_v`` (``(d_V,)``, heads contiguous); out_weight: ``W_o``
            (``(m, group_size · d_V)``, ``nn.Linear`` layout); out_bias: ``b_o`` (``(m,)``).
        heads: number of value heads (``d_V / heads`` per head).
        group_size: query heads per value head (1 without grouped-query attention).

    Raises:
        ShapeError: a name not in the block, or shapes that do not fit.
        ActionError: the block holds other tensors.
    """

    kind = "value_bias_shift"

    def __init__(self, block: ParameterBlock, value_bias: str, out_weight: str, out_bias: str, *, heads: int = 1,
                 group_size: int = 1):
        super().__init__()
        cls = "ValueBiasShift"
        k = int(torch.Size(entry(block, value_bias, cls).shape).numel())
        wshape = tuple(entry(block, out_weight, cls).shape)
        m = wshape[0] if len(wshape) == 2 else -1
        if heads < 1 or group_size < 1 or k % heads or len(wshape) != 2 or wshape[1] != k * group_size:
            raise ShapeError(f"{cls}: the output weight {out_weight!r} {wshape} must be (m, group_size·d_V) = "
                             f"(m, {group_size}·{k}), and heads={heads} must divide d_V = {k}.")
        if tuple(entry(block, out_bias, cls).shape) != (m,):
            raise ShapeError(f"{cls}: the output bias {out_bias!r} must have shape ({m},).")
        self.v_loc, self.w_loc, self.o_loc = (locate(block, n, None, cls) for n in (value_bias, out_weight, out_bias))
        refuse_untouched(cls, block, [self.v_loc, self.w_loc, self.o_loc], "It moves b_v and b_o and reads W_o.")
        self.k, self.m, self.heads, self.group_size = k, m, int(heads), int(group_size)
        self.size, self.dimension, self.p = k + 1, k, block.size

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return translation_basis(self.k, dtype)

    random_elements = KeyBiasTranslation.random_elements

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        c = translation_of(g).to(theta.dtype)
        d = self.k // self.heads
        W = theta[self.w_loc].reshape(self.m, self.heads, self.group_size, d).sum(2).reshape(self.m, self.k)
        return replace(theta, [(self.v_loc, theta[self.v_loc] + c), (self.o_loc, theta[self.o_loc] - W @ c)])
