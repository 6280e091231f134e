"""Kafka's share-consumer perf test (kafka-share-consumer-perf-test, Kafka 4.4.0's
ShareConsumerPerformance) against nullbroker and against Apache Kafka 4.4.0, side by side in
one run: a share group of three consumer threads reads a topic of 3 partitions whole, and
each broker's CPU time and RSS are read from /proc over the reading only.

    python -m perf.share_consumer_perf --records 1000000 --record-size 1024 --rounds 3

Kafka's topic is filled first by kafka-producer-perf-test (not measured); nullbroker's is a
declared source topic of the same records (`--source`, ceil(records / 3) a partition), which
exist without a producer, so that both brokers serve the share path only: the records read,
acquired, acknowledged. Each
round reads the whole topic with a new group (share.auto.offset.reset=earliest). Prints one
JSON line per broker and round, and the medians; --out appends them to a file.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from nullbroker.app.launcher import start
from perf.java_perf import BIN, producer_command
from perf.kafka_broker import KAFKA_VERSION, KafkaBroker
from perf.proc_sampler import ProcSampler

TOPIC = "share-perf"
PARTITIONS = 3
THREADS = 3
SAMPLE_INTERVAL_S = 0.2
TOOL_TIMEOUT_S = 900.0
# The tool's --timeout, the longest wait for records before its threads are interrupted, is
# 10 s by default: reading 1,000,000 records from nullbroker, which takes about that long
# on this machine, then failed ("Timeout waiting for results from fetching records", exit 1)
# and passed with 60 s.
RECORD_WAIT_MS = 60_000
GB = 1e9
SUMMARY = re.compile(
    r"^\S+ \S+, \S+ \S+, (?P<mb>[\d.]+), [\d.]+, [\d.]+, (?P<records>\d+), (?P<ms>\d+)$",
    re.M,
)


def read_earliest(bootstrap: str, group: str) -> None:
    """The group reads from the log start (Kafka's default is the log end)."""
    resource = ConfigResource(
        "group",
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while its futures run
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def fill_kafka(bootstrap: str, records: int, record_size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(60)
    command = producer_command(bootstrap, TOPIC, records, record_size, ("acks=1",))
    subprocess.run(command, check=True, capture_output=True, timeout=TOOL_TIMEOUT_S)


def read_round(name: str, bootstrap: str, pid: int, records: int) -> dict[str, Any]:
    """One share group of THREADS consumers reads `records`; the broker's cost meanwhile."""
    group = f"share-perf-{uuid.uuid4().hex[:8]}"
    read_earliest(bootstrap, group)
    sampler = ProcSampler(SAMPLE_INTERVAL_S)
    sampler.watch(name, pid)
    sampler.start()
    began = sampler.now()
    printed = subprocess.run(
        [
            str(BIN / "kafka-share-consumer-perf-test"), "--bootstrap-server", bootstrap,
            "--topic", TOPIC, "--group", group, "--num-records", str(records),
            "--threads", str(THREADS), "--timeout", str(RECORD_WAIT_MS), "--hide-header",
        ],
        check=True, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
    ).stdout  # fmt: skip
    sampler.watch(name, pid)  # one reading at the end
    ended = sampler.now()
    sampler.stop()
    samples = [s for s in sampler.samples[name] if began <= s.t <= ended]
    found = SUMMARY.search(printed)
    if found is None:
        raise RuntimeError(f"kafka-share-consumer-perf-test printed no summary:\n{printed}")
    consumed_bytes = float(found["mb"]) * 1024 * 1024
    seconds = int(found["ms"]) / 1000
    cpu = samples[-1].cpu_s - samples[0].cpu_s
    return {
        "broker": name,
        "records": int(found["records"]),
        "records_per_sec": round(int(found["records"]) / seconds, 1) if seconds else None,
        "mb_per_sec": round(float(found["mb"]) / seconds, 2) if seconds else None,
        "broker_cpu_s": round(cpu, 3),
        "broker_cpu_s_per_gb": round(cpu / (consumed_bytes / GB), 3),
        "rss_mib_start": round(samples[0].rss_kib / 1024, 1),
        "rss_mib_peak": round(max(s.rss_kib for s in samples) / 1024, 1),
        "rss_mib_end": round(samples[-1].rss_kib / 1024, 1),
    }


def median_of(rounds: list[dict[str, Any]], field: str) -> float:
    return float(statistics.median(r[field] for r in rounds if r[field] is not None))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perf.share_consumer_perf",
        description="Kafka 4.4.0's share-consumer perf test, three consumer threads in one "
        "share group, against nullbroker and Apache Kafka 4.4.0 side by side: records/s, "
        "broker CPU seconds per GB read, broker RSS over the reading.",
    )
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the topic")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record")
    parser.add_argument("--rounds", type=int, default=3, help="reads of the whole topic")
    parser.add_argument("--out", type=Path, help="append the JSON lines to this file")
    options = parser.parse_args(argv)
    rounds: dict[str, list[dict[str, Any]]] = {"nullbroker": [], "kafka": []}
    # A source topic's `records` are each partition's: the least that hold `--records` in all.
    per_partition = -(-options.records // PARTITIONS)
    source = f"{TOPIC}:partitions={PARTITIONS},records={per_partition},size={options.record_size}"
    with tempfile.TemporaryDirectory() as workdir:
        nullbroker = start("--source", source)
        kafka = KafkaBroker(Path(workdir) / "kafka", version=KAFKA_VERSION)
        try:
            kafka.start()
            fill_kafka(kafka.bootstrap, options.records, options.record_size)
            for _ in range(options.rounds):  # alternated, so that both see the same machine
                rounds["nullbroker"].append(
                    read_round("nullbroker", nullbroker.bootstrap, nullbroker.pid, options.records)
                )
                rounds["kafka"].append(
                    read_round("kafka", kafka.bootstrap, kafka.pid, options.records)
                )
        finally:
            nullbroker.stop()
            kafka.stop()
    lines = [json.dumps(r) for name in rounds for r in rounds[name]]
    fields = ("records_per_sec", "broker_cpu_s_per_gb", "rss_mib_peak")
    medians = {name: {f: median_of(rs, f) for f in fields} for name, rs in rounds.items()}
    summary = {
        "medians": medians,
        "ratio_nullbroker_to_kafka": {
            f: round(medians["nullbroker"][f] / medians["kafka"][f], 3)
            for f in fields
            if medians["kafka"][f]
        },
        "rounds": options.rounds,
        "records": options.records,
        "record_size": options.record_size,
        "date": time.strftime("%Y-%m-%d"),
    }
    lines.append(json.dumps(summary))
    print("\n".join(lines))
    if options.out is not None:
        with options.out.open("a") as out:
            out.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
