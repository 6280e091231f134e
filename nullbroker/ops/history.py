"""The last ten minutes of the accounts, a sample a second, for the status page's charts
(`GET /history` on the --metrics listener): a page opened in the middle of a run draws the
minutes before it too, not only what it polled itself.

A sample is a handful of numbers over the second before it: records produced and fetched
per second, the p99 of the broker's own time per request, held requests per second, and per
client instance still pushing (KIP-714) the records per second and the record queue time it
pushed. The ring keeps `capacity` samples and each at most MAX_CLIENTS clients: bounded
memory however long the broker runs and however many clients push.

Sans-IO: `History.sample` reads the accounts it is given; the broker's operator services
(nullbroker.workers.operator_services) call it once a second, off the request path, only
when --metrics is on."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..stats import BrokerStats, percentile_ns

if TYPE_CHECKING:
    from ..stats import ClientSnapshot

INTERVAL_SECONDS = 1.0
CAPACITY = 600
"""Ten minutes of samples a second apart."""
MAX_CLIENTS = 16
"""Client instances a sample keeps (those that pushed last): as many lines as a chart can
tell apart."""

SENT_RATE = "org.apache.kafka.producer.record.send.rate"
CONSUMED_RATE = "org.apache.kafka.consumer.fetch.manager.records.consumed.rate"
QUEUE_TIME = "org.apache.kafka.producer.record.queue.time.avg"
"""What the Java clients push as their records per second and a record's wait in the
producer's buffer (ms); librdkafka pushes the queue time but no rate."""


class ClientSample(NamedTuple):
    """One pushing client instance in a sample: what it last pushed (None: not pushed)."""

    instance_id: str
    client_id: str
    records_per_second: float | None
    queue_time_ms: float | None


class Sample(NamedTuple):
    """The accounts over the interval that ends at `uptime_seconds` (the broker's uptime,
    as /accounts gives it)."""

    uptime_seconds: float
    seconds: float
    """The interval's length: a rate times it is the count it grew by."""
    produced_records_per_second: float
    fetched_records_per_second: float
    p99_request_latency_ms: float | None
    """None when no request was answered in the interval."""
    held_requests_per_second: float
    clients: tuple[ClientSample, ...]


@dataclass(frozen=True, slots=True)
class _Counts:
    """What a sample is the change in."""

    uptime_seconds: float
    counts_since: float
    produced: int
    fetched: int
    latency: list[int]
    held: list[int]

    @classmethod
    def of(cls, stats: BrokerStats) -> _Counts:
        return cls(
            stats.uptime_seconds,
            stats.counts_since,
            stats.totals().records,
            stats.fetched_totals()[0],
            stats.latency_counts(),
            stats.held_counts(),
        )

    def zeroed(self) -> _Counts:
        """The counts just after a reset, at this one's time."""
        return _Counts(
            self.uptime_seconds,
            self.counts_since,
            0,
            0,
            [0] * len(self.latency),
            [0] * len(self.held),
        )


class History:
    """The last `capacity` samples, oldest first."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.samples: deque[Sample] = deque(maxlen=capacity)
        self._last: _Counts | None = None
        self._lines: dict[str, tuple[int, ClientSample]] = {}
        """Each pushing instance's line as last sampled, with its pushes then: read again
        from its metrics only once it pushed again (a second's sample would otherwise go
        over every series of every instance)."""

    def sample(self, stats: BrokerStats) -> Sample | None:
        """Add the sample of the interval since the last call (None for the first call,
        which only starts the interval, or one at the same uptime)."""
        counts = _Counts.of(stats)
        last, self._last = self._last, counts
        if last is None:
            return None
        if counts.counts_since != last.counts_since:
            # Reset in between (POST /accounts/reset): the counts start again from zero.
            last = last.zeroed()
        seconds = counts.uptime_seconds - last.uptime_seconds
        if seconds <= 0:
            return None
        latency = _since(counts.latency, last.latency)
        held = _since(counts.held, last.held)
        sample = Sample(
            round(counts.uptime_seconds, 3),
            seconds,
            (counts.produced - last.produced) / seconds,
            (counts.fetched - last.fetched) / seconds,
            percentile_ns(latency, 0.99) / 1e6 if sum(latency) else None,
            sum(held) / seconds,
            self._clients(stats.pushed_clients),
        )
        self.samples.append(sample)
        return sample

    def as_json(self, after: float | None = None) -> dict[str, Any]:
        """The samples (those after uptime `after`, when given) as JSON-ready values."""
        return {
            "interval_seconds": INTERVAL_SECONDS,
            "capacity": self.samples.maxlen,
            "samples": [
                _sample_json(sample)
                for sample in self.samples
                if after is None or sample.uptime_seconds > after
            ],
        }

    def _clients(self, pushed: Iterable[ClientSnapshot]) -> tuple[ClientSample, ...]:
        """The instances still pushing that pushed last, at most MAX_CLIENTS, in the order
        they first pushed (so that a chart's lines keep their colours)."""
        pushing = sorted(
            (client for client in pushed if not client.ended),
            key=lambda client: client.last_push_ms,
            reverse=True,
        )[:MAX_CLIENTS]
        pushing.sort(key=lambda client: (client.first_push_ms, client.instance_id))
        lines = {}
        for client in pushing:
            line = self._lines.get(client.instance_id)
            if line is None or line[0] != client.pushes:
                rate = client.metric(SENT_RATE)
                if rate is None:
                    rate = client.metric(CONSUMED_RATE)
                sample = ClientSample(
                    client.instance_id, client.client_id, rate, client.metric(QUEUE_TIME)
                )
                line = (client.pushes, sample)
            lines[client.instance_id] = line
        self._lines = lines
        return tuple(lines[client.instance_id][1] for client in pushing)


def _since(now: list[int], before: list[int]) -> list[int]:
    return [current - previous for current, previous in zip(now, before, strict=True)]


def _sample_json(sample: Sample) -> dict[str, Any]:
    return {
        **sample._asdict(),
        "clients": [client._asdict() for client in sample.clients],
    }
