"""The paper's annulus protocol (draws, init) and attribution of a user's own weights (--weights)."""

import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from paramsym.errors import (
    ConfigError,
    InputFileError,
    NonFiniteError,
    ParameterNameError,
    ShapeError,
)
from paramsym.experiments.attribution.annulus.protocol import (
    load_mlp_state,
    load_probes,
    paper_data,
    paper_init,
)
from paramsym.experiments.attribution.annulus.run import AnnulusConfig, build_problem
from paramsym.experiments.attribution.presets import resolve_attribution_config
from paramsym.runs.rundir import save_tensors

WIDTHS = [2, 96, 96, 96, 1]


def _sequential(widths, seed=0):
    g = torch.Generator().manual_seed(seed)
    layers = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1])
        with torch.no_grad():
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) * 0.3)
            lin.bias.copy_(torch.randn(lin.bias.shape, generator=g) * 0.1)
        layers += [lin, nn.GELU()]
    return nn.Sequential(*layers[:-1])


class Wrapper(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net


def test_paper_init_is_torch_default_linear_init_after_manual_seed():
    with torch.random.fork_rng():
        torch.manual_seed(42)
        ref = nn.Sequential(nn.Linear(2, 96), nn.GELU(), nn.Linear(96, 96), nn.GELU(), nn.Linear(96, 96), nn.GELU(),
                            nn.Linear(96, 1))
    ours = paper_init(WIDTHS, "gelu", 42)
    for a, b in zip(ref.parameters(), ours.parameters()):
        assert a.dtype == b.dtype == torch.float32 and torch.equal(a, b)


def test_paper_data_draw_order_and_geometry():
    x, y = paper_data(100, 100, math.pi / 2, 2.3, 3.0, data_seed=3)
    assert x.dtype == torch.float32 and x.shape == (200, 2) and y.tolist() == [1.0] * 100 + [0.0] * 100
    # the first inner point is built from the first draw (angle) and the 101st (radius)
    rng = np.random.default_rng(3)
    u = rng.random(200)
    np.testing.assert_allclose(x[0].numpy(), [math.sqrt(u[100]) * math.cos(2 * math.pi * u[0]),
                                              math.sqrt(u[100]) * math.sin(2 * math.pi * u[0])], rtol=1e-6)
    r, a = x.double().norm(dim=1), torch.atan2(x[:, 1].double(), x[:, 0].double())
    assert float(r[:100].max()) <= 1.0 and 2.3 - 1e-6 <= float(r[100:].min()) and float(r[100:].max()) <= 3.0 + 1e-6
    assert float(a[100:].abs().max()) <= math.pi / 4 + 1e-6


@pytest.mark.parametrize("style", ["sequential", "prefixed", "paramsym"])
def test_load_state_dict_from_equivalent_modules(tmp_path, style):
    seq = _sequential(WIDTHS)
    if style == "sequential":
        state = seq.state_dict()
    elif style == "prefixed":
        state = Wrapper(seq).state_dict()
    else:
        from paramsym.models.mlp import mlp

        m = mlp(WIDTHS, "gelu", dtype=torch.float32)
        for dst, src in zip([l for l in m if isinstance(l, nn.Linear)], [l for l in seq if isinstance(l, nn.Linear)]):
            dst.load_state_dict(src.state_dict())
        state = m.state_dict()
    save_tensors(tmp_path / "w.safetensors", {k: v.contiguous() for k, v in state.items()})
    model = load_mlp_state(tmp_path / "w.safetensors", WIDTHS, "gelu")
    xs = torch.randn(50, 2, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(xs.double()), seq.double()(xs.double()), rtol=0, atol=1e-12)


def test_load_state_named_errors(tmp_path):
    seq = _sequential(WIDTHS)
    sd = {k: v.contiguous() for k, v in seq.state_dict().items()}
    save_tensors(tmp_path / "small.safetensors", {k: v.contiguous() for k, v in _sequential([2, 32, 1]).state_dict().items()})
    with pytest.raises(ShapeError, match=r"wrong architecture.*expected.*2→96→96→96→1"):
        load_mlp_state(tmp_path / "small.safetensors", WIDTHS, "gelu")
    wide = {k: v.contiguous() for k, v in _sequential([2, 64, 96, 96, 1]).state_dict().items()}
    save_tensors(tmp_path / "wide.safetensors", wide)
    with pytest.raises(ShapeError, match=r"\[64, 2\].*fc1.weight \[96, 2\]"):
        load_mlp_state(tmp_path / "wide.safetensors", WIDTHS, "gelu")
    missing = dict(sd)
    del missing["4.bias"]
    save_tensors(tmp_path / "missing.safetensors", missing)
    with pytest.raises(ParameterNameError, match=r"missing tensor\(s\) \['4.bias'\].*expected"):
        load_mlp_state(tmp_path / "missing.safetensors", WIDTHS, "gelu")
    bad = dict(sd)
    bad["2.weight"] = bad["2.weight"].clone()
    bad["2.weight"][3, 4] = float("nan")
    save_tensors(tmp_path / "nan.safetensors", bad)
    with pytest.raises(NonFiniteError, match=r"2.weight holds 1 non-finite"):
        load_mlp_state(tmp_path / "nan.safetensors", WIDTHS, "gelu")
    save_tensors(tmp_path / "stray.safetensors", {**sd, "norm.running_mean": torch.zeros(3)})
    with pytest.raises(ParameterNameError, match="unexpected tensors"):
        load_mlp_state(tmp_path / "stray.safetensors", WIDTHS, "gelu")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(InputFileError, match="junk.safetensors.*Check the file"):  # the user's file: user advice
        load_mlp_state(tmp_path / "junk.safetensors", WIDTHS, "gelu")
    save_tensors(tmp_path / "p.safetensors", {"points": torch.zeros(4, 2)})
    with pytest.raises(ParameterNameError, match="no tensor 'probes'"):
        load_probes(tmp_path / "p.safetensors")
    save_tensors(tmp_path / "p3.safetensors", {"probes": torch.zeros(4, 3)})
    with pytest.raises(ShapeError, match=r"expected \[N, 2\]"):
        load_probes(tmp_path / "p3.safetensors")


def test_weights_and_probes_drive_the_problem(tmp_path):
    widths = [2, 16, 16, 16, 1]
    seq = _sequential(widths, seed=3)
    save_tensors(tmp_path / "w.safetensors", {k: v.contiguous() for k, v in Wrapper(seq).state_dict().items()})
    probes = torch.randn(40, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    xy = torch.randn(30, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    lab = (xy.norm(dim=1) < 1).double()
    save_tensors(tmp_path / "p.safetensors", {"probes": probes, "x": xy, "y": lab})
    cfg = AnnulusConfig(hidden=16, weights=str(tmp_path / "w.safetensors"), probes=str(tmp_path / "p.safetensors"))
    problem, extra = build_problem(cfg)
    torch.testing.assert_close(problem.probes, probes)
    with torch.no_grad():
        torch.testing.assert_close(problem.values().reshape(-1), seq.double()(probes).reshape(-1), rtol=0, atol=1e-12)
        z = seq.double()(xy).reshape(-1)
    assert extra["info"]["train_accuracy"] == float(((z > 0).double() == lab).double().mean())
    assert extra["info"]["weights"].endswith("w.safetensors")


def test_cli_weights_end_to_end(tmp_path, capsys):
    from paramsym.cli import main

    widths = [2, 8, 8, 8, 1]
    save_tensors(tmp_path / "w.safetensors", {k: v.contiguous() for k, v in _sequential(widths, 5).state_dict().items()})
    save_tensors(tmp_path / "p.safetensors", {"probes": torch.randn(24, 2, generator=torch.Generator().manual_seed(0))})
    rc = main(["attribute", "--preset", "annulus-wedge", "--quick", "--flow", "fixed", "--json", "--quiet",
               "--weights", str(tmp_path / "w.safetensors"), "--probes", str(tmp_path / "p.safetensors"),
               "--set", "hidden=8", "--set", "gauge=paper", "--out", str(tmp_path / "run")])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert {r["direction"] for r in summary["flows"]} == {"+c", "-b"}
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["info"]["weights"].endswith("w.safetensors") and metrics["info"]["n_probes"] == 24
    assert (tmp_path / "run" / "report.md").exists()


def test_weights_flag_refused_by_presets_without_it():
    with pytest.raises(ConfigError, match="does not accept --weights"):
        resolve_attribution_config("lifting-sanity", weights="x.safetensors")
