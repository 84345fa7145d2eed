"""The learned action network ([Discovery] §5, eq. 7), and a learned flow that is a group action by construction.

Two kinds, chosen by ``kind`` (``action.kind`` of a discovery run):

``"direct"`` (default, the paper's eq. 7)::

    a_X(g, θ) = θ + ( b(g, θ) − b(I, θ) ),

``b`` an MLP of ``(vec(g), θ)``: inputs normalised by fixed scales
``((vec(g) − vec(I)) / g_scale, (θ − θ_c) / θ_scale)``, three hidden layers of width 256 with
SiLU by default, output multiplied by a fixed ``out_scale``. The difference is formed before
adding θ, with the same deterministic network, so ``a(I, θ) = θ`` holds exactly (bitwise) for
every θ; composition is learned.

``"flow"`` (beyond the paper)::

    a_X(g, θ) = Φ^{ξ(g)}(θ),   ξ(g) = M⁻¹ (⟨log g, h_j⟩_F)_j,   M_ij = ⟨h_i, h_j⟩_F,

``Φ^ξ`` the time-1 flow of the autonomous field ``Σ_i ξ_i V_i(θ)``, integrated by ``flow_steps``
classical RK4 steps; ``V(θ) = (out_scale/√p) · net((θ − θ_c)/θ_scale) ∈ R^{r×p}`` (an MLP of θ alone,
r fields), ``log`` the principal matrix logarithm (:mod:`paramsym.actions.flow`). Which laws hold:

* identity: ``a(I, θ) = θ`` exactly (``log I = 0`` bitwise, a zero field moves nothing);
* infinitesimal action: ``D_g a(I, θ)[h_i] = V_i(θ)`` exactly (RK4's derivative in ξ at ξ = 0 is
  the field), so the fields the objectives and the verdict differentiate are the network's;
* one generator (r = 1), or several commuting generators whose fields commute
  (``[V_i, V_j] = 0``): ``g = exp(Σ t_i h_i)`` gives ``ξ = t``, and ``Φ^s ∘ Φ^t = Φ^{s+t}``,
  ``Φ^{−t} ∘ Φ^t = id`` hold for the exact flow; the computed ones hold to RK4's global
  truncation error ``O((|t|/N)⁴)`` and rounding (float32 in training, float64 in the tests).
  For r = 1 the learned generator is only a label: ``exp(t h) ↦ Φ^t`` whatever h is;
* several generators that do not commute: ``ξ`` projects the Baker–Campbell–Hausdorff
  logarithm of a product onto the span, and the flow of ``Σ ξ_i V_i`` is an action only when
  ``h ↦ Σ_i ξ_i(h) V_i`` is a Lie-algebra anti-homomorphism (``[V_i, V_j] = −Σ_k c_ij^k V_k`` for
  ``[h_i, h_j] = Σ_k c_ij^k h_k``) on a closed algebra. That is not built in: the finite and
  transport losses still have to learn it, exactly as for the direct kind.
Field scale: the flow kind multiplies the network output by ``out_scale / √p``, so fields have norm
``O(out_scale)`` whatever the block size (the direct kind's output is a difference
``b(g, θ) − b(I, θ)``, small near I; a flow's field is the raw output, whose norm grows like ``√p``:
on a block of thousands of entries the first flow would leave the region the target is defined
on). The factor is fixed, not folded into the weights, so Adam's steps stay relative to weights of
the usual size.
Cost: ``4 N`` network evaluations per action instead of 2; the training step evaluates two flows
(the second at ``a(g1, θ)``) with the transport tangent carried through the first as a dual number.

**Reduced coordinates** (``basis = E``, ``p × q`` with orthonormal columns; either kind): the network
reads and writes ``z = Eᵀ θ`` and the action is conjugated back to the block,

    a(g, θ) = θ + E ( a_z(g, Eᵀθ) − Eᵀθ ),

``a_z`` the kind's action on ``R^q`` (inputs ``Eᵀ(θ − θ_c) / θ_scale``, fields ``E V_z``). Every law of
``a_z`` (identity, composition, inverse, and the flow's group law) carries over exactly, because
``θ ↦ (Eᵀθ, θ − EEᵀθ)`` is an isometry and the part orthogonal to ``range(E)`` is never moved; the
motion lies in ``range(E)``. The block's other directions are then not learned at all: choose ``E``
so that they are directions the symmetry does not need (e.g.
:func:`paramsym.actions.ffn_unit.unit_span_basis`). Without ``basis``, ``E = I`` (``q = p``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from ..groups.lie import MatrixLieGroup
from . import flow as FL
from .base import GroupAction, StepQuantities

__all__ = ["KINDS", "LearnedAction", "SiLU", "check_basis", "mlp"]

#: the kinds of learned action (module docstring)
KINDS = ("direct", "flow")


class SiLU(nn.Module):
    """``x σ(x)`` written with primitive ops: the same function as ``nn.SiLU``, but its
    forward-mode derivative runs in C++ (``nn.SiLU``'s JVP goes through a Python decomposition
    under ``torch.func``, several times slower for these small networks)."""

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(x)


def check_basis(basis: Tensor, p: int) -> Tensor:
    """``basis`` as a float64 ``p × q`` matrix with orthonormal columns (``‖EᵀE − I‖_max ≤ 1e-5``), else a :class:`ConfigError`."""
    E = torch.as_tensor(basis).double()
    if E.ndim != 2 or E.shape[0] != int(p) or not 1 <= E.shape[1] <= int(p):
        raise ConfigError(f"basis must be a p × q matrix with p = {p} block entries and 1 ≤ q ≤ p; received shape "
                          f"{tuple(E.shape)}.")
    if not bool(torch.isfinite(E).all()):
        raise ConfigError("basis has non-finite entries; pass orthonormal columns (e.g. from torch.linalg.qr).")
    err = float((E.T @ E - torch.eye(E.shape[1], dtype=E.dtype)).abs().max())
    if err > 1e-5:
        raise ConfigError(f"basis columns must be orthonormal (max |EᵀE − I| = {err:.3g} > 1e-5); orthonormalise them "
                          "(torch.linalg.qr) first.")
    return E


def mlp(sizes: list[int], activation: type[nn.Module] = SiLU) -> nn.Sequential:
    """Linear layers of the given sizes with ``activation`` between them (none at the end)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


