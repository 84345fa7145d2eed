"""MergeKit 0.1.x's own architecture classes, loaded from its wheel for the export tests.

``pip download mergekit --no-deps`` gives the wheel without its dependencies; importing
``mergekit.architecture`` would pull ``peft``, ``accelerate`` and ``immutables`` (through
``mergekit.common`` and ``mergekit.architecture.auto``), which the project environment does not
have and which change ``transformers``' loading paths when installed. The two modules that define
and parse the JSON architecture format need none of them: ``mergekit/architecture/base.py``
(``WeightInfo``, ``ModelArchitecture``) and ``mergekit/architecture/json_definitions.py``
(``JsonModuleArchDef``, ``_load_architecture_json``). This helper extracts the wheel's
``mergekit`` package to a temporary directory and executes exactly those two files as
``mergekit.architecture.base`` / ``.json_definitions`` under bare parent packages (their
``__init__`` files are not run). ``base.py`` imports one function from ``mergekit.common``,
``get_config_value`` (``num_layers_config_key`` lookup); it is taken from the wheel's own
``common.py`` by compiling just that function's definition (``ast``), so every line that
validates or expands a file is MergeKit's. ``sys.modules`` is restored afterwards.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["find_wheel", "load_mergekit_json_classes"]

_DEFAULT = Path.home() / ".cache" / "paramsym" / "mergekit"


def find_wheel() -> Path | None:
    """The MergeKit wheel: ``$PARAMSYM_MERGEKIT`` (a wheel or a directory holding one), else
    ``~/.cache/paramsym/mergekit`` (the same places as ``paramsym.census.mergekit_compare``)."""
    for src in (os.environ.get("PARAMSYM_MERGEKIT"), _DEFAULT):
        if not src:
            continue
        p = Path(src)
        if p.is_file() and p.name.startswith("mergekit-") and p.suffix == ".whl":
            return p
        if p.is_dir():
            wheels = sorted(p.glob("mergekit-*.whl"))
            if wheels:
                return wheels[-1]
    return None


def load_mergekit_json_classes(wheel: Path, workdir: Path) -> types.SimpleNamespace:
    """``WeightInfo``, ``JsonModuleArchDef``, ``ModelArchitecture``, ``load_architecture_json``
    (``_load_architecture_json``), ``shipped`` (``{stem: text}`` of the wheel's architecture
    files) and ``version``, from the wheel's own source (module docstring)."""
    with zipfile.ZipFile(wheel) as z:
        members = [n for n in z.namelist() if n.startswith("mergekit/")]
        z.extractall(workdir, members)
    root = workdir / "mergekit"
    saved = {k: v for k, v in sys.modules.items() if k == "mergekit" or k.startswith("mergekit.")}
    for k in saved:
        del sys.modules[k]
    try:
        pkg = types.ModuleType("mergekit")
        pkg.__path__ = [str(root)]
        arch = types.ModuleType("mergekit.architecture")
        arch.__path__ = [str(root / "architecture")]
        common = types.ModuleType("mergekit.common")
        tree = ast.parse((root / "common.py").read_text())
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_config_value")
        from typing import Any as _Any

        from transformers import PretrainedConfig

        common.__dict__.update(Any=_Any, PretrainedConfig=PretrainedConfig)
        exec(compile(ast.Module(body=[fn], type_ignores=[]), str(root / "common.py"), "exec"), common.__dict__)
        sys.modules.update({"mergekit": pkg, "mergekit.architecture": arch, "mergekit.common": common})
        pkg.architecture, pkg.common = arch, common
        base = importlib.import_module("mergekit.architecture.base")
        jd = importlib.import_module("mergekit.architecture.json_definitions")
    finally:
        for k in [k for k in sys.modules if k == "mergekit" or k.startswith("mergekit.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    shipped: dict[str, Any] = {p.stem: p.read_text() for p in sorted((root / "_data" / "architectures").glob("*.json"))}
    return types.SimpleNamespace(WeightInfo=base.WeightInfo, ModelArchitecture=base.ModelArchitecture,
                                 JsonModuleArchDef=jd.JsonModuleArchDef, load_architecture_json=jd._load_architecture_json,
                                 shipped=shipped, version=wheel.name.split("-")[1])
