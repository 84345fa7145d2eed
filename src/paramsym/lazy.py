"""Lazy package exports: a package's public names resolved from its modules on first use.

``paramsym group`` and ``paramsym attention count|table|clusterings`` must not import torch, so
the packages they use (:mod:`paramsym.groups`, :mod:`paramsym.attention`) declare their names as a
table ``{name: module}`` and resolve each one only when it is read (PEP 562 module
``__getattr__``). Standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` resolving ``name`` as ``package.<exports[name]>.name``.

    Args:
        package: the package's ``__name__``.
        exports: public name → the sub-module (relative to ``package``) that defines it.

    Returns:
        ``__getattr__(name)``; an unknown name raises :class:`AttributeError` naming the package.
    """

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
