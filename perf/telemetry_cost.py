"""What client telemetry (KIP-714) costs the broker: CPU per GB produced by eight of Kafka's
own producer perf tests at once, with the clients pushing their metrics (the default,
`--client-metrics '*'` every 5 s) and with pushing off (`--client-metrics off`: the APIs are
not advertised and the clients never ask), side by side, alternating, several rounds.

    python -m perf.telemetry_cost --rounds 5 --producers 8 --records 2000000

Each run starts a broker of its own, runs the producers to the end (each closes, with its
terminating push), and reads the broker's CPU time (user + system, /proc) and the bytes it
counted; the figure is the broker's CPU seconds per GiB of record batches, and the pushes
the broker accepted. The median of the rounds is reported for each side and their ratio, and,
from the pushing runs alone, the share of the broker's CPU the pushes took as the broker
measures it (`Accounts.clients.cpu_seconds`: its thread's CPU time on PushTelemetry and on the
snapshots of what was pushed): the side-by-side ratio moves by several percent from run to
run on a shared machine of two cores, the share does not. What the share leaves out is what
the pushes cost the rest (the garbage collector, caches), which only the ratio sees.

CPU per GiB is a rate: what a run pays once (the producers' start, the first push's import of
the OTLP decoder, 25 to 60 ms and 2.5 MiB of RSS, which the broker puts off until a client
pushes) is no part of it, and in a 30-s run it reads as a percent or more. So each run is
measured twice: whole, and from `--warmup` seconds after the producers start to the end, the
window whose CPU and bytes give the steady figure. Eight JVMs start slowly on two cores: at a
5-s interval none had pushed by 10 s, hence a default of 20 (a window that holds the first
pushes holds the import too: compare its share of the pushes' CPU with the whole run's).

`--with-unpushed` adds a third side to each round: the broker as when pushing, the perf tests
told `enable.metrics.push=false`. Its ratio to the side with pushing off is what the machine
alone makes of two sides where no one pushes, the yardstick for the pushing side's ratio.
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
from perf.java_perf import java_program_command, missing, producer_command
from perf.proc_sampler import exact_cpu_seconds

GIB = 1024**3
SIDES = {
    "pushing": ("*", ()),
    "off": ("off", ()),
    "unpushed": ("*", ("enable.metrics.push=false",)),
}
"""Each side's --client-metrics and the producers' own properties. `unpushed` (with
--with-unpushed): the broker as when pushing, the clients told not to push, so that the
side-by-side also shows how far two sides apart where no one pushes."""


def run_once(
    side: str,
    producers: int,
    records: int,
    record_size: int,
    warmup: float,
    interval_ms: int | None = None,
    throughput: int = -1,
    one_jvm: bool = False,
) -> dict[str, Any]:
    settings = {} if interval_ms is None else {"client_metrics_interval_ms": interval_ms}
    client_metrics, props = SIDES[side]
    with start(client_metrics=client_metrics, **settings) as broker:
        cpu_before = exact_cpu_seconds(broker.pid)
        started = time.monotonic()
        if one_jvm:
            commands = [
                java_program_command(
                    "ManyProducers",
                    broker.bootstrap,
                    str(producers),
                    str(records),
                    str(record_size),
                    "cost",
                )
            ]
        else:
            commands = [
                producer_command(
                    broker.bootstrap, f"cost-{index}", records, record_size, props, throughput
                )
                for index in range(producers)
            ]
        running = [
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for command in commands
        ]
        time.sleep(warmup)
        if any(process.poll() is not None for process in running):
            raise RuntimeError(f"a producer ended within the warm-up ({warmup} s): more --records")
        # The accounts first: reading them costs the broker more with eight clients' series
        # in them, and that is no part of the window.
        warm = broker.accounts()
        cpu_warm = exact_cpu_seconds(broker.pid)
        codes = [process.wait(timeout=600) for process in running]
        elapsed = time.monotonic() - started
        # Before the accounts are read: a summary of eight clients' series costs the broker
        # a few milliseconds that no run pays but this one.
        cpu_end = exact_cpu_seconds(broker.pid)
        accounts = broker.accounts()
    if any(codes):
        raise RuntimeError(f"a producer failed: exit codes {codes}")
    produced = accounts.produced
    expected = producers * records
    if produced.records != expected:
        raise RuntimeError(f"{side}: counted {produced.records} records, sent {expected}")
    cpu = cpu_end - cpu_before
    return {
        "side": side,
        "cpu_seconds": cpu,
        "bytes": produced.bytes,
        "cpu_seconds_per_gib": cpu / (produced.bytes / GIB),
        "steady_cpu_seconds": cpu_end - cpu_warm,
        "steady_bytes": produced.bytes - warm.produced.bytes,
        "steady_cpu_seconds_per_gib": (cpu_end - cpu_warm)
        / ((produced.bytes - warm.produced.bytes) / GIB),
        # The broker's own measure of its CPU on the pushes (PushTelemetry's handling, the
        # snapshots of what was pushed): free of the side-by-side's run-to-run noise.
        "pushes_cpu_seconds": accounts.clients.cpu_seconds,
        "steady_pushes_cpu_seconds": accounts.clients.cpu_seconds - warm.clients.cpu_seconds,
        "pushes": accounts.requests.get("PushTelemetry", 0),
        "subscription_requests": accounts.requests.get("GetTelemetrySubscriptions", 0),
        "produce_requests": accounts.requests.get("Produce", 0),
        "requests": accounts.requests_total,
        "instances": len(accounts.clients.instances),
        "agree": all(row.agrees for row in accounts.clients.agreement),
        # Producers whose closing push never came (the Java client drops it when it closes
        # with its requests in flight): why "agree" is false, when it is.
        "without_closing_push": sum(row.without_closing_push for row in accounts.clients.agreement),
        "elapsed_seconds": elapsed,
        "throughput": throughput,
        "one_jvm": one_jvm,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--records", type=int, default=400_000, help="per producer")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument(
        "--warmup",
        type=float,
        default=20.0,
        help="seconds after the producers start before the steady window (default 20: "
        "eight JVMs started on two cores, every client has pushed once at a 5-s interval)",
    )
    parser.add_argument(
        "--interval-ms",
        type=int,
        help="the push interval the broker asks for (default: its own default)",
    )
    parser.add_argument(
        "--throughput",
        type=int,
        default=-1,
        help="records a second each producer sends at most (default -1: as fast as it can). "
        "Unthrottled, the producers share the two cores with the broker, and pushing takes "
        "their CPU too: their batches, so the broker's work per byte, differ between the "
        "sides. Below the machine's limit both sides send the same requests at the same "
        "times, and the difference is the broker's alone",
    )
    parser.add_argument(
        "--one-jvm",
        action="store_true",
        help="run the producers in one JVM (perf/java/ManyProducers.java, compiled against "
        "Kafka 4.4.0's jars at first use) rather than a perf test each: the clients' start "
        "and their telemetry path, loaded and compiled at the first push, paid once, not "
        "once a producer, on the cores the broker shares (unthrottled only)",
    )
    parser.add_argument(
        "--with-unpushed",
        action="store_true",
        help="a third side a round: the broker as when pushing, the producers with "
        "enable.metrics.push=false (perf tests only). Its ratio to the side with pushing "
        "off is the spread of two runs in which no one pushes: how much of the "
        "side-by-side the machine makes",
    )
    parser.add_argument("--json", help="write the runs and medians here")
    args = parser.parse_args(argv)
    if args.one_jvm and args.throughput != -1:
        parser.error("--one-jvm sends as fast as it can: no --throughput")
    if args.one_jvm and args.with_unpushed:
        parser.error("--with-unpushed sets the perf tests' properties: not with --one-jvm")
    sides = list(SIDES) if args.with_unpushed else ["pushing", "off"]
    why = missing()
    if why is not None:
        print(f"perf.telemetry_cost: {why}", file=sys.stderr)
        return 2
    runs = []
    for round_index in range(args.rounds):
        # Each side first as often as the others, and never in a fixed order.
        shift = round_index % len(sides)
        order = sides[shift:] + sides[:shift]
        if round_index // len(sides) % 2:
            order.reverse()
        for side in order:
            run = run_once(
                side,
                args.producers,
                args.records,
                args.record_size,
                args.warmup,
                args.interval_ms,
                args.throughput,
                args.one_jvm,
            )
            run["round"] = round_index
            runs.append(run)
            print(json.dumps(run), flush=True)
    medians = {
        side: statistics.median(r["cpu_seconds_per_gib"] for r in runs if r["side"] == side)
        for side in sides
    }
    steady = {
        side: statistics.median(r["steady_cpu_seconds_per_gib"] for r in runs if r["side"] == side)
        for side in sides
    }
    ratio = medians["pushing"] / medians["off"]
    steady_ratio = steady["pushing"] / steady["off"]
    # A round's runs ran one after the other, on the same machine's mood: the ratio within a
    # round drifts less than either side's figure from round to round.
    paired = {
        window: sorted(_ratio(runs, round_index, key) for round_index in range(args.rounds))
        for window, key in (
            ("steady", "steady_cpu_seconds_per_gib"),
            ("whole", "cpu_seconds_per_gib"),
        )
    }
    if args.with_unpushed:
        for window, key in (
            ("steady", "steady_cpu_seconds_per_gib"),
            ("whole", "cpu_seconds_per_gib"),
        ):
            paired[f"{window}, unpushed / off"] = sorted(
                _ratio(runs, round_index, key, "unpushed") for round_index in range(args.rounds)
            )
    share = {
        window: statistics.median(
            r[f"{prefix}pushes_cpu_seconds"] / r[f"{prefix}cpu_seconds"]
            for r in runs
            if r["side"] == "pushing"
        )
        for window, prefix in (("steady", "steady_"), ("whole", ""))
    }
    print(
        f"broker CPU per GiB, median of {args.rounds}: steady (from {args.warmup:g} s on) "
        f"pushing {steady['pushing']:.3f} s, off {steady['off']:.3f} s, ratio "
        f"{steady_ratio:.4f}; whole runs pushing {medians['pushing']:.3f} s, off "
        f"{medians['off']:.3f} s, ratio {ratio:.4f}. The pushes' own share of the pushing "
        f"runs' CPU, as the broker measured it, median: steady {share['steady']:.2%}, whole "
        f"{share['whole']:.2%}"
    )
    if args.with_unpushed:
        print(
            f"unpushed (the broker as when pushing, the clients not): steady "
            f"{steady['unpushed']:.3f} s, whole {medians['unpushed']:.3f} s per GiB"
        )
    for window, ratios in paired.items():
        label = window if "/" in window else f"{window}: pushing / off"
        print(
            f"{label} within each round, median {statistics.median(ratios):.4f} "
            f"(sorted: {', '.join(f'{r:.3f}' for r in ratios)})"
        )
    if args.json:
        with open(args.json, "w") as file:
            document = {
                "runs": runs,
                "medians": medians,
                "ratio": ratio,
                "steady_medians": steady,
                "steady_ratio": steady_ratio,
                "share": share,
                "paired_ratios": paired,
            }
            json.dump(document, file, indent=2)
    return 0


def _ratio(runs: list[dict[str, Any]], round_index: int, key: str, side: str = "pushing") -> float:
    """`side`'s figure over the figure with pushing off, in one round."""
    by_side = {run["side"]: run[key] for run in runs if run["round"] == round_index}
    return float(by_side[side] / by_side["off"])


if __name__ == "__main__":
    raise SystemExit(main())