class LearnedAction(GroupAction):
    """``a(g, θ) = θ + b(g, θ) − b(I, θ)`` with ``b`` an MLP (``kind="direct"``), or the RK4 flow
    ``Φ^{ξ(g)}(θ)`` of learned fields ``V_i(θ)`` (``kind="flow"``; module docstring).

    Args:
        group: the (learned or supplied) matrix group.
        p: block dimension.
        theta_center: ``θ_c`` used to centre the θ input (e.g. the base point), shape ``(p,)``.
        theta_scale: scale dividing ``θ − θ_c`` (scalar or ``(p,)``), e.g. the perturbation std.
        out_scale: scale multiplying the network output (e.g. ``s_θ``).
        g_scale: scale dividing ``vec(g) − vec(I)``.
        width, depth: hidden width and number of hidden layers (256, 3).
        generator: ``torch.Generator`` for the initialisation.
        kind: ``"direct"`` (eq. 7) or ``"flow"`` (a group action by construction, module docstring).
        flow_steps: RK4 steps ``N`` of the flow kind (ignored by the direct kind).
        basis: reduced coordinates ``E`` (``p × q``, orthonormal columns; module docstring), or
            ``None`` for the whole block (``E = I``). ``theta_scale`` must then be a scalar.

    Raises:
        ConfigError: an unknown ``kind``, ``flow_steps < 1``, or a ``basis`` that is not ``p × q``
            (``1 ≤ q ≤ p``) with orthonormal columns.
    """

    def __init__(
        self,
        group: MatrixLieGroup,
        p: int,
        *,
        theta_center: Tensor,
        theta_scale: Tensor | float,
        out_scale: float,
        g_scale: float = 1.0,
        width: int = 256,
        depth: int = 3,
        generator: torch.Generator | None = None,
        kind: str = "direct",
        flow_steps: int = 4,
        basis: Tensor | None = None,
    ):
        super().__init__()
        if kind not in KINDS:
            raise ConfigError(f"action.kind must be one of {list(KINDS)}; received {kind!r}.")
        if int(flow_steps) < 1:
            raise ConfigError(f"action.flow_steps must be an integer ≥ 1 (RK4 steps); received {flow_steps!r}.")
        self.kind = kind
        self.flow_steps = int(flow_steps)
        self.group = group
        self.p = int(p)
        s = group.size
        self.register_buffer("theta_center", torch.as_tensor(theta_center, dtype=torch.float32).reshape(-1).clone())
        ts = torch.as_tensor(theta_scale, dtype=torch.float32)
        if basis is not None:
            basis = check_basis(basis, self.p)
            if ts.ndim != 0:
                raise ConfigError("LearnedAction: with reduced coordinates (basis) theta_scale must be a scalar; "
                                  f"received shape {tuple(ts.shape)}.")
            self.register_buffer("basis", basis.to(torch.float32).clone())
            # a basis with at most one nonzero per row (a coordinate selection with scales, e.g. the
            # FFN unit span) is applied as a gather/scatter, O(p) instead of O(p q) per vector
            nz = basis != 0
            if bool((nz.sum(1) <= 1).all()):
                cols = nz.double().argmax(1)
                self.register_buffer("_cols", cols, persistent=False)
        else:
            self.basis = None
        self.q = self.p if basis is None else int(basis.shape[1])
        self.register_buffer("theta_scale", (ts.expand(self.q) if ts.ndim == 0 else ts.reshape(-1)).clone())
        self.register_buffer("out_scale", torch.tensor(float(out_scale)))
        self.register_buffer("g_scale", torch.tensor(float(g_scale)))
        if kind == "flow":  # V(θ): r fields of θ alone (an autonomous field per generator)
            self.net = mlp([self.q] + [width] * depth + [group.num_generators * self.q])
        else:
            self.net = mlp([s * s + self.q] + [width] * depth + [self.q])
        if generator is not None:
            with torch.no_grad():
                for prm in self.net.parameters():
                    if prm.ndim == 2:
                        bound = (1.0 / prm.shape[1]) ** 0.5
                        prm.copy_((torch.rand(prm.shape, generator=generator) * 2 - 1) * bound)
                    else:
                        prm.copy_((torch.rand(prm.shape, generator=generator) * 2 - 1) * 0.01)

    # -- network evaluation ------------------------------------------------------------------
    def _row_values(self, dtype: torch.dtype) -> Tensor:
        """The one entry per row of a selection basis, ``E[i, cols[i]]`` (0 for an empty row)."""
        return self.basis.to(dtype).gather(1, self._cols[:, None])[:, 0]

    def reduce(self, x: Tensor) -> Tensor:
        """``Eᵀ x`` (block vectors ``(..., p)`` to reduced coordinates ``(..., q)``; ``x`` itself without a basis)."""
        if self.basis is None:
            return x
        if getattr(self, "_cols", None) is None:
            return x @ self.basis.to(x.dtype)
        flat = x.reshape(-1, self.p) * self._row_values(x.dtype)
        out = flat.new_zeros(flat.shape[0], self.q).index_add_(1, self._cols, flat)
        return out.reshape(*x.shape[:-1], self.q)

    def expand(self, y: Tensor) -> Tensor:
        """``E y`` (reduced coordinates ``(..., q)`` to block increments ``(..., p)``; ``y`` itself without a basis)."""
        if self.basis is None:
            return y
        if getattr(self, "_cols", None) is None:
            return y @ self.basis.to(y.dtype).T
        return y.index_select(-1, self._cols) * self._row_values(y.dtype)

    def _inputs(self, g: Tensor, theta: Tensor, tin: Tensor | None = None) -> Tensor:
        """Normalised network input ``[(vec(g) − vec(I))/g_scale, Eᵀ(θ − θ_c)/θ_scale]`` (batched);
        ``tin``: the second part if already computed (:meth:`_theta_in`)."""
        eye = torch.eye(g.shape[-1], dtype=g.dtype, device=g.device)
        gin = (g - eye).reshape(*g.shape[:-2], -1) / self.g_scale.to(g.dtype)
        tin = self._theta_in(theta) if tin is None else tin
        return torch.cat([gin.to(tin.dtype), tin], -1)

    def _theta_in(self, theta: Tensor) -> Tensor:
        """The θ part of the network input, ``Eᵀ(θ − θ_c)/θ_scale`` ``(..., q)``."""
        return self.reduce(theta - self.theta_center.to(theta.dtype)) / self.theta_scale.to(theta.dtype)

    def _dual(self, x: Tensor, dx: Tensor | None, rows: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """The MLP and its forward-mode derivative in one batched pass.

        For ``z = W x + c`` and ``y = z σ(z)``: ``dz = W dx`` and ``dy = σ(z)(1 + z(1 − σ(z))) dz``.
        Equal to ``torch.func.jvp`` of the network (tested), but plain batched ops: no ``vmap``
        and no Python decompositions, which makes training several times faster.

        Args:
            x: inputs ``(N, d)``.
            dx: tangents ``(T, k)``, ``k ≤ d``: directions in the first ``k`` input coordinates
                (the rest zero, never multiplied), or ``None`` (no derivative).
            rows: the primal row of each tangent, ``(T,)`` (several tangents may share one primal:
                the primal pass runs once per row, the tangents in one batch); ``None``: ``T = N``,
                tangent ``t`` at row ``t``.
        """
        layers = [m for m in self.net if isinstance(m, nn.Linear)]
        for i, lin in enumerate(layers):
            z = nn.functional.linear(x, lin.weight, lin.bias)
            if dx is None:
                dz = None
            else:
                w = lin.weight if i or dx.shape[-1] == lin.weight.shape[1] else lin.weight[:, :dx.shape[-1]]
                dz = nn.functional.linear(dx, w)
            if i < len(layers) - 1:
                sg = torch.sigmoid(z)
                x = z * sg
                if dz is not None:
                    slope = sg * (1 + z * (1 - sg))
                    dx = dz * (slope if rows is None else slope.index_select(0, rows))
            else:
                x, dx = z, dz
        return x, dx

    def b(self, g: Tensor, theta: Tensor) -> Tensor:
        """The raw network ``b(g, θ)`` (single or batched; direct kind only)."""
        if self.kind != "direct":
            raise ConfigError(f"LearnedAction.b is the direct kind's network; this action is kind={self.kind!r} "
                              "(use fields_all / act).")
        return self.expand(self._dual(self._inputs(g, theta), None)[0] * self.out_scale.to(theta.dtype))

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        if self.kind == "flow":
            return self.act_many(g.unsqueeze(0), theta.unsqueeze(0))[0]
        eye = torch.eye(g.shape[-1], dtype=g.dtype, device=g.device)
        return theta + (self.b(g, theta) - self.b(eye, theta))

    # -- batched fast paths (same values as the generic vmap/jvp versions) -------------------
    def act_many(self, g: Tensor, theta: Tensor) -> Tensor:
        if theta.ndim == 1:
            theta = theta.expand(g.shape[0], -1)
        if self.kind == "flow":
            return self.flow(self.coordinates(g, theta.dtype)[0], theta)[0]
        eye = torch.eye(g.shape[-1], dtype=g.dtype, device=g.device).expand_as(g)
        # two calls of the same shape, not one call on the concatenation: a row's GEMM result
        # depends on its position in the batch, so only equal positions make a(I, θ) == θ bitwise.
        # The θ input is reduced once, and the difference expanded once (E (b_g − b_I), exactly 0 at I).
        tin, scale = self._theta_in(theta), self.out_scale.to(theta.dtype)
        y_g = self._dual(self._inputs(g, theta, tin), None)[0] * scale
        y_I = self._dual(self._inputs(eye, theta, tin), None)[0] * scale
        return theta + self.expand(y_g - y_I)

    def _directional(self, g: Tensor, dg: Tensor, theta: Tensor) -> Tensor:
        """``D_g a(g, θ)[dg]`` for batches (``g``, ``dg``: ``(n, s, s)``; θ: ``(n, p)``)."""
        x = self._inputs(g, theta)
        dx = torch.cat([dg.reshape(dg.shape[0], -1).to(theta.dtype) / self.g_scale.to(theta.dtype),
                        theta.new_zeros(theta.shape[0], self.q)], -1)
        return self.expand(self._dual(x, dx)[1] * self.out_scale.to(theta.dtype))

    def field_many(self, h: Tensor, theta: Tensor) -> Tensor:
        if h.ndim == 2:
            h = h.expand(theta.shape[0], -1, -1)
        if self.kind == "flow":
            dxi = FL.algebra_derivative_at_identity(h, self.group.generators().to(theta.dtype))
            return (dxi.unsqueeze(-1) * self.fields(theta)).sum(1)
        eye = torch.eye(h.shape[-1], dtype=h.dtype, device=h.device).expand_as(h)
        return self._directional(eye, h, theta)

    def transported_many(self, g: Tensor, h: Tensor, theta: Tensor) -> Tensor:
        if self.kind == "flow":
            xi, dxi = self.coordinates(g, theta.dtype, h @ g)
            return self.flow(xi, theta, dxi)[1]
        return self._directional(g, h @ g, theta)

    def fields_all(self, theta: Tensor) -> Tensor:
        if self.kind == "flow":
            return self.fields(theta)
        gens = self.group.generators().to(theta.dtype)
        n, r = theta.shape[0], gens.shape[0]
        v = self.field_many(gens.repeat(n, 1, 1), theta.repeat_interleave(r, 0))
        return v.reshape(n, r, -1)

    # -- fused training step --------------------------------------------------------------------
    def step_quantities(self, theta: Tensor, theta_mu: Tensor, g1: Tensor, g2: Tensor, h: Tensor, *,
                        infinitesimal: bool, finite: bool, shared: int = 0, residuals: bool = False) -> StepQuantities:
        """All quantities of one training step in two batched network passes.

        Same values as :func:`paramsym.discovery.objectives.step_quantities` (tested), but each
        network input is evaluated once: the evaluations at the original points (``b(I, θ)`` with
        the r field tangents, ``b(g1, θ)`` with its transported tangent ``h g1``, ``b(g2 g1, θ)``,
        ``b(I, θ_μ)`` with the r field tangents) share one dual pass, those at ``a(g1, θ)``
        (``b(I, ·)`` with the tangent ``h``, ``b(g2, ·)``) a second one. A primal row carries as many
        tangents as it needs (none for ``b(g2 g1, θ)``; r at the identity), so the primal ``b(I, θ)`` is
        computed once, not once per generator (:meth:`_dual`'s ``rows``).

        Args:
            shared: the first ``shared`` rows of ``theta_mu`` are the first rows of ``theta`` (the
                trainer's batch: half μ points, half moved points); with ``infinitesimal`` their
                fields are those of ``theta``, not evaluated a second time.
            residuals: with reduced coordinates, the residual form of
                :class:`~paramsym.actions.base.StepQuantities` (only the moved points and the fields
                at θ are expanded to the block; equal to the block form up to ``E``'s orthonormality).
        """
        if self.kind == "flow":
            return self._flow_step_quantities(theta, theta_mu, g1, g2, h, infinitesimal=infinitesimal, finite=finite)
        dt, dev = theta.dtype, theta.device
        n, p = theta.shape
        gens = self.group.generators().to(dt)
        r, s = gens.shape[0], gens.shape[-1]
        eye = torch.eye(s, dtype=dt, device=dev)
        k = min(int(shared), n, theta_mu.shape[0]) if infinitesimal else 0
        mu = theta_mu[k:]
        m = mu.shape[0]

        def at(start: int, count: int, each: int = 1) -> Tensor:
            return torch.arange(start, start + count, device=dev).repeat_interleave(each)

        # pass 1, primal rows: I at θ (n), I at μ (m), g1 at θ (n), g2 g1 at θ (n, finite); every
        # output stays in reduced coordinates until the differences are formed, then one expansion
        t_in, mu_in = self._theta_in(theta), self._theta_in(mu)
        dgs, rows = [gens.repeat(m, 1, 1)], [at(n, m, r)]
        if infinitesimal:
            dgs, rows = [gens.repeat(n, 1, 1), dgs[0], h @ g1], [at(0, n, r), rows[0], at(n + m, n)]
        y, dy = self._batch([eye.expand(n + m, s, s), g1] + ([g2 @ g1] if finite else []),
                            [t_in, mu_in, t_in] + ([t_in] if finite else []), dgs, rows)
        y_I, _, y_g1, y_g21 = y.split([n, m, n, n if finite else 0])
        sizes = [n, n if finite else 0, n * r if infinitesimal else 0, m * r, n if infinitesimal else 0]
        reduced = residuals and self.basis is not None
        if reduced:  # expand only what the target sees: the moved points and the fields at θ
            z_g1, z_g21, z_I, z_mu, z_tr = torch.cat([y_g1 - y_I, y_g21 - y_I[:len(y_g21)], dy]).split(sizes)
            d_g1, f_I = self.expand(torch.cat([z_g1, z_I])).split([n, len(z_I)])
            fields_I, f_mu = z_I.reshape(n, r if infinitesimal else 0, self.q), z_mu.reshape(m, r, self.q)
        else:
            d_g1, d_g21, f_I, f_mu, transported = self.expand(torch.cat([y_g1 - y_I, y_g21 - y_I[:len(y_g21)], dy])).split(sizes)
            f_mu = f_mu.reshape(m, r, p)
        moved = theta + d_g1
        q = StepQuantities(fields_mu=f_mu, moved=moved)
        if infinitesimal:
            q.fields = f_I.reshape(n, r, p)
            if not reduced:
                fields_I, q.transported = q.fields, transported
            q.fields_mu = torch.cat([fields_I[:k], q.fields_mu]) if k else q.fields_mu
        if finite and not reduced:
            q.direct = theta + d_g21
        # pass 2 at a(g1, θ): I (n) with the tangent h (infinitesimal), g2 (n, finite)
        moved_in = self._theta_in(moved)
        y, dy = self._batch([eye.expand(n, s, s)] + ([g2] if finite else []), [moved_in] + ([moved_in] if finite else []),
                            [h] if infinitesimal else [], [at(0, n)] if infinitesimal else [])
        if reduced:
            if finite:
                q.comp_residual = z_g21 - z_g1 - (y[n:] - y[:n])
            if infinitesimal:
                q.trans_residual = z_tr - dy
            return q
        parts = ([y[n:] - y[:n]] if finite else []) + ([dy] if infinitesimal else [])
        out = self.expand(torch.cat(parts)).split([n] * len(parts)) if parts else []
        if finite:
            q.two_step = moved + out[0]
        if infinitesimal:
            q.field_at_moved = out[-1]
        return q

    def _batch(self, gs: list[Tensor], tins: list[Tensor], dgs: list[Tensor], rows: list[Tensor]
               ) -> tuple[Tensor, Tensor]:
        """``b`` in reduced coordinates (before :meth:`expand`) at the concatenated inputs: elements
        ``gs`` and θ parts ``tins`` (:meth:`_theta_in`), and ``D_g b[dg]`` for each tangent ``dgs`` at
        its input row ``rows`` (:meth:`_dual`; an empty ``(0, q)`` without tangents)."""
        t = torch.cat(tins)
        x = self._inputs(torch.cat(gs), t, t)
        scale = self.out_scale.to(t.dtype)
        if not dgs:
            return self._dual(x, None)[0] * scale, t.new_zeros(0, self.q)
        dg = torch.cat(dgs)
        dx = dg.reshape(dg.shape[0], -1).to(t.dtype) / self.g_scale.to(t.dtype)
        y, dy = self._dual(x, dx, torch.cat(rows))
        return y * scale, dy * scale

    # -- the flow kind ----------------------------------------------------------------------------
    def coordinates(self, g: Tensor, dtype: torch.dtype | None = None, dg: Tensor | None = None
                    ) -> tuple[Tensor, Tensor | None]:
        """``(ξ(g), Dξ(g)[dg])`` with ``ξ(g) = M⁻¹(⟨log g, h_j⟩_F)_j``, each ``(n, r)``
        (:func:`paramsym.actions.flow.algebra_coordinates`; the second ``None`` without ``dg``)."""
        dt = dtype or g.dtype
        return FL.algebra_coordinates(g.to(dt), self.group.generators().to(dt), None if dg is None else dg.to(dt))

    def fields(self, theta: Tensor) -> Tensor:
        """The learned fields ``V(θ) = E (out_scale/√q) · net(Eᵀ(θ − θ_c)/θ_scale)``, ``(n, r, p)`` (flow kind)."""
        return self._fields_dual(theta, None)[0]

    def _fields_dual(self, theta: Tensor, dtheta: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """``(V(θ), DV(θ)[dθ])`` from one dual pass (the second ``None`` without a tangent)."""
        n = theta.shape[0]
        r = self.group.num_generators
        dt = theta.dtype
        x = self.reduce(theta - self.theta_center.to(dt)) / self.theta_scale.to(dt)
        dx = None if dtheta is None else self.reduce(dtheta) / self.theta_scale.to(dt)
        y, dy = self._dual(x, dx)
        scale = self.out_scale.to(dt) * self.q ** -0.5  # fields of norm O(out_scale) (module docstring)
        v = self.expand((y * scale).reshape(n, r, self.q))
        return v, (None if dy is None else self.expand((dy * scale).reshape(n, r, self.q)))

    def flow(self, xi: Tensor, theta: Tensor, dxi: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``Φ^ξ(θ)``: ``flow_steps`` RK4 steps of ``dθ/dτ = Σ_i ξ_i V_i(θ)`` on ``τ ∈ [0, 1]``.

        Args:
            xi: coefficients ``(n, r)``; theta: start points ``(n, p)``.
            dxi: optional tangent of the coefficients ``(n, r)``: then the second result is
                ``D_ξ Φ^ξ(θ)[dξ]``, carried through the same RK4 stages as a dual number.
        """
        xi = xi.to(theta.dtype)
        dxi = None if dxi is None else dxi.to(theta.dtype)

        def field(y: Tensor, dy: Tensor | None) -> tuple[Tensor, Tensor | None]:
            if dy is None:
                v = self.fields(y)
                f = (xi.unsqueeze(-1) * v).sum(1)
                return f, (None if dxi is None else (dxi.unsqueeze(-1) * v).sum(1))
            v, dv = self._fields_dual(y, dy)
            f = (xi.unsqueeze(-1) * v).sum(1)
            return f, (dxi.unsqueeze(-1) * v).sum(1) + (xi.unsqueeze(-1) * dv).sum(1)

        return FL.rk4_flow(field, theta, self.flow_steps)

    def _flow_step_quantities(self, theta: Tensor, theta_mu: Tensor, g1: Tensor, g2: Tensor, h: Tensor, *,
                              infinitesimal: bool, finite: bool) -> StepQuantities:
        """The training step of the flow kind: one dual flow from θ (coefficients ``ξ(g1)`` with the
        transport tangent ``Dξ(g1)[h g1]``, and ``ξ(g2 g1)``), one flow from ``a(g1, θ)`` (``ξ(g2)``);
        fields are network evaluations. Same values as the generic computation (tested)."""
        dt = theta.dtype
        n = theta.shape[0]
        gens = self.group.generators().to(dt)
        q_fields = self.fields(torch.cat([theta_mu, theta]) if infinitesimal else theta_mu)
        xi1, dxi1 = self.coordinates(g1, dt, h @ g1 if infinitesimal else None)
        if finite:
            xi = torch.cat([xi1, self.coordinates(g2 @ g1, dt)[0]])
            dxi = None if dxi1 is None else torch.cat([dxi1, torch.zeros_like(dxi1)])
            out, dout = self.flow(xi, torch.cat([theta, theta]), dxi)
            moved, direct = out[:n], out[n:]
        else:
            moved, dout = self.flow(xi1, theta, dxi1)
            direct = None
        m = theta_mu.shape[0]
        q = StepQuantities(fields_mu=q_fields[:m], moved=moved, direct=direct)
        if infinitesimal:
            q.fields = q_fields[m:]
            q.transported = dout[:n]
            dxi_h = FL.algebra_derivative_at_identity(h, gens)
            q.field_at_moved = (dxi_h.unsqueeze(-1) * self.fields(moved)).sum(1)
        if finite:
            q.two_step = self.flow(self.coordinates(g2, dt)[0], moved)[0]
        return q
