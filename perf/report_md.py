"""perf.compare's result as markdown: tables like Tansu's, per broker and target rate, the
ratios, and what limited each row."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perf.compare_summary import RATIO_LABELS, brokers_of

PEERS = {
    "mock": "librdkafka's mock cluster",
    "kfake": "franz-go's kfake",
    "kafka": "Apache Kafka",
    "floor": "the floor",
}

THROUGHPUT_COLUMNS = (("records/s", "records_per_sec", 0), ("MB/s", "mb_per_sec", 2))
COST_COLUMNS = (
    ("broker CPU s/GB", "broker_cpu_s_per_gb", 2),
    ("peak RSS MiB", "broker_peak_rss_mib", 1),
    ("broker cores", "broker_cores", 2),
    ("client cores", "client_cores", 2),
    ("client thread", "client_thread_cores", 2),
    ("other cores", "other_cores", 2),
    ("limit", "limit", "text"),
)
LATENCIES = (
    ("avg ms", "avg_latency_ms"),
    ("max ms", "max_latency_ms"),
    ("p50 ms", "p50_ms"),
    ("p95 ms", "p95_ms"),
    ("p99 ms", "p99_ms"),
    ("p99.9 ms", "p999_ms"),
)
PRODUCE_COLUMNS = (
    ("target rate", "target", "rate"),
    *THROUGHPUT_COLUMNS,
    *((title, key, 3) for title, key in LATENCIES),
    *COST_COLUMNS,
)
CONSUME_COLUMNS = (*THROUGHPUT_COLUMNS, *COST_COLUMNS)
# kafka-producer-perf-test prints its percentiles in whole milliseconds.
JAVA_PRODUCE_COLUMNS = (
    *THROUGHPUT_COLUMNS,
    *((title, key, 1 if key == "avg_latency_ms" else 0) for title, key in LATENCIES),
    *COST_COLUMNS,
)
LIMITS = (
    "limit: `target` the rate was reached; `broker` the broker used ≥ 0.9 of a core; "
    "`client` the load generator's Python thread did (it handles every record: client-bound); "
    "`cores` broker, client and other processes together kept ≥ 90 % of the machine's cores "
    "busy; `-` none of these: round trips set the rate (an idempotent producer keeps at most "
    "5 requests in flight, so the time each spends at the broker, or waiting for a core, "
    "caps it). "
    "`client cores` counts the load generator's threads together (librdkafka's and Python's), "
    "`client thread` its Python thread alone; `other cores` is what the rest of the machine "
    "used meanwhile (other work on a shared machine)."
)


def rate_label(target: float | None) -> str:
    if target is None:
        return "-"
    return "unlimited" if target <= 0 else f"{target:,.0f}"


def cell(value: Any, kind: int | str) -> str:
    if kind == "rate":
        return rate_label(value)
    if kind == "text":
        return str(value)
    if value is None:
        return "n/a"
    return f"{value:,.{kind}f}"


def table(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[tuple[str, str, int | str]]
) -> list[str]:
    lines = [
        "| broker | " + " | ".join(title for title, _, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for row in rows:
        cells = [cell(row[key], kind) for _, key, kind in columns]
        lines.append(f"| {row['broker']} | " + " | ".join(cells) + " |")
    return lines


def render(result: Mapping[str, Any], plots: Sequence[str]) -> str:
    """The whole page for perf/results/<name>.md."""
    machine, settings, rows = result["machine"], result["settings"], result["summary"]
    peers = [name for name in brokers_of(result) if name != "nullbroker"]
    produce = [row for row in rows if row["phase"] == "produce"]
    consume = [row for row in rows if row["phase"] == "consume"]
    lines = [
        f"# nullbroker vs {_listed(PEERS[peer] for peer in peers)}: {result['name']}",
        "",
        f"{machine['date']} on {machine['cpu_model']} ({machine['cores']} cores, "
        f"{machine['kernel']}), Python {machine['python']}, {machine['client']}, "
        f"nullbroker {machine['nullbroker_commit']}. Load average at the start "
        f"{machine['loadavg_start']}, at the end {machine['loadavg_end']}.",
        "",
        f"    {result['command']}",
        "",
        "The brokers run in processes of their own on 127.0.0.1; the load generator "
        "(`perf.producer_perf` / `perf.consumer_perf`, a process per step) shares the "
        f"machine's {machine['cores']} cores with them. Each number is the median of "
        f"{settings['repeats']} run(s); the brokers take turns to go first at each step."
        + _warmup(settings)
        + _versions(result),
        "",
        "## Producing",
        "",
        f"{settings['record_size']} B records, acks=all, idempotent, batch.size=16384, "
        f"linger.ms=5 (kafka-producer-perf-test's Java defaults), up to "
        f"{settings['records_per_step']:,} records a step (at most "
        f"{settings['max_step_seconds']:g} s of records at the target rate), into one topic "
        f"of {settings['partitions']} partitions per broker. Throughput and latency are the "
        "steady state after the first 10 % of each step's records (librdkafka queues records "
        "while it connects, so the first ones wait out its start-up; the JSON also has the "
        "whole run's). Latency is produce() to delivery report. CPU s/GB and RSS cover the "
        "whole step.",
        "",
        *table(produce, PRODUCE_COLUMNS),
        "",
        *_one_batch_section(result),
        *_consume_section(result, consume),
        *_java_section(result),
        *_ratio_section(result["ratios"]),
        "## Reading the numbers",
        "",
        f"- {LIMITS}",
        f"- Client-bound rows: {client_bound(rows)}.",
        "- MB is 2^20 bytes; CPU s/GB is the broker's user+system CPU time (/proc/PID/stat, "
        "10 ms ticks) over the step, per 10^9 bytes of record keys and values sent or read; "
        "peak RSS is the highest of the samples taken every "
        f"{settings['sample_interval']:g} s during the step.",
        f"- Idle RSS after start: {_idle(result)}.",
        "- The mock stores what it is sent (about 5 MiB per partition), so its RSS grows with "
        "topics; kfake keeps every record in memory; Kafka writes every record to its log "
        "files (the page cache, which the kernel writes back: no process's CPU); nullbroker "
        "stores nothing.",
        *_floor_note(result),
        "",
        *[f"![{plot}]({plot})" for plot in plots],
        "",
    ]
    return "\n".join(lines)


def _consume_section(result: Mapping[str, Any], consume: list[Mapping[str, Any]]) -> list[str]:
    """The consumers' rows, when the run had them."""
    if not consume:
        return []
    settings = result["settings"]
    return [
        "## Consuming",
        "",
        f"`perf.consumer_perf --assign` reading {settings['consume_topics']} topics of "
        f"{settings['partitions']} partitions from the start, "
        f"{_consumed(result):,} records of {settings['record_size']} B from each broker "
        "(the mock keeps about the last 5 MiB of each partition, so that is all it holds; "
        "the others serve the same number from offset 0).",
        "",
        *table(consume, CONSUME_COLUMNS),
        "",
    ]


