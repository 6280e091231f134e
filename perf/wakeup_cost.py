"""What one wake-up costs on this machine: two processes pass a byte back and forth over a
socket pair, each blocking in epoll between turns, as a broker's process waits for its next
request, pinned to one CPU and then to two. Prints the CPU time each side spends per round
trip and the wall time of one.

    python -m perf.wakeup_cost --round-trips 20000

On bare metal the two are a few microseconds apart; in a virtual machine, waking a process
whose CPU is idle may cost the guest an interrupt between vCPUs and both processes far more
CPU. A broker spread over several processes (`--processes`) wakes more often at a given load
(each process for its own nodes' requests), so what it costs there is that many wake-ups.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import sys
import time
from collections.abc import Sequence


def round_trips(count: int, cpus: tuple[int, int]) -> dict[str, float]:
    """`count` round trips between this process on `cpus[0]` and a child on `cpus[1]`:
    microseconds of CPU per round trip on each side, and of wall time."""
    ours, theirs = socket.socketpair()
    child = os.fork()
    if child == 0:  # the answering side: wait, read, answer
        try:
            os.sched_setaffinity(0, {cpus[1]})
            poll = select.epoll()
            poll.register(theirs.fileno(), select.EPOLLIN)
            for _ in range(count):
                poll.poll(-1)
                theirs.recv(16)
                theirs.send(b"x")
        finally:
            os._exit(0)
    theirs.close()
    os.sched_setaffinity(0, {cpus[0]})
    poll = select.epoll()
    poll.register(ours.fileno(), select.EPOLLIN)
    children_before = os.times()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        ours.send(b"x")
        poll.poll(-1)
        ours.recv(16)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    os.waitpid(child, 0)
    ours.close()
    children = os.times()
    child_cpu = (children.children_user - children_before.children_user) + (
        children.children_system - children_before.children_system
    )
    return {
        "cpu_us_here": round(cpu / count * 1e6, 1),
        "cpu_us_there": round(child_cpu / count * 1e6, 1),
        "wall_us": round(wall / count * 1e6, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.wakeup_cost", description=__doc__)
    parser.add_argument("--round-trips", type=int, default=20_000)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0))
    result = {"one CPU": round_trips(args.round_trips, (cpus[0], cpus[0]))}
    if len(cpus) > 1:
        result["two CPUs"] = round_trips(args.round_trips, (cpus[0], cpus[1]))
    if args.json:
        print(json.dumps(result))
    else:
        for name, numbers in result.items():
            print(
                f"{name}: {numbers['cpu_us_here']} + {numbers['cpu_us_there']} us of CPU "
                f"per round trip, {numbers['wall_us']} us wall"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
