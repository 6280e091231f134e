"""What client telemetry (KIP-714) costs the broker: CPU per GB produced by eight of Kafka's
own producer perf tests at once, with the clients pushing their metrics (the default,
`--client-metrics '*'` every 5 s) and with pushing off (`--client-metrics off`: the APIs are
not advertised and the clients never ask), side by side, alternating, several rounds.

    python -m perf.telemetry_cost --rounds 5 --producers 8 --records 2000000

Each run starts a broker of its own, runs the producers to the end (each closes, with its
terminating push), and reads the broker's CPU time (user + system, /proc) and the bytes it
counted; the figure is the broker's CPU seconds per GiB of record batches, and the pushes
the broker accepted. The median of the rounds is reported for each side and their ratio, and,
from the pushing runs alone, the share of the broker's CPU its telemetry requests took (their
request latency over its CPU time): the side-by-side ratio moves by several percent from run to
run on a shared machine of two cores, the share does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from nullbroker.app.launcher import start
from perf.java_perf import missing, producer_command
from perf.proc_sampler import exact_cpu_seconds

GIB = 1024**3
SIDES = {"pushing": "*", "off": "off"}
TELEMETRY = ("GetTelemetrySubscriptions", "PushTelemetry")


def run_once(side: str, producers: int, records: int, record_size: int) -> dict[str, Any]:
    with start(client_metrics=SIDES[side]) as broker:
        cpu_before = exact_cpu_seconds(broker.pid)
        started = time.monotonic()
        commands = [
            producer_command(broker.bootstrap, f"cost-{index}", records, record_size, ())
            for index in range(producers)
        ]
        running = [
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for command in commands
        ]
        codes = [process.wait(timeout=600) for process in running]
        elapsed = time.monotonic() - started
        # Before the accounts are read: a summary of eight clients' series costs the broker
        # a few milliseconds that no run pays but this one.
        cpu = exact_cpu_seconds(broker.pid) - cpu_before
        accounts = broker.accounts()
    if any(codes):
        raise RuntimeError(f"a producer failed: exit codes {codes}")
    produced = accounts.produced
    expected = producers * records
    if produced.records != expected:
        raise RuntimeError(f"{side}: counted {produced.records} records, sent {expected}")
    return {
        "side": side,
        "cpu_seconds": cpu,
        "bytes": produced.bytes,
        "cpu_seconds_per_gib": cpu / (produced.bytes / GIB),
        "pushes": accounts.requests.get("PushTelemetry", 0),
        # The broker's own time on the telemetry requests (decode, handle, encode: its
        # request latency), the first push's imports included: what they cost it, read in
        # the same run as the rest, free of the run-to-run noise of the side-by-side.
        "telemetry_seconds": sum(
            accounts.request_latency[api].sum
            for api in TELEMETRY
            if api in accounts.request_latency
        ),
        "produce_requests": accounts.requests.get("Produce", 0),
        "requests": accounts.requests_total,
        "instances": len(accounts.clients.instances),
        "agree": all(row.agrees for row in accounts.clients.agreement),
        "elapsed_seconds": elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--records", type=int, default=400_000, help="per producer")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--json", help="write the runs and medians here")
    args = parser.parse_args(argv)
    why = missing()
    if why is not None:
        print(f"perf.telemetry_cost: {why}", file=sys.stderr)
        return 2
    runs = []
    for round_index in range(args.rounds):
        order = list(SIDES) if round_index % 2 == 0 else list(reversed(SIDES))
        for side in order:
            run = run_once(side, args.producers, args.records, args.record_size)
            runs.append(run)
            print(json.dumps(run), flush=True)
    medians = {
        side: statistics.median(r["cpu_seconds_per_gib"] for r in runs if r["side"] == side)
        for side in SIDES
    }
    ratio = medians["pushing"] / medians["off"]
    share = statistics.median(
        r["telemetry_seconds"] / r["cpu_seconds"] for r in runs if r["side"] == "pushing"
    )
    print(
        f"broker CPU per GiB, median of {args.rounds}: pushing {medians['pushing']:.3f} s, "
        f"off {medians['off']:.3f} s, ratio {ratio:.4f}; the telemetry requests' share of "
        f"the pushing runs' CPU, median: {share:.2%}"
    )
    if args.json:
        with open(args.json, "w") as file:
            document = {"runs": runs, "medians": medians, "ratio": ratio, "share": share}
            json.dump(document, file, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
