"""Cross-check against GAP 4 output committed in tests/fixtures/gap/ (scripts/gap/*.g).

GAP is not needed at test time: the fixtures hold GAP's permutation generators, class
representatives, exact character values (cyclotomic coefficients), Frobenius–Schur indicators
and subgroup counts, and every comparison below maps GAP's classes to ours through the actual
elements (or through an explicit isomorphism for the named groups).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from paramsym.groups.characters import character_table
from paramsym.groups.decompose import decompose
from paramsym.groups.finite import find_isomorphism, from_permutations, group_by_name
from paramsym.groups.irreps import real_irreps
from paramsym.groups.reps import regular

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gap" / "character_tables.json"
DATA = json.loads(FIXTURE.read_text())
GROUPS = {g["name"]: g for g in DATA["groups"]}
#: fixture groups without a paramsym name (only built from GAP's generators)
UNNAMED = {"F21", "Dic3", "SL(2,3)"}


def gap_values(entry) -> np.ndarray:
    n = entry["conductor"]
    roots = np.exp(2j * np.pi * np.arange(n) / n)
    return np.array([[np.dot(c, roots) for c in row] for row in entry["irr_coeffs"]])


def perm_group(entry):
    gens = [[x - 1 for x in g] for g in entry["generators"]]
    return from_permutations(gens, name=entry["name"])


def gap_class_to_ours(group, entry) -> list[int]:
    index = {p.tobytes(): i for i, p in enumerate(group.permutations)}
    out = []
    for rep in entry["class_representatives"]:
        elem = index[np.array([x - 1 for x in rep], dtype=group.permutations.dtype).tobytes()]
        out.append(int(group.class_of[elem]))
    return out


def match_rows(ours: np.ndarray, theirs: np.ndarray, tol: float = 1e-9) -> list[int]:
    """perm with ours[perm[i]] == theirs[i]; asserts it is a bijection."""
    perm = []
    for row in theirs:
        dist = np.abs(ours - row[None, :]).max(axis=1)
        j = int(np.argmin(dist))
        assert dist[j] < tol, f"GAP character {np.round(row, 4)} not found (closest off by {dist[j]:.2e})"
        perm.append(j)
    assert sorted(perm) == list(range(len(theirs)))
    return perm


def test_fixture_provenance():
    assert DATA["generated_by"] == "scripts/gap/character_tables.g"
    required = {f"C{n}" for n in range(2, 9)} | {f"D{n}" for n in range(3, 7)} | {"S3", "S4", "A4", "Q8"}
    assert required <= set(GROUPS)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_character_table_matches_gap(name):
    entry = GROUPS[name]
    g = perm_group(entry)
    assert g.order == entry["order"]
    cmap = gap_class_to_ours(g, entry)
    assert sorted(cmap) == list(range(len(g.conjugacy_classes())))
    assert [len(g.conjugacy_classes()[c]) for c in cmap] == entry["class_sizes"]
    assert [g.element_order(g.conjugacy_classes()[c][0]) for c in cmap] == entry["class_element_orders"]
    table = character_table(g)
    theirs = gap_values(entry)
    ours = table.values[:, cmap]
    perm = match_rows(ours, theirs)
    assert [int(table.fs_indicators[j]) for j in perm] == entry["fs_indicators"]
    assert len(g.subgroups()) == entry["num_subgroups"]
    assert len(g.subgroup_classes()) == entry["num_subgroup_classes"]


@pytest.mark.parametrize("name", sorted(set(GROUPS) - UNNAMED))
def test_named_group_matches_gap(name):
    """Our closed-form group of the same name is isomorphic to GAP's and has GAP's table."""
    entry = GROUPS[name]
    ref = perm_group(entry)
    g = group_by_name(name)
    iso = find_isomorphism(g, ref)
    assert iso is not None, f"{name} is not isomorphic to GAP's {name}"
    cmap_ref = gap_class_to_ours(ref, entry)  # GAP class -> class of ref
    # GAP class -> class of g, through the isomorphism g -> ref
    inv = np.empty_like(iso)
    inv[iso] = np.arange(iso.size)
    cmap = [int(g.class_of[inv[ref.conjugacy_classes()[c][0]]]) for c in cmap_ref]
    table = character_table(g)
    perm = match_rows(table.values[:, cmap], gap_values(entry))
    assert [int(table.fs_indicators[j]) for j in perm] == entry["fs_indicators"]
    assert len(g.subgroup_classes()) == entry["num_subgroup_classes"]
    assert len(g.subgroups()) == entry["num_subgroups"]


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_real_irreps_types_match_gap(name):
    """Real irreducibles: one per real-type GAP character, one per quaternionic one, one per
    pair of complex conjugate ones; dimensions chi(1), 2 chi(1), 2 chi(1)."""
    entry = GROUPS[name]
    g = perm_group(entry) if name in UNNAMED else group_by_name(name)
    vals = gap_values(entry)
    expected = []
    for row, nu in zip(vals, entry["fs_indicators"]):
        d = int(round(row[0].real))
        expected.append({1: ("real", d), 0: ("complex", 2 * d), -1: ("quaternionic", 2 * d)}[nu])
    n_complex = sum(1 for t, _ in expected if t == "complex")
    expected = sorted([e for e in expected if e[0] != "complex"]
                      + sorted(e for e in expected if e[0] == "complex")[::2])
    irreps = real_irreps(g)
    got = sorted((r.type, r.dim) for r in irreps)
    assert got == expected
    assert sum(1 for r in irreps if r.type == "complex") == n_complex // 2
    for r in irreps:
        r.rep.check(tol=1e-11)
        assert abs(r.character @ r.character / g.order - r.endomorphism_dim) < 1e-9


@pytest.mark.parametrize("name", sorted(UNNAMED))
def test_regular_decomposition_of_groups_without_closed_form(name):
    """Multiplicity of each real irrep in R[G] is dim / e; the change of basis is orthogonal."""
    g = perm_group(GROUPS[name])
    dec = decompose(regular(g))
    assert dec.multiplicities == [r.dim // r.endomorphism_dim for r in dec.irreps]
    assert dec.orthogonality_error < 1e-11 and dec.equivariance_error < 1e-11
    q = dec.basis
    assert np.abs(np.matmul(q.T, regular(g).matrices @ q) - dec.block_matrices()).max() < 1e-11
