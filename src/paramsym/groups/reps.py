"""Real orthogonal representations of finite groups.

A :class:`Representation` of a :class:`~paramsym.groups.finite.FiniteGroup` G stores one real
``d x d`` matrix per element, ``matrices[g] = rho(g)``, and is checked to be an orthogonal
homomorphism: ``rho(e) = I``, ``rho(g)^T rho(g) = I`` and ``rho(a s) = rho(a) rho(s)`` for every
element ``a`` and generator ``s`` (which implies ``rho(ab) = rho(a) rho(b)`` for all ``a, b`` by
induction on the word length of ``b``).

Constructions: :func:`trivial`, :func:`regular`, :func:`permutation`, :func:`induced`,
:func:`direct_sum`, :func:`tensor`, :func:`copies`, :func:`restrict`, :func:`from_generators`.
Real irreducibles and decompositions live in :mod:`paramsym.groups.irreps` (:func:`real_irreps`,
:class:`RealIrrep`) and :mod:`paramsym.groups.decompose` (:func:`decompose`,
:class:`Decomposition`, :func:`equivariant_basis`), which build on this module.

Memory: every constructor estimates its ``(order, d, d)`` float64 array first and raises
:class:`~paramsym.errors.TooLargeError` above the budget ``max_memory`` (bytes; default
:data:`paramsym.groups.memory.DEFAULT_MAX_MEMORY`, 2 GiB).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import RepresentationError
from .finite import FiniteGroup
from .gsets import coset_space
from .memory import check_memory, dense_bytes

__all__ = [
    "Representation", "trivial", "regular", "permutation", "induced", "direct_sum", "tensor",
    "copies", "restrict", "from_generators", "check_dense",
]


_REP_FORMS = ("regular, trivial, perm, copies:C (C >= 1 copies of regular) or a .json/.safetensors file holding "
              "'matrices' (one per element) or 'generators'")


def _rep_from_file(group: FiniteGroup, path: str, budget: int, argument: str) -> Representation:
    """A representation read from a ``.json`` / ``.safetensors`` file (see :meth:`Representation.parse`)."""
    import json
    from pathlib import Path

    from ..errors import InputFileError

    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"{argument}: representation file {path!r} does not exist; give an existing .json or "
                             f".safetensors file, or one of {_REP_FORMS.split(' or a ')[0]}.")
    try:
        if p.suffix.lower() == ".json":
            raw = json.loads(p.read_text())
            if not isinstance(raw, dict):
                raise ValueError(f"top level is a {type(raw).__name__}, not an object")
        else:
            from safetensors.numpy import load_file

            raw = load_file(str(p))
        data = {k: np.asarray(v, dtype=np.float64) for k, v in raw.items() if k in ("matrices", "generators")}
    except Exception as exc:  # noqa: BLE001 - unreadable JSON/safetensors, ragged lists: one named error
        raise InputFileError(f"{argument}: cannot read representation file {path!r} ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); give 'matrices' or 'generators' as "
                             "arrays of square matrices.") from None
    if "matrices" in data:
        mats = data["matrices"]
        if mats.ndim != 3 or mats.shape[0] != group.order or mats.shape[1] != mats.shape[2]:
            raise RepresentationError(
                f"{path}: 'matrices' must have shape ({group.order}, d, d), one per element of "
                f"{group.name}; received {mats.shape}."
            )
        check_dense(group.order, mats.shape[1], f"the representation in {path}", budget)
        return Representation(group, mats, name=p.name)
    if "generators" in data:
        gens = data["generators"]
        if gens.ndim != 3 or gens.shape[0] != len(group.generators) or gens.shape[1] != gens.shape[2]:
            raise RepresentationError(
                f"{path}: 'generators' must have shape ({len(group.generators)}, d, d), the "
                f"images of {group.name}'s generators {[group.label(g) for g in group.generators]}; "
                f"received {gens.shape}."
            )
        return from_generators(group, list(gens), max_memory=budget)
    raise RepresentationError(f"representation file {path!r} must hold 'matrices' or 'generators'.")


def check_dense(order: int, dim: int, what: str, max_memory: int | None = None, hint: str = "") -> None:
    """Refuse ``order`` dense ``dim x dim`` float64 matrices (``8 order dim^2`` bytes) above the
    memory budget ``max_memory`` (see :mod:`paramsym.groups.memory`)."""
    check_memory(dense_bytes(order, dim, dim), f"{what} ({order} matrices of {dim}x{dim} float64)",
                 max_memory, hint)




class Representation:
    """A real orthogonal representation ``rho : G -> O(d)``.

    Args:
        group: the group.
        matrices: ``(group.order, d, d)`` array, ``matrices[g] = rho(g)``.
        name: optional description (``"regular"``, ``"E1"``).
        check: validate with :meth:`check` (raises :class:`RepresentationError`).
        tol: tolerance of that check.
    """

    def __init__(
        self,
        group: FiniteGroup,
        matrices: np.ndarray,
        *,
        name: str = "rho",
        check: bool = True,
        tol: float = 1e-9,
    ) -> None:
        if not isinstance(group, FiniteGroup):
            raise RepresentationError(
                f"group must be a paramsym.groups.finite.FiniteGroup; got {type(group).__name__} "
                "(build one with group_by_name, from_permutations or from_matrices)."
            )
        try:
            arr = np.asarray(matrices, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise RepresentationError(
                f"representation matrices must be a real (order, d, d) array; could not convert "
                f"them to float64 ({exc})."
            ) from None
        if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[0] != group.order:
            raise RepresentationError(
                f"a representation of {group.name} (order {group.order}) needs one square "
                f"matrix per element, an array of shape ({group.order}, d, d); got shape "
                f"{arr.shape}. Build it with from_generators(G, generator_matrices) if you only "
                "have the generators' matrices."
            )
        self.group = group
        self.matrices = arr
        self.dim = arr.shape[1]
        self.name = name
        if check:
            self.check(tol)

    def __repr__(self) -> str:
        return f"Representation({self.name!r} of {self.group.name}, dim={self.dim})"

    @classmethod
    def parse(cls, group: FiniteGroup | str, spec: str = "regular", copies: int = 1, *,
              max_memory: int | str | None = None, progress: bool = False,
              argument: str = "--rep") -> Representation:
        """The one representation grammar of every command: ``R^copies ⊗ ρ`` for a spec ``ρ``.

        ``spec`` is one of ``regular`` (``ρ_reg``), ``trivial``, ``perm`` (the defining
        permutation action of a group given by permutations), ``copies:C`` (``R^C ⊗ ρ_reg``,
        block diagonal ``I_C ⊗ ρ_reg(g)``), or a ``.json``/``.safetensors`` file (read here)
        holding ``matrices`` (one ``(d, d)`` matrix per element, in the group's element order) or
        ``generators`` (images of ``group.generators``, extended by :func:`from_generators`).
        Matrices from files are checked to be an orthogonal homomorphism when built; the
        constructions are exact.

        Args:
            group: a :class:`FiniteGroup` or a group spec (:meth:`FiniteGroup.parse`).
            spec: the representation spec.
            copies: ``C ≥ 1``, the representation is taken ``C`` times.
            max_memory: budget for the dense ``(order, d, d)`` array (a
                :class:`~paramsym.groups.memory.MemoryBudget`; ``None``: 2 GiB), checked before
                it is allocated.
            progress: announce representations above 256 MiB on stderr.
            argument: how the user named the spec, used in errors.

        Raises:
            RepresentationError: an unknown spec (the closest valid ones are suggested), bad
                ``copies``, a file of the wrong shape or not a homomorphism.
            InputFileError: a missing or unreadable file.
            TooLargeError: the dense matrices would exceed the budget (the estimate is named).
        """
        from .memory import budget_bytes, format_bytes
        from .progress import warn

        group = FiniteGroup.parse(group)
        budget = budget_bytes(max_memory, "--max-memory")
        hint = ("Use a smaller group, or a smaller representation (--rep perm or trivial) of a group "
                "whose irreducibles can be computed.")
        if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 1:
            raise RepresentationError(f"--copies must be an integer >= 1; received {copies!r}.")
        if not isinstance(spec, str):
            raise RepresentationError(f"{argument}: expected {_REP_FORMS}; received {spec!r} ({type(spec).__name__}).")
        text = spec.strip()

        def announce(dim: int, what: str) -> None:
            check_dense(group.order, dim * int(copies), what, budget, hint)
            nbytes = dense_bytes(group.order, dim * int(copies), dim * int(copies))
            warn(f"building a {format_bytes(nbytes)} representation of {group.name} ({group.order} "
                 f"matrices {dim * int(copies)}x{dim * int(copies)}); this may take a while.",
                 enabled=progress and nbytes > 2**28)

        if text == "regular":
            announce(group.order, f"the regular representation of {group.name}")
            rep = regular(group, max_memory=budget)
        elif text == "trivial":
            announce(1, f"the trivial representation of {group.name}")
            rep = trivial(group, max_memory=budget)
        elif text.startswith("copies:"):
            try:
                c = int(text.split(":", 1)[1])
            except ValueError:
                c = 0
            if c < 1:
                raise RepresentationError(f"{argument} {spec!r}: write copies:C with an integer C >= 1.")
            announce(c * group.order, f"{c} copies of the regular representation of {group.name}")
            rep = regular(group, max_memory=budget)
            rep = _copies_of(rep, c, max_memory=budget) if c > 1 else rep
        elif text == "perm":
            if group.permutations is None:
                raise RepresentationError(
                    f"{argument} perm: the group {group.name} was not given by permutations (it has no defining "
                    "permutation action); use regular, copies:C or a file of matrices."
                )
            announce(group.permutations.shape[1], f"the permutation representation of {group.name}")
            rep = permutation(group, group.permutations, max_memory=budget)
        elif text.lower().endswith((".json", ".safetensors")):
            rep = _rep_from_file(group, text, budget, argument)
        else:
            close = difflib.get_close_matches(text.lower(), ["regular", "trivial", "perm", "copies:"], n=2, cutoff=0.4)
            hint_close = f"did you mean {' or '.join(c if c != 'copies:' else 'copies:C' for c in close)}? " if close else ""
            raise RepresentationError(f"{argument}: unknown representation {spec!r}; {hint_close}expected {_REP_FORMS}.")
        if copies > 1:
            rep = _copies_of(rep, int(copies), max_memory=budget)
        return rep

    def __call__(self, g: int) -> np.ndarray:
        return self.matrices[g]

    def check(self, tol: float = 1e-9) -> None:
        """Raise :class:`RepresentationError` unless ``rho`` is an orthogonal homomorphism.

        Checks, entrywise to ``tol``: finite entries; ``rho(e) = I``;
        ``max_g |rho(g)^T rho(g) - I|``; ``max_{a, s} |rho(a s) - rho(a) rho(s)|`` over all
        elements ``a`` and generators ``s``. The message names the worst element or pair.
        """
        g, m, d = self.group, self.matrices, self.dim
        if not np.isfinite(m).all():
            bad = int(np.flatnonzero(~np.isfinite(m).reshape(g.order, -1).all(axis=1))[0])
            raise RepresentationError(f"rho({g.label(bad)}) has NaN or infinite entries.")
        eye = np.eye(d)
        err0 = np.abs(m[0] - eye).max() if d else 0.0
        if err0 > tol:
            raise RepresentationError(
                f"rho(e) must be the identity matrix (element 0 is the identity); it is off by "
                f"{err0:.3e} > tol {tol:.1e}."
            )
        if d == 0:
            return
        orth = np.abs(np.einsum("gji,gjk->gik", m, m) - eye).max(axis=(1, 2))
        worst = int(np.argmax(orth))
        if orth[worst] > tol:
            raise RepresentationError(
                f"not orthogonal: |rho(g)^T rho(g) - I| = {orth[worst]:.3e} > tol {tol:.1e} for "
                f"g = {g.label(worst)} (element {worst}). paramsym works with orthogonal "
                "representations; for a representation that is not orthogonal, conjugate it by "
                "the square root of the invariant inner product sum_g rho(g)^T rho(g)."
            )
        for s in g.generators:
            err = np.abs(m[g.table[:, s]] - m @ m[s]).max(axis=(1, 2))
            a = int(np.argmax(err))
            if err[a] > tol:
                b = int(g.table[a, s])
                raise RepresentationError(
                    f"not a homomorphism: rho(a) rho(b) differs from rho(a b) by {err[a]:.3e} > tol "
                    f"{tol:.1e} for a = {g.label(a)} (element {a}), b = {g.label(s)} (element {s}), "
                    f"a b = {g.label(b)} (element {b}). Matrices must be indexed like the group "
                    "table: matrices[g] = rho(g)."
                )

    def character(self) -> np.ndarray:
        """``chi(g) = tr rho(g)`` for every element, shape ``(order,)``."""
        return np.trace(self.matrices, axis1=1, axis2=2).copy()

    def class_character(self) -> np.ndarray:
        """The character on conjugacy-class representatives, shape ``(num_classes,)``."""
        return self.character()[self.group.class_representatives()]

    def on_generators(self) -> np.ndarray:
        """``(num_generators, d, d)`` images of the group's generators."""
        return self.matrices[self.group.generators]


def _same_group(reps: Sequence[Representation], what: str) -> FiniteGroup:
    if not reps:
        raise RepresentationError(f"{what} needs at least one representation.")
    for r in reps:
        if not isinstance(r, Representation):
            raise RepresentationError(f"{what} takes Representation objects; got {type(r).__name__}.")
    g = reps[0].group
    if not all(g.same_as(r.group) for r in reps):
        raise RepresentationError(
            f"{what}: all representations must be of the same group (same multiplication "
            f"table); got {[r.group.name for r in reps]} (build each from one FiniteGroup)."
        )
    return g


def trivial(group: FiniteGroup, dim: int = 1, *, max_memory: int | None = None) -> Representation:
    """``rho(g) = I_dim``."""
    check_dense(group.order, dim, f"the trivial representation of {group.name}", max_memory)
    return Representation(group, np.broadcast_to(np.eye(dim), (group.order, dim, dim)).copy(),
                          name="trivial", check=False)


def regular(group: FiniteGroup, *, max_memory: int | None = None) -> Representation:
    """Left regular representation on ``R^G``: ``rho(g) e_h = e_{gh}``.

    Dense: ``8 |G|^3`` bytes, checked against ``max_memory`` before allocating.
    """
    n = group.order
    check_dense(n, n, f"the regular representation of {group.name}", max_memory,
            "Use a smaller group or a smaller representation (e.g. --rep perm or trivial).")
    m = np.zeros((n, n, n))
    g, h = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    m[g, group.table[g, h], h] = 1.0
    return Representation(group, m, name="regular", check=False)


def permutation(group: FiniteGroup, perm_images: np.ndarray, *,
                max_memory: int | None = None) -> Representation:
    """Permutation representation of a left action: ``rho(g) e_p = e_{g.p}``.

    Args:
        perm_images: ``(order, n)`` int array, ``perm_images[g, p] = g . p``.
    """
    a = np.asarray(perm_images)
    if a.ndim != 2 or a.shape[0] != group.order:
        raise RepresentationError(
            f"permutation images for {group.name} must have shape ({group.order}, n); got {a.shape}."
        )
    n = a.shape[1]
    check_dense(group.order, n, f"a permutation representation of {group.name}", max_memory)
    if n and (not np.issubdtype(a.dtype, np.integer) or
              not np.array_equal(np.sort(a, axis=1), np.broadcast_to(np.arange(n), a.shape))):
        raise RepresentationError(f"each row of perm_images must be a permutation of 0..{n - 1}.")
    m = np.zeros((group.order, n, n))
    g, p = np.meshgrid(np.arange(group.order), np.arange(n), indexing="ij")
    m[g, a, p] = 1.0
    return Representation(group, m, name=f"permutation({n})")


def direct_sum(*reps: Representation, max_memory: int | None = None) -> Representation:
    """``rho_1 ⊕ rho_2 ⊕ ...`` (block diagonal, blocks in argument order)."""
    g = _same_group(reps, "direct_sum")
    d = sum(r.dim for r in reps)
    check_dense(g.order, d, "a direct sum", max_memory)
    m = np.zeros((g.order, d, d))
    o = 0
    for r in reps:
        m[:, o : o + r.dim, o : o + r.dim] = r.matrices
        o += r.dim
    return Representation(g, m, name=" ⊕ ".join(r.name for r in reps), check=False)


def tensor(a: Representation, b: Representation, *, max_memory: int | None = None) -> Representation:
    """``rho_a ⊗ rho_b`` with ``(rho_a ⊗ rho_b)(g) = kron(rho_a(g), rho_b(g))``."""
    g = _same_group([a, b], "tensor")
    check_dense(g.order, a.dim * b.dim, "a tensor product", max_memory)
    m = np.einsum("gij,gkl->gikjl", a.matrices, b.matrices).reshape(g.order, a.dim * b.dim, -1)
    return Representation(g, m, name=f"({a.name}) ⊗ ({b.name})", check=False)


def copies(rep: Representation, c: int, *, max_memory: int | None = None) -> Representation:
    """``R^c ⊗ rho = rho ⊕ .. ⊕ rho`` (``c`` copies; ``kron(I_c, rho(g))``)."""
    if not isinstance(c, (int, np.integer)) or c < 1:
        raise RepresentationError(f"copies(rep, c) needs an integer c >= 1; got {c!r}.")
    check_dense(rep.group.order, c * rep.dim, f"{c} copies of {rep.name}", max_memory,
            "Component counts only need one copy (they scale multiplicities by C).")
    m = np.einsum("ij,gkl->gikjl", np.eye(c), rep.matrices).reshape(rep.group.order, c * rep.dim, -1)
    return Representation(rep.group, m, name=f"{c}x({rep.name})", check=False)


def restrict(rep: Representation, subgroup: Iterable[int]) -> Representation:
    """``rho`` restricted to a subgroup ``K``, as a representation of ``group.subgroup(K)``."""
    sub = rep.group.subgroup(subgroup)
    return Representation(sub, rep.matrices[sub.parent_indices], name=f"Res({rep.name})", check=False)


def induced(group: FiniteGroup, subgroup: Iterable[int], rep_of_subgroup, *,
            max_memory: int | None = None) -> Representation:
    """``Ind_K^G sigma`` on ``⊕_i t_i W`` over left coset representatives ``t_i`` of ``G/K``.

    ``rho(g)`` has block ``(i, j)`` equal to ``sigma(t_i^{-1} g t_j)`` when ``g t_j K = t_i K``
    and zero otherwise; ``t_i`` is the smallest element of its coset (``t_0 = e``). Dimension
    ``[G:K] dim W``; its character is ``chi(g) = sum_{i: t_i^-1 g t_i in K} chi_sigma(t_i^-1 g t_i)``.

    Args:
        group: G.
        subgroup: element indices of K in G.
        rep_of_subgroup: a :class:`Representation` of ``group.subgroup(K)`` (element ``i`` is
            ``sorted(K)[i]``), or a ``(|K|, d, d)`` array in that order.
    """
    k = np.array(sorted(set(int(x) for x in subgroup)), dtype=np.int64)
    x = coset_space(group, k)
    if isinstance(rep_of_subgroup, Representation):
        if rep_of_subgroup.group.order != k.size:
            raise RepresentationError(
                f"rep_of_subgroup is a representation of a group of order "
                f"{rep_of_subgroup.group.order}, but the subgroup has {k.size} elements."
            )
        sig = rep_of_subgroup.matrices
    else:
        sig = Representation(group.subgroup(k), rep_of_subgroup, name="sigma").matrices
    pos = np.full(group.order, -1)
    pos[k] = np.arange(k.size)
    reps_t = np.array([min(np.flatnonzero(x.action[:, 0] == i)) for i in range(x.size)])
    r, d = x.size, sig.shape[1]
    check_dense(group.order, r * d, f"an induced representation of {group.name}", max_memory)
    m = np.zeros((group.order, r * d, r * d))
    for g in range(group.order):
        for j in range(r):
            i = int(x.action[g, j])
            h = group.table[group.table[group.inverse[reps_t[i]], g], reps_t[j]]
            m[g, i * d : (i + 1) * d, j * d : (j + 1) * d] = sig[pos[h]]
    return Representation(group, m, name="Ind")


def from_generators(group: FiniteGroup, images: Sequence[np.ndarray], tol: float = 1e-9, *,
                    max_memory: int | None = None) -> Representation:
    """The representation with ``rho(generators[k]) = images[k]``, extended along words.

    Raises :class:`RepresentationError` if the images are not orthogonal or do not satisfy the
    group's relations (the check names the failing pair).
    """
    imgs = [np.asarray(x, dtype=np.float64) for x in images]
    if len(imgs) != len(group.generators):
        raise RepresentationError(
            f"{group.name} has {len(group.generators)} generators "
            f"{[group.label(s) for s in group.generators]}; got {len(imgs)} images."
        )
    d = imgs[0].shape[0] if imgs else 1
    for i, x in enumerate(imgs):
        if x.shape != (d, d):
            raise RepresentationError(f"image {i} has shape {x.shape}; expected ({d}, {d}) like image 0.")
    check_dense(group.order, d, f"a representation of {group.name}", max_memory)
    parent, via = group._words()
    m = np.zeros((group.order, d, d))
    m[0] = np.eye(d)
    for b in group.bfs_order()[1:]:
        m[b] = m[parent[b]] @ imgs[via[b]]
    return Representation(group, m, name="from_generators", tol=tol)


_copies_of = copies  # Representation.parse has a parameter named `copies`
