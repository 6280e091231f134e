"""The broker's accounts: plain integers and fixed-bucket histograms.

Updated once per request (never per record) and read only when someone asks: the
Prometheus collector, the console reporter and the summary JSON all read these objects.
"""

from __future__ import annotations

import copy
import dataclasses
import resource
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter

GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")
"""A classic group's live states (nullbroker.state.groups.model.GroupState): the accounts
show each at zero from the start, before the first group request loads the group code."""

# Latency bucket upper bounds in nanoseconds: 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 per decade
# from 1 µs to 100 s, so that percentiles read from the buckets are within 25 %.
_MANTISSAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
LATENCY_BOUNDS_NS: tuple[int, ...] = (
    *(round(mantissa * 10**exponent) for exponent in range(3, 11) for mantissa in _MANTISSAS),
    10**11,
)

# The bounds exposed to Prometheus (1, 2.5, 5 per decade): a subset of the internal ones,
# so the cumulative counts at these bounds are exact.
PROMETHEUS_BOUNDS_NS: tuple[int, ...] = tuple(
    bound for bound in LATENCY_BOUNDS_NS if str(bound).rstrip("0") in ("1", "25", "5")
)


class LatencyHistogram:
    """Counts of observations per fixed bucket, plus their sum, in nanoseconds."""

    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        # One more bucket than bounds: the last counts what exceeds the largest bound.
        self.counts = [0] * (len(LATENCY_BOUNDS_NS) + 1)
        self.sum_ns = 0

    def observe(self, nanoseconds: int) -> None:
        self.counts[bisect_left(LATENCY_BOUNDS_NS, nanoseconds)] += 1
        self.sum_ns += nanoseconds

    def add(self, other: LatencyHistogram) -> None:
        for index, count in enumerate(other.counts):
            self.counts[index] += count
        self.sum_ns += other.sum_ns

    @property
    def count(self) -> int:
        return sum(self.counts)

    def snapshot(self) -> list[int]:
        return list(self.counts)

    def clear(self) -> None:
        """Back to no observations, in place: the C Produce lane holds this object."""
        self.counts[:] = [0] * len(self.counts)
        self.sum_ns = 0


def percentile_ns(counts: list[int], fraction: float) -> float:
    """The `fraction` quantile of bucket counts, interpolated within its bucket."""
    total = sum(counts)
    if total == 0:
        return 0.0
    rank = fraction * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            lower = LATENCY_BOUNDS_NS[index - 1] if index else 0
            upper = LATENCY_BOUNDS_NS[min(index, len(LATENCY_BOUNDS_NS) - 1)]
            return lower + (upper - lower) * (rank - seen) / count
        seen += count
    return float(LATENCY_BOUNDS_NS[-1])


@dataclass(slots=True)
class PartitionCounters:
    """What producers wrote to one partition: records, record-batch bytes, batches."""

    records: int = 0
    bytes: int = 0
    batches: int = 0
    retained_bytes: int = 0
    """Bytes of batches held for Fetch by --retain (a gauge, not a count)."""
    compaction_dropped: int = 0
    """Records a compacted partition's ring let go of that were still the latest of their
    key: its keys' latest values outgrew --retain (nullbroker.state.compaction)."""


@dataclass(slots=True)
class FetchCounters:
    """What consumers were served from one partition: records at or after each fetch
    offset, and record-batch bytes."""

    records: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member of a consumer group, as DescribeGroups names it."""

    member_id: str
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class StreamsSnapshot:
    """What only a streams group (KIP-1071) has, as it stood when the accounts were read."""

    topology_epoch: int
    """The epoch of the topology the group keeps (-1 until a member gave it one)."""
    epoch: int
    """The group epoch: moves with every change of its members or of the topics it reads."""
    assignment_epoch: int
    """The group epoch its target assignment was made at (behind `epoch`: Assigning)."""
    active_tasks: int
    standby_tasks: int
    warmup_tasks: int
    """Tasks assigned to its members, of each kind, summed over the members, as
    StreamsGroupDescribe gives them: a task a member is told to give up counts no more, and
    one it waits for (another member still holds it) not yet, so while tasks move the sums
    may be short of the topology's."""
    rebalances: int
    """Target assignments made for the group since it was created: the group's own count,
    which a reset of the accounts leaves, as it leaves the group."""


