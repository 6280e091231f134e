"""Running the project's commands as its docs say: `python -m <module> ...` from the
repository root, on the interpreter running the tests (the venv's)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


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


def run_checked(
    command: list[str],
    *,
    timeout: float,
    what: str | None = None,
    cwd: Path = REPO,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run `command` from the repository root (or `cwd`, in `env`), no input; its stdout.
    Fails the test, showing the output's tail, unless it exits 0."""
    result = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, (
        f"{what or ' '.join(command)} exited {result.returncode}\n"
        f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-4000:]}"
    )
    return result.stdout
