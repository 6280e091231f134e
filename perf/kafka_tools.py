"""What the producer and consumer perf twins share: Kafka's ways with client properties, on
confluent-kafka (librdkafka).

Kafka's tools take Java client properties (`--command-property k=v`, a properties file).
librdkafka understands most of them under the same name (bootstrap.servers, acks, linger.ms,
batch.size, compression.type, enable.idempotence, delivery.timeout.ms, fetch.min.bytes,
max.partition.fetch.bytes, ...). Those it names differently are renamed here; those that
only mean something to the Java client are dropped with a note on stderr; everything else is
passed as is, so librdkafka's own properties work too and a misspelt one fails loudly.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

Properties = dict[str, str]

RENAMED: dict[str, str] = {
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "max.request.size": "message.max.bytes",
    "compression.gzip.level": "compression.level",
    "compression.lz4.level": "compression.level",
    "compression.zstd.level": "compression.level",
}
"""Java client property → librdkafka property with the same meaning and unit."""

JAVA_ONLY: frozenset[str] = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "partitioner.class",
        "partitioner.ignore.keys",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "metadata.max.idle.ms",
        "auto.include.jmx.reporter",
        "default.api.timeout.ms",
    }
)
"""Properties of the Java client that librdkafka has no counterpart for: dropped."""

ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
"""Java assignor class names → librdkafka's partition.assignment.strategy names."""


class ToolError(Exception):
    """A bad flag or property: printed as `<tool>: error: ...`, exit code 1."""


def wrapped(text: str) -> str:
    """Help text wrapped for a terminal (argparse's raw formatter keeps our line breaks)."""
    return textwrap.fill(text, width=88, break_on_hyphens=False, break_long_words=False)


MAPPING_HELP = (
    "Java property names librdkafka spells differently are renamed: buffer.memory -> "
    "queue.buffering.max.kbytes (KiB), max.request.size -> message.max.bytes, "
    "receive.buffer.bytes / send.buffer.bytes -> socket.receive.buffer.bytes / "
    "socket.send.buffer.bytes (-1 -> 0, the OS default), compression.<codec>.level -> "
    "compression.level, Java assignor class names -> range / roundrobin / cooperative-sticky. "
    "Java-only ones (serializers, partitioner.class, interceptor.classes, metric.reporters, "
    "metadata.max.idle.ms, ...) are dropped with a note; all others pass through to librdkafka."
)


def parse_key_values(pairs: Iterable[str]) -> Properties:
    """`k=v` arguments into properties; a value may itself contain '='."""
    props: Properties = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid property: {pair} (expected NAME=VALUE)")
        props[key.strip()] = value.strip()
    return props


def int_property(props: dict[str, str], key: str, default: int) -> int:
    """Take an integer property out of `props` (the tool, not librdkafka, acts on it)."""
    value = props.pop(key, None)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ToolError(f"{key} must be an integer, not {value!r}") from None


def load_properties(path: Path) -> Properties:
    """A Java properties file: `key=value` or `key: value` lines, `#`/`!` comments.

    Line continuations and unicode escapes are not supported (client configs rarely use them).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ToolError(f"cannot read properties file {path}: {error.strerror}") from None
    props: Properties = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ToolError(f"{path}:{number}: expected key=value, got {raw!r}")
        props[line[:cut].strip()] = line[cut + 1 :].strip()
    return props


def to_librdkafka(props: Mapping[str, str], warn: TextIO = sys.stderr) -> dict[str, str]:
    """Rename Java properties librdkafka calls otherwise; drop the Java-only ones."""
    config: dict[str, str] = {}
    for key, value in props.items():
        if key in JAVA_ONLY:
            print(f"note: ignoring {key}: the Java client's only, librdkafka has none", file=warn)
            continue
        if key == "buffer.memory":
            # Java counts bytes, librdkafka KiB.
            config["queue.buffering.max.kbytes"] = str(max(1, math.ceil(int(value) / 1024)))
        elif key in ("receive.buffer.bytes", "send.buffer.bytes") and value.strip() == "-1":
            config[RENAMED[key]] = "0"  # both mean "the OS default"
        elif key == "partition.assignment.strategy":
            config[key] = ",".join(
                ASSIGNORS.get(name.strip(), name.strip()) for name in value.split(",")
            )
        else:
            config[RENAMED.get(key, key)] = value
    return config


def redacted(config: Mapping[str, str]) -> dict[str, str]:
    """The config without secrets, for JSON results."""
    secret = ("password", "secret", "jaas", "token", "key.pem", "keystore")
    return {
        key: ("<redacted>" if any(word in key for word in secret) else value)
        for key, value in sorted(config.items())
    }


def java_double(value: float, decimals: int) -> str:
    """Format like Java's %.Nf, which prints Infinity and NaN by name."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.{decimals}f}"