def _floor_note(result: Mapping[str, Any]) -> list[str]:
    floor = result["brokers"].get("floor")
    if floor is None:
        return []
    return [
        "- The floor (perf/floor/floor.c, C, one epoll loop) answers ApiVersions, Metadata "
        "and InitProducerId with answers recorded from librdkafka's mock and every Produce "
        "with a pre-encoded answer, and nothing else: its CPU per GB is what reading the "
        "requests and sending the answers costs, the least a broker can spend (nullbroker / "
        "floor: how far above it a broker is). It produces into its one topic, "
        f"`{floor['topic']}`, takes no part in the other steps, and counts no records: its "
        "steps count the producer's acknowledgements.",
    ]


def _warmup(settings: Mapping[str, Any]) -> str:
    records = settings.get("broker_warmup_records", 0)
    if not records:
        return ""
    return (
        f" Before the first step each broker was sent {records:,} records, unthrottled and "
        "not measured (a JVM, Kafka's, compiles its hot paths in its first seconds of "
        "traffic)."
    )


def _listed(names: Iterable[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    *others, last = names
    return f"{', '.join(others)} and {last}" if others else last


def _versions(result: Mapping[str, Any]) -> str:
    text = ""
    if kfake := result["brokers"].get("kfake"):
        text += f" kfake is version {kfake['version']}."
    if kafka := result["brokers"].get("kafka"):
        text += (
            f" Kafka is Apache Kafka {kafka['version']}, one KRaft node (broker and "
            f"controller in one JVM, `java {kafka['heap']}`, started directly: its pid is the "
            "whole broker), its log folder on local disk, 4 partitions per auto-created "
            "topic, Kafka's defaults otherwise (no fsync per message, every record kept)."
        )
    return text


def _one_batch_section(result: Mapping[str, Any]) -> list[str]:
    """The rows with one batch a request, when the run had them."""
    rows = [row for row in result["summary"] if row["phase"] == "one-batch"]
    if not rows:
        return []
    records = result["settings"].get("one_batch_records", 0)
    return [
        "### One batch a request",
        "",
        f"The same producer, unthrottled, {records:,} records a step, with "
        "`sticky.partitioning.linger.ms=900000`: librdkafka's sticky partitioner keeps every "
        "record of a step on one partition, so every Produce request carries one batch of "
        "about 15 records. The steady state leaves out the first 10 % or what the producer's "
        "queue holds (32 MiB), whichever is more, at most half a step: librdkafka spreads the "
        "records it queued before it knew the topic's partitions over all of them (each step "
        "checks that no more records than its warm-up reached the other partitions).",
        "",
        *table(rows, PRODUCE_COLUMNS),
        "",
        *_spread_steps(result),
    ]


def _spread_steps(result: Mapping[str, Any]) -> list[str]:
    """The one-batch steps whose requests were not all of one batch, if any."""
    spread = [
        f"- {step['broker']}, run {step['repeat'] + 1}: {step['spread_records']:,} of "
        f"{step['records']:,} records reached other partitions"
        for step in result["steps"]
        if step["phase"] == "one-batch" and not step.get("one_batch_ok", True)
    ]
    if not spread:
        return []
    return [
        "**Not one batch a request throughout** (more records on other partitions than the "
        "step's warm-up; a step this short is mostly queued before the producer knows the "
        "partitions):",
        "",
        *spread,
        "",
    ]


def _java_section(result: Mapping[str, Any]) -> list[str]:
    """The rows of Kafka's own perf tools, when the run had them."""
    rows = result["summary"]
    produce = [row for row in rows if row["phase"] == "java-produce"]
    consume = [row for row in rows if row["phase"] == "java-consume"]
    if not produce and not consume:
        return []
    settings = result["settings"]
    records = settings.get("java_records", 0)
    return [
        "## Kafka's Java perf tools",
        "",
        f"Apache Kafka's own `kafka-producer-perf-test` ({records:,} records of "
        f"{settings['record_size']} B a run, unthrottled, the same producer properties) and "
        f"`kafka-consumer-perf-test` (reading {records:,} records of that topic from the "
        "start, in a group of its own), against the brokers the Java 4 client works with "
        "(the mock fails it: `Topic ... not present in metadata`). Their rates cover the "
        "whole run, connecting and JIT included (the Java tools have no warm-up option); "
        "the consumer's leave out joining its group (`fetch.nMsg.sec`). `client cores` is "
        "the JVM's CPU over its whole process, start-up included; `client thread` does not "
        "apply.",
        "",
        "### kafka-producer-perf-test",
        "",
        *table(produce, JAVA_PRODUCE_COLUMNS),
        "",
        "### kafka-consumer-perf-test",
        "",
        *table(consume, CONSUME_COLUMNS),
        "",
    ]


def _ratio_section(by_peer: Mapping[str, Mapping[str, float | None]]) -> list[str]:
    lines: list[str] = []
    for peer, values in by_peer.items():
        lines += [f"## nullbroker / {peer}", ""]
        lines += [
            f"- {RATIO_LABELS[key]}: " + ("n/a" if value is None else f"**{value:.2f}x**")
            for key, value in values.items()
        ]
        lines.append("")
    return lines


def _idle(result: Mapping[str, Any]) -> str:
    parts = []
    for name in brokers_of(result):
        info = result["brokers"][name]
        part = f"{name} {info['idle_rss_kib'] / 1024:.1f} MiB"
        if "host_rss_kib" in info:
            part += (
                " (of which the Python host with confluent-kafka imported, before the mock "
                f"exists: {info['host_rss_kib'] / 1024:.1f} MiB)"
            )
        parts.append(part)
    return ", ".join(parts)


def _consumed(result: Mapping[str, Any]) -> int:
    steps = [step for step in result["steps"] if step["phase"] == "consume"]
    return steps[0]["records"] if steps else 0


def client_bound(rows: Iterable[Mapping[str, Any]]) -> str:
    """The summary rows whose limit was the load generator, named for a sentence."""
    names = [
        f"{row['broker']} {row['phase']} {rate_label(row['target'])}".replace(" -", "")
        for row in rows
        if row["limit"] == "client"
    ]
    return ", ".join(names) if names else "none"
