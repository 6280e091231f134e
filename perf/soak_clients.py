"""`perf.soak --connections N`: a broker holding N connections for minutes — idempotent
producers and consumers in a group (confluent-kafka), the rest idle connections that sent one
ApiVersions request — its RSS sampled throughout. At the end the producers' acknowledged
records are checked against the broker's count for their topic (exact, or the run fails), and
the broker's p99 request latency is read from its /metrics histogram.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from .proc_sampler import cpu_seconds, rss_kib

PRODUCED_TOPIC = "soak-clients"
GROUP = "soak-readers"
PRODUCER_RATE = 500
"""Records a second each producer sends: the load, not a flood."""
# ApiVersions v0 with correlation id 1 and client id "soak": what an idle connection sends.
_CLIENT_ID = b"soak"
_API_VERSIONS = struct.pack(">hhih", 18, 0, 1, len(_CLIENT_ID)) + _CLIENT_ID


def scrape(metrics_url: str) -> dict[str, Any]:
    """The broker's metric families, by name."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def p99_request_latency_us(families: dict[str, Any]) -> float:
    """The bound of the histogram bucket holding the 99th percentile of every API's requests
    (an upper bound, in µs)."""
    cumulative: dict[float, float] = {}
    for sample in families["nullbroker_request_latency_seconds"].samples:
        if sample.name.endswith("_bucket"):
            bound = float(sample.labels["le"])
            cumulative[bound] = cumulative.get(bound, 0.0) + sample.value
    total = cumulative.get(float("inf"), 0.0)
    for bound in sorted(cumulative):
        if total and cumulative[bound] >= 0.99 * total:
            return bound * 1e6
    return 0.0


def produced_records(families: dict[str, Any], topic: str) -> int:
    return int(
        sum(
            sample.value
            for sample in families["nullbroker_produced_records"].samples
            if sample.labels.get("topic") == topic and sample.name.endswith("_total")
        )
    )


def open_connections(families: dict[str, Any]) -> int:
    return int(families["nullbroker_connections"].samples[0].value)


def idle_connection(host: str, port: int) -> socket.socket:
    """A connection that sends one ApiVersions request, reads its answer, then sits."""
    sock = socket.create_connection((host, port), timeout=30)
    sock.sendall(struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS)
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    sock.recv(size, socket.MSG_WAITALL)
    return sock


def soak_connections(
    broker_pid: int,
    bootstrap: str,
    metrics_url: str,
    *,
    minutes: float,
    connections: int,
    producers: int,
    consumers: int,
    sample_seconds: float,
    source_topic: str,
) -> tuple[dict[str, Any], list[tuple[float, int]]]:
    """Run the load; the figures and the RSS samples. Raises if a client failed or the
    broker's count differs from what the producers were acknowledged."""
    from confluent_kafka import Consumer, Producer  # perf's client, imported when used

    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + minutes * 60
    acked = [0] * producers
    consumed = [0] * consumers
    errors: list[BaseException] = []

    def produce(index: int) -> None:
        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                errors.append(RuntimeError(f"producer {index}: {error}"))
            else:
                acked[index] += 1

        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                             "linger.ms": 5})  # fmt: skip
        interval = 1.0 / PRODUCER_RATE
        next_send = time.monotonic()
        while time.monotonic() < deadline and not errors:
            producer.produce(PRODUCED_TOPIC, value=b"p" * 100, on_delivery=delivered)
            producer.poll(0)
            next_send += interval
            pause = next_send - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        if producer.flush(60):
            errors.append(RuntimeError(f"producer {index}: records left unsent"))

    def consume(index: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                             "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.subscribe([source_topic])
        while time.monotonic() < deadline and not errors:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    consumed[index] += 1
        consumer.close()

    def guarded(work: Callable[[int], None], index: int) -> threading.Thread:
        def run() -> None:
            try:
                work(index)
            except BaseException as error:  # reported after the run, which must stop cleanly
                errors.append(error)

        return threading.Thread(target=run, daemon=True)

    clients = [guarded(produce, i) for i in range(producers)]
    clients += [guarded(consume, i) for i in range(consumers)]
    idle: list[socket.socket] = []
    samples: list[tuple[float, int]] = []
    started = time.monotonic()
    cpu_start = cpu_seconds(broker_pid)
    try:
        for client in clients:
            client.start()
        time.sleep(2)  # the clients open their connections: the rest are idle ones
        clients_open = open_connections(scrape(metrics_url))
        for _ in range(max(0, connections - clients_open)):
            idle.append(idle_connection(host, int(port)))
        peak_connections = open_connections(scrape(metrics_url))
        while True:  # at least one sample, however short the run
            samples.append((round(time.monotonic() - started, 2), rss_kib(broker_pid)))
            if time.monotonic() >= deadline or errors:
                break
            time.sleep(sample_seconds)
        for client in clients:
            client.join(120)
        cpu = cpu_seconds(broker_pid) - cpu_start
        families = scrape(metrics_url)
    finally:
        for sock in idle:
            sock.close()
    if errors:
        raise errors[0]
    counted = produced_records(families, PRODUCED_TOPIC)
    if counted != sum(acked):
        raise RuntimeError(
            f"the broker counted {counted} records; producers had {sum(acked)} acked"
        )
    result = {
        "connections": peak_connections,
        "idle_connections": len(idle),
        "producers": producers,
        "consumers": consumers,
        "records_acked": sum(acked),
        "records_counted": counted,
        "records_consumed": sum(consumed),
        "p99_request_latency_us": round(p99_request_latency_us(families), 1),
        "broker_cpu_seconds": round(cpu, 2),
    }
    return result, samples
