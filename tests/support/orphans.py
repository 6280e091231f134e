"""A server that must not outlive the process that started it (a test or perf run that
died), checked as a user would see it: started by a shell that then exits."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 30.0
EXIT_WITHIN_S = 10.0


def assert_exits_once_orphaned(command: list[str], what: str, parent_lives_s: float) -> None:
    """Start `command` in the background of a shell that exits `parent_lives_s` later
    (time for the server to look at who its parent is); fail unless it is gone, or a zombie
    left for whichever process adopted it to reap, within EXIT_WITHIN_S."""
    shell = subprocess.run(
        ["sh", "-c", f"{shlex.join(command)} >/dev/null 2>&1 & echo $!; sleep {parent_lives_s}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=START_TIMEOUT_S,
    )
    stat = Path(f"/proc/{int(shell.stdout.strip())}/stat")
    deadline = time.monotonic() + EXIT_WITHIN_S
    while stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, f"{what} outlived its parent by {EXIT_WITHIN_S:g} s"
        time.sleep(0.1)
