"""Property-based: the public Python entry points with bad inputs never raise a raw error.

Hypothesis feeds ``Target``, ``check_action``, ``assert_invariant``, the catalogue actions
(constructed from a tiny MLP's block), ``solve_affine``, ``teleport`` and ``align`` edge values —
negative, 0, ``2**64``, NaN, inf, booleans, text — malformed and foreign files (via
``paramsym.alignment.io.load_pair``: truncated, JSON, a pickle), wrong dtypes and the ``meta``
device. Every call must either return or raise a :class:`~paramsym.errors.ParamsymError` whose
message is one line (``AssertionError`` from ``assert_invariant`` is its documented failure), and
the inputs must be unchanged afterwards (nothing lost). The counts of calls per entry point and
outcome are checked by :func:`test_every_entry_point_was_fuzzed` (printed with ``pytest -s``).
"""

from __future__ import annotations

import collections
import math
import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paramsym.errors import ParamsymError

API = settings(deadline=None, database=None, max_examples=int(os.environ.get("PARAMSYM_FUZZ_API", "25")),
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
COUNTS: collections.Counter = collections.Counter()

EDGE_INTS = [-1, 0, 1, 3, 20, 50, 2**64, 2**64 - 1, -(2**63), True, 3.5, math.nan, math.inf, "3", None]
EDGE_FLOATS = [-1.0, 0.0, 1e-6, 0.1, 0.5, 1e-300, 1e300, math.nan, math.inf, -math.inf, 2**64, "0.1", None, True]
edge_int = st.sampled_from(EDGE_INTS)
edge_float = st.sampled_from(EDGE_FLOATS)


def _outcome(entry: str, fn, *args, **kwargs):
    """Call ``fn``; allow success or a one-line ParamsymError (or AssertionError for assert_invariant)."""
    try:
        result = fn(*args, **kwargs)
    except ParamsymError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg, (entry, msg)
        COUNTS[(entry, type(exc).__name__)] += 1
        return None
    except AssertionError:
        if entry != "assert_invariant":
            raise
        COUNTS[(entry, "AssertionError (not invariant)")] += 1
        return None
    COUNTS[(entry, "ok")] += 1
    return result


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()


BLOCK = ["0.weight", "0.bias", "2.weight"]


def _x(rows: int = 6, width: int = 3, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(1), dtype=dtype)


batches = st.one_of(
    st.tuples(st.sampled_from([0, 1, 6]), st.sampled_from([1, 3, 7]),
              st.sampled_from([torch.float64, torch.float32, torch.float16, torch.int64])).map(
        lambda a: _x(a[0], a[1], torch.float64).to(a[2])),
    st.sampled_from(["nan", "inf", "meta", "scalar", "list", "none"]).map(lambda k: {
        "nan": _x().index_fill(0, torch.tensor([2]), math.nan), "inf": _x().index_fill(1, torch.tensor([0]), math.inf),
        "meta": _x().to("meta"), "scalar": torch.tensor(1.0, dtype=torch.float64), "list": [[1.0, 2.0, 3.0]],
        "none": None}[k]),
)
blocks = st.one_of(st.just(BLOCK), st.sampled_from([["0.weight", "0.weight"], ["nope"], [], ["0.weight[0]"], "2.bias",
                                                    ["0.weight[9, 9]"], [3], None]))


@API
@given(batch=batches, block=blocks, meta_model=st.booleans())
def test_target(batch, block, meta_model) -> None:
    from paramsym.targets import Target

    net = _net()
    if meta_model:
        net = net.to("meta")
    before = None if not isinstance(batch, torch.Tensor) or batch.is_meta else batch.clone()
    _outcome("Target", Target, net, block, batch)
    if before is not None:
        assert torch.equal(before.nan_to_num(), batch.nan_to_num())  # the input is not modified


def _actions(block):
    from paramsym.actions.linear import HiddenBasisAction, RescalingAction
    from paramsym.actions.permutation import HiddenPermutationAction

    return {"RescalingAction": lambda b, *a, **k: RescalingAction(b, *a, **k),
            "HiddenBasisAction": lambda b, *a, **k: HiddenBasisAction(b, *a, **k),
            "HiddenPermutationAction": lambda b, *a, **k: HiddenPermutationAction(b, *a, **k)}


@API
@given(name=st.sampled_from(["RescalingAction", "HiddenBasisAction", "HiddenPermutationAction"]),
       first=st.sampled_from(["block", "target", "none", "dict", "string"]),
       earlier=st.sampled_from(["0.weight", "2.weight", "nope", None, 3]),
       later=st.sampled_from(["2.weight", "0.weight", "nope", None]))
def test_catalogue_actions(name, first, earlier, later) -> None:
    from paramsym.targets import Target

    F = Target(_net(), BLOCK, _x())
    arg = {"block": F.block, "target": F, "none": None, "dict": {"0.weight": torch.ones(4, 3)}, "string": "0.weight"}[first]
    _outcome(f"catalogue {name}", _actions(F.block)[name], arg, earlier, later)


@API
@given(seed=edge_int, rho=edge_float, samples=edge_int, factors=st.sampled_from([(1,), (1, 2), (2,), (0, 1), (), ("1",)]),
       swapped=st.booleans())
def test_check_action_and_assert_invariant(seed, rho, samples, factors, swapped) -> None:
    from paramsym.actions.linear import RescalingAction
    from paramsym.targets import Target
    from paramsym.testing import assert_invariant, check_action

    F = Target(_net(), ["0.weight", "0.bias", "2.weight"], _x())
    action = RescalingAction(F.block, "0.weight", "2.weight", earlier_bias="0.bias")
    theta = F.theta0.clone()
    args = (F, action) if swapped else (action, F)
    _outcome("check_action", check_action, *args, seed=seed, rho=rho, samples=samples, factors=factors)
    _outcome("assert_invariant", assert_invariant, *args, seed=seed, samples=samples if samples != 0 else 20)
    assert torch.equal(theta, F.theta0)  # nothing moved in place


@API
@given(samples=edge_int, tol=edge_float, radius=edge_float, rule=st.sampled_from(["gap", "threshold", "magic", None]),
       max_memory=st.sampled_from([None, 1, -5, 2**70, math.nan]))
def test_solve_affine(samples, tol, radius, rule, max_memory) -> None:
    from paramsym.exact.affine import AffineSolverConfig, solve_affine
    from paramsym.exact.presets import build_preset

    target, ansatz = build_preset("linear2x2", 0)
    if isinstance(samples, int) and not isinstance(samples, bool) and samples > 400:
        samples = 400  # keep the accepted solves small: the size check is tested via max_memory
    _outcome("solve_affine", solve_affine, target, ansatz,
             AffineSolverConfig(samples=samples, tol=tol, radius=radius, rule=rule, max_memory=max_memory),
             generator=torch.Generator().manual_seed(0))


@API
@given(steps=edge_int, step_size=edge_float, tol=edge_float, theta_kind=st.sampled_from(["ok", "nan", "short", "int", "meta"]))
def test_teleport(steps, step_size, tol, theta_kind) -> None:
    from paramsym.teleport import AscentConfig, mlp_rescaling, teleport

    g = torch.Generator().manual_seed(0)
    params = {"fc1.weight": torch.randn(4, 3, generator=g, dtype=torch.float64),
              "fc2.weight": torch.randn(2, 4, generator=g, dtype=torch.float64)}
    block, action = mlp_rescaling(params)
    theta = torch.cat([params["fc1.weight"].reshape(-1), params["fc2.weight"].reshape(-1)])
    x = torch.randn(8, 3, generator=g, dtype=torch.float64)

    def loss_fn(th):
        w1, w2 = th[:12].reshape(4, 3), th[12:].reshape(2, 4)
        return (torch.relu(x @ w1.T) @ w2.T).pow(2).mean()

    theta = {"ok": theta, "nan": theta.index_fill(0, torch.tensor([0]), math.nan), "short": theta[:5],
             "int": theta.long(), "meta": theta.to("meta")}[theta_kind]
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 20:
        steps = 20
    _outcome("teleport", teleport, action, theta, loss_fn, AscentConfig(steps=steps, step_size=step_size, tol=tol))


@API
@given(points=edge_int, b_kind=st.sampled_from(["ok", "nan", "int", "half", "missing", "shape"]),
       file_kind=st.sampled_from(["none", "truncated", "json", "pickle", "empty", "dir"]))
def test_align(tmp_path_factory, points, b_kind, file_kind) -> None:
    from safetensors.torch import save_file

    from paramsym.alignment.align import align
    from paramsym.alignment.arch import mlp_architecture
    from paramsym.alignment.io import load_pair
    from paramsym.models.datasets import Split

    def mlp(seed):
        g = torch.Generator().manual_seed(seed)
        return {"fc1.weight": torch.randn(6, 4, generator=g), "fc1.bias": torch.randn(6, generator=g),
                "fc2.weight": torch.randn(3, 6, generator=g), "fc2.bias": torch.randn(3, generator=g)}

    a, b = mlp(0), mlp(1)
    b = {"ok": b, "nan": {**b, "fc1.bias": b["fc1.bias"].index_fill(0, torch.tensor([1]), math.nan)},
         "int": {k: v.long() for k, v in b.items()}, "half": {k: v.half() for k, v in b.items()},
         "missing": {k: v for k, v in b.items() if k != "fc2.bias"},
         "shape": {**b, "fc1.weight": torch.randn(6, 5)}}[b_kind]
    g = torch.Generator().manual_seed(2)
    data = Split(torch.randn(20, 4, generator=g), torch.randint(0, 3, (20,), generator=g),
                 torch.randn(10, 4, generator=g), torch.randint(0, 3, (10,), generator=g))
    if isinstance(points, int) and not isinstance(points, bool) and 2 <= points and points > 50 and points < 2**62:
        points = 50
    _outcome("align", align, mlp_architecture(a), a, b, data, points=points)
    if file_kind != "none":
        root = tmp_path_factory.mktemp("align-files")
        save_file(a, root / "a.safetensors")
        path = root / "b.safetensors"
        save_file({k: v.contiguous() for k, v in mlp(1).items()}, path)
        if file_kind == "truncated":
            path.write_bytes(path.read_bytes()[:50])
        elif file_kind == "json":
            path.write_text('{"fc1.weight": [1, 2]}')
        elif file_kind == "pickle":
            import pickle

            path.write_bytes(pickle.dumps({"fc1.weight": [1.0]}))
        elif file_kind == "empty":
            path.write_bytes(b"")
        elif file_kind == "dir":
            path.unlink()
            path.mkdir()
        before = path.read_bytes() if path.is_file() else None
        _outcome("align files (load_pair)", load_pair, root / "a.safetensors", path)
        assert before is None or path.read_bytes() == before  # nothing lost


def test_every_entry_point_was_fuzzed() -> None:
    if not COUNTS:
        pytest.skip("run with the fuzz tests above (this test reports their counts)")
    entries = sorted({e for e, _ in COUNTS})
    for needed in ("Target", "check_action", "assert_invariant", "solve_affine", "teleport", "align",
                   "align files (load_pair)", "catalogue RescalingAction"):
        assert needed in entries, (needed, entries)
    print(f"\nPython API calls: {sum(COUNTS.values())}")
    for e in entries:
        outcomes = {o: n for (ee, o), n in sorted(COUNTS.items()) if ee == e}
        print(f"  {e:28s} {sum(outcomes.values()):4d}  " + ", ".join(f"{o} {n}" for o, n in outcomes.items()))
    if os.environ.get("PARAMSYM_FUZZ_COUNTS"):
        path = Path(os.environ["PARAMSYM_FUZZ_COUNTS"]).with_suffix(".api.json")
        import json

        path.write_text(json.dumps({f"{e}|{o}": n for (e, o), n in COUNTS.items()}, indent=1))