def divide(numerator: float, denominator: float) -> float:
    """Java's double division: x/0 is ±Infinity (0/0 NaN) rather than an exception."""
    if denominator:
        return numerator / denominator
    if numerator == 0 or math.isnan(numerator):
        return math.nan
    return math.copysign(math.inf, numerator)


# -- --print-metrics ---------------------------------------------------------------------------


def flatten_statistics(statistics_json: str) -> dict[str, float | int]:
    """librdkafka's statistics JSON as `group:name:{tags}` metrics, as Kafka's tools name them.

    Groups: `client` (totals), `broker`, `topic` and `partition`; nested windows such as
    `rtt` become `rtt-avg`, `rtt-p99`, ...
    """
    stats = json.loads(statistics_json)
    metrics: dict[str, float | int] = {}
    client_tag = f"client-id={stats.get('client_id', '')}"
    _add_numbers(metrics, "client", client_tag, stats, skip=("brokers", "topics", "cgrp", "eos"))
    for broker in stats.get("brokers", {}).values():
        tag = f"{client_tag}, node={broker.get('name', '')}"
        _add_numbers(metrics, "broker", tag, broker, skip=("toppars", "req"))
        for request, count in broker.get("req", {}).items():
            if count:
                metrics[f"broker:req-{request}:{{{tag}}}"] = count
    for topic in stats.get("topics", {}).values():
        tag = f"{client_tag}, topic={topic.get('topic', '')}"
        _add_numbers(metrics, "topic", tag, topic, skip=("partitions",))
        for partition in topic.get("partitions", {}).values():
            if partition.get("partition", -1) < 0:
                continue  # librdkafka's internal "unassigned" partition
            part_tag = f"{tag}, partition={partition['partition']}"
            _add_numbers(metrics, "partition", part_tag, partition, skip=())
    for group in ("cgrp", "eos"):
        if isinstance(stats.get(group), dict):
            _add_numbers(metrics, group, client_tag, stats[group], skip=())
    return metrics


def _add_numbers(
    metrics: dict[str, float | int],
    group: str,
    tag: str,
    values: Mapping[str, Any],
    skip: Sequence[str],
    prefix: str = "",
) -> None:
    for key, value in values.items():
        if key in skip:
            continue
        name = f"{prefix}{key}".replace("_", "-")
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            metrics[f"{group}:{name}:{{{tag}}}"] = value
        elif isinstance(value, dict) and not prefix:
            _add_numbers(metrics, group, tag, value, skip=(), prefix=f"{key}-")


def print_metrics(metrics: Mapping[str, float | int], out: TextIO = sys.stdout) -> None:
    """The table Kafka's ToolsUtils.printMetrics prints: sorted names, `name : value`."""
    if not metrics:
        return
    width = max(len(name) for name in metrics)
    print(f"\n{'Metric Name':<{width}}   Value", file=out)
    for name in sorted(metrics):
        value = metrics[name]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{name:<{width}} : {shown}", file=out)


def client_versions() -> str:
    """Which client measured: recorded with every result."""
    import confluent_kafka

    library = confluent_kafka.libversion()[0]
    return f"confluent-kafka {confluent_kafka.__version__}, librdkafka {library}"


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
