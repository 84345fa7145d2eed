"""`paramsym.discovery.discover` on a user's own nn.Module writes a complete, reportable run,
records its block, and reloads through `load_action(run_dir, target=...)`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import paramsym.discovery.entry as drun
from paramsym.config import apply_overrides
from paramsym.discovery import DiscoverConfig, discover, load_action, resume_run
from paramsym.discovery.config import with_overrides
from paramsym.discovery.threads import choose_threads
from paramsym.errors import BlockMismatchError, ConfigError, RunDirError
from paramsym.runs.reports import regenerate
from paramsym.runs.rundir import RunDir
from paramsym.targets import Target

TINY = {"train.steps": 40, "action.width": 16, "verdict.samples": 32, "verdict.rhos": [0.5], "verdict.factors": [1, 2],
        "verdict.curve_points": 2, "verdict.curve_times": 5}
TINY_CFG = with_overrides(DiscoverConfig(), TINY)


def _model(seed: int = 0, hidden: int = 2) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(1, hidden, bias=False), torch.nn.Sigmoid(), torch.nn.Linear(hidden, 1, bias=False))
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen))
    return model


def _target(model=None) -> Target:
    return Target(model if model is not None else _model(), ["0.weight", "2.weight"],
                  torch.randn(1, 1, generator=torch.Generator().manual_seed(1)))


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory):
    F = _target()
    return F, discover(F, 0.1, cfg=TINY_CFG, out=tmp_path_factory.mktemp("api") / "run", progress=False)


def test_discover_custom_module(custom_run) -> None:
    F, res = custom_run
    assert res.metrics["preset"] == "Sequential" and res.metrics["p"] == 4
    assert {"output_err_p95", "motion_median"} <= set(res.metrics["verdict"]["declared"])
    # the returned action is the trained one: it reproduces the stored weights' motion
    g = res.action.group.matrices(res.action.group.sample(4, 0.5, generator=torch.Generator().manual_seed(0)))
    theta = F.theta0.expand(4, -1)
    assert (res.action.act_many(g, theta) - theta).norm(dim=-1).min() > 0
    assert regenerate(RunDir(res.run.path)).exists()
    block = json.loads(res.run.file("block.json").read_text())
    assert block["p"] == 4 and block["perturb_std"] == 0.1
    assert [(e["name"], e["shape"], e["indices"]) for e in block["entries"]] == [("0.weight", [2, 1], [0, 1]),
                                                                                   ("2.weight", [1, 2], [0, 1])]


def test_load_action_reproduces_the_trained_action(custom_run) -> None:
    F, res = custom_run
    same = _target()
    before = torch.get_rng_state()
    again = load_action(res.run.path, target=same)
    assert torch.equal(torch.get_rng_state(), before)
    gen = torch.Generator().manual_seed(5)
    g = res.action.group.matrices(res.action.group.sample(16, 0.8, 3, generator=gen))
    theta = F.theta0.float() + 0.1 * torch.randn(16, 4, generator=gen)
    with torch.no_grad():
        assert torch.equal(again.act_many(g, theta), res.action.act_many(g, theta))
        assert torch.equal(again.group.generators(), res.action.group.generators())
    assert torch.equal(load_action(res.run.path).act_many(g, theta), res.action.act_many(g, theta))


def test_load_action_with_another_block_names_the_difference(custom_run) -> None:
    _, res = custom_run
    with pytest.raises(BlockMismatchError, match=r"0\.weight: shape \(3, 1\) vs recorded \(2, 1\)"):
        load_action(res.run.path, target=_target(_model(hidden=3)))
    other = Target(_model(), ["0.weight"], torch.randn(1, 1))
    with pytest.raises(BlockMismatchError, match=r"names \['0.weight'\] vs recorded \['0.weight', '2.weight'\]"):
        load_action(res.run.path, target=other)
    with pytest.raises(BlockMismatchError, match="different indices"):
        load_action(res.run.path, target=Target(_model(), ["0.weight", ("2.weight", torch.tensor([[False, True]]))], torch.randn(1, 1)))


def test_discover_is_deterministic_and_leaves_global_state(custom_run, tmp_path: Path) -> None:
    """Explicit generators only: another global seed gives the same metrics bitwise, and the
    thread count is never changed."""
    F, res = custom_run
    torch.manual_seed(1234)
    threads = torch.get_num_threads()
    again = discover(F, 0.1, cfg=TINY_CFG, out=tmp_path / "again", progress=False)
    assert torch.get_num_threads() == threads
    assert {k: again.metrics[k] for k in ("verdict", "final_losses", "generators")} == \
        {k: res.metrics[k] for k in ("verdict", "final_losses", "generators")}


def test_bad_inputs_fail_before_any_directory_exists(tmp_path: Path) -> None:
    F = _target()
    out = tmp_path / "never"
    with pytest.raises(ConfigError, match="perturb_std"):
        discover(F, -1.0, out=out, progress=False)
    with pytest.raises(ConfigError, match="unknown config key"):
        discover(F, 0.1, cfg=with_overrides(DiscoverConfig(), {"train.lrr": 1}), out=out, progress=False)
    with pytest.raises(ConfigError, match="one configuration, cfg=; received overrides="):
        discover(F, 0.1, overrides=TINY, out=out, progress=False)
    with pytest.raises(ConfigError, match="unknown preset"):
        discover("nope", out=out, progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="cuda"):
            discover(F, 0.1, cfg=with_overrides(TINY_CFG, {"device": "cuda"}), out=out, progress=False)
    assert not out.exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    with pytest.raises(RunDirError, match="not empty"):
        discover(F, 0.1, cfg=TINY_CFG, out=tmp_path / "full", progress=False)
    assert (tmp_path / "full" / "x").read_text() == "keep"


def test_presets_use_their_recipe_and_quick(tmp_path: Path, monkeypatch) -> None:
    """discover("linear2x2") uses the tuned recipe as the CLI does; overrides come last; one
    Trainer is built (the trained action is returned, not reloaded into a second one)."""
    built = []
    real = drun.Trainer

    def counting(*a, **k):
        built.append(1)
        return real(*a, **k)

    monkeypatch.setattr(drun, "Trainer", counting)
    cfg = DiscoverConfig.quick("linear2x2")
    assert cfg.objective.gamma_transport == 10.0 and cfg.train.lr == 2e-3 and cfg.train.steps == 300
    res = discover("linear2x2", cfg=with_overrides(cfg, {**TINY, "train.lr": 3e-4}), out=tmp_path / "r", progress=False)
    saved = json.loads(res.run.file("config.json").read_text())
    assert saved["objective"]["gamma_transport"] == 10.0 and saved["train"]["lr"] == 3e-4
    assert saved["problem"]["preset"] == "linear2x2" and len(built) == 1
    assert DiscoverConfig.for_preset("sigmoid-scalar", "finite").train.lr == 4e-3
    assert apply_overrides(DiscoverConfig(), ["train.steps=7"]).train.steps == 7
    done = resume_run(res.run.path, progress=False)
    assert done.already_finished and done.metrics == res.metrics


def test_custom_runs_resume_from_python_only(custom_run, tmp_path: Path) -> None:
    _, res = custom_run
    with pytest.raises(RunDirError, match="custom target"):
        resume_run(res.run.path)
    with pytest.raises(BlockMismatchError, match="shape"):
        resume_run(res.run.path, target=_target(_model(hidden=3)))


@pytest.mark.parametrize("keep_checkpoint", [True, False])
def test_custom_run_resumes_with_its_target(custom_run, tmp_path: Path, keep_checkpoint: bool) -> None:
    """An interrupted custom run (no metrics, no action; with or without its checkpoint) resumes
    from Python with the same target and ends with the uninterrupted metrics."""
    _, res = custom_run
    run = tmp_path / "r"
    shutil.copytree(res.run.path, run)
    for name in ("metrics.json", "action.safetensors", "report.md"):
        (run / name).unlink()
    if not keep_checkpoint:
        shutil.rmtree(run / "checkpoint")
    again = resume_run(run, target=_target(), progress=False)
    assert {k: again.metrics[k] for k in ("verdict", "final_losses", "generators")} == \
        {k: res.metrics[k] for k in ("verdict", "final_losses", "generators")}
    with pytest.raises(BlockMismatchError):
        resume_run(run, target=_target(_model(hidden=3)))


def test_choose_threads_never_sets_them() -> None:
    n = torch.get_num_threads()
    assert choose_threads(DiscoverConfig.for_preset("linear2x2")) == 1  # small problem, auto
    assert choose_threads(apply_overrides(DiscoverConfig(), ["threads=3"])) == 3
    assert torch.get_num_threads() == n
