"""What a running broker counted, as typed Python objects: the document of its `GET /accounts`
(the same as the summary JSON it writes at shutdown), read into frozen dataclasses.

    accounts = broker.accounts()
    accounts.produced.records                          # every topic
    accounts.produced.topic("orders").records          # one topic (zero if never seen)
    accounts.produced.partition("orders", 2).batches   # one partition
    accounts.fetched.topic("orders").bytes
    accounts.requests["Produce"], accounts.held_requests.get("Fetch", 0)

`expect_counts` compares what was counted with what a test expected and says, in words, where
they differ ("topic orders partition 2: expected 1,000 records, counted 998").

Standard library only, and no broker code: a test process reads the accounts without loading
the broker.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    """Records, record-batch bytes and (produced only) batches.

    Records are read from batch headers (compressed batches are never inflated), bytes are
    the batches' own size. `batches` is None for what Fetch served: the broker renders the
    batches it serves and counts their records and bytes, not the batches.
    """

    records: int = 0
    bytes: int = 0
    batches: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicCounts(Counts):
    """One topic's counts, in all and per partition."""

    partitions: Mapping[int, Counts] = field(default_factory=dict)

    def partition(self, index: int) -> Counts:
        """The partition's counts: zero for a partition that counted nothing."""
        return self.partitions.get(index) or Counts(**_zero(self.batches))


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic(Counts):
    """What producers sent (`Accounts.produced`) or consumers were served
    (`Accounts.fetched`): the totals, and each topic's."""

    topics: Mapping[str, TopicCounts] = field(default_factory=dict)

    def topic(self, name: str) -> TopicCounts:
        """The topic's counts: zero for a topic that counted nothing."""
        return self.topics.get(name) or TopicCounts(**_zero(self.batches))

    def partition(self, topic: str, index: int) -> Counts:
        """One partition's counts: zero for one that counted nothing."""
        return self.topic(topic).partition(index)


