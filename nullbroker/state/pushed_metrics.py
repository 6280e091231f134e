"""What clients push (KIP-714): each client instance's metrics as it last pushed them,
bounded, for the accounts, /metrics, the status page and the summary.

Kafka hands a push to a plugin its operator writes; nullbroker keeps it here. Clients push
every metric of theirs that the subscription asks for, once an interval: gauges (the
latest value is kept), sums (Kafka asks for delta temporality, so a push carries what a
sum grew by since the last one, and the total is kept by adding them up; a cumulative sum's
latest value is its total) and histograms and summaries (their count and sum, as two
series). A series is a metric's name with its data point's attributes (a producer's
per-topic or per-node metrics are several series of one name).

Bounded twice over: at most `max_clients` instances and `max_series` series over all of
them. A new instance beyond the first pushes out an ended one (terminated, closed, or silent
past its expiry), else the one that pushed least recently; a series beyond the second is not
kept, and counted. An ended instance leaves /metrics at once and stays in the accounts
until it is pushed out, so that a run's summary still shows the clients that closed.

Sans-IO: the handler (nullbroker.handlers.telemetry.push_telemetry) decompresses and decodes
the payload into `Point`s; time is given in milliseconds."""

from __future__ import annotations

import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from ..stats import ClientSnapshot
from .client_metrics import MIN_EXPIRY_MS

DEFAULT_MAX_CLIENTS = 64
"""Client instances kept: a load test's producers and consumers, with room to spare."""
DEFAULT_MAX_SERIES = 16_384
"""Series kept over every instance: a Java producer pushes about 80 for itself and a few
per topic and node it sends to; at about 300 bytes a series, 5 MiB at most."""
MAX_RESOURCE_ATTRIBUTES = 32
"""A push's resource attributes kept (librdkafka sends four or five, Java none)."""
MAX_TEXT = 256
"""Characters kept of an attribute's key or value, and of a metric's name."""


Point = tuple[str, str, tuple[tuple[str, str], ...], float, bool]
"""One data point of a pushed metric, as the handler read it: (name, kind: GAUGE, SUM or
UP_DOWN_SUM, attributes, value, delta: a sum's point that says what it grew by since the
last push, not its total). A plain tuple: a push makes one per metric, a hundred or more,
on the request path, and a NamedTuple's constructor is a Python call, several tuples' cost."""


@dataclass(slots=True)
class Series:
    kind: str
    value: float


SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
"""A metric's name and its point's attributes."""


@dataclass(slots=True)
class PushedClient:
    """A client instance as its pushes describe it."""

    instance_id: str
    client_id: str
    software_name: str
    software_version: str
    address: str
    first_push_ms: int
    last_push_ms: int = 0
    pushes: int = 0
    payload_bytes: int = 0
    """Bytes pushed, as sent (compressed)."""
    interval_ms: int = 0
    ended: str = ""
    """Why the instance pushes no more: "terminated" (its closing push), "closed" (the
    connection its last push came on closed, and no closing push came: what it did after
    its last push was never pushed), "silent" (no push for its expiry); "" while it pushes."""
    connection: str = ""
    """The connection (its peer address) its last push came on."""
    resource: dict[str, str] = field(default_factory=dict)
    series: dict[SeriesKey, Series] = field(default_factory=dict)
    """In the order of their keys (name, then attributes), as the accounts list them: put
    back in order when a push brings a new series, which a client does in its first pushes
    (and when it meets a new topic or node), not in every push."""
    snapshot: ClientSnapshot | None = None
    """As the accounts last read it; None once it changed. The accounts are read every
    second for the status page's history (nullbroker.ops.history), and an instance pushes
    once an interval: one snapshot made per push, not per second."""

    def snapshotted(self) -> ClientSnapshot:
        if self.snapshot is None:
            self.snapshot = ClientSnapshot(
                self.instance_id,
                self.client_id,
                self.software_name,
                self.software_version,
                self.address,
                self.first_push_ms,
                self.last_push_ms,
                self.pushes,
                self.payload_bytes,
                self.interval_ms,
                self.ended,
                tuple(sorted(self.resource.items())),
                tuple(
                    (name, series.kind, attributes, series.value)
                    for (name, attributes), series in self.series.items()
                ),
            )
        return self.snapshot


