"""Exact per-head symmetries of multi-head attention, as :class:`GroupAction` s.

For one attention layer described by an :class:`~paramsym.models.adapters.AttentionLayout`
(``nn.MultiheadAttention`` via :func:`~paramsym.models.adapters.mha_layout`, HF models via the
architecture adapters), with query head ``h`` reading key/value head ``j = h // (H / H_kv)``:

* :class:`QueryKeyAction` — for each acted key/value head ``j`` an element ``A_j`` acts by

      W_q,h ↦ A_j W_q,h,   b_q,h ↦ A_j b_q,h   (every query head h of the group of j),
      W_k,j ↦ A_j⁻ᵀ W_k,j, b_k,j ↦ A_j⁻ᵀ b_k,j,

  so every score ``q_hᵀ k_j = (A q_h)ᵀ (A⁻ᵀ k_j)`` is unchanged. Without rotary embeddings
  ``A_j ∈ GL(d_k)`` (dimension d_k² per key head). With rotary embeddings the scores are
  ``q_hᵀ R(i)ᵀ R(j) k`` and ``A`` must commute with every rotation: the group is the **commutant
  of the rotary blocks** — per frequency pair ``(i, i + r/2)`` the 2×2 block ``[[a, −b], [b, a]]``
  (pairs sharing a frequency couple into ``gl(m, ℂ)``, dimension 2m²), ``GL`` on the non-rotated
  dimensions, nothing across: dimension ``d_k`` per key head when all ``r/2`` frequencies are
  distinct and ``r = d_k`` (Llama); ``r + (d_k − r)²`` with partial rotary (GPT-NeoX).
* :class:`ValueOutputAction` — for each acted key/value head ``j`` an element ``B_j ∈ GL(d_v)``:

      W_v,j ↦ B_j W_v,j,  b_v,j ↦ B_j b_v,j,  W_o[:, h] ↦ W_o[:, h] B_j⁻¹ (every query head h of j),

  exact because attention weights sum to one (the value bias moves through them) — dimension
  d_v² per key/value head.

Group elements: the acted heads' elements form a block-diagonal ``s × s`` matrix
``g = diag(A_1, …, A_n)`` (``s = n·d``); off-diagonal blocks are ignored. The group's
generators (a basis of the per-head algebra in every block) are built lazily on first use of
:attr:`group` — ``n·d²`` matrices of size ``s × s``, so restrict ``kv_heads`` for large heads;
:meth:`random_element` needs no generators.

The block may hold partial tensors (fused ``c_attn`` / ``query_key_value``):
:meth:`block_for` builds the block of exactly the moved coordinates; every other coordinate of a
given block is left untouched. Both actions are exact: identity, composition and invariance
hold to rounding (tested with :func:`paramsym.testing.check_action` in float64).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..errors import ActionError, ShapeError
from ..groups.lie import MatrixLieGroup
from ..models.adapters import AttentionLayout, Projection
from ..params import ParameterBlock
from .base import GroupAction
from .layout import require_block

__all__ = ["QueryKeyAction", "ValueOutputAction", "rotary_commutant_basis", "rotary_commutant_dimension",
           "rotary_pair_classes"]


# -- the per-head algebras ------------------------------------------------------------------
def rotary_pair_classes(head_dim: int, rotary_dim: int, freqs: Sequence[float]) -> tuple[list[list[int]], list[int]]:
    """Frequency classes of rotary pairs (pairs with equal nonzero frequency) and the dimensions
    that are not rotated (beyond ``rotary_dim``, or in a zero-frequency pair).

    Pair ``p`` is dimensions ``(p, p + rotary_dim/2)`` (HF's ``rotate_half``). The rotary
    commutant is block diagonal over these sets: ``GL(m, ℂ)`` on a class of ``m`` pairs (pair
    ``p`` read as the complex coordinate ``x_p + i x_{p + r/2}``), ``GL`` on the non-rotated dimensions.
    """
    half = rotary_dim // 2
    if rotary_dim and len(freqs) < half:
        raise ShapeError(f"rotary_dim {rotary_dim} needs {half} frequencies; received {len(freqs)}.")
    classes: list[list[int]] = []
    keys: list[float] = []
    passive = list(range(rotary_dim, head_dim))
    for p in range(half):
        f = float(freqs[p])
        if f == 0.0:
            passive += [p, p + half]
            continue
        for c, key in enumerate(keys):
            if abs(f - key) <= 1e-12 * max(abs(f), abs(key)):
                classes[c].append(p)
                break
        else:
            keys.append(f)
            classes.append([p])
    return classes, sorted(passive)


def rotary_commutant_dimension(head_dim: int, rotary_dim: int, freqs: Sequence[float]) -> int:
    """``Σ_classes 2m² + (non-rotated dims)²``; ``head_dim`` for a full rotary head with distinct
    frequencies, ``head_dim²`` without rotary."""
    if rotary_dim == 0:
        return head_dim * head_dim
    classes, passive = rotary_pair_classes(head_dim, rotary_dim, freqs)
    return sum(2 * len(c) ** 2 for c in classes) + len(passive) ** 2


def rotary_commutant_basis(head_dim: int, rotary_dim: int, freqs: Sequence[float], dtype=torch.float64) -> Tensor:
    """An orthogonal basis ``(r, d, d)`` of the matrices commuting with every rotary rotation.

    Pair ``p`` is dimensions ``(i_p, j_p) = (p, p + rotary_dim/2)``; for pairs ``p, q`` of one
    frequency class: ``E[i_p,i_q] + E[j_p,j_q]`` (real part) and ``E[j_p,i_q] − E[i_p,j_q]``
    (imaginary part); ``E[a, b]`` for non-rotated ``a, b``. Without rotary: the ``E_ab`` basis of gl(d).
    """
    d, half = head_dim, rotary_dim // 2
    classes, passive = rotary_pair_classes(head_dim, rotary_dim, freqs) if rotary_dim else ([], list(range(d)))
    mats = []
    for cls in classes:
        for p in cls:
            for q in cls:
                re = torch.zeros(d, d, dtype=dtype)
                re[p, q] = re[p + half, q + half] = 1.0
                im = torch.zeros(d, d, dtype=dtype)
                im[p + half, q], im[p, q + half] = 1.0, -1.0
                mats += [re, im]
    for a in passive:
        for b in passive:
            e = torch.zeros(d, d, dtype=dtype)
            e[a, b] = 1.0
            mats.append(e)
    return torch.stack(mats)


def _project_rotary(x: Tensor, head_dim: int, rotary_dim: int, freqs: Sequence[float]) -> Tensor:
    """Orthogonal projection of ``(d, d)`` matrices onto the rotary commutant."""
    if rotary_dim == 0:
        return x
    half = rotary_dim // 2
    classes, passive = rotary_pair_classes(head_dim, rotary_dim, freqs)
    out = torch.zeros_like(x)
    for cls in classes:
        i = torch.tensor(cls)
        j = i + half
        a = (x[i][:, i] + x[j][:, j]) / 2
        b = (x[j][:, i] - x[i][:, j]) / 2
        out[i[:, None], i[None, :]] = a
        out[j[:, None], j[None, :]] = a
        out[j[:, None], i[None, :]] = b
        out[i[:, None], j[None, :]] = -b
    if passive:
        pa = torch.tensor(passive)
        out[pa[:, None], pa[None, :]] = x[pa[:, None], pa[None, :]]
    return out


# -- indexing into θ ---------------------------------------------------------------------------
class _Positions:
    """Maps (parameter, flat positions) to positions in the block's θ."""

    def __init__(self, block: ParameterBlock):
        require_block(block, type(self).__name__)
        self.block = block
        self._lookup: dict[str, tuple[int, Tensor | None]] = {}
        for e in block.entries:
            if e.whole:
                self._lookup[e.name] = (e.offset, None)
            else:
                table = torch.full((int(torch.tensor(e.shape).prod()),), -1, dtype=torch.long)
                table[e.index] = torch.arange(e.size) + e.offset
                self._lookup[e.name] = (e.offset, table)

    def __call__(self, name: str, flat: Tensor) -> Tensor:
        if name not in self._lookup:
            raise ShapeError(f"the action needs parameter {name!r}, which is not in the block {self.block!r}; build the "
                             "block with the action's block_for(params, layout, ...).")
        offset, table = self._lookup[name]
        if table is None:
            return flat + offset
        pos = table[flat]
        if bool((pos < 0).any()):
            raise ShapeError(f"the block selects only part of {name!r} and misses coordinates the action moves; build "
                             "it with the action's block_for(params, layout, ...).")
        return pos


def _write(theta: Tensor, positions: list[Tensor], values: list[Tensor]) -> Tensor:
    """θ with ``θ[positions[k]] = values[k]``: one gather, functional and vmap/jvp-friendly."""
    pos = torch.cat([p.reshape(-1) for p in positions])
    src = torch.arange(theta.shape[-1], device=theta.device)
    src = src.index_put((pos.to(theta.device),), torch.arange(pos.numel(), device=theta.device) + theta.shape[-1])
    return torch.cat([theta] + [v.reshape(-1) for v in values])[src]


class _HeadAction(GroupAction):
    """Shared machinery: acted key/value heads, block-diagonal group, lazy generators."""

    kind = ""

    def __init__(self, block: ParameterBlock, layout: AttentionLayout, kv_heads: Sequence[int] | None):
        super().__init__()
        if not isinstance(layout, AttentionLayout):
            raise ActionError(f"{type(self).__name__} needs an AttentionLayout (paramsym.models.adapters); "
                              f"received {type(layout).__name__}.")
        if layout.num_heads % layout.num_kv_heads:
            raise ShapeError(f"{layout.num_heads} query heads are not a multiple of {layout.num_kv_heads} key/value heads.")
        heads = list(range(layout.num_kv_heads)) if kv_heads is None else [int(h) for h in kv_heads]
        bad = [h for h in heads if not 0 <= h < layout.num_kv_heads]
        if bad or not heads:
            raise ShapeError(f"kv_heads must be a non-empty list of key/value heads in 0..{layout.num_kv_heads - 1}; "
                             f"received {list(kv_heads) if kv_heads is not None else None}.")
        self.layout, self.kv_heads, self.d = layout, heads, layout.head_dim
        self.p = block.size
        self._pos = _Positions(block)
        self._group: MatrixLieGroup | None = None

    # per-head algebra (overridden for the rotary commutant)
    def head_basis(self) -> Tensor:
        return rotary_commutant_basis(self.d, 0, ())

    def head_dimension(self) -> int:
        return self.d * self.d

    def project(self, x: Tensor) -> Tensor:
        return x

    @property
    def dimension(self) -> int:
        """Continuous dimension of the group acted by this action (all acted heads)."""
        return len(self.kv_heads) * self.head_dimension()

    @property
    def group(self) -> MatrixLieGroup:  # type: ignore[override]
        if self._group is None:
            basis, n, d = self.head_basis(), len(self.kv_heads), self.d
            gens = torch.zeros(n * basis.shape[0], n * d, n * d, dtype=basis.dtype)
            for i in range(n):
                gens[i * basis.shape[0]:(i + 1) * basis.shape[0], i * d:(i + 1) * d, i * d:(i + 1) * d] = basis
            self._group = MatrixLieGroup.supplied(gens)
        return self._group

    def random_element(self, generator: torch.Generator, scale: float = 0.5, dtype=torch.float64) -> Tensor:
        """``diag(exp(scale·X_1), …)``, ``X_i`` a random unit-Frobenius element of the per-head algebra."""
        n, d = len(self.kv_heads), self.d
        g = torch.zeros(n * d, n * d, dtype=dtype)
        for i in range(n):
            x = self.project(torch.randn(d, d, generator=generator, dtype=torch.float64))
            g[i * d:(i + 1) * d, i * d:(i + 1) * d] = torch.linalg.matrix_exp(scale * x / x.norm())
        return g

    def _blocks(self, g: Tensor) -> Tensor:
        d, n = self.d, len(self.kv_heads)
        if g.shape[-2:] != (n * d, n * d):
            raise ShapeError(f"{type(self).__name__}: group elements must be ({n * d}, {n * d}) (block diagonal over "
                             f"{n} heads of size {d}); received {tuple(g.shape)}.")
        return torch.stack([g[i * d:(i + 1) * d, i * d:(i + 1) * d] for i in range(n)])

    def _rows(self, proj: Projection, heads: list[list[int]]) -> tuple[Tensor, Tensor | None]:
        """θ positions of ``W[rows of head]`` (n, m, d, in) and of the bias rows (n, m, d)."""
        rows = torch.tensor([[self.layout.head_rows(h) for h in hs] for hs in heads])
        w = self._pos(proj.weight, proj.row_positions(rows.reshape(-1)).reshape(*rows.shape, -1))
        b = None if proj.bias is None else self._pos(proj.bias, proj.bias_positions(rows.reshape(-1)).reshape(rows.shape))
        return w, b

    @classmethod
    def _block_masks(cls, params: Mapping[str, Tensor], layout: AttentionLayout,
                     parts: list[tuple[Projection, list[int], str]]) -> ParameterBlock:
        masks: dict[str, Tensor] = {}
        for proj, rows, how in parts:
            r = torch.tensor(rows)
            flat = proj.row_positions(r) if how == "rows" else proj.column_positions(r)
            m = masks.setdefault(proj.weight, torch.zeros(params[proj.weight].numel(), dtype=torch.bool))
            m[flat.reshape(-1)] = True
            if how == "rows" and proj.bias is not None:
                mb = masks.setdefault(proj.bias, torch.zeros(params[proj.bias].numel(), dtype=torch.bool))
                mb[proj.bias_positions(r)] = True
        return ParameterBlock(params, [(k, v.reshape(params[k].shape)) for k, v in masks.items()])


class QueryKeyAction(_HeadAction):
    """Per key/value head ``A_j``: ``q_h ↦ A_j q_h`` (its query heads), ``k_j ↦ A_j⁻ᵀ k_j``.

    ``A_j ∈ GL(d_k)`` without rotary embeddings, the rotary commutant with them (see module
    docstring); ``algebra="gl"`` forces GL(d_k) (not a symmetry under rotary — used to test that
    verification catches a wrong claim).

    Args:
        block: a block holding at least the moved coordinates (see :meth:`block_for`).
        layout: the attention layer's layout.
        kv_heads: acted key/value heads (default all).
        algebra: ``"auto"`` (rotary commutant when ``layout.rotary_dim > 0``, else gl), ``"gl"``.
    """

    kind = "attention.query_key"

    def __init__(self, block: ParameterBlock, layout: AttentionLayout, kv_heads: Sequence[int] | None = None,
                 *, algebra: str = "auto"):
        super().__init__(block, layout, kv_heads)
        if algebra not in ("auto", "gl"):
            raise ActionError(f"algebra must be 'auto' or 'gl'; received {algebra!r}.")
        self.rotary = algebra == "auto" and layout.rotary_dim > 0
        groups = [layout.query_heads(j) for j in self.kv_heads]
        self.q_w, self.q_b = self._rows(layout.q, groups)
        self.k_w, self.k_b = self._rows(layout.k, [[j] for j in self.kv_heads])

    def head_basis(self) -> Tensor:
        lay = self.layout
        return rotary_commutant_basis(self.d, lay.rotary_dim if self.rotary else 0, lay.rotary_freqs)

    def head_dimension(self) -> int:
        lay = self.layout
        return rotary_commutant_dimension(self.d, lay.rotary_dim if self.rotary else 0, lay.rotary_freqs)

    def project(self, x: Tensor) -> Tensor:
        return _project_rotary(x, self.d, self.layout.rotary_dim, self.layout.rotary_freqs) if self.rotary else x

    @classmethod
    def block_for(cls, params: Mapping[str, Tensor], layout: AttentionLayout,
                  kv_heads: Sequence[int] | None = None) -> ParameterBlock:
        """The block of exactly the coordinates this action moves (query and key rows, biases)."""
        heads = range(layout.num_kv_heads) if kv_heads is None else kv_heads
        q_rows = [r for j in heads for h in layout.query_heads(j) for r in layout.head_rows(h)]
        k_rows = [r for j in heads for r in layout.head_rows(j)]
        return cls._block_masks(params, layout, [(layout.q, q_rows, "rows"), (layout.k, k_rows, "rows")])

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        A = self._blocks(g.to(theta.dtype))  # (n, d, d)
        At = A.transpose(-1, -2)
        pos, val = [self.q_w, self.k_w], []
        val.append(A[:, None] @ theta[self.q_w])  # (n, m, d, in)
        val.append(torch.linalg.solve(At[:, None], theta[self.k_w]))  # A⁻ᵀ W_k
        if self.q_b is not None:
            pos.append(self.q_b)
            val.append((A[:, None] @ theta[self.q_b][..., None])[..., 0])
        if self.k_b is not None:
            pos.append(self.k_b)
            val.append(torch.linalg.solve(At[:, None], theta[self.k_b][..., None])[..., 0])
        return _write(theta, pos, val)


class ValueOutputAction(_HeadAction):
    """Per key/value head ``B_j ∈ GL(d_v)``: ``v_j ↦ B_j v_j``, ``W_o[:, h] ↦ W_o[:, h] B_j⁻¹``.

    Args:
        block: a block holding at least the moved coordinates (see :meth:`block_for`).
        layout: the attention layer's layout.
        kv_heads: acted key/value heads (default all).
    """

    kind = "attention.value_output"

    def __init__(self, block: ParameterBlock, layout: AttentionLayout, kv_heads: Sequence[int] | None = None):
        super().__init__(block, layout, kv_heads)
        self.v_w, self.v_b = self._rows(layout.v, [[j] for j in self.kv_heads])
        cols = torch.tensor([[layout.head_rows(h) for h in layout.query_heads(j)] for j in self.kv_heads])
        # (n, m, out, d): W_o[:, cols of head h]
        self.o_w = self._pos(layout.o.weight, layout.o.column_positions(cols.reshape(-1))
                             .reshape(layout.o.out_features, *cols.shape).permute(1, 2, 0, 3))

    @classmethod
    def block_for(cls, params: Mapping[str, Tensor], layout: AttentionLayout,
                  kv_heads: Sequence[int] | None = None) -> ParameterBlock:
        """The block of exactly the coordinates this action moves (value rows and bias, output columns)."""
        heads = range(layout.num_kv_heads) if kv_heads is None else kv_heads
        v_rows = [r for j in heads for r in layout.head_rows(j)]
        o_cols = [r for j in heads for h in layout.query_heads(j) for r in layout.head_rows(h)]
        return cls._block_masks(params, layout, [(layout.v, v_rows, "rows"), (layout.o, o_cols, "cols")])

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        B = self._blocks(g.to(theta.dtype))
        pos, val = [self.v_w, self.o_w], []
        val.append(B[:, None] @ theta[self.v_w])  # (n, 1, d, in)
        # W_o B⁻¹ = (B⁻ᵀ W_oᵀ)ᵀ
        Wo = theta[self.o_w]  # (n, m, out, d)
        val.append(torch.linalg.solve(B.transpose(-1, -2)[:, None], Wo.transpose(-1, -2)).transpose(-1, -2))
        if self.v_b is not None:
            pos.append(self.v_b)
            val.append((B[:, None] @ theta[self.v_b][..., None])[..., 0])
        return _write(theta, pos, val)