@dataclass(frozen=True, slots=True, kw_only=True)
class Latency:
    """A latency histogram of the broker's, in seconds: how many, their sum, and the p50 and
    p99 read from its buckets (within 25 %). /metrics exposes the same count and sum."""

    count: int
    sum: float
    p50: float
    p99: float


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMember:
    """A member of a consumer group, as DescribeGroups and kafka-consumer-groups name it."""

    member_id: str
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLag:
    """Where a group stands in one partition: its committed offset, the log end, and the
    records between them (kafka-consumer-groups' LAG)."""

    committed: int
    log_end: int
    lag: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroup:
    """What only a streams group (KIP-1071) has, now: the epoch of its topology (-1 until a
    member gave it one), its group epoch and the epoch its target assignment was made at
    (behind the group epoch while it is Assigning), the tasks assigned to its members, of
    each kind, summed over them (as StreamsGroupDescribe gives each member's: while tasks
    move, those being given up or waited for are not counted), and the target assignments
    made for it since it was created (`rebalances`: the group's own count, which a reset of
    the accounts leaves, as it leaves the group)."""

    topology_epoch: int
    epoch: int
    assignment_epoch: int
    active_tasks: int
    standby_tasks: int
    warmup_tasks: int
    rebalances: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """One consumer group now: its protocol (`classic`, KIP-848's `consumer`, or KIP-1071's
    `streams`), state, members and lag, in all and per topic and partition it committed
    offsets to; and for a streams group, its epochs, tasks and rebalances (`streams`, None
    for the other kinds)."""

    protocol: str
    state: str
    members: tuple[GroupMember, ...]
    lag: int
    partitions: Mapping[str, Mapping[int, PartitionLag]]
    streams: StreamsGroup | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Groups:
    """Consumer groups by state (a gauge: how many are in each now), the rebalances
    completed, and each group with its members and lag, and a streams group's tasks
    (`by_group`, by group id)."""

    by_state: Mapping[str, int]
    rebalances: int
    by_group: Mapping[str, Group] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareCounts:
    """What a share group (KIP-932) did with records: acquired (every delivery), accepted,
    released, rejected, renewed, redelivered (deliveries after the first), archived (done
    without being accepted), lock timeouts; in flight (acquired now) and the start offset
    (of one partition; the largest, in totals)."""

    acquired: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    renewed: int = 0
    redelivered: int = 0
    archived: int = 0
    lock_timeouts: int = 0
    in_flight: int = 0
    start_offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroup:
    """One share group's records: in all, and per topic and partition."""

    totals: ShareCounts
    partitions: Mapping[str, Mapping[int, ShareCounts]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroups:
    """Share groups' records: over all of them, and per group (`by_group`, by group id)."""

    totals: ShareCounts = field(default_factory=ShareCounts)
    by_group: Mapping[str, ShareGroup] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientCounts:
    """What the broker counted for one client id: records appended by its Produce requests,
    records served to its Fetch requests."""

    produced_records: int = 0
    fetched_records: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PushedSeries:
    """One series a client pushed: a metric and its data point's attributes."""

    name: str
    kind: str
    """gauge, sum (monotonic: its pushed deltas added up) or up_down_sum."""
    attributes: Mapping[str, str]
    value: float | None
    """None where the client pushed NaN (an average of nothing yet)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PushedClient:
    """A client instance and what it pushed (KIP-714), as the broker keeps it: `metrics`
    gives each metric's value by its KIP-714 name (a sum's total over its series, a gauge's
    where it has one series), `series` every series."""

    instance_id: str
    client_id: str
    software_name: str
    software_version: str
    address: str
    first_push: datetime.datetime
    last_push: datetime.datetime
    pushes: int
    payload_bytes: int
    interval_ms: int
    ended: str
    """"terminated" (it closed, with its closing push), "closed" (its connection closed with
    no closing push), "silent" (stopped pushing), "" (still pushing)."""
    resource: Mapping[str, str]
    metrics: Mapping[str, float | None]
    series: tuple[PushedSeries, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAgreement:
    """A producer's pushed count of records sent (`metric`, summed over the `instances` of
    its client id) beside the records the broker appended for its client id. `final`: every
    instance ended, so no more will come; `without_closing_push` of them ended with no
    closing push (their connection closed first, or they fell silent), so what they sent
    after their last push is not in `pushed`."""

    client_id: str
    metric: str
    pushed: int
    counted: int
    instances: int
    final: bool
    agrees: bool
    without_closing_push: int = 0

    def __str__(self) -> str:
        state = "closed" if self.final else "still running"
        if self.without_closing_push:
            state += f", {self.without_closing_push} without a closing push"
        verdict = "agree" if self.agrees else f"differ by {self.pushed - self.counted:+,}"
        if not self.agrees and self.without_closing_push:
            verdict += " (what those sent after their last push was never pushed)"
        return (
            f"client id {self.client_id!r} ({self.instances} instance(s), {state}): pushed "
            f"{self.metric} {self.pushed:,}, broker counted {self.counted:,} records: {verdict}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Clients:
    """The clients: the broker's counts by client id (`by_client_id`), the instances that
    pushed their metrics (KIP-714), each producer's pushed count beside the broker's
    (`agreement`), and what the bounds left out."""

    by_client_id: Mapping[str, ClientCounts] = field(default_factory=dict)
    instances: tuple[PushedClient, ...] = ()
    agreement: tuple[ClientAgreement, ...] = ()
    series_kept: int = 0
    dropped_series: int = 0
    dropped_clients: int = 0
    refused_payloads: int = 0
    cpu_seconds: float = 0.0
    """The broker's CPU time on the pushes (their handling, the decoder's import at the
    first, the snapshots of them): what this view cost it."""

    def of(self, client_id: str) -> tuple[PushedClient, ...]:
        """The instances of `client_id` that pushed."""
        return tuple(client for client in self.instances if client.client_id == client_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Accounts:
    """Everything a broker counted since it started or was last reset (`counts_since`).

    `produced` and `fetched` hold the traffic; `requests` the requests answered by API,
    `request_latency` the broker's own time per request (a held request's wait excluded),
    `held_requests` and `request_held` the requests that waited (a Fetch at the log end, a
    JoinGroup or SyncGroup in a rebalance) and for how long; `errors` the Kafka error codes
    answered, by name; `groups` the consumer groups; `share` the share groups' records
    (KIP-932); `clients` the counts by client id and what clients pushed (KIP-714);
    `connections` those open now.
    Docs: docs/python-api.md; every field's meaning: docs/metrics.md.
    """

    started_at: datetime.datetime
    counts_since: datetime.datetime
    uptime_seconds: float
    produced: Traffic
    fetched: Traffic
    requests: Mapping[str, int]
    requests_total: int
    request_latency: Mapping[str, Latency]
    held_requests: Mapping[str, int]
    request_held: Mapping[str, Latency]
    errors: Mapping[str, int]
    connections_closed_on_error: Mapping[str, int]
    connections: int
    connections_total: int
    groups: Groups
    share: ShareGroups
    clients: Clients
    fetch_requests: Mapping[str, int]
    transactions: Mapping[str, int]
    transactional_records: Mapping[str, int]
    faults: Mapping[str, int]
    rss_bytes: int
    peak_rss_bytes: int

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Accounts:
        """The accounts from the broker's JSON document (GET /accounts, or the summary)."""
        return cls(
            started_at=datetime.datetime.fromisoformat(document["started_at"]),
            counts_since=datetime.datetime.fromisoformat(document["counts_since"]),
            uptime_seconds=float(document["uptime_seconds"]),
            produced=_traffic(document["produced"]),
            fetched=_traffic(document["fetched"]),
            requests=dict(document["requests"]),
            requests_total=int(document["requests_total"]),
            request_latency=_latencies(document["request_latency_seconds"]),
            held_requests=dict(document["held_requests"]),
            request_held=_latencies(document["request_held_seconds"]),
            errors=dict(document["errors"]),
            connections_closed_on_error=dict(document["connections_closed_on_error"]),
            connections=int(document["connections"]),
            connections_total=int(document["connections_total"]),
            groups=_groups(document["groups"]),
            share=_share(document.get("share", {})),
            clients=_clients(document.get("clients", {})),
            fetch_requests=dict(document["fetch_requests"]),
            transactions=dict(document["transactions"]),
            transactional_records=dict(document["transactional_records"]),
            faults=dict(document["faults"]),
            rss_bytes=int(document["rss_bytes"]),
            peak_rss_bytes=int(document["peak_rss_bytes"]),
        )


