"""What clients pushed (KIP-714), as Prometheus series: one family per pushed metric, named
`nullbroker_client_` and the metric's KIP-714 name without `org.apache.kafka.`, dots made
underscores (`org.apache.kafka.producer.record.send.total` is
`nullbroker_client_producer_record_send_total`), its KIP-714 name kept in the `name` label;
labelled with the client's id, instance id and software (`name/version`), and the data
point's attributes. Gauges stay gauges; monotonic sums are counters (their pushed deltas
added up). Only the instances still pushing are shown: one that closed or fell silent leaves
/metrics (and stays in /accounts). Beside them, the broker's own counts by client id."""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..stats import SUM, BrokerStats

PREFIX = "nullbroker_client_"
KAFKA_PREFIX = "org.apache.kafka."
CLIENT_LABELS = ("client_id", "client_instance_id", "client_software", "name")
_NOT_A_NAME = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: str) -> str:
    """A pushed metric's Prometheus name."""
    return PREFIX + _NOT_A_NAME.sub("_", name.removeprefix(KAFKA_PREFIX))


def _label(key: str) -> str:
    label = _NOT_A_NAME.sub("_", key)
    if label[:1].isdigit() or label.startswith("__") or label in CLIENT_LABELS:
        label = "attribute_" + label
    return label


def client_families(stats: BrokerStats) -> Iterator[Metric]:
    yield from _broker_counts(stats)
    kinds: dict[str, str] = {}
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for client in stats.pushed_clients:
        if client.ended:
            continue
        software = f"{client.software_name}/{client.software_version}"
        for name, kind, attributes, value in client.series:
            family = prometheus_name(name)
            if kinds.setdefault(family, kind) != kind:
                continue  # two clients disagree on a metric's kind: the first one's is shown
            labels = {
                "client_id": client.client_id,
                "client_instance_id": client.instance_id,
                "client_software": software,
                "name": name,
                **{_label(key): text for key, text in attributes},
            }
            samples.setdefault(family, []).append((labels, value))
    for family, found in sorted(samples.items()):
        label_names = sorted({label for labels, _ in found for label in labels})
        metric: GaugeMetricFamily | CounterMetricFamily
        if kinds[family] == SUM:
            metric = CounterMetricFamily(family, "Pushed by clients (KIP-714).", labels=label_names)
        else:
            metric = GaugeMetricFamily(family, "Pushed by clients (KIP-714).", labels=label_names)
        for labels, value in found:
            metric.add_metric([labels.get(name, "") for name in label_names], value)
        yield metric


def _broker_counts(stats: BrokerStats) -> Iterator[Metric]:
    for name, documentation, counts in (
        (
            "nullbroker_client_produced_records",
            "Records appended by Produce, by the requests' client id.",
            stats.client_records,
        ),
        (
            "nullbroker_client_fetched_records",
            "Records served by Fetch, by the requests' client id.",
            stats.client_fetched,
        ),
    ):
        family = CounterMetricFamily(name, documentation, labels=["client_id"])
        for client_id, count in sorted(counts.items()):
            family.add_metric([client_id], count)
        yield family
    pushes = CounterMetricFamily(
        "nullbroker_client_pushes",
        "Pushes of client metrics accepted (KIP-714), by client instance still pushing.",
        labels=["client_id", "client_instance_id"],
    )
    for client in stats.pushed_clients:
        if not client.ended:
            pushes.add_metric([client.client_id, client.instance_id], client.pushes)
    yield pushes
    totals = stats.pushed_totals
    yield GaugeMetricFamily(
        "nullbroker_client_series",
        "Pushed series kept (at most --client-metrics-max-series).",
        value=totals["series_kept"],
    )
    dropped = CounterMetricFamily(
        "nullbroker_client_dropped",
        "What pushes brought that was not kept: series beyond --client-metrics-max-series, "
        "instances pushed out beyond --client-metrics-max-clients, payloads that could not "
        "be read (answered INVALID_RECORD).",
        labels=["what"],
    )
    for what, key in (
        ("series", "dropped_series"),
        ("clients", "dropped_clients"),
        ("payloads", "refused_payloads"),
    ):
        dropped.add_metric([what], totals[key])
    yield dropped
    yield CounterMetricFamily(
        "nullbroker_client_telemetry_cpu_seconds",
        "The broker's CPU time on the pushes: their handling (the decoder's import at the "
        "first included) and the snapshots of them for the accounts.",
        value=totals["cpu_ns"] / 1e9,
    )
