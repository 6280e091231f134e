"""The machine a benchmark ran on, for its result file: CPU, cores, kernel, Python, the
Kafka client's versions, the commit measured, the date and the load average."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from perf.kafka_tools import client_versions

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout measured; also where `python -m perf.…` finds the perf package (it is not
installed)."""


def machine_info() -> dict[str, Any]:
    """Everything but `loadavg_end`, which the caller adds when the run is over."""
    model = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "client": client_versions(),
        "nullbroker_commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "loadavg_start": loadavg(),
    }


def loadavg() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def git_commit() -> str:
    """The commit measured, `+dirty` when tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--"], cwd=REPO_ROOT, timeout=10
        ).returncode
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")
