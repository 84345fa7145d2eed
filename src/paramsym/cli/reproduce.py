"""``paramsym reproduce``: the seed papers' numbered claims, the paper's number beside ours.
::

    paramsym reproduce CLAIM [CLAIM ...] | all [--quick] [--json] [--out DIR] [--rerun | --reuse-stale]
                       [--write-docs DOCS]
    paramsym reproduce --list [CLAIM ...] [--json]

Prints a markdown table (claim, kind, source, paper, ours, holds yes/no/—, budget, wall / CPU
seconds, code version) and a summary line; ``--json`` prints ``{"rows": [...], "summary": {...}}``
with ``summary`` = ``reproduced``, ``failing``, ``not_evaluated``, ``related``, ``measurements``,
``stale`` (claim ids) and their ``counts`` (:mod:`paramsym.reproduce.engine`).
``--quick`` runs the reduced budgets (CI): trained claims are then not evaluated (holds ``null``).
``--out DIR`` keeps the run directories and figures; a finished run there is reused only when its
``config_hash`` and ``code_version`` match, a stale one is refused (named error, exit 2) unless
``--rerun`` (recompute; the old directory is kept beside it) or ``--reuse-stale`` (reuse, rows
marked ``stale``). ``--write-docs DOCS`` regenerates ``DOCS/reproductions.md`` and the generated
blocks of the other pages from these rows. ``--list`` runs nothing and takes no budget or output
options (combining them is refused). Exit status 0 when every run ran (whether or not its claims
hold — the table says), 1 when a run failed, 2 for bad input (unknown claim with the closest ids,
a foreign or corrupt ``--out``, a stale run, a refused combination).
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
    p.add_argument("--list", action="store_true",
                   help="list the claims (id, kind, source, paper, criterion; only those named, if any) and exit")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--rerun", action="store_true",
                   help="recompute stale runs in --out (another config, recipe, budget or code version); the old "
                   "directory is kept beside it as <run>.stale-<time>")
    g.add_argument("--reuse-stale", action="store_true",
                   help="reuse stale finished runs in --out; their rows are marked stale")
    p.add_argument("--threads", default=None, help="torch CPU threads, 1..4096 (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from .options import threads_option

    threads = threads_option(args.threads) if args.threads is not None else 1
    from ..reproduce import CLAIMS, RUNS, get_claims, markdown, reproduce
    from ..reproduce.engine import preflight, summary

    if args.list:
        given = [f for f, on in (("--quick", args.quick), ("--out", args.out), ("--write-docs", args.write_docs),
                                 ("--rerun", args.rerun), ("--reuse-stale", args.reuse_stale)) if on]
        if given:
            raise ConfigError(f"--list runs nothing, so {', '.join(given)} would be ignored; drop "
                              f"{'it' if len(given) == 1 else 'them'} to list, or drop --list to run.")
        claims = get_claims(args.claims) if args.claims else CLAIMS
        rows = [{"claim": c.id, "kind": c.kind, "source": c.source, "statement": c.statement, "paper": c.paper,
                 "criterion": c.criterion, "run": c.run, "full_time": RUNS[c.run].full_time,
                 "trained": not RUNS[c.run].exact} for c in claims]
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=False))
        else:
            for r in rows:
                print(f"{r['claim']:45s} {r['kind']:12s} {r['source']:32s} paper {r['paper']}")
        return 0
    reuse = "rerun" if args.rerun else "stale" if args.reuse_stale else "refuse"
    if reuse != "refuse" and not args.out:
        flag = "--rerun" if args.rerun else "--reuse-stale"
        raise ConfigError(f"{flag} decides what to do with stale runs kept in --out DIR; without --out every run is fresh, "
                          f"so it would do nothing. Add --out DIR, or drop {flag}.")
    get_claims(args.claims)  # unknown ids fail before anything runs
    import os

    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ConfigError(f"--out {args.out!r} is a file; give a directory (new, or one from an earlier "
                          "`paramsym reproduce --out`, whose matching finished runs are reused).")
    if args.write_docs:
        if not os.path.isdir(args.write_docs):
            raise ConfigError(f"--write-docs {args.write_docs!r} is not a directory; give the docs directory (e.g. docs).")
        from ..reproduce.docs import read_store

        read_store(args.write_docs)  # a corrupt store is refused before anything runs
    preflight(args.claims, args.out, args.quick, reuse)  # foreign, corrupt or stale runs: refused before anything runs
    import torch

    torch.set_num_threads(threads)
    log = None if (args.quiet or args.json) else (lambda s: print(s, file=sys.stderr, flush=True))
    rows = reproduce(args.claims, quick=args.quick, out=args.out, log=log, reuse=reuse)
    if args.write_docs:
        from ..reproduce.docs import write_docs

        for path in write_docs(rows, args.write_docs):
            if log:
                log(f"wrote {path}")
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary(rows)}, indent=2, ensure_ascii=False, default=str))
    else:
        print(markdown(rows))
        figs = {r["run"]: r["figures"] for r in rows if r["figures"]}
        if figs:
            print("\nFigures (kept under --out):")
            for run, paths in figs.items():
                print(f"- {run}: " + ", ".join(paths))
    return 1 if any(r["error"] for r in rows) else 0
