"""What a process costs, read from /proc: RSS, CPU time, and a sampled time series of both.

Imports only the standard library, so the processes being measured (perf.mock_cluster reads
its own RSS with it) pay nothing for it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal ...
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def status_kib(pid: int | str, field: str) -> int:
    """A `VmRSS`-like field of /proc/<pid>/status in KiB (0 when the process has none)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


def rss_kib(pid: int | str = "self") -> int:
    return status_kib(pid, "VmRSS")


def peak_rss_kib(pid: int | str = "self") -> int:
    """The kernel's high-water mark of RSS since the process started (VmHWM)."""
    return status_kib(pid, "VmHWM")


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU time of a process, all its threads (live and exited), from
    /proc/<pid>/stat; the kernel counts it in clock ticks (10 ms here)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_tree(pid: int) -> list[int]:
    """`pid` and every process descended from it (a cluster's supervisor and its workers),
    found by each process's parent in /proc/*/stat (this kernel has no
    /proc/PID/task/TID/children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rpartition(")")[2].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # exited while we looked
        children.setdefault(parent, []).append(int(entry))
    tree, waiting = [], [pid]
    while waiting:
        process = waiting.pop()
        tree.append(process)
        waiting.extend(children.get(process, ()))
    return sorted(tree)


def exact_cpu_seconds(pid: int) -> float:
    """The CPU time of a process, all its threads, to the nanosecond: its CPU-time clock
    (clock_getcpuclockid(3)), which /proc/PID/stat rounds to clock ticks (10 ms here, a
    tenth of what a cluster's idle supervisor spends in a second)."""
    return time.clock_gettime(_process_cpu_clock(pid))


def _process_cpu_clock(pid: int) -> int:
    # Linux encodes another process's CPU-time clock as ~pid << 3 | CPUCLOCK_SCHED (2),
    # what glibc's clock_getcpuclockid returns; Python has no wrapper for it.
    return (~pid << 3) | 2


def tree_cpu_seconds(pids: list[int]) -> float:
    """The CPU time of every process of `pids` that is still running, summed."""
    total = 0.0
    for pid in pids:
        # One that exited took what it used with it (EINVAL: no such process any more).
        with contextlib.suppress(OSError):
            total += exact_cpu_seconds(pid)
    return total


def smaps_rollup_kib(pid: int | str = "self") -> dict[str, int]:
    """Every size in /proc/PID/smaps_rollup, in KiB: Rss; Pss, the proportional set size,
    each page shared with N processes counted 1/N (a process tree's PSS sums to the memory
    it really takes, where its RSS counts shared pages in every process); Pss_Anon, the
    process's own memory, shared only with its forked relatives; Pss_File, shared
    libraries and the like, split with every process on the machine that maps them; ..."""
    sizes = {}
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            name, _, value = line.partition(":")
            if value.rstrip().endswith(" kB"):
                sizes[name] = int(value.split()[0])
    return sizes


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy (not idle, not waiting for IO)
    since boot: the difference over a step, less what the measured processes used, is
    what other work took from them."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    return sum(int(fields[i]) for i in _BUSY_FIELDS) / CLOCK_TICKS


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading: seconds since the sampler started, RSS in KiB, CPU seconds so far."""

    t: float
    rss_kib: int
    cpu_s: float


class ProcSampler:
    """Reads the RSS and CPU time of named processes every `interval` seconds on a thread,
    until stop(). A process that has exited is no longer sampled."""

    def __init__(self, interval: float) -> None:
        if interval <= 0:
            raise ValueError("the sampling interval must be positive")
        self.interval = interval
        self.started = time.monotonic()
        self.samples: dict[str, list[Sample]] = {}
        self._pids: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proc-sampler", daemon=True)

    def now(self) -> float:
        """Seconds since the sampler started: the clock of every sample."""
        return time.monotonic() - self.started

    def watch(self, name: str, pid: int) -> None:
        with self._lock:
            self._pids[name] = pid
            self.samples.setdefault(name, [])
        self._sample(name, pid)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(10 * self.interval + 1)

    def peak_rss_kib(self, name: str, since: float, until: float) -> int:
        """The highest RSS sampled for `name` between two sampler times (0 if none)."""
        with self._lock:
            found = [s.rss_kib for s in self.samples.get(name, []) if since <= s.t <= until]
        return max(found, default=0)

    def _run(self) -> None:
        # Ends when stop() is called: each pass waits one interval for it.
        while not self._stopped.wait(self.interval):
            with self._lock:
                watched = list(self._pids.items())
            for name, pid in watched:
                self._sample(name, pid)

    def _sample(self, name: str, pid: int) -> None:
        try:
            sample = Sample(round(self.now(), 3), rss_kib(pid), cpu_seconds(pid))
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            with self._lock:
                self._pids.pop(name, None)  # exited: nothing more to read
            return
        with self._lock:
            self.samples[name].append(sample)