GAUGE = "gauge"
"""A pushed metric whose latest value is kept (the other kinds are sums)."""
SUM = "sum"
"""A monotonic sum: a counter (Java's `*.total`, `*.count`), whose pushes are deltas."""
UP_DOWN_SUM = "up_down_sum"


@dataclass(frozen=True, slots=True)
class ClientSnapshot:
    """A client instance and what it pushed (KIP-714, nullbroker.state.pushed_metrics), as
    the accounts carry it (plain values: a worker's accounts reach the supervisor
    pickled)."""

    instance_id: str
    client_id: str
    software_name: str
    software_version: str
    address: str
    first_push_ms: int
    last_push_ms: int
    pushes: int
    payload_bytes: int
    interval_ms: int
    ended: str
    resource: tuple[tuple[str, str], ...]
    series: tuple[tuple[str, str, tuple[tuple[str, str], ...], float], ...]
    """(name, kind, attributes, value) of each series, by name."""

    def metric(self, name: str) -> float | None:
        """One metric's value (`metric_value`), its series found by bisection (they are
        sorted by name): the status page's history reads two a second of each pushing
        client, and `metrics` reads them all."""
        series = self.series
        index = bisect_left(series, name, key=itemgetter(0))
        found = []
        while index < len(series) and series[index][0] == name:
            _, kind, attributes, value = series[index]
            found.append((kind, attributes, value))
            index += 1
        return metric_value(found)

    @property
    def metrics(self) -> dict[str, float]:
        """Each metric's value over its series (`metric_value`; per-topic and per-node
        values are in `series`)."""
        by_name: dict[str, list[tuple[str, tuple[tuple[str, str], ...], float]]] = {}
        for name, kind, attributes, value in self.series:
            by_name.setdefault(name, []).append((kind, attributes, value))
        values = {name: metric_value(found) for name, found in sorted(by_name.items())}
        return {name: value for name, value in values.items() if value is not None}


def metric_value(found: list[tuple[str, tuple[tuple[str, str], ...], float]]) -> float | None:
    """A metric's value from its series, each (kind, attributes, value): the series with
    no attributes where there is one (the Java consumer pushes records.consumed.total for
    the client and again per topic, under one name: adding them up would count each
    record twice); else a sum's total over its series, a gauge's only value."""
    if not found:
        return None
    whole = [value for _, attributes, value in found if not attributes]
    if whole:
        return whole[0]
    if found[0][0] == GAUGE:
        return found[0][2] if len(found) == 1 else None
    return sum(value for _, _, value in found)


