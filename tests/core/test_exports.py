"""One export style (issue 19): every area package declares a flat ``__all__`` of its public
names, each of which resolves, with no duplicates, and none hiding a submodule of the same name."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import paramsym

#: the area packages of ``src/paramsym`` (the top layers ``cli``, ``reproduce``, ``sweep``, ``kinds``, ``experiments`` and the foundation ``runs`` are not areas)
AREAS = ["actions", "alignment", "attention", "attribution", "census", "compensation", "discovery", "exact",
         "groups", "models", "targets", "teleport", "testing"]
#: a public function named like its module, re-exported before this rule (kept for its callers)
SHADOWING_KEPT = {("attribution", "lift")}


def test_every_area_package_is_listed() -> None:
    packages = {m.name for m in pkgutil.iter_modules(paramsym.__path__) if m.ispkg}
    assert packages - {"cli", "reproduce", "sweep", "kinds", "experiments", "runs"} == set(AREAS)


@pytest.mark.parametrize("area", AREAS)
def test_all_names_resolve_once(area: str) -> None:
    pkg = importlib.import_module(f"paramsym.{area}")
    names = pkg.__all__
    assert isinstance(names, list | tuple) and names, f"paramsym.{area} declares no __all__"
    assert all(isinstance(n, str) for n in names)
    dupes = sorted({n for n in names if names.count(n) > 1})
    assert not dupes, f"paramsym.{area}.__all__ repeats {dupes}"
    missing = [n for n in names if not hasattr(pkg, n)]
    assert not missing, f"paramsym.{area}.__all__ names missing objects: {missing}"
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    shadowing = sorted(n for n in set(names) & submodules if (area, n) not in SHADOWING_KEPT)
    assert not shadowing, f"paramsym.{area}.__all__ names {shadowing}, which are also its submodules' names"
    modules = [n for n in names if isinstance(getattr(pkg, n), type(pkg)) and (area, n) not in SHADOWING_KEPT]
    assert not modules, f"paramsym.{area}.__all__ names modules {modules} (flat: re-export their names instead)"