def _clients(entry: Mapping[str, Any]) -> Clients:
    return Clients(
        by_client_id={
            client_id: ClientCounts(**counts)
            for client_id, counts in entry.get("by_client_id", {}).items()
        },
        instances=tuple(
            PushedClient(
                **{
                    **pushed,
                    "first_push": datetime.datetime.fromisoformat(pushed["first_push"]),
                    "last_push": datetime.datetime.fromisoformat(pushed["last_push"]),
                    "series": tuple(PushedSeries(**series) for series in pushed["series"]),
                }
            )
            for pushed in entry.get("instances", ())
        ),
        agreement=tuple(ClientAgreement(**row) for row in entry.get("agreement", ())),
        **{
            name: int(entry.get(name, 0))
            for name in ("series_kept", "dropped_series", "dropped_clients", "refused_payloads")
        },
        cpu_seconds=float(entry.get("cpu_seconds", 0.0)),
    )


def _share(entry: Mapping[str, Any]) -> ShareGroups:
    return ShareGroups(
        totals=ShareCounts(**entry.get("totals", {})),
        by_group={
            group: ShareGroup(
                totals=ShareCounts(**counts["totals"]),
                partitions={
                    topic: {int(index): ShareCounts(**c) for index, c in partitions.items()}
                    for topic, partitions in counts["partitions"].items()
                },
            )
            for group, counts in entry.get("by_group", {}).items()
        },
    )


def _zero(batches: int | None) -> dict[str, Any]:
    """Zero counts shaped as their traffic's: batches counted (0) or not (None)."""
    return {"records": 0, "bytes": 0, "batches": None if batches is None else 0}


def _counts(entry: Mapping[str, Any]) -> dict[str, Any]:
    batches = entry.get("batches")
    return {
        "records": int(entry["records"]),
        "bytes": int(entry["bytes"]),
        "batches": None if batches is None else int(batches),
    }