def one_per_instance(clients: Iterable[ClientSnapshot]) -> tuple[ClientSnapshot, ...]:
    """The client instances of several processes' accounts, each once. A client pushes to
    one node and may move to another (the Java producer's closing push often goes to
    another): each process keeps the pushes it was sent, under the one instance id (Kafka
    keeps instances per broker too). Made one: pushes and bytes added, a monotonic sum's
    pushed deltas added up (the broker asks for deltas), the rest as its latest part has
    it (its gauges, whether it ended)."""
    parts: dict[str, list[ClientSnapshot]] = {}
    for client in clients:
        parts.setdefault(client.instance_id, []).append(client)
    merged = []
    for found in parts.values():
        if len(found) == 1:
            merged.append(found[0])
            continue
        found.sort(key=lambda part: part.last_push_ms)
        series: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, float]] = {}
        for part in found:
            for name, kind, attributes, value in part.series:
                before = series.get((name, attributes))
                if kind == SUM and before is not None and before[0] == kind:
                    value += before[1]
                series[(name, attributes)] = (kind, value)
        merged.append(
            dataclasses.replace(
                found[-1],
                first_push_ms=min(part.first_push_ms for part in found),
                pushes=sum(part.pushes for part in found),
                payload_bytes=sum(part.payload_bytes for part in found),
                series=tuple(
                    (name, kind, attributes, value)
                    for (name, attributes), (kind, value) in sorted(series.items())
                ),
            )
        )
    return tuple(sorted(merged, key=lambda client: client.first_push_ms))


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """One consumer group as it stood when the accounts were read: its protocol (`classic`,
    `consumer` for KIP-848's, or `streams` for KIP-1071's), state, members and committed
    offsets, and a streams group's own numbers."""

    protocol: str
    state: str
    members: tuple[GroupMember, ...]
    committed: dict[tuple[str, int], int]
    """The offset committed for each topic and partition."""
    streams: StreamsSnapshot | None = None
    """A streams group's topology and group epochs, tasks and rebalances; None for the other
    kinds."""


SHARE_COUNTS = (
    "acquired",
    "accepted",
    "released",
    "rejected",
    "renewed",
    "redelivered",
    "archived",
    "lock_timeouts",
)
"""ShareCounters' counts, in the order reports show them."""


@dataclass(slots=True)
class ShareCounters:
    """What one share group (KIP-932) did with one partition's records: each count is of
    records, never of requests or batches. Kept per (group, topic, partition)."""

    acquired: int = 0
    """Records handed to a member, locked for it (every delivery, the first and the next)."""
    accepted: int = 0
    """Acknowledged ACCEPT: processed; they are done."""
    released: int = 0
    """Acknowledged RELEASE: given back, to be delivered again (or archived at the limit)."""
    rejected: int = 0
    """Acknowledged REJECT: unprocessable; archived."""
    renewed: int = 0
    """Acknowledged RENEW (KIP-1222): their lock extended, still the member's."""
    redelivered: int = 0
    """Acquisitions of a record delivered before (delivery count above one)."""
    archived: int = 0
    """Records archived without ACCEPT: rejected, or released or timed out at the delivery
    limit (share.delivery.count.limit)."""
    lock_timeouts: int = 0
    """Records whose acquisition lock expired before they were acknowledged."""
    in_flight: int = 0
    """Records acquired now, not yet acknowledged (a gauge)."""
    start_offset: int = 0
    """The share-partition start offset (SPSO): every record below it is done (a gauge)."""

    def add(self, other: ShareCounters) -> None:
        for name in SHARE_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.in_flight += other.in_flight
        self.start_offset = max(self.start_offset, other.start_offset)

    def clear_counts(self) -> None:
        for name in SHARE_COUNTS:
            setattr(self, name, 0)


# BrokerStats' totals besides traffic and APIs, by attribute name: what `add` sums over a
# cluster's processes, and `reset_counts` zeroes (the counts) or keeps (the gauges).
COUNTERS = (
    "errors",
    "client_records",
    "client_fetched",
    "node_connections",
    "transactions",
    "transactional_records",
    "node_requests",
    "faults",
    "protocol_errors",
    "fetch_requests",
    "fetch_sessions",
    "authentications",
    "connections_refused",
)
"""Counters by key that only grow."""
COUNTS = ("connections_total", "rebalances", "connections_idle_closed", "read_budget_waits")
"""Numbers that only grow."""
GAUGE_COUNTERS = ("groups",)
"""Counters by key of what stands now (groups by state)."""
GAUGES = ("connections", "fetch_sessions_open", "read_budget_reserved")
"""Numbers of what stands now."""


@dataclass(slots=True)
class ApiStats:
    requests: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    """The broker's own time per request: decode, handle, encode; never a hold."""
    held: LatencyHistogram = field(default_factory=LatencyHistogram)
    """How long each held request waited (Fetch at the log end, JoinGroup, SyncGroup)."""


