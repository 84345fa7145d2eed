"""The library reads no environment variables (issue 19): configuration comes from typed
configs and command-line flags; only the command line (``paramsym.cli``) and script entry
points (``if __name__ == "__main__"``) may read the environment."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).parents[2] / "src" / "paramsym"
#: (file, line content) that touch the environment for another program, not to configure paramsym
ALLOWED = {
    # the child processes of `paramsym reproduce` get an offline, one-thread environment
    ("reproduce/runs.py", 'env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}'),
    # Ray's own output switch (Ray is configured by its environment)
    ("sweep/ray_backend.py", 'os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no experiment banner on stdout (verbose=0)'),
}


def test_library_modules_read_no_environment() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("cli/"):
            continue
        text = path.read_text(encoding="utf-8")
        main = text.find('if __name__ == "__main__":')
        body = text if main < 0 else text[:main]
        for line in body.splitlines():
            if re.search(r"os\.environ|getenv\(|environ\[", line) and (rel, line.strip()) not in ALLOWED:
                found.append(f"{rel}: {line.strip()}")
    assert not found, found
    assert len(list(SRC.rglob("*.py"))) > 50  # the scan saw the package