def _traffic(entry: Mapping[str, Any]) -> Traffic:
    # The document counts Fetch's batches nowhere: its totals say whether they are counted.
    return Traffic(
        **_counts(entry),
        topics={
            name: TopicCounts(
                **_counts(topic),
                partitions={
                    int(index): Counts(**_counts(partition))
                    for index, partition in topic["partitions"].items()
                },
            )
            for name, topic in entry["topics"].items()
        },
    )


def _groups(entry: Mapping[str, Any]) -> Groups:
    return Groups(
        by_state=dict(entry["by_state"]),
        rebalances=int(entry["rebalances"]),
        by_group={
            name: Group(
                protocol=group["protocol"],
                state=group["state"],
                members=tuple(GroupMember(**member) for member in group["members"]),
                lag=int(group["lag"]),
                partitions={
                    topic: {
                        int(index): PartitionLag(**partition)
                        for index, partition in partitions.items()
                    }
                    for topic, partitions in group["partitions"].items()
                },
                streams=_streams(group.get("streams")),
            )
            for name, group in entry["by_group"].items()
        },
    )


def _streams(entry: Mapping[str, Any] | None) -> StreamsGroup | None:
    if entry is None:
        return None
    return StreamsGroup(**{number.name: int(entry[number.name]) for number in fields(StreamsGroup)})


def _latencies(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Latency]:
    return {
        api: Latency(
            count=int(entry["count"]),
            sum=float(entry["sum"]),
            p50=float(entry["p50"]),
            p99=float(entry["p99"]),
        )
        for api, entry in entries.items()
    }


COUNTED = ("records", "bytes", "batches")


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A count that is not what a test expected."""

    where: str
    """"topic orders", or "topic orders partition 2"."""
    name: str
    """records, bytes or batches."""
    what: str
    """produced or fetched."""
    expected: int
    counted: int

    @property
    def exceeds(self) -> bool:
        """Counted more than expected: counts only grow (until a reset), so waiting
        cannot mend it."""
        return self.counted > self.expected

    def __str__(self) -> str:
        name = _ONE[self.name] if self.expected == 1 else self.name
        return (
            f"{self.where}: expected {self.expected:,} {name} {self.what}, counted {self.counted:,}"
        )


_ONE = {"records": "record", "bytes": "byte", "batches": "batch"}


def expect_counts(
    traffic: Traffic,
    what: str,
    topic: str,
    partition: int | None = None,
    **expected: int | Mapping[int, int] | None,
) -> list[Mismatch]:
    """Where `traffic` differs from what was expected of `topic` (or of one `partition`);
    empty when everything matches.

    `expected` names the counts to check (`records`, `bytes`, `batches`), each a number for
    the topic (or the partition), or a mapping of partition to number: then every
    partition of the topic not named must have counted none. `what` is the verb of the
    traffic ("produced", "fetched"). A TypeError for a count the traffic does not keep
    (Fetch's batches) or that is not one.
    """
    unknown = set(expected) - set(COUNTED)
    if unknown:
        raise TypeError(f"unknown counts {sorted(unknown)}: expected some of {list(COUNTED)}")
    if expected.get("batches") is not None and traffic.batches is None:
        raise TypeError(f"{what} batches are not counted, only records and bytes")
    mismatches = []
    counted_topic = traffic.topic(topic)
    for name in COUNTED:
        wanted = expected.get(name)
        if wanted is None:
            continue
        if isinstance(wanted, Mapping):
            if partition is not None:
                raise TypeError("give a partition, or a mapping of partitions, not both")
            for index in sorted(set(wanted) | set(counted_topic.partitions)):
                counted = getattr(counted_topic.partition(index), name)
                where = f"topic {topic} partition {index}"
                mismatches.append(Mismatch(where, name, what, wanted.get(index, 0), counted))
        else:
            counts = counted_topic if partition is None else counted_topic.partition(partition)
            where = f"topic {topic}" + ("" if partition is None else f" partition {partition}")
            mismatches.append(Mismatch(where, name, what, wanted, getattr(counts, name)))
    return [mismatch for mismatch in mismatches if mismatch.counted != mismatch.expected]
