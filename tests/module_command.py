"""Running the project's commands as its docs say: `python -m <module> ...` from the
repository root, on the interpreter running the tests (the venv's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_module(module: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m module args...`, finished, its output captured; the exit code unchecked."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