MAX_CLIENT_IDS = 10_000
"""Client ids whose records are counted apart (client_records, client_fetched): a client
making up a new id for each request must not grow the accounts without end."""
OTHER_CLIENT_IDS = "(other client ids)"
"""The key the records of the client ids beyond MAX_CLIENT_IDS are counted under."""


def count_client_records(counts: Counter[str], client_id: str | None, records: int) -> None:
    """Count `records` for `client_id` (None: ""), as the C Produce lane counts them too
    (produce_lane.h)."""
    key = client_id or ""
    if key not in counts and len(counts) >= MAX_CLIENT_IDS:
        key = OTHER_CLIENT_IDS
    counts[key] += records


class BrokerStats:
    """Every count the broker keeps."""

    def __init__(self) -> None:
        self.started_at = time.time()
        self._started_monotonic = time.monotonic()
        self.counts_since = self.started_at
        """When the counts began: the start, or the last `reset_counts` (time.time())."""
        self.produced: dict[tuple[str, int], PartitionCounters] = {}
        self.fetched: dict[tuple[str, int], FetchCounters] = {}
        self.apis: dict[str, ApiStats] = {}
        self.errors: Counter[str] = Counter()
        self.connections = 0
        self.connections_total = 0
        self.node_connections: Counter[int] = Counter()
        self.transactions: Counter[str] = Counter()
        """Transactions ended, by outcome: committed, aborted."""
        self.transactional_records: Counter[str] = Counter()
        """Records written in transactions, by their transaction's outcome."""
        """Connections accepted, by the node of the cluster they reached."""
        self.node_requests: Counter[int] = Counter()
        """Requests read, by the node of the cluster they were sent to."""
        self.faults: Counter[str] = Counter()
        """Faults applied (nullbroker.cluster.faults), by kind."""
        self.protocol_errors: Counter[str] = Counter()
        """Connections closed for a broken request, by reason (codec error class)."""
        self.groups: Counter[str] = Counter(dict.fromkeys(GROUP_STATES, 0))
        """Consumer groups by state (GROUP_STATES)."""
        self.rebalances = 0
        """Join phases completed with members: each starts a new group generation."""
        self.fetch_requests: Counter[str] = Counter()
        """Fetch requests by what their session made of them: sessionless, full (opening a
        session), incremental (KIP-227)."""
        self.fetch_sessions: Counter[str] = Counter()
        """Fetch sessions opened, closed (by their client) and evicted (for a new one)."""
        self.fetch_sessions_open = 0
        """Fetch sessions kept now, over every node (a gauge)."""
        self.authentications: Counter[tuple[str, str]] = Counter()
        """SASL authentications by (mechanism, result: succeeded or failed)."""
        self.connections_refused: Counter[str] = Counter()
        """Connections closed on arrival for a limit (--max-connections-per-ip), by limit."""
        self.connections_idle_closed = 0
        """Connections closed for reading nothing for --idle-timeout-ms."""
        self.read_budget_reserved = 0
        """Bytes large requests being read hold of --max-buffered-bytes (a gauge)."""
        self.read_budget_waits = 0
        """Times a connection stopped reading for want of room in that budget."""
        self.share: dict[tuple[str, str, int], ShareCounters] = {}
        """What each share group (KIP-932) did with each partition's records, by (group,
        topic, partition); made by the group's first acquisition there."""
        self.group_snapshots: dict[str, GroupSnapshot] = {}
        """Each consumer group's members and committed offsets, by group id, and
        `log_end_offsets` each partition's log end: read from the broker's state when its
        accounts are read (Broker.current_accounts), for the groups' lag (`group_lags`)."""
        self.log_end_offsets: dict[tuple[str, int], int] = {}
        self.client_records: Counter[str] = Counter()
        """Records appended by Produce, by the requests' client id."""
        self.client_fetched: Counter[str] = Counter()
        """Records Fetch served, by the requests' client id."""
        self.pushed_clients: tuple[ClientSnapshot, ...] = ()
        """What client instances pushed (KIP-714), read from the broker's state when its
        accounts are read (Broker.current_accounts), as `group_snapshots`."""
        self.pushed_totals: Counter[str] = Counter()
        """Of those pushes: series kept, and series, instances and payloads dropped
        (nullbroker.state.pushed_metrics), read likewise."""
        self.other_processes_rss = 0
        self.other_processes_peak_rss = 0
        """RSS and peak RSS, in bytes, of the worker processes whose accounts were added
        (`--processes`), so that reports give the whole cluster's memory."""

    def partition_counters(self, topic: str, partition: int) -> PartitionCounters:
        """The counters of a partition, created on first use and kept for the broker's life."""
        key = (topic, partition)
        counters = self.produced.get(key)
        if counters is None:
            counters = self.produced[key] = PartitionCounters()
        return counters

    def share_counters(self, group: str, topic: str, partition: int) -> ShareCounters:
        key = (group, topic, partition)
        counters = self.share.get(key)
        if counters is None:
            counters = self.share[key] = ShareCounters()
        return counters

    def fetch_counters(self, topic: str, partition: int) -> FetchCounters:
        """The read-side counters of a partition, kept for the broker's life."""
        key = (topic, partition)
        counters = self.fetched.get(key)
        if counters is None:
            counters = self.fetched[key] = FetchCounters()
        return counters

    def api(self, name: str) -> ApiStats:
        stats = self.apis.get(name)
        if stats is None:
            stats = self.apis[name] = ApiStats()
        return stats

    def served(self, api_name: str, nanoseconds: int) -> ApiStats:
        """Account a request served in `nanoseconds` of the broker's own time: what every
        request dispatch answers counts, besides its node's count (`node_requests`, counted
        as it is read). The C Produce lane moves the same fields for the requests it answers
        (nullbroker/handlers/produce_lane.h names them), and
        tests/handlers/test_lane_contract.py fails when the two differ: a count added here
        must be added there."""
        api = self.api(api_name)
        api.requests += 1
        api.latency.observe(nanoseconds)
        return api

    def error(self, name: str, count: int = 1) -> None:
        """Count an error code the broker answered with, by its Kafka name."""
        self.errors[name] += count

    @property
    def uptime_seconds(self) -> float:
        return time.monotonic() - self._started_monotonic

    def totals(self) -> PartitionCounters:
        total = PartitionCounters()
        for counters in self.produced.values():
            total.records += counters.records
            total.bytes += counters.bytes
            total.batches += counters.batches
        return total

    def fetched_totals(self) -> tuple[int, int]:
        """Records and record-batch bytes served by Fetch, over every partition."""
        records = served_bytes = 0
        for counters in self.fetched.values():
            records += counters.records
            served_bytes += counters.bytes
        return records, served_bytes

    def requests_total(self) -> int:
        return sum(stats.requests for stats in self.apis.values())

    def latency_counts(self) -> list[int]:
        """Bucket counts of all APIs' latencies together."""
        return _merged(stats.latency for stats in self.apis.values())

    def held_counts(self) -> list[int]:
        """Bucket counts of all APIs' hold times together."""
        return _merged(stats.held for stats in self.apis.values())

    def group_lags(self) -> dict[str, dict[tuple[str, int], tuple[int, int]]]:
        """Each group's committed offset and lag (records from it to the log end, as
        kafka-consumer-groups computes LAG) per partition it committed to, by group id;
        a partition whose log end is unknown (its topic deleted) has none."""
        ends = self.log_end_offsets
        return {
            group: {
                key: (offset, ends[key] - offset)
                for key, offset in sorted(snapshot.committed.items())
                if key in ends
            }
            for group, snapshot in sorted(self.group_snapshots.items())
        }

    def add(self, other: BrokerStats) -> None:
        """Add another process's accounts to these (a cluster of processes reports once)."""
        for key, produced in other.produced.items():
            mine = self.partition_counters(*key)
            mine.records += produced.records
            mine.bytes += produced.bytes
            mine.batches += produced.batches
            mine.retained_bytes += produced.retained_bytes
            mine.compaction_dropped += produced.compaction_dropped
        for key, fetched in other.fetched.items():
            served = self.fetch_counters(*key)
            served.records += fetched.records
            served.bytes += fetched.bytes
        for (group, topic, index), share in other.share.items():
            self.share_counters(group, topic, index).add(share)
        for name, api in other.apis.items():
            mine_api = self.api(name)
            mine_api.requests += api.requests
            mine_api.latency.add(api.latency)
            mine_api.held.add(api.held)
        for name in (*COUNTERS, *GAUGE_COUNTERS):
            getattr(self, name).update(getattr(other, name))
        for name in (*COUNTS, *GAUGES):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        # A group is coordinated by one process. Every process keeps every partition, but
        # only its leader's log grows: the other copies lag behind it (a log end never
        # goes back), so the largest is the partition's.
        self.group_snapshots.update(other.group_snapshots)
        self.pushed_clients = one_per_instance(self.pushed_clients + other.pushed_clients)
        self.pushed_totals.update(other.pushed_totals)
        for key, end in other.log_end_offsets.items():
            self.log_end_offsets[key] = max(end, self.log_end_offsets.get(key, 0))

    def reset_counts(self) -> BrokerStats:
        """Zero every count, in place, and return a copy of the accounts as they stood.

        Counts are what only grows: records, bytes and batches produced and fetched,
        requests and their latency and hold histograms, errors, connections accepted and
        closed, faults applied, transactions, rebalances, fetch requests and session
        events, authentications, refusals, read-budget waits, share groups' record counts.
        What describes the broker now stays: open connections, share records in flight and
        start offsets, groups by state, their members and offsets, log ends,
        fetch sessions kept, retained bytes, bytes reserved of the read budget, RSS (and
        the peak, which the OS keeps). So do the partitions and APIs already seen, at zero,
        so that a scrape's series carry on.

        In place because the objects are shared: topics hold their partitions' counters,
        the C Produce lane the API table and the node counts, the fault registry its
        counts; a new object would leave them counting where no one reads.
        """
        counted = copy.deepcopy(self)
        for produced in self.produced.values():
            produced.records = produced.bytes = produced.batches = 0
        for fetched in self.fetched.values():
            fetched.records = fetched.bytes = 0
        for share in self.share.values():
            share.clear_counts()
        for api in self.apis.values():
            api.requests = 0
            api.latency.clear()
            api.held.clear()
        for name in COUNTERS:
            getattr(self, name).clear()
        for name in COUNTS:
            setattr(self, name, 0)
        self.counts_since = time.time()
        return counted

    def rss_bytes(self) -> int:
        """The resident memory of this process and of the workers whose accounts it holds."""
        return rss_bytes() + self.other_processes_rss

    def peak_rss_bytes(self) -> int:
        """This process's peak RSS plus each worker's (an upper bound of the cluster's)."""
        return peak_rss_bytes() + self.other_processes_peak_rss


def _merged(histograms: Iterable[LatencyHistogram]) -> list[int]:
    merged = [0] * (len(LATENCY_BOUNDS_NS) + 1)
    for histogram in histograms:
        for index, count in enumerate(histogram.counts):
            merged[index] += count
    return merged


def rss_bytes() -> int:
    """The process's resident set size now, from /proc (0 where there is no /proc)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            resident_pages = int(statm.read().split()[1])
    except OSError:
        return 0
    return resident_pages * resource.getpagesize()


def peak_rss_bytes() -> int:
    """The process's highest resident set size so far."""
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
