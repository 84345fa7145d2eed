"""Sweep specs: every malformed input is a named error that says what to write instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paramsym.errors import ConfigError, SweepSpecError
from paramsym.sweep import (
    load_spec,
    make_trial,
    plan_candidates,
    spec_from_dict,
    trial_id,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sweeps"
GOOD = {"preset": "sigmoid-scalar", "variants": ["hybrid"], "search": {"train.lr": [1e-3, 2e-3]}}


def _err(data: dict) -> str:
    with pytest.raises(SweepSpecError) as info:
        spec_from_dict(data)
    assert isinstance(info.value, ConfigError)  # the CLI prints it as one line, exit 2
    return str(info.value)


def test_unknown_top_level_key_names_the_closest_one() -> None:
    msg = _err({**GOOD, "replicaton_seeds": [1, 2]})
    assert "'replicaton_seeds'" in msg and "Did you mean 'replication_seeds'?" in msg


def test_unknown_config_key_in_the_search_names_the_closest_one() -> None:
    msg = _err({**GOOD, "search": {"train.learning_rate": [1e-3]}})
    assert "train.learning_rate" in msg and "Did you mean 'train.lr'?" in msg and "--set" in msg
    assert "Did you mean 'train.lr'?" in _err({**GOOD, "search": {"lr": [1e-3]}})
    assert "Did you mean 'objective.gamma_transport'?" in _err({**GOOD, "search": {"objective.gama_transport": [1.0]}})


def test_unknown_select_key_and_metric() -> None:
    assert "Did you mean 'select.metric'?" in _err({**GOOD, "select": {"metrc": "output_err_p95"}})
    assert "Did you mean 'composition_err_p95'?" in _err({**GOOD, "select": {"metric": "compositon_err_p95"}})


@pytest.mark.parametrize("search", [{}, {"train.lr": []}])
def test_empty_search_space(search) -> None:
    msg = _err({**GOOD, "search": search})
    assert "empty" in msg and ("at least one value" in msg or "search: {KEY: [values]}" in msg)


def test_a_variant_without_any_grid_is_an_empty_search_space() -> None:
    msg = _err({"variants": ["hybrid", "finite"], "variant_search": {"hybrid": {"train.lr": [1e-3]}}})
    assert "'finite' is empty" in msg


@pytest.mark.parametrize("key", ["validation_seeds", "replication_seeds"])
def test_duplicate_seeds(key: str) -> None:
    msg = _err({**GOOD, "validation_seeds": [0], "replication_seeds": [5, 6], key: [7, 8, 7]})
    assert key in msg and "[7]" in msg and "more than once" in msg and "[7, 8]" in msg


def test_replication_seeds_must_be_fresh() -> None:
    msg = _err({**GOOD, "validation_seeds": [0, 1], "replication_seeds": [1, 2]})
    assert "[1]" in msg and "fresh" in msg


@pytest.mark.parametrize(("patch", "words"), [
    ({"candidate_steps": "many"}, "candidate_steps: expected an integer, received 'many'"),
    ({"candidate_steps": 2.5}, "candidate_steps: expected an integer"),
    ({"candidate_steps": 0}, "candidate_steps must be an integer ≥ 1"),
    ({"continue_top": -1}, "continue_top must be an integer ≥ 0"),
    ({"continue_steps": 100, "candidate_steps": 200}, "continue_steps (100) must exceed candidate_steps (200)"),
    ({"variants": []}, "variants must be a nonempty list"),
    ({"search": None}, "search: expected a mapping"),
    ({"select": "composition_err_p95"}, "select: expected a mapping for SelectSpec"),
    ({"variants": ["hybird"]}, "Did you mean 'hybrid'?"),
    ({"quick": "maybe"}, "quick: expected true or false"),
    ({"search": {"train.lr": 1e-3}}, "must be a list of values to try"),
    ({"search": {"train.lr": [1e-3, 1e-3]}}, "more than once"),
    ({"search": {"seed": [1, 2]}}, "use validation_seeds / replication_seeds instead"),
    ({"search": {"train.steps": [10, 20]}}, "use candidate_steps / continue_steps instead"),
    ({"base": {"train.lr": float("nan")}}, "finite number"),
    ({"replication_seeds": [1, -2]}, "replication_seeds[1] must be an integer ≥ 0"),
    ({"replication_seeds": []}, "nonempty list"),
    ({"select": {"mode": "lowest"}}, "select.mode must be 'min' or 'max'"),
    ({"device": "tpu"}, "device must be 'cpu' or 'cuda'"),
])
def test_wrong_types_and_values(patch: dict, words: str) -> None:
    assert words in _err({**GOOD, **patch})


def test_a_value_the_configuration_rejects_is_named_with_its_point() -> None:
    spec = spec_from_dict({**GOOD, "search": {"train.lr": [1e-3, "fast"]}})
    with pytest.raises(SweepSpecError, match=r"variant 'hybrid', point \{'train.lr': 'fast'\}.*expected a number"):
        plan_candidates(spec)
    spec = spec_from_dict({**GOOD, "search": {"train.batch": [3]}})
    with pytest.raises(SweepSpecError, match="even number"):
        plan_candidates(spec)


def test_points_are_normalised_and_duplicates_after_parsing_refused() -> None:
    # YAML 1.1 reads 1e-3 as the string "1e-3": the plan holds the number the run uses
    spec = spec_from_dict({**GOOD, "search": {"train.lr": ["1e-3", 2e-3], "objective.gamma_transport": [1, 10]}})
    plan = plan_candidates(spec)["hybrid"]
    assert plan == [{"objective.gamma_transport": g, "train.lr": lr} for g in (1.0, 10.0) for lr in (1e-3, 2e-3)]
    assert all(isinstance(p["objective.gamma_transport"], float) for p in plan)
    with pytest.raises(SweepSpecError, match="same configuration"):
        plan_candidates(spec_from_dict({**GOOD, "search": {"train.lr": ["1e-3", 0.001]}}))


def test_variant_grids_merge_over_the_shared_grid() -> None:
    spec = spec_from_dict({"variants": ["hybrid", "finite"], "search": {"train.lr": [1e-3, 2e-3]},
                           "variant_search": {"hybrid": {"objective.gamma_transport": [1.0, 10.0]},
                                              "finite": {"train.lr": [4e-3]}}})
    assert len(spec.grid("hybrid")) == 4 and spec.grid("finite") == [{"train.lr": 4e-3}]
    with pytest.raises(SweepSpecError, match="not in variants"):
        spec_from_dict({**GOOD, "variant_search": {"finite": {"train.lr": [1e-3]}}})


def test_trial_ids_are_content_hashes() -> None:
    kw = dict(preset="sigmoid-scalar", variant="hybrid", base={}, point={"train.lr": 1e-3}, seed=0, steps=10,
              quick=True, device="cpu", figures=False)
    a = make_trial(**kw, stage="candidates")
    assert a["id"] == make_trial(**kw, stage="replicate")["id"] == trial_id(a)  # the stage is not identity
    assert len(a["id"]) == 16 and int(a["id"], 16) >= 0
    changed = [make_trial(**{**kw, k: v}, stage="candidates")["id"] for k, v in
               [("seed", 1), ("steps", 11), ("point", {"train.lr": 2e-3}), ("variant", "finite"), ("quick", False)]]
    changed.append(make_trial(**kw, stage="continue", parent=a["id"])["id"])
    assert len({a["id"], *changed}) == 1 + len(changed)


def test_the_example_specs_load() -> None:
    full = load_spec(str(EXAMPLES / "hybrid-vs-finite.yaml"))
    assert (full.candidate_steps, full.continue_steps, full.continue_top) == (5000, 15000, 2)
    assert full.variants == ["hybrid", "finite"] and full.replication_seeds == [1, 2, 3]
    assert len(plan_candidates(full)["hybrid"]) == 12 and len(plan_candidates(full)["finite"]) == 5
    tiny = load_spec(str(EXAMPLES / "tiny.yaml"))
    assert tiny.quick and tiny.candidate_steps < 50


def test_plan_counts_trials_and_steps(capsys) -> None:
    from paramsym.cli import main
    from paramsym.sweep import budget

    full = budget(load_spec(str(EXAMPLES / "hybrid-vs-finite.yaml")))
    # 17 candidates x 5,000; 2 x 2 continued by 10,000 each (from their checkpoints); 2 x 3 x 15,000
    assert full["stages"] == {"candidates": {"trials": 17, "steps": 85_000}, "continue": {"trials": 4, "steps": 40_000},
                              "replicate": {"trials": 6, "steps": 90_000}}
    assert (full["trials"], full["steps"]) == (27, 215_000)
    assert main(["sweep", str(EXAMPLES / "tiny.yaml"), "--plan", "--json"]) == 0
    tiny = json.loads(capsys.readouterr().out)
    assert (tiny["trials"], tiny["steps"]) == (5, 2 * 10 + 1 * 10 + 2 * 20)


def test_spec_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SweepSpecError, match="cannot read sweep spec"):
        load_spec(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("search: [unclosed\n")
    with pytest.raises(SweepSpecError, match="not valid YAML"):
        load_spec(str(bad))
    bad.write_text("- a list\n")
    with pytest.raises(SweepSpecError, match="bad.yaml: SweepSpec: expected a mapping of SweepSpec keys"):
        load_spec(str(bad))
    bad.write_text("presett: sigmoid-scalar\nsearch: {train.lr: [1e-3]}\n")
    with pytest.raises(SweepSpecError, match=r"bad.yaml: unknown config key 'presett'.*Did you mean 'preset'\?"):
        load_spec(str(bad))
    bad.write_text("search: {train.lr: [1e-3]}\nreplication_seeds: [0]\n")
    with pytest.raises(SweepSpecError, match=r"bad.yaml: replication_seeds \[0\] are also validation_seeds"):
        load_spec(str(bad))


def test_one_reading_of_a_spec_file_set_and_config_json() -> None:
    """The spec file, ``--set`` over it and a sweep's ``config.json`` are read by the one serializer
    (``from_dict`` then ``SweepSpec.validate``): the same refusal on each path, named."""
    from paramsym.config import Overrides, from_document, to_document
    from paramsym.errors import ConfigFileError
    from paramsym.sweep.kind import SweepConfig

    good = SweepConfig(spec_from_dict(GOOD))
    assert from_document(SweepConfig, to_document("sweep", good)) == good
    stale = to_document("sweep", good)
    stale["spec"]["replication_seeds"] = [0]  # also a validation seed
    with pytest.raises(ConfigFileError, match=r"config.json: replication_seeds \[0\] are also validation_seeds"):
        from_document(SweepConfig, stale)
    with pytest.raises(SweepSpecError, match=r"replication_seeds \[0\] are also validation_seeds"):
        Overrides.parse(["spec.replication_seeds=[0]"], config=SweepConfig).apply(good)
    with pytest.raises(ConfigFileError, match=r"unknown config key 'spec.presett'. Did you mean 'spec.preset'\?"):
        from_document(SweepConfig, {"kind": "sweep", "spec": {**GOOD, "presett": "x"}})
