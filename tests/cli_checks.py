"""In-process CLI helpers shared by the bad-input tests (imported by test modules; not collected)."""

from __future__ import annotations

from paramsym.cli import main


def run_cli(capsys, argv: list) -> tuple[int, str, str]:
    """Run ``paramsym ARGV`` in-process; return (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, argv: list, *needles: str) -> str:
    """Run ``argv``; assert exit 2, one stderr line with ``error:`` and every needle; return the line."""
    rc, _, err = run_cli(capsys, argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "error:" in lines[0], (argv, rc, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (argv, needle, lines[0])
    return lines[0]
