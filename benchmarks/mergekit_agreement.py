"""The census against MergeKit's hand-written architecture files, tensor by tensor (issue 18, item 4).

Reads MergeKit's data files (``mergekit/_data/architectures/*.json``) from a downloaded wheel or
an installed package — no MergeKit code is imported or copied, and the files are not committed —
and compares them with the census of the tiny model of each architecture
(:mod:`paramsym.census.mergekit_compare`). Get the wheel once:

    /work/main/.venv/bin/pip download mergekit --no-deps -d /tmp/mk
    PARAMSYM_MERGEKIT=/tmp/mk OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/mergekit_agreement.py [--json]
        [--archs llama,gpt2,...] [--mergekit WHEEL_OR_DIR]

Without the files it says so and exits 0 (skipped). The table in ``docs/census.md`` is written
by ``paramsym reproduce census-mergekit --write-docs docs`` (the same function, run
``census-mergekit``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from paramsym.census.mergekit_compare import compare
from paramsym.errors import InputFileError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mergekit", default=None, help="a mergekit wheel or a directory holding one (default: "
                    "$PARAMSYM_MERGEKIT, else an installed mergekit)")
    ap.add_argument("--archs", default=None, help="comma-separated zoo names (default: every one MergeKit covers)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args()
    try:
        res = compare(a.archs.split(",") if a.archs else None, source=a.mergekit or os.environ.get("PARAMSYM_MERGEKIT"))
    except InputFileError as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    if a.json:
        print(json.dumps(res, indent=1))
        return 0
    from paramsym.reproduce.measurements import render_census_mergekit

    print(render_census_mergekit({"census-mergekit": {"values": res}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
