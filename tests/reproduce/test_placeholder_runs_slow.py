"""The two measurement rows docs/reproductions.md still lists as "not run yet" run end to end (slow: ≈ 70 CPU-s).

``align-modadd-transformer`` (run ``align-modadd``) and ``transformer-learned-objectives`` (run
``transformer``) at the ``--quick`` budget from an empty ``--out``: no error, not evaluated
(trained runs), provenance recorded, and their documentation blocks render from the rows.
"""

import pytest

from paramsym.reproduce import reproduce
from paramsym.reproduce.docs import BLOCKS

CLAIMS = ("align-modadd-transformer", "transformer-learned-objectives")


@pytest.mark.slow
def test_placeholder_rows_run_from_an_empty_out(tmp_path):
    rows = {r["claim"]: r for r in reproduce(list(CLAIMS), quick=True, out=tmp_path)}
    assert list(rows) == list(CLAIMS)
    for r in rows.values():
        assert r["error"] is None, r["error"]
        assert r["holds"] is None and r["budget"] == "quick" and r["code_version"] and len(r["config_hash"]) == 16
    # the modular-addition models are trained inside the run directory (not read from ~/.cache)
    models = sorted(p.name for p in (tmp_path / "align-modadd" / "models").rglob("*.safetensors"))
    assert len(models) == 2 and all("-s200-" in m for m in models), models
    al = rows["align-modadd-transformer"]["values"]["align"]
    text = BLOCKS["align-modadd"].render(rows)
    assert f"| before | {al['barrier_before_train']:.3g} | {al['barrier_before']:.3g} |" in text
    per = rows["transformer-learned-objectives"]["values"]["objectives"]
    assert set(per) == {"hybrid", "finite"}
    text = BLOCKS["transformer-objectives"].render(rows)
    assert all(f"| {v} | {x['seed']} | {x['steps']} |" in text for v, rs in per.items() for x in rs)
