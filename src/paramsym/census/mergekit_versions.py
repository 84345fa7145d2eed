"""MergeKit 0.1.4 versus 0.1.5 architecture files: the one field that differs (issue 34).

Both versions read the same JSON layout (``model_type``, ``architectures``, ``pre_weights``,
``layer_templates.weights``, ``post_weights``, ``num_layers_config_key``). Per tensor, 0.1.5's
``WeightInfo`` states the token-indexed axis as ``vocabulary_axis`` and forbids unknown fields
(``extra="forbid"``, so it rejects ``is_embed``); 0.1.4's ``WeightInfo`` (the last tagged source)
marks the embedding and the LM head with ``is_embed: true`` and leaves pydantic's default
``extra="ignore"`` — it would load a 0.1.5 file and **silently drop** ``vocabulary_axis``, so its
merges would treat the embeddings as ordinary weights. Neither file can serve both readers, so
``--export mergekit`` writes 0.1.5's and ``--export mergekit-0.1.4`` writes 0.1.4's (the same
tensors, ``is_embed: true`` where 0.1.5 says ``vocabulary_axis: 0``; 0.1.4 has no way to state
another axis). :func:`check_version` refuses a file carrying the other version's field with
:class:`~paramsym.errors.MergekitVersionError`, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import MergekitVersionError

__all__ = ["MERGEKIT_VERSIONS", "MERGEKIT_V014_FIELDS", "check_version", "to_v014", "from_v014"]

#: export format -> the MergeKit version its file targets
MERGEKIT_VERSIONS = {"mergekit": "0.1.5", "mergekit-0.1.4": "0.1.4"}
#: the per-tensor fields of MergeKit 0.1.4's ``WeightInfo``
MERGEKIT_V014_FIELDS = ("name", "is_embed", "optional", "aliases", "force_dtype", "tied_names")
_ONLY = {"0.1.5": "vocabulary_axis", "0.1.4": "is_embed"}


def _entries(arch: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [*arch.get("pre_weights", []), *arch.get("layer_templates", {}).get("weights", []), *arch.get("post_weights", [])]


def check_version(arch: Mapping[str, Any], version: str) -> None:
    """Refuse an architecture file holding the field of the other MergeKit version.

    Raises:
        MergekitVersionError: ``version`` is 0.1.5 and a tensor has ``is_embed`` (0.1.5 rejects
            it), or ``version`` is 0.1.4 and a tensor has ``vocabulary_axis`` (0.1.4 would drop it).
    """
    other = "0.1.4" if version == "0.1.5" else "0.1.5"
    field = _ONLY[other]
    hit = next((e.get("name") for e in _entries(arch) if field in e), None)
    if hit is not None:
        fmt = "mergekit" if other == "0.1.5" else "mergekit-0.1.4"
        raise MergekitVersionError(f"MergeKit {version} architecture file expected, but tensor {hit!r} has {field!r}, a "
                                   f"MergeKit {other} field ({'rejected' if version == '0.1.5' else 'silently dropped'} "
                                   f"by {version}); export for {version} with --export "
                                   f"{'mergekit' if version == '0.1.5' else 'mergekit-0.1.4'} (this file is --export "
                                   f"{fmt}'s).")


def to_v014(arch: Mapping[str, Any]) -> dict[str, Any]:
    """The 0.1.5 file ``arch`` in 0.1.4's fields: ``vocabulary_axis: 0`` → ``is_embed: true``.

    Raises:
        MergekitVersionError: a vocabulary axis other than 0 (0.1.4 cannot state it).
    """
    def one(e: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in e.items() if k != "vocabulary_axis"}
        if "vocabulary_axis" in e:
            if e["vocabulary_axis"] != 0:
                raise MergekitVersionError(f"tensor {e.get('name')!r} has its vocabulary on axis {e['vocabulary_axis']}; "
                                           "MergeKit 0.1.4's is_embed assumes axis 0: use --export mergekit (0.1.5).")
            out["is_embed"] = True
        return out

    check_version(arch, "0.1.5")
    return {**arch, "pre_weights": [one(e) for e in arch["pre_weights"]],
            "layer_templates": {"weights": [one(e) for e in arch["layer_templates"]["weights"]]},
            "post_weights": [one(e) for e in arch["post_weights"]]}


def from_v014(arch: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`to_v014` (``is_embed: true`` → ``vocabulary_axis: 0``), for verifying a
    0.1.4 file with the 0.1.5 checks.

    Raises:
        MergekitVersionError: the file has 0.1.5's ``vocabulary_axis``.
    """
    def one(e: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in e.items() if k != "is_embed"}
        if e.get("is_embed"):
            out["vocabulary_axis"] = 0
        return out

    check_version(arch, "0.1.4")
    return {**arch, "pre_weights": [one(e) for e in arch["pre_weights"]],
            "layer_templates": {"weights": [one(e) for e in arch["layer_templates"]["weights"]]},
            "post_weights": [one(e) for e in arch["post_weights"]]}
