"""What a source topic's format costs a broker: memory and Fetch speed (issue 15).

For each `--kind LABEL=SPEC` (a --source definition), rounds alternating between kinds:
start `nullbroker serve --source SPEC` alone, read its VmRSS right after the listening
line, read the topic whole with `perf.consumer_perf --assign` (librdkafka) and then with
`perf.replay fetch`, and read its VmHWM (peak RSS); print one JSON line a run. With
`--group`, perf.consumer_perf reads as a member of a consumer group (as Kafka's
kafka-consumer-perf-test does), so the peak includes the group coordinator's code.

    python -m perf.source_formats --rounds 3 \\
        --kind 'letters=src:partitions=4,records=100000,size=1024' \\
        --kind 'json=src:partitions=4,records=100000,format=json,schema=order.json'

Each broker listens on 127.0.0.1 on a port the OS picks and is stopped after its run.
Write the package's bytecode first (`make bytecode`): compiling at start raises RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nullbroker.app.launcher import start
from nullbroker.sources.synthetic import SourceSpec
from perf.proc_sampler import peak_rss_kib, rss_kib

_ROOT = Path(__file__).resolve().parent.parent


def measure(label: str, source: str, group: bool = False) -> dict[str, Any]:
    """One broker serving `source`: its RSS idle and at peak, and two reads of the topic."""
    spec = SourceSpec.parse(source)
    assert spec.records is not None, "a kind needs records=N: the reads take the topic whole"
    # No --summary-json: it imports json at start, which the idle RSS would count.
    with start("--source", source, summary=False, cwd=_ROOT, metrics=False) as broker:
        bootstrap = broker.bootstrap
        idle = rss_kib(broker.pid)
        total = spec.records * spec.partitions
        with tempfile.TemporaryDirectory() as scratch:
            numbers = Path(scratch) / "consumer.json"
            subprocess.run(
                [sys.executable, "-m", "perf.consumer_perf", "--bootstrap-server", bootstrap,
                 "--topic", spec.name, "--messages", str(total), "--hide-header",
                 *(() if group else ("--assign",)),
                 "--json", str(numbers)],
                check=True, cwd=_ROOT, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            consumer = json.loads(numbers.read_text())
        replay_run = subprocess.run(
            [sys.executable, "-m", "perf.replay", "fetch", "--bootstrap-server", bootstrap,
             "--topic", spec.name, "--partitions", str(spec.partitions),
             "--records", str(spec.records), "--broker-pid", str(broker.pid), "--json"],
            check=True, cwd=_ROOT, capture_output=True, text=True,
        )  # fmt: skip
        replay = json.loads(replay_run.stdout)
        peak = peak_rss_kib(broker.pid)
    return {
        "kind": label,
        "reader": "group" if group else "assign",
        "source": source,
        "idle_rss_mib": round(idle / 1024, 2),
        "peak_rss_mib": round(peak / 1024, 2),
        "consumer_records_per_s": round(consumer["records_per_sec"]),
        "consumer_mb_per_s": round(consumer["mb_per_sec"], 1),
        "replay_records_per_s": replay["records_per_second"],
        "replay_mb_per_s": replay["mb_per_second"],
        "replay_broker_cpu_s_per_gb": replay.get("broker_cpu_seconds_per_gb"),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perf.source_formats",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kind", action="append", required=True, metavar="LABEL=SPEC")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--group", action="store_true", help="the first read by a consumer group's member"
    )
    args = parser.parse_args(argv)
    kinds = [kind.partition("=")[::2] for kind in args.kind]
    for round_number in range(args.rounds):
        # Each round starts one kind later, so no kind always follows the same one.
        shift = round_number % len(kinds)
        for label, source in kinds[shift:] + kinds[:shift]:
            run = measure(label, source, args.group)
            print(json.dumps({"round": round_number, **run}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
