"""``paramsym reproduce``: the seed papers' numbered claims, the paper's number beside ours.
::

    paramsym reproduce CLAIM [CLAIM ...] | all [--quick] [--json] [--out DIR] [--write-docs DOCS]
    paramsym reproduce --list [--json]

Prints a markdown table (claim, source, paper, ours, holds, budget); ``--json`` prints a list of
rows with ``claim``, ``paper``, ``ours``, ``holds`` and the rest
(:mod:`paramsym.experiments.reproduce.engine`). ``--quick`` runs the reduced budgets (CI);
``--out DIR`` keeps the run directories and figures (and reuses finished runs of the same
budget there, so an interrupted reproduction resumes); ``--write-docs DOCS`` regenerates
``DOCS/reproductions.md`` and the generated blocks of the other pages from these rows.
Exit status 0 when every claim ran (whether or not it holds — the table says), 1 when a run
failed, 2 for an unknown claim (named error with the closest id).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "reproduce", help="reproduce the seed papers' numbered claims (paper's number, ours, holds)",
        description="Run the experiments behind each numbered claim of the seed papers and print the paper's number "
        "beside ours, with whether it holds under the claim's stated criterion.")
    p.add_argument("claims", nargs="*", help="claim ids, or `all` (see --list)")
    p.add_argument("--quick", action="store_true", help="reduced budgets (minutes for all claims; CI)")
    p.add_argument("--json", action="store_true", help="print a JSON list of rows instead of the table")
    p.add_argument("--out", default=None, help="keep run directories and figures here (reused when rerun)")
    p.add_argument("--write-docs", default=None, metavar="DOCS",
                   help="regenerate DOCS/reproductions.md and the generated blocks of DOCS/*.md")
    p.add_argument("--list", action="store_true", help="list the claims (id, source, paper, criterion) and exit")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError

    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1; received {args.threads}.")
    from ..experiments.reproduce import CLAIMS, RUNS, get_claims, markdown, reproduce

    if args.list:
        rows = [{"claim": c.id, "source": c.source, "statement": c.statement, "paper": c.paper,
                 "criterion": c.criterion, "run": c.run, "full_time": RUNS[c.run].full_time} for c in CLAIMS]
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        else:
            for r in rows:
                print(f"{r['claim']:45s} {r['source']:32s} paper {r['paper']}")
        return 0
    get_claims(args.claims)  # unknown ids fail before anything runs
    import os

    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ConfigError(f"--out {args.out!r} is a file; give a directory (new, or one from an earlier "
                          "`paramsym reproduce --out`, whose finished runs are reused).")
    if args.write_docs and not os.path.isdir(args.write_docs):
        raise ConfigError(f"--write-docs {args.write_docs!r} is not a directory; give the docs directory (e.g. docs).")
    import torch

    torch.set_num_threads(args.threads)
    log = None if (args.quiet or args.json) else (lambda s: print(s, file=sys.stderr, flush=True))
    rows = reproduce(args.claims, quick=args.quick, out=args.out, log=log)
    if args.write_docs:
        from ..experiments.reproduce.docs import write_docs

        for path in write_docs(rows, args.write_docs):
            if log:
                log(f"wrote {path}")
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
    else:
        print(markdown(rows))
        figs = {r["run"]: r["figures"] for r in rows if r["figures"]}
        if figs:
            print("\nFigures (kept under --out):")
            for run, paths in figs.items():
                print(f"- {run}: " + ", ".join(paths))
    return 1 if any(r["error"] for r in rows) else 0
