"""Property-based: the public Python entry points with bad inputs never raise a raw error.

Hypothesis feeds ``Target``, ``check_action``, ``assert_invariant``, the catalogue actions
(constructed from a tiny MLP's block), ``solve_affine``, ``teleport``, ``align``, ``census``,
``default_inputs``, the attention counts (``theorem9_bound``, ``count_partial_clusterings``,
``component_count``), the alignment helpers (``distance``, ``interpolate``,
``relative_output_error``) and ``load_model`` on incomplete or non-finite checkpoints edge values —
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
@given(steps=edge_int, step_size=edge_float, tol=edge_float, theta_kind=st.sampled_from(["ok", "nan", "short", "int", "meta"]),
       action_kind=st.sampled_from(["ok", "ok", "none", "text"]), loss_kind=st.sampled_from(["ok", "ok", "none"]))
def test_teleport(steps, step_size, tol, theta_kind, action_kind, loss_kind) -> None:
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
    action = {"ok": action, "none": None, "text": "rescaling"}[action_kind]
    _outcome("teleport", teleport, action, theta, loss_fn if loss_kind == "ok" else None,
             AscentConfig(steps=steps, step_size=step_size, tol=tol))


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


@API
@given(model_kind=st.sampled_from(["ok", "nan-weight", "inf-weight", "meta", "none", "empty"]),
       inputs=st.one_of(batches, st.sampled_from([3, "x", (), {}])),
       dtype=st.sampled_from([torch.float64, torch.float32, torch.int32, torch.float16, "float64", None]),
       layout=st.sampled_from(["auto", "derived", "adapter", "magic", None]))
def test_census(model_kind, inputs, dtype, layout) -> None:
    """census(model, inputs, dtype=, layout=) on an MLP: wrong-shape, int, meta, NaN or empty inputs,
    NaN/inf weights, a meta or missing model and non-float dtypes are named errors (issue 36)."""
    from paramsym.census import census

    net = {"ok": _net, "nan-weight": _net, "inf-weight": _net, "meta": lambda: _net().to("meta"), "none": lambda: None,
           "empty": lambda: torch.nn.Sequential()}[model_kind]()
    if model_kind in ("nan-weight", "inf-weight"):
        with torch.no_grad():
            net[0].weight[1, 2] = math.nan if model_kind == "nan-weight" else math.inf
    before = None if net is None or model_kind == "meta" else {k: v.clone() for k, v in net.state_dict().items()}
    _outcome("census", census, net, inputs, dtype=dtype, layout=layout)
    if before is not None:  # the model is not changed (census works on a copy)
        assert all(torch.equal(v.nan_to_num(), net.state_dict()[k].nan_to_num()) for k, v in before.items())


@API
@given(model_kind=st.sampled_from(["mlp", "none", "text"]), tokens=edge_int, batch=edge_int,
       generator=st.sampled_from(["ok", None, 0]))
def test_default_inputs(model_kind, tokens, batch, generator) -> None:
    from paramsym.census import default_inputs

    model = {"mlp": _net(), "none": None, "text": "bert"}[model_kind]
    gen = torch.Generator().manual_seed(0) if generator == "ok" else generator
    _outcome("default_inputs", default_inputs, model, gen, tokens=tokens, batch=batch)


@API
@given(c=st.sampled_from([-3, 0, 1, 3, 10**6, True, 2.5, None, "3"]),
       heads=st.sampled_from([-1, 0, 1, 2, 10**6, True, 2.5, None]),
       group=st.sampled_from(["C6", "Z0", "D4", "C0", "perm:[[1,0]]", "", None, 3]),
       rep=st.sampled_from(["regular(C2)", "regular(D4)", "regular", None]),
       copies=st.sampled_from([1, 2, 0, -1, True, 1.5]))
def test_attention_counts(c, heads, group, rep, copies) -> None:
    """theorem9_bound (sizes guarded before the exact fraction), count_partial_clusterings (a group
    name or object), component_count (a Representation) with edge arguments."""
    from paramsym.attention.clusterings import count_partial_clusterings
    from paramsym.attention.components import component_count, theorem9_bound
    from paramsym.groups.finite import group_by_name
    from paramsym.groups.reps import regular

    _outcome("theorem9_bound", theorem9_bound, c, heads)
    small = heads if isinstance(heads, int) and not isinstance(heads, bool) and heads <= 6 else 3
    _outcome("count_partial_clusterings", count_partial_clusterings, group, small)
    r = {"regular(C2)": lambda: regular(group_by_name("C2")), "regular(D4)": lambda: regular(group_by_name("D4")),
         "regular": lambda: "regular", None: lambda: None}[rep]()
    _outcome("component_count", component_count, r, heads if heads != 10**6 else 7, copies=copies)


@API
@given(b_kind=st.sampled_from(["ok", "missing", "extra", "shape", "none", "list", "float64"]), alpha=edge_float,
       forward=st.sampled_from(["ok", None, "text"]), x_kind=st.sampled_from(["ok", "empty", "meta", "none", "scalar"]))
def test_alignment_helpers(b_kind, alpha, forward, x_kind) -> None:
    """alignment.distance / interpolate / relative_output_error: mismatched tensors, a NaN or
    non-number α, a missing forward or batch are named errors."""
    from paramsym.alignment import distance, interpolate, relative_output_error

    g = torch.Generator().manual_seed(0)
    a = {"w1": torch.randn(4, 3, generator=g), "w2": torch.randn(2, 4, generator=g)}
    b0 = {k: v + 0.1 for k, v in a.items()}
    b = {"ok": b0, "missing": {"w1": b0["w1"]}, "extra": {**b0, "w3": torch.zeros(1)},
         "shape": {**b0, "w2": torch.zeros(3, 4)}, "none": None, "list": [1.0, 2.0],
         "float64": {k: v.double() for k, v in b0.items()}}[b_kind]
    fwd = {"ok": lambda p, x: torch.relu(x @ p["w1"].T) @ p["w2"].T, None: None, "text": "f"}[forward]
    x = {"ok": torch.randn(5, 3, generator=g), "empty": torch.zeros(0, 3), "meta": torch.zeros(5, 3, device="meta"),
         "none": None, "scalar": torch.tensor(1.0)}[x_kind]
    _outcome("alignment.distance", distance, a, b)
    _outcome("alignment.interpolate", interpolate, a, b, alpha)
    _outcome("alignment.relative_output_error", relative_output_error, fwd, a, b, x)


@pytest.fixture(scope="module")
def saved_bert(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import load_file

    cfg = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                  vocab_size=40, max_position_embeddings=16)
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("bert")
    transformers.BertModel(cfg).save_pretrained(d)
    return d, load_file(str(d / "model.safetensors"))


@settings(API, max_examples=min(API.max_examples, 6))
@given(which=st.integers(0, 10**6))
@pytest.mark.parametrize("kind", ["ok", "missing", "extra", "int", "nan", "inf", "shape", "truncated"])
def test_load_model_checkpoints(saved_bert, tmp_path_factory, kind, which) -> None:
    """The one loader on incomplete, mis-shaped, integer, non-finite and truncated checkpoints (issue 36)."""
    import shutil

    from safetensors.torch import save_file

    from paramsym.models.loading import load_model

    good, sd = saved_bert
    d = tmp_path_factory.mktemp("ckpt")
    shutil.copytree(good, d, dirs_exist_ok=True)
    names = sorted(sd)
    name = names[which % len(names)]
    t = dict(sd)
    if kind == "missing":
        del t[name]
    elif kind == "extra":
        t["head.extra"] = torch.zeros(2)
    elif kind == "int":
        t[name] = t[name].to(torch.int32)
    elif kind in ("nan", "inf") and t[name].is_floating_point():
        t[name] = t[name].clone().reshape(-1).index_fill(0, torch.tensor([which % t[name].numel()]),
                                                         math.nan if kind == "nan" else math.inf).reshape(t[name].shape)
    elif kind == "shape":
        t[name] = torch.zeros(3, 5)
    save_file(t, str(d / "model.safetensors"), metadata={"format": "pt"})
    if kind == "truncated":
        p = d / "model.safetensors"
        p.write_bytes(p.read_bytes()[: 200 + which % 1000])
    before = (d / "model.safetensors").read_bytes()
    model = _outcome(f"load_model ({kind} checkpoint)", load_model, d, quiet=True)
    int_buffer = kind == "int" and name.endswith("position_ids")  # stored as an integer buffer: accepted
    if kind not in ("ok",) and not int_buffer and not (kind in ("nan", "inf") and not sd[name].is_floating_point()):
        assert model is None, (kind, name)  # every defect is refused, none silently loaded
    assert (d / "model.safetensors").read_bytes() == before


def test_every_entry_point_was_fuzzed() -> None:
    if not COUNTS:
        pytest.skip("run with the fuzz tests above (this test reports their counts)")
    entries = sorted({e for e, _ in COUNTS})
    for needed in ("Target", "check_action", "assert_invariant", "solve_affine", "teleport", "align",
                   "align files (load_pair)", "catalogue RescalingAction", "census", "default_inputs", "theorem9_bound",
                   "count_partial_clusterings", "component_count", "alignment.distance", "alignment.interpolate",
                   "alignment.relative_output_error", "load_model (missing checkpoint)", "load_model (nan checkpoint)"):
        assert needed in entries, (needed, entries)
    print(f"\nPython API calls: {sum(COUNTS.values())}")
    for e in entries:
        outcomes = {o: n for (ee, o), n in sorted(COUNTS.items()) if ee == e}
        print(f"  {e:28s} {sum(outcomes.values()):4d}  " + ", ".join(f"{o} {n}" for o, n in outcomes.items()))
    if os.environ.get("PARAMSYM_FUZZ_COUNTS"):
        path = Path(os.environ["PARAMSYM_FUZZ_COUNTS"]).with_suffix(".api.json")
        import json

        path.write_text(json.dumps({f"{e}|{o}": n for (e, o), n in COUNTS.items()}, indent=1))
