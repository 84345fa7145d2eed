"""Property-based: corrupted run directories never give a raw exception and never lose files.

Random subsets of a run's files (config.json, block.json, env.json, metrics.json, the
checkpoint state and tensors, action.safetensors) are truncated, overwritten with random bytes,
emptied or (for the files the library validates) replaced by valid JSON of the wrong form. The
library entry points the command line uses — ``resume_run`` (``discover --resume``),
``regenerate`` (``report``) and ``load_action`` — must either succeed or raise a named
:class:`~paramsym.errors.ParamsymError`, and every file that existed before still exists (and is
unchanged when the call failed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paramsym.discovery import DiscoverConfig, discover, load_action, resume_run
from paramsym.discovery.config import with_overrides
from paramsym.errors import ParamsymError
from paramsym.runs.reports import regenerate
from paramsym.runs.rundir import RunDir

TINY = {"train.steps": 20, "train.checkpoint_every": 10, "action.width": 16, "verdict.samples": 32,
        "verdict.rhos": [0.5], "verdict.factors": [1, 2], "verdict.curve_points": 2, "verdict.curve_times": 5}

FILES = ["config.json", "block.json", "env.json", "metrics.json", "checkpoint/state.json", "CHECKPOINT_TENSORS",
         "action.safetensors"]
#: files whose JSON form the library checks (so a valid JSON of the wrong form must be refused by name)
VALIDATED = {"config.json", "block.json", "env.json", "checkpoint/state.json"}
WRONG_FORMS = [b"[]", b"{}", b"null", b"17", b'"text"', b'{"kind": "discovery", "train": []}',
               b'{"step": "7", "tensor_file": "x"}', b'{"starts": 3}', b'{"p": 4, "entries": [{"name": 1}]}']


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fuzz") / "run"
    discover("sigmoid-scalar", cfg=with_overrides(DiscoverConfig.for_preset("sigmoid-scalar"), TINY), out=out,
             progress=False)
    return out


def _snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


corruption = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 0.95)),
    st.tuples(st.just("garbage"), st.binary(min_size=1, max_size=256)),
    st.tuples(st.just("empty"), st.none()),
    st.tuples(st.just("wrong-form"), st.sampled_from(WRONG_FORMS)),
)


def _corrupt(path: Path, name: str, how: tuple) -> None:
    kind, arg = how
    data = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(data[: int(len(data) * arg)])
    elif kind == "garbage":
        path.write_bytes(arg if not arg.lstrip().startswith((b"{", b"[")) else b"\x00" + arg)
    elif kind == "empty":
        path.write_bytes(b"")
    elif name in VALIDATED:
        path.write_bytes(arg)
    else:  # a safetensors file or metrics.json: byte-level corruption only
        path.write_bytes(data[: len(data) // 3])


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.dictionaries(st.sampled_from(FILES), corruption, min_size=1, max_size=3),
       unfinished=st.booleans(), entry=st.sampled_from(["resume", "report", "load_action"]))
def test_corrupted_run_dirs_raise_named_errors_and_keep_files(template: Path, damage, unfinished: bool, entry: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="paramsym-fuzz-"))
    try:
        run = root / "run"
        shutil.copytree(template, run)
        if unfinished:
            (run / "metrics.json").unlink()
        for name, how in damage.items():
            path = next((run / "checkpoint").glob("tensors-*.safetensors")) if name == "CHECKPOINT_TENSORS" else run / name
            if path.exists():
                _corrupt(path, name, how)
        before = _snapshot(run)
        try:
            if entry == "resume":
                resume_run(run, progress=False)
            elif entry == "report":
                regenerate(RunDir.open_existing(run))
            else:
                load_action(run)
        except ParamsymError as exc:
            assert "\n" not in str(exc) and str(exc)
            assert _snapshot(run) == before  # a refused call changes nothing
        else:
            assert set(before) <= set(_snapshot(run))  # success may rewrite files, never remove one
    finally:
        shutil.rmtree(root, ignore_errors=True)
        assert not os.path.exists(root)
