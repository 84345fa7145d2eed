"""Groups: matrix Lie groups (``lie``), finite groups (``finite``), characters and real
irreducibles (``characters``, ``irreps``), real representations (``reps``, ``decompose``), G-sets
(``gsets``), the Reynolds average (``reynolds``), Lie-algebra analysis (``algebra``) and memory
budgets (``memory``).

The names below are re-exported lazily: this package imports nothing heavy at import time
(``paramsym group`` never imports torch), and each name loads only its own module. No name here is also a submodule's name
(``decompose.decompose`` is imported from :mod:`.decompose`).
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    "FiniteGroup": "finite",
    "cyclic": "finite",
    "dihedral": "finite",
    "symmetric": "finite",
    "alternating": "finite",
    "quaternion": "finite",
    "direct_product": "finite",
    "group_by_name": "finite",
    "CharacterTable": "characters",
    "character_table": "characters",
    "RealIrrep": "irreps",
    "real_irreps": "irreps",
    "Representation": "reps",
    "Decomposition": "decompose",
    "equivariant_basis": "decompose",
    "GSet": "gsets",
    "coset_space": "gsets",
    "reynolds_matrices": "reynolds",
    "reynolds_function": "reynolds",
    "MatrixLieGroup": "lie",
    "so2_generator": "lie",
    "so2_basis": "lie",
    "MemoryBudget": "memory",
    "parse_memory": "memory",
    "check_memory": "memory",
    "commutativity": "brackets",
    "generated_algebra": "algebra",
    "structure_constants": "algebra",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
