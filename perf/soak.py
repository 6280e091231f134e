"""Hold a broker at full load for minutes and watch its memory: is RSS flat?

Starts `nullbroker serve` on a port the OS picks, then replays Produce requests as fast as
it answers them (perf.replay's load: no client-side encoding) and, with `--fetch`, reads a
source topic from the start over and over on a second connection, until `--minutes` have
passed. Every `--sample-seconds` it reads the broker's RSS and CPU time from /proc. It
prints the RSS at the start of the load, the peak, the last sample and the slope of a
least-squares line through the second half of the samples (KiB per minute: about 0 when
memory is flat), and writes every sample with `--json` (its folder made at the start).

    .venv/bin/python -m perf.soak --minutes 10 --fetch --json out/soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from nullbroker.app.launcher import RunningBroker, start

from .proc_sampler import cpu_seconds, rss_kib
from .replay import Connection, produce_frame, replay_fetch, replay_produce

SOURCE_TOPIC = "soak-source"
SOURCE_PARTITIONS = 4
SOURCE_RECORDS = 50_000


def soak_broker(*flags: str, metrics: bool = False) -> RunningBroker:
    """`nullbroker serve` on a port the OS picks, with the source topic --fetch reads."""
    return start(
        "--report-interval", "3600",
        "--source",
        f"{SOURCE_TOPIC}:partitions={SOURCE_PARTITIONS},records={SOURCE_RECORDS},size=1024",
        *flags,
        metrics=metrics,
    )  # fmt: skip


def slope_kib_per_minute(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of RSS over time, in KiB per minute."""
    if len(samples) < 2:
        return 0.0
    times = [t for t, _ in samples]
    values = [v for _, v in samples]
    mean_t, mean_v = sum(times) / len(times), sum(values) / len(values)
    spread = sum((t - mean_t) ** 2 for t in times)
    if spread == 0:
        return 0.0
    slope = sum((t - mean_t) * (v - mean_v) for t, v in samples) / spread
    return slope * 60


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perf.soak",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long (default 10)")
    parser.add_argument(
        "--sample-seconds", type=float, default=1.0, help="between RSS samples (default 1)"
    )
    parser.add_argument("--fetch", action="store_true", help="also read a source topic")
    parser.add_argument(
        "--partitions", type=int, default=4, help="batches per Produce request (default 4)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every sample here")
    parser.add_argument(
        "--connections",
        type=int,
        metavar="N",
        help="instead of replayed requests: hold N connections — --producers idempotent "
        "producers and --consumers consumers in one group (confluent-kafka), the rest idle "
        "connections that sent one ApiVersions — and check the producers' records are "
        "counted exactly (see perf/soak_clients.py)",
    )
    parser.add_argument("--producers", type=int, default=10, help="with --connections (10)")
    parser.add_argument("--consumers", type=int, default=10, help="with --connections (10)")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.sample_seconds <= 0:
        parser.error("--minutes and --sample-seconds must be positive")
    if args.json:
        # Now, not after the run: a folder that cannot be made would lose the whole soak.
        args.json.parent.mkdir(parents=True, exist_ok=True)
    if args.connections is not None:
        return soak_with_connections(args)

    # As many partitions as each request has batches: each is appended, none refused.
    broker = soak_broker("--partitions", str(args.partitions))
    host, _, port = broker.bootstrap.rpartition(":")
    address = (host, int(port))
    deadline = time.monotonic() + args.minutes * 60
    counts = {"produce_requests": 0, "fetch_passes": 0}
    errors: list[BaseException] = []

    def produce_until_deadline() -> None:
        connection = Connection(address)
        frame = produce_frame("soak", range(args.partitions), 15, 1024)
        while time.monotonic() < deadline:
            counts["produce_requests"] += replay_produce([connection], [frame], 2_000, 5)
        connection.close()

    def fetch_until_deadline() -> None:
        while time.monotonic() < deadline:
            connection = Connection(address)
            replay_fetch(connection, SOURCE_TOPIC, SOURCE_PARTITIONS, SOURCE_RECORDS, 1 << 20)
            connection.close()
            counts["fetch_passes"] += 1

    def guarded(work: Any) -> Any:
        def run() -> None:
            try:
                work()
            except BaseException as error:  # reported below; the soak must stop cleanly
                errors.append(error)

        return run

    samples: list[tuple[float, int]] = []
    started = time.monotonic()
    workers = [threading.Thread(target=guarded(produce_until_deadline))]
    if args.fetch:
        workers.append(threading.Thread(target=guarded(fetch_until_deadline)))
    with broker:
        cpu_start = cpu_seconds(broker.pid)
        for worker in workers:
            worker.start()
        while time.monotonic() < deadline and not errors:
            samples.append((round(time.monotonic() - started, 2), rss_kib(broker.pid)))
            time.sleep(args.sample_seconds)
        for worker in workers:
            worker.join()
        cpu = cpu_seconds(broker.pid) - cpu_start
    if errors:
        raise errors[0]

    report(args, {"minutes": args.minutes, "fetch": args.fetch, **counts,
                  "broker_cpu_seconds": round(cpu, 2)}, samples)  # fmt: skip
    return 0


def report(
    args: argparse.Namespace, figures: dict[str, Any], samples: list[tuple[float, int]]
) -> None:
    """Print the figures and the RSS's course (first, peak, last, the second half's slope);
    write them with every sample for --json."""
    second_half = samples[len(samples) // 2 :]
    result = {
        **figures,
        "rss_first_kib": samples[0][1],
        "rss_peak_kib": max(v for _, v in samples),
        "rss_last_kib": samples[-1][1],
        "rss_slope_second_half_kib_per_minute": round(slope_kib_per_minute(second_half), 1),
    }
    print(", ".join(f"{key} {value}" for key, value in result.items()))
    if args.json:
        args.json.write_text(json.dumps({**result, "samples": samples}, indent=1) + "\n")


def soak_with_connections(args: argparse.Namespace) -> int:
    from .soak_clients import soak_connections

    # Idle connections stay for the whole run, however long: --idle-timeout-ms 0.
    with soak_broker(
        "--idle-timeout-ms", "0", "--group-initial-rebalance-delay-ms", "0", metrics=True
    ) as broker:
        assert broker.metrics_url is not None
        figures, samples = soak_connections(
            broker.pid, broker.bootstrap, broker.metrics_url,
            minutes=args.minutes, connections=args.connections, producers=args.producers,
            consumers=args.consumers, sample_seconds=args.sample_seconds,
            source_topic=SOURCE_TOPIC,
        )  # fmt: skip
    report(args, {"minutes": args.minutes, **figures}, samples)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