class PushedMetrics:
    """The metrics every client instance pushed to this broker, bounded."""

    def __init__(
        self, max_clients: int = DEFAULT_MAX_CLIENTS, max_series: int = DEFAULT_MAX_SERIES
    ) -> None:
        self.max_clients = max_clients
        self.max_series = max_series
        self.clients: OrderedDict[str, PushedClient] = OrderedDict()
        """By instance id, the one that pushed least recently first."""
        self.series_kept = 0
        self.dropped_series = 0
        """Series of accepted pushes not kept: over `max_series`."""
        self.dropped_clients = 0
        """Instances pushed out to make room for a new one."""
        self.refused_payloads = 0
        """Pushes whose payload could not be read (corrupt, too large inflated, not OTLP)."""
        self._snapshots: tuple[ClientSnapshot, ...] | None = None
        """As `snapshots` last made them; None once an instance pushed, came, went or
        ended. The accounts are read every second (the status page's history): between
        pushes they are the same."""
        self.cpu_ns = 0
        """The broker's CPU time (its thread's) on the pushes: PushTelemetry's handling,
        the decoder's import at the first, and the snapshots made of them for the accounts.
        What the clients' view costs, shown beside it (perf/README.md, "Client telemetry")."""

    def record(
        self,
        instance_id: uuid.UUID,
        client: dict[str, str],
        interval_ms: int,
        resource: dict[str, str],
        points: list[Point],
        payload_bytes: int,
        terminating: bool,
        now_ms: int,
        connection: str = "",
    ) -> None:
        """An accepted push's points, into its instance's series; `connection` (the peer
        address it came from) is the one whose closing ends the instance (`closed`)."""
        key = str(instance_id)
        pushed = self.clients.get(key)
        if pushed is None:
            pushed = self._added(key, client, now_ms)
        else:
            self.clients.move_to_end(key)
        pushed.snapshot = self._snapshots = None
        pushed.pushes += 1
        pushed.payload_bytes += payload_bytes
        pushed.last_push_ms = now_ms
        pushed.interval_ms = interval_ms
        pushed.ended = "terminated" if terminating else ""
        pushed.connection = connection
        for attribute, text in list(resource.items())[:MAX_RESOURCE_ATTRIBUTES]:
            pushed.resource[attribute[:MAX_TEXT]] = text[:MAX_TEXT]
        series = pushed.series
        known = len(series)
        # One loop, no call a point: a push holds a hundred or more, on the request path.
        for name, kind, attributes, value, delta in points:
            series_key = (name[:MAX_TEXT], attributes)
            kept = series.get(series_key)
            if kept is None:
                if self.series_kept >= self.max_series:
                    self.dropped_series += 1
                    continue
                kept = series[series_key] = Series(kind, 0.0)
                self.series_kept += 1
            kept.value = kept.value + value if delta else value
            kept.kind = kind
        if len(series) != known:
            pushed.series = dict(sorted(series.items()))

    def closed(self, connection: str) -> None:
        """`connection` closed: the instances whose last push came on it and had not ended
        have now (at most `max_clients` looked at, whatever the connection sent). A Java
        producer that closes with requests in flight can drop its closing push (its sender
        sends it only when the connection has room for one more request, and stops once the
        last response is in): what it sent after its last push is never pushed, and its
        agreement row says so instead of waiting for it."""
        for pushed in self.clients.values():
            if not pushed.ended and pushed.connection == connection:
                pushed.ended = "closed"
                pushed.snapshot = self._snapshots = None

    def expire(self, now_ms: int) -> None:
        """Mark as ended the instances silent for longer than Kafka keeps an instance:
        max(60 s, 3 push intervals)."""
        for pushed in self.clients.values():
            if not pushed.ended and now_ms - pushed.last_push_ms >= max(
                MIN_EXPIRY_MS, 3 * pushed.interval_ms
            ):
                pushed.ended = "silent"
                pushed.snapshot = self._snapshots = None

    def totals(self) -> Counter[str]:
        return Counter(
            series_kept=self.series_kept,
            dropped_series=self.dropped_series,
            dropped_clients=self.dropped_clients,
            refused_payloads=self.refused_payloads,
            cpu_ns=self.cpu_ns,
        )

    def snapshots(self, now_ms: int) -> tuple[ClientSnapshot, ...]:
        started = time.thread_time_ns()
        self.expire(now_ms)
        snapshots = self._snapshots
        if snapshots is None:
            snapshots = self._snapshots = tuple(
                pushed.snapshotted()
                for pushed in sorted(self.clients.values(), key=lambda c: c.first_push_ms)
            )
        self.cpu_ns += time.thread_time_ns() - started
        return snapshots

    def _added(self, key: str, client: dict[str, str], now_ms: int) -> PushedClient:
        if len(self.clients) >= self.max_clients:
            self.expire(now_ms)
            ended = next((k for k, c in self.clients.items() if c.ended), None)
            self._forget(ended if ended is not None else next(iter(self.clients)))
        pushed = PushedClient(
            key,
            client.get("client_id", "")[:MAX_TEXT],
            client.get("client_software_name", "")[:MAX_TEXT],
            client.get("client_software_version", "")[:MAX_TEXT],
            client.get("client_source_address", "")[:MAX_TEXT],
            now_ms,
        )
        self.clients[key] = pushed
        return pushed

    def _forget(self, key: str) -> None:
        forgotten = self.clients.pop(key)
        self._snapshots = None
        self.series_kept -= len(forgotten.series)
        self.dropped_clients += 1
