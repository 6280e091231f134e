"""The differential harness: the same requests to Apache Kafka 4.1.1 and to nullbroker, both
answers decoded with kio and compared field by field.

A `Pair` holds one connection to each broker. A step is a kio request, or a function of the
broker it goes to (`Side`) that builds one from what that broker answered before (its topic
ids, producer ids and epochs, member ids, generations). Both answers are compared
recursively; each difference has a readable path
(`MetadataResponse.topics[0].partitions[0].leader_epoch: kafka=0 nullbroker=-1`) and is
either data (tests/support/differential_allowed.py, ALLOWED), a difference known and to be fixed
(KNOWN, which a test names so that it fails once the difference is gone), or a failure.
Record batches (Fetch) are decoded and compared batch by batch, record by record.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import io
import re
import struct
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from types import GenericAlias
from typing import Any, get_args, get_origin

import pytest
import trio
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as AssignedPartition
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription
from kio.serial import entity_writer

from codec.apis import KAFKA_4_RANGES, api_name, request_schema
from nullbroker.app.pytest_plugin import StartBroker
from perf.kafka_broker import KafkaBroker
from tests.support.differential_allowed import (
    ALLOWED,
    ASSIGNED,
    CLOCK,
    CLUSTER_ID,
    COMMON,
    KNOWN,
    SESSION,
    TOPIC_ID,
    UNORDERED,
    Entry,
)
from tests.support.kafka_wire import FrameStream, decode_response, request_frame, size_prefix

KAFKA = "kafka"
NULLBROKER = "nullbroker"

NULLBROKER_FLAGS = (
    "--retain",
    str(8 << 20),
    "--partitions",
    "1",
    "--group-initial-rebalance-delay-ms",
    "0",
    # The fixture's internal topics have one partition each (perf.kafka_broker).
    "--offsets-topic-partitions",
    "1",
    "--transaction-state-partitions",
    "1",
)
"""What makes nullbroker comparable with the `kafka` fixture: produced batches kept and read
back as received (not synthetic), one partition per auto-created topic (Kafka's
num.partitions=1), a group's first rebalance not delayed (as the fixture's Kafka)."""

RETRY_SECONDS = 15.0
"""How long a step is repeated until its answer is the one waited for (Kafka creates
__consumer_offsets and elects a topic's leader asynchronously)."""


@dataclass(frozen=True, slots=True)
class Difference:
    api: str
    version: int
    path: str
    kafka: Any
    nullbroker: Any

    def __str__(self) -> str:
        return f"{self.path} (v{self.version}): kafka={self.kafka!r} nullbroker={self.nullbroker!r}"


def normalised(path: str) -> str:
    """A path with its array indices dropped (keys of unordered arrays stay), the form the
    tables' patterns match."""
    return re.sub(r"\[\d+\]", "[]", path)


def glob(pattern: str) -> re.Pattern[str]:
    """A pattern where only `*` is special (any characters), brackets being literal."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")


def matching(
    entries: Iterable[Entry],
    difference: Difference,
    identities: dict[str, tuple[Any, Any]] | None = None,
    seen: Seen | None = None,
) -> list[Entry]:
    """The entries that explain a difference (its path, version, values): an entry of an
    identity explains it only where both values are that identity (each broker's own,
    `identities`, or as the sequence has `seen` them), and the ids it sees are learned."""
    path = normalised(difference.path)
    found = []
    for entry in entries:
        if not glob(entry.path).match(path):
            continue
        if entry.versions is not None and difference.version not in entry.versions:
            continue
        if entry.kafka is not None and difference.kafka not in entry.kafka:
            continue
        if entry.nullbroker is not None and difference.nullbroker not in entry.nullbroker:
            continue
        if entry.identity is not None and not _same_identity(
            entry.identity, difference, identities, seen
        ):
            continue
        found.append(entry)
    return found


@dataclass
class Seen:
    """What a sequence has seen of the values each broker makes up, for the identities that
    must hold across it (tests/support/differential_allowed.py: TOPIC_ID, CLUSTER_ID, CLOCK)."""

    since_ms: int
    """When the sequence began, by the clock both brokers read (they run on this machine)."""
    topic_ids: dict[tuple[str, uuid.UUID], uuid.UUID] = field(default_factory=dict)
    """Each topic id seen, by broker and id, with the other broker's id for the topic."""
    cluster_ids: tuple[Any, Any] | None = None

    @classmethod
    def starting_now(cls) -> Seen:
        return cls(since_ms=time.time_ns() // 1_000_000)


def _same_identity(
    identity: str,
    difference: Difference,
    identities: dict[str, tuple[Any, Any]] | None,
    seen: Seen | None,
) -> bool:
    values = (difference.kafka, difference.nullbroker)
    if identity == ASSIGNED:
        return all(
            (isinstance(value, str) and value) or (isinstance(value, int) and value >= 0)
            for value in values
        )
    if identity == SESSION:
        return all(isinstance(value, int) and value > 0 for value in values)
    if identity in (TOPIC_ID, CLUSTER_ID, CLOCK):
        return seen is not None and _seen_identity(identity, values, seen)
    return (identities or {}).get(identity) == values


def _seen_identity(identity: str, values: tuple[Any, Any], seen: Seen) -> bool:
    kafka, ours = values
    if identity == TOPIC_ID:
        # One topic, one id on each side for the sequence: a pair of ids, once seen, is the
        # only pair either id may be in (so a changed id, or one id for two topics, fails).
        if not all(isinstance(value, uuid.UUID) and value.int for value in values):
            return False
        if seen.topic_ids.get((KAFKA, kafka), ours) != ours:
            return False
        if seen.topic_ids.get((NULLBROKER, ours), kafka) != kafka:
            return False
        seen.topic_ids[KAFKA, kafka], seen.topic_ids[NULLBROKER, ours] = ours, kafka
        return True
    if identity == CLUSTER_ID:
        if not all(is_cluster_id(value) for value in values):
            return False
        if seen.cluster_ids is None:
            seen.cluster_ids = values
        return seen.cluster_ids == values
    now_ms = time.time_ns() // 1_000_000
    return all(_in_window(value, seen.since_ms, now_ms) for value in values)


def is_cluster_id(value: Any) -> bool:
    """A KRaft cluster id: 16 bytes in URL-safe base64, unpadded (22 characters), as
    Kafka's Uuid.toString writes it and `kafka-storage format -t` takes it."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_-]{22}", value):
        return False
    raw = base64.urlsafe_b64decode(value + "==")
    return len(raw) == 16 and base64.urlsafe_b64encode(raw).decode().rstrip("=") == value


def _in_window(value: Any, since_ms: int, now_ms: int) -> bool:
    """Whether a broker's time (ms since the epoch, or a datetime) falls between the
    sequence's start and now; a datetime at its precision (kio keeps a record's timestamp
    to the second)."""
    if isinstance(value, datetime.datetime):
        ms = round(value.timestamp() * 1000)
        since_ms -= since_ms % (1000 if value.microsecond == 0 else 1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        return False
    return since_ms <= ms <= now_ms


# -- comparing two decoded answers -------------------------------------------------------


def decoded_batches(records: bytes | None) -> tuple[Any, ...] | None:
    """The record batches of a records field, decoded by kio (CRCs checked)."""
    if records is None:
        return None
    batches = []
    offset = 0
    view = memoryview(records)
    while offset + 12 <= len(records):
        (length,) = struct.unpack_from(">i", records, offset + 8)
        if offset + 12 + length > len(records):
            break  # a partial batch at the end of a response, as Kafka may send
        batch, size = read_batch(view, offset)
        batches.append(batch)
        offset += size
    return tuple(batches)


def _is_records(entity_field: Any) -> bool:
    return bool(entity_field.metadata.get("kafka_type") == "records")


def compare(kafka: Any, nullbroker: Any, path: str) -> list[tuple[str, Any, Any]]:
    """Every (path, kafka value, nullbroker value) where the two answers differ."""
    if path.endswith(".batches") and isinstance(kafka, tuple):
        return compare_batches(kafka, nullbroker, path)
    if is_dataclass(kafka) and type(kafka) is type(nullbroker):
        found: list[tuple[str, Any, Any]] = []
        for entity_field in fields(kafka):
            left = getattr(kafka, entity_field.name)
            right = getattr(nullbroker, entity_field.name)
            where = f"{path}.{entity_field.name}"
            if _is_records(entity_field):
                found += compare_batches(decoded_batches(left), decoded_batches(right), where)
            else:
                found += compare(left, right, where)
        return found
    if isinstance(kafka, tuple) and isinstance(nullbroker, tuple):
        key = UNORDERED.get(re.sub(r"\[[^\]]*\]", "[]", path))
        # An array keyed by a name in one version may carry only topic ids in another
        # (Produce v13), which differ between the brokers: those are compared in order.
        if key is not None and all(hasattr(entry, key) for entry in kafka + nullbroker):
            return _compare_keyed(kafka, nullbroker, path, key)
        found = []
        for index in range(max(len(kafka), len(nullbroker))):
            where = f"{path}[{index}]"
            if index >= len(kafka) or index >= len(nullbroker):
                left = kafka[index] if index < len(kafka) else "<absent>"
                right = nullbroker[index] if index < len(nullbroker) else "<absent>"
                found.append((where, left, right))
            else:
                found += compare(kafka[index], nullbroker[index], where)
        return found
    if kafka != nullbroker:
        return [(path, kafka, nullbroker)]
    return []


CONTROL = 0x20
"""The control bit of a batch's attributes: a transaction marker, written by the broker."""


def compare_batches(
    kafka: tuple[Any, ...] | None, nullbroker: tuple[Any, ...] | None, path: str
) -> list[tuple[str, Any, Any]]:
    """Record batches batch by batch, record by record; a transaction marker's path says so
    (`records[2].control.base_timestamp`), since the broker writes those fields."""
    if kafka is None or nullbroker is None:
        return compare(kafka, nullbroker, path)
    found: list[tuple[str, Any, Any]] = []
    for index in range(max(len(kafka), len(nullbroker))):
        if index >= len(kafka) or index >= len(nullbroker):
            left = kafka[index] if index < len(kafka) else "<absent>"
            right = nullbroker[index] if index < len(nullbroker) else "<absent>"
            found.append((f"{path}[{index}]", left, right))
            continue
        kind = ".control" if kafka[index].attributes & CONTROL else ""
        found += compare(kafka[index], nullbroker[index], f"{path}[{index}]{kind}")
    return found


def _compare_keyed(
    kafka: tuple[Any, ...], nullbroker: tuple[Any, ...], path: str, key: str
) -> list[tuple[str, Any, Any]]:
    """Arrays whose order Kafka does not define (it comes from a hash map), matched by key;
    one entry on each side is matched whatever its key (a broker's config resource is named
    by each broker's own node id), its key then compared as a field."""
    if len(kafka) == len(nullbroker) == 1 and getattr(kafka[0], key) != getattr(nullbroker[0], key):
        return compare(kafka[0], nullbroker[0], f"{path}[0]")
    left = {getattr(entry, key): entry for entry in kafka}
    right = {getattr(entry, key): entry for entry in nullbroker}
    found: list[tuple[str, Any, Any]] = []
    for name in sorted(left.keys() | right.keys(), key=str):
        where = f"{path}[{name}]"
        if name not in left or name not in right:
            found.append((where, left.get(name, "<absent>"), right.get(name, "<absent>")))
        else:
            found += compare(left[name], right[name], where)
    return found


# -- building requests for any version ----------------------------------------------------


def build(entity_type: type, /, **spec: Any) -> Any:
    """An instance of `entity_type` from `spec`, keeping the fields this version has: nested
    entities may be given as dicts, arrays of them as lists of dicts."""
    values = {}
    for entity_field in fields(entity_type):
        if entity_field.name not in spec:
            continue
        values[entity_field.name] = _converted(entity_field.type, spec[entity_field.name])
    return entity_type(**values)


def _converted(kind: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return build(_entity_of(kind), **value)
    if isinstance(value, list):
        (item,) = (arg for arg in get_args(_strip_none(kind)) if arg is not Ellipsis)
        return tuple(_converted(item, entry) for entry in value)
    return value


def _strip_none(kind: Any) -> Any:
    options = [arg for arg in get_args(kind) if arg is not type(None)]
    if get_origin(kind) is not tuple and not isinstance(kind, GenericAlias) and options:
        return options[0]
    return kind


def _entity_of(kind: Any) -> type:
    kind = _strip_none(kind)
    assert is_dataclass(kind), kind
    return kind  # type: ignore[return-value]


def request(api_key: int, version: int, **spec: Any) -> Any:
    """A kio request entity of (key, version) from a spec naming the fields of any version."""
    return build(request_schema(api_key, version), **spec)


def records_batch(
    values: Sequence[bytes],
    *,
    timestamp_ms: int = 1_767_225_600_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    headers: tuple[RecordHeader, ...] = (),
    key: bytes | None = None,
) -> bytes:
    """A RecordBatch v2 of `values`, one millisecond apart from `timestamp_ms`, by kio."""
    start = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    batch = NewRecordBatch(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        attributes=0x10 if transactional else 0,
        records=tuple(
            Record(
                attributes=0,
                timestamp=start + datetime.timedelta(milliseconds=index),
                offset=index,
                key=key,
                value=value,
                headers=headers,
            )
            for index, value in enumerate(values)
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


# -- the two brokers ----------------------------------------------------------------------


@dataclass
class Side:
    """One broker of the pair: its connection, the versions it serves, and what a sequence
    learned from its answers (ids that differ between the brokers by nature)."""

    name: str
    host: str
    port: int
    stream: FrameStream
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    learned: dict[str, Any] = field(default_factory=dict)
    correlation: int = 0

    async def ask(self, payload: Any) -> Any:
        self.correlation += 1
        await self.stream.send(size_prefix(request_frame(payload, self.correlation)))
        try:
            frame = await self.stream.receive_frame()
        except (trio.TooSlowError, EOFError) as error:
            raise AssertionError(f"{self.name} did not answer {payload!r}: {error!r}") from error
        try:
            answered, body = decode_response(frame, payload.__api_key__, payload.__version__)
        except Exception as error:
            raise AssertionError(f"{self.name}'s answer to {payload!r}: {error!r}") from error
        assert answered == self.correlation
        return body

    async def connection(self) -> Side:
        """Another connection to the same broker, sharing what this one learned (for a
        second group member, or a request that must wait beside another)."""
        stream = FrameStream(await trio.open_tcp_stream(self.host, self.port))
        return Side(self.name, self.host, self.port, stream, self.ranges, self.learned)


Step = Any | Callable[[Side], Any]
Until = Callable[[Any], bool]


@dataclass
class Answers:
    kafka: Any
    nullbroker: Any

    def __getitem__(self, side: Side | str) -> Any:
        name = side if isinstance(side, str) else side.name
        return self.kafka if name == KAFKA else self.nullbroker


class Pair:
    """A connection to each broker; every step goes to both and the answers are compared."""

    def __init__(self, kafka: Side, nullbroker: Side, kafka_node_id: int) -> None:
        self.kafka = kafka
        self.nullbroker = nullbroker
        self.identities: dict[str, tuple[Any, Any]] = {
            "node": (kafka_node_id, 0),
            "node name": (str(kafka_node_id), "0"),
            "port": (kafka.port, nullbroker.port),
        }
        kafka.learned["node id"], nullbroker.learned["node id"] = kafka_node_id, 0
        self.seen = Seen.starting_now()
        self.unexplained: list[Difference] = []
        self.known: list[tuple[Difference, frozenset[str]]] = []
        """Known differences seen, each with the names of the KNOWN entries that fit it."""
        self.compared: set[tuple[int, int]] = set()
        """Every (API key, version) whose answers were compared."""

    @property
    def sides(self) -> tuple[Side, Side]:
        return (self.kafka, self.nullbroker)

    @classmethod
    async def open(
        cls, kafka_bootstrap: str, nullbroker_bootstrap: str, kafka_node_id: int
    ) -> Pair:
        sides = []
        for name, bootstrap in ((KAFKA, kafka_bootstrap), (NULLBROKER, nullbroker_bootstrap)):
            host, port = bootstrap.rsplit(":", 1)
            stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
            sides.append(Side(name, host, int(port), stream))
        pair = cls(*sides, kafka_node_id)
        for side in pair.sides:
            answer = await side.ask(
                request(18, 3, client_software_name="nb", client_software_version="1")
            )
            assert answer.error_code == 0
            side.ranges = {
                key.api_key: (key.min_version, key.max_version) for key in answer.api_keys
            }
        return pair

    async def aclose(self) -> None:
        for side in self.sides:
            await side.stream.aclose()

    def versions(self, api_key: int, low: int = 0) -> range:
        """The versions both brokers serve of `api_key` (from their ApiVersions answers),
        as far as kio and the codec's table define them, from `low` up. Versions advertised
        below the served range (Produce from v0, as Kafka 4 lists it) close the connection on
        both brokers (`advertised`, `compare_refused`)."""
        lows, highs = zip(*(side.ranges.get(api_key, (0, -1)) for side in self.sides), strict=True)
        served = KAFKA_4_RANGES.get(api_key)
        floor, ceiling = (served.min_version, served.max_version) if served else (0, -1)
        return range(max(*lows, low, floor), min(*highs, ceiling) + 1)

    def advertised(self, api_key: int) -> range:
        """The versions of `api_key` both brokers advertise (ApiVersions), the lowest first."""
        lows, highs = zip(*(side.ranges.get(api_key, (0, -1)) for side in self.sides), strict=True)
        return range(max(lows), min(highs) + 1)

    async def compare_refused(self, api_key: int, version: int) -> None:
        """A version both advertise and neither serves (Produce v0-v2 in Kafka 4): a request
        at it on a fresh connection, whose body is never read, is answered or closed alike."""
        outcomes = [await outcome_of_version(side, api_key, version) for side in self.sides]
        self.compared.add((api_key, version))
        if outcomes[0] != outcomes[1]:
            path = f"{api_name(api_key)}Request v{version}"
            self.unexplained.append(Difference(api_name(api_key), version, path, *outcomes))

    async def step(
        self,
        build_request: Step,
        *,
        until: Until | None = None,
        compared: bool = True,
        only: Listed | None = None,
    ) -> Answers:
        """Send one request to each broker (built per broker when `build_request` is a
        function of the Side) and compare the answers. With `until`, the request is repeated
        on each broker until its answer satisfies it (what waits on Kafka's asynchronous
        work: a topic's leader, the offsets topic). With `only`, a listing (ListGroups,
        ListTransactions) is restricted on both sides to the entries the sequence made,
        repeated until it lists those expected, and Kafka's must (or the comparison would be
        of lists the sequence never made what it meant to); the restricted answers are
        compared and returned."""
        if only is not None:
            until = only.until(until)
        answers = []
        for side in self.sides:
            answers.append(by_role(await self._ask_until(side, build_request, until), side))
        both = Answers(*answers)
        if only is not None:
            both = Answers(only.restrict(both.kafka), only.restrict(both.nullbroker))
            only.check_listed(both.kafka)
        if compared:
            sample = build_request(self.kafka) if callable(build_request) else build_request
            self.record(sample.__api_key__, sample.__version__, both)
        return both

    async def _ask_until(self, side: Side, build_request: Step, until: Until | None) -> Any:
        deadline = trio.current_time() + RETRY_SECONDS
        while True:
            payload = build_request(side) if callable(build_request) else build_request
            answer = await side.ask(payload)
            if until is None or until(answer) or trio.current_time() > deadline:
                return answer
            await trio.sleep(0.1)

    def record(self, api_key: int, version: int, answers: Answers, name: str = "") -> None:
        """Compare two answers of (key, version) and sort their differences."""
        self.compared.add((api_key, version))
        name = name or type(answers.kafka).__name__
        for path, left, right in compare(answers.kafka, answers.nullbroker, name):
            difference = Difference(api_name(api_key), version, path, left, right)
            if matching(ALLOWED, difference, self.identities, self.seen):
                continue
            known = frozenset(entry.name for entry in matching(KNOWN, difference))
            if known:
                self.known.append((difference, known))
            else:
                self.unexplained.append(difference)

    def check(self, *known: str) -> None:
        """No difference outside the allowed table, and each known difference this sequence
        names (KNOWN) still seen: once one is fixed, its entry must go; and every known
        difference it meets named, so that the table says where each is seen."""
        lines = [str(difference) for difference in self.unexplained]
        named = set(known) | COMMON
        seen = {name for _, names in self.known for name in names & named}
        sometimes = {entry.name for entry in KNOWN if entry.sometimes}
        gone = [name for name in known if name not in seen and name not in sometimes]
        strays = [difference for difference, names in self.known if not names & named]
        message = "\n".join(
            [
                *(["differences outside the allowed table:", *lines] if lines else []),
                *(
                    [f"known differences no longer seen (remove them from KNOWN): {gone}"]
                    if gone
                    else []
                ),
                *(
                    [
                        "known differences this sequence does not name "
                        + f"{sorted({n for d, ns in self.known if d in strays for n in ns})}: "
                        + "; ".join(
                            f"{difference} ({' or '.join(sorted(names))})"
                            for difference, names in self.known
                            if difference in strays
                        )
                    ]
                    if strays
                    else []
                ),
            ]
        )
        assert not message, message


async def for_each_version(pair: Pair, api_key: int, run: Callable[[int], Awaitable[None]]) -> None:
    """`run(version)` at every version of `api_key` both brokers serve (at least one), and
    each version both advertise below those refused alike (`Pair.compare_refused`)."""
    versions = pair.versions(api_key)
    assert versions, f"no version of {api_name(api_key)} served by both brokers"
    for version in pair.advertised(api_key):
        if version in versions:
            await run(version)
        elif version < versions.start:
            await pair.compare_refused(api_key, version)


def uncompared_versions(
    compared: set[tuple[int, int]], api_key: int, advertised: Iterable[int]
) -> list[int]:
    """The versions of `api_key` advertised (by both brokers: `Pair.advertised`) whose
    answers were never compared (`Pair.compared`)."""
    asked = {version for key, version in compared if key == api_key}
    return [version for version in advertised if version not in asked]


async def outcome_of_version(side: Side, api_key: int, version: int) -> str:
    """What a broker does with a request at `version` on a fresh connection: "closed" or
    "answered" (the body is zeros: a version refused is refused before its body is read)."""
    stream = FrameStream(await trio.open_tcp_stream(side.host, side.port))
    try:
        header = struct.pack(">hhih", api_key, version, 1, 5) + b"tests"
        await stream.send(size_prefix(header + bytes(32)))
        try:
            await stream.receive_frame()
        except EOFError:
            return "closed"
        return "answered"
    finally:
        await stream.aclose()


def by_role(answer: Any, side: Side) -> Any:
    """Entries whose ids are each broker's own, in the order the sequence learned the ids on
    that broker, the ids it does not know after them: DescribeGroups' members (a classic
    group's member ids) and DescribeProducers' active producers (producer ids). Kafka lists
    both from a hash map keyed by the id (in no order a client may rely on, and one that
    follows the ids, which differ between the brokers), so entries are compared by their part
    in the sequence (its first member, its second producer)."""
    kind = type(answer).__name__
    if kind not in ("DescribeGroupsResponse", "DescribeProducersResponse"):
        return answer
    rank: dict[object, int] = {}
    for key, value in side.learned.items():
        if isinstance(value, str) or (isinstance(key, tuple) and key[0] == "producer_id"):
            rank.setdefault(value, len(rank))

    def ordered(entries: tuple[Any, ...], id_of: Callable[[Any], Any]) -> tuple[Any, ...]:
        return tuple(
            sorted(entries, key=lambda entry: (rank.get(id_of(entry), len(rank)), id_of(entry)))
        )

    if kind == "DescribeGroupsResponse":
        return dataclasses.replace(
            answer,
            groups=tuple(
                dataclasses.replace(
                    group, members=ordered(group.members, lambda member: member.member_id)
                )
                for group in answer.groups
            ),
        )
    return dataclasses.replace(
        answer,
        topics=tuple(
            dataclasses.replace(
                topic,
                partitions=tuple(
                    dataclasses.replace(
                        partition,
                        active_producers=ordered(
                            partition.active_producers, lambda producer: producer.producer_id
                        ),
                    )
                    for partition in topic.partitions
                ),
            )
            for topic in answer.topics
        ),
    )


@dataclass(frozen=True)
class Listed:
    """A listing (ListGroups' groups, ListTransactions' transactions) restricted to the
    entries a sequence made: the Kafka is the session's, so its lists hold every other
    test's groups and transactions too, and a comparison of whole lists could only be of
    filters that match nothing. The sequence names what it made (`made`, by `key`) and,
    of them, what this listing must hold (`expected`); both answers are cut down to what
    it made, and Kafka's must hold exactly what is expected."""

    array: str
    key: str
    made: frozenset[str]
    expected: frozenset[str]

    @classmethod
    def of(cls, array: str, key: str, made: Iterable[str], expected: Iterable[str]) -> Listed:
        made = frozenset(made)
        expected = frozenset(expected)
        assert expected <= made, f"expected {sorted(expected - made)}, never made"
        return cls(array, key, made, expected)

    def names(self, answer: Any) -> set[str]:
        return {getattr(entry, self.key) for entry in getattr(answer, self.array)}

    def restrict(self, answer: Any) -> Any:
        kept = tuple(
            entry for entry in getattr(answer, self.array) if getattr(entry, self.key) in self.made
        )
        return dataclasses.replace(answer, **{self.array: kept})

    def until(self, until: Until | None) -> Until:
        """Repeated until it lists what is expected (Kafka changes a group's state, or a
        transaction's, a moment after it answers), and `until` holds."""
        return lambda answer: (
            (self.names(self.restrict(answer)) == self.expected)
            and (until is None or until(answer))
        )

    def check_listed(self, answer: Any) -> None:
        listed = self.names(answer)
        assert listed == self.expected, (
            f"Kafka lists {sorted(listed)} of what the sequence made, not "
            f"{sorted(self.expected)}: the sequence does not make what it means to"
        )


def unique(prefix: str) -> str:
    """A topic or group name no other test uses (the Kafka is shared by the session)."""
    return f"diff-{prefix}-{uuid.uuid4().hex[:10]}"


# -- steps most sequences share ------------------------------------------------------------


@pytest.fixture
async def pair(kafka: KafkaBroker, nullbroker_factory: StartBroker) -> AsyncIterator[Pair]:
    """A connection to the session's Kafka and one to a fresh nullbroker (NULLBROKER_FLAGS)."""
    broker = nullbroker_factory(*NULLBROKER_FLAGS)
    opened = await Pair.open(kafka.bootstrap, broker.bootstrap, kafka.node_id)
    try:
        yield opened
    finally:
        await opened.aclose()


def no_error(answer: Any) -> bool:
    """Whether an answer carries no error code anywhere (a step to repeat until it holds)."""
    return not any(code for code in error_codes(answer))


def error_codes(value: Any) -> Iterable[int]:
    if is_dataclass(value):
        for entity_field in fields(value):
            inner = getattr(value, entity_field.name)
            if entity_field.name.endswith("error_code"):
                yield int(inner)
            else:
                yield from error_codes(inner)
    elif isinstance(value, tuple):
        for entry in value:
            yield from error_codes(entry)


async def create_topic(
    pair: Pair,
    topic: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    *,
    compared: bool = True,
) -> None:
    """CreateTopics (compared, unless not `compared`: the share sweeps' Kafka 4.4.0 reports
    topic configs 4.1.1 has not), then Metadata until the topic's leader is known on both,
    learning each broker's topic id."""
    await pair.step(
        request(
            19,
            pair.versions(19)[-1],
            topics=[
                {
                    "name": topic,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            timeout=datetime.timedelta(seconds=30),
            validate_only=False,
        ),
        compared=compared,
    )
    await learn_topic_ids(pair, topic)
    await until_led(pair, topic, partitions)
    await until_assignable(pair, topic, partitions)


GROUP_RESOURCE = 32
"""The GROUP config resource (KIP-848's group configs), for IncrementalAlterConfigs."""


async def set_assignment_interval(pair: Pair, group: str, interval_ms: int) -> None:
    """Set a consumer group's consumer.assignment.interval.ms on both brokers (compared).
    Kafka 4.4 makes a group's target assignment at most once a second by default; a sequence
    whose members join and rebalance in a row sets 0 (every change assigned at once, as
    Kafka 4.1 did), or the longest, 15 s, to see what the interval holds back, either way
    whatever the machine's speed."""
    await pair.step(
        request(
            44,
            pair.versions(44)[-1],
            resources=[
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group,
                    "configs": [
                        {
                            "name": "consumer.assignment.interval.ms",
                            "config_operation": 0,
                            "value": str(interval_ms),
                        }
                    ],
                }
            ],
            validate_only=False,
        )
    )


def consumer_group_join(version: int, group: str, member_id: str, topic: str) -> object:
    """A KIP-848 member's first ConsumerGroupHeartbeat (epoch 0), subscribed to `topic`,
    asking for the uniform assignor, with a 30 s rebalance timeout."""
    return request(
        68,
        version,
        group_id=group,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=[topic],
        server_assignor="uniform",
        topic_partitions=[],
    )


async def until_assignable(pair: Pair, topic: str, partitions: int) -> None:
    """A KIP-848 member of a group of its own joins, subscribed to the topic, until each
    broker assigns it every partition, then leaves (none of it compared). Kafka's group
    coordinator takes a new topic from the metadata image a moment after its leader serves
    it: a group that joined in between is given nothing, then, once the coordinator sees the
    topic, a new epoch with the partitions, where nullbroker gives them at once. Sequences
    that then compare a consumer group's epochs wait here for both to have settled."""
    if not pair.versions(68):
        return  # not served here (several processes): no group to wait for
    group, member_id = unique("settle"), str(uuid.uuid4())
    version = pair.versions(68)[-1]
    await find_coordinator(pair, group)

    def assigned(answer: Any) -> bool:
        given = answer.assignment.topic_partitions if answer.assignment else ()
        return sum(len(entry.partitions) for entry in given) == partitions

    await pair.step(
        consumer_group_join(version, group, member_id, topic),
        until=assigned,
        compared=False,
    )
    await pair.step(
        request(
            68, version, group_id=group, member_id=member_id, member_epoch=-1, topic_partitions=None
        ),
        compared=False,
    )


async def until_led(pair: Pair, topic: str, partitions: int) -> None:
    """ListOffsets of every partition (compared), until each broker answers it as its
    leader: Kafka's Metadata names a new topic's leader a moment before that broker takes
    requests for it (NOT_LEADER_OR_FOLLOWER till then)."""
    await pair.step(
        list_offsets_request(pair.versions(2)[-1], topic, -1, partitions=range(partitions)),
        until=no_error,
    )


async def learn_topic_ids(pair: Pair, *topics: str) -> None:
    """Metadata for `topics` until each has a leader on both brokers; each broker's topic
    ids are kept in side.learned["topic_id", name]."""
    answers = await pair.step(
        request(
            3,
            12,
            topics=[{"name": topic, "topic_id": uuid.UUID(int=0)} for topic in topics],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        until=no_error,
    )
    for side in pair.sides:
        for entry in answers[side].topics:
            side.learned["topic_id", entry.name] = entry.topic_id


def topic_id(side: Side, topic: str) -> uuid.UUID:
    return side.learned["topic_id", topic]  # type: ignore[no-any-return]


async def produce(
    pair: Pair,
    topic: str,
    batch: bytes | Callable[[Side], bytes],
    *,
    version: int | None = None,
    partition: int = 0,
    transactional_id: str | None = None,
    acks: int = -1,
) -> Answers:
    """One Produce of `batch` (or a batch per broker, for its producer id) to a partition."""
    chosen = pair.versions(0)[-1] if version is None else version

    def produce_request(side: Side) -> Any:
        return request(
            0,
            chosen,
            transactional_id=transactional_id,
            acks=acks,
            timeout=datetime.timedelta(seconds=10),
            topic_data=[
                {
                    "name": topic,
                    "topic_id": side.learned.get(("topic_id", topic), uuid.UUID(int=0)),
                    "partition_data": [
                        {"index": partition, "records": batch(side) if callable(batch) else batch}
                    ],
                }
            ],
        )

    return await pair.step(produce_request)


def fetch_request(
    side: Side,
    version: int,
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    isolation_level: int = 0,
    max_wait_ms: int = 100,
    max_bytes: int = 1 << 20,
    current_leader_epoch: int = -1,
) -> Any:
    return request(
        1,
        version,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "topic_id": side.learned.get(("topic_id", topic), uuid.UUID(int=0)),
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": current_leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


async def find_coordinator(pair: Pair, key: str, key_type: int = 0, version: int = 4) -> Answers:
    """FindCoordinator until both know it (Kafka creates __consumer_offsets, or
    __transaction_state, on the first request and answers COORDINATOR_NOT_AVAILABLE till then)."""
    return await pair.step(
        request(10, version, key=key, key_type=key_type, coordinator_keys=[key]), until=no_error
    )


async def init_producer(
    pair: Pair,
    transactional_id: str | None,
    version: int | None = None,
    timeout: datetime.timedelta = datetime.timedelta(seconds=60),
) -> Answers:
    """InitProducerId (its transactions aborted by the broker past `timeout`); each
    broker's producer id and epoch are learned under the transactional id (None: the
    idempotent producer)."""
    if transactional_id is not None:
        await find_coordinator(pair, transactional_id, key_type=1)
    chosen = pair.versions(22)[-1] if version is None else version
    answers = await pair.step(
        lambda side: request(
            22,
            chosen,
            transactional_id=transactional_id,
            transaction_timeout=timeout,
            producer_id=side.learned.get(("producer_id", transactional_id), -1),
            producer_epoch=side.learned.get(("producer_epoch", transactional_id), -1),
        ),
        # COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and CONCURRENT_TRANSACTIONS are
        # Kafka's for a moment (the transaction log loading, a transaction ending)
        until=lambda answer: answer.error_code not in (14, 16, 51),
    )
    for side in pair.sides:
        side.learned["producer_id", transactional_id] = answers[side].producer_id
        side.learned["producer_epoch", transactional_id] = answers[side].producer_epoch
    return answers


def producer_batch(
    transactional_id: str | None,
    values: Sequence[bytes],
    base_sequence: int,
    *,
    transactional: bool = False,
    timestamp_ms: int = 1_767_225_600_000,
) -> Callable[[Side], bytes]:
    """A batch per broker, carrying that broker's producer id and epoch."""

    def batch(side: Side) -> bytes:
        return records_batch(
            values,
            producer_id=side.learned["producer_id", transactional_id],
            producer_epoch=side.learned["producer_epoch", transactional_id],
            base_sequence=base_sequence,
            transactional=transactional,
            timestamp_ms=timestamp_ms,
        )

    return batch


def subscription(topic: str) -> bytes:
    """A consumer's JoinGroup metadata (ConsumerProtocolSubscription v1). It must be valid:
    Kafka 4.1.1 never answers a JoinGroup of protocol type "consumer" whose metadata it
    cannot parse (seen with the bytes of a topic name)."""
    return _versioned(ConsumerProtocolSubscription(topics=(topic,), owned_partitions=()))


def assignment(topic: str) -> bytes:
    """The leader's SyncGroup assignment for itself: the topic's partition 0."""
    return _versioned(
        ConsumerProtocolAssignment(
            assigned_partitions=(AssignedPartition(topic=topic, partitions=(0,)),)
        )
    )


def _versioned(data: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(data))(buffer, data)
    return struct.pack(">h", data.__version__) + buffer.getvalue()


async def join_classic(
    pair: Pair,
    group: str,
    topic: str,
    version: int | None = None,
    protocol: str = "range",
    timeout: datetime.timedelta = datetime.timedelta(seconds=30),
    sync: bool = True,
) -> Answers:
    """One member joins a classic group (its session and rebalance timeouts `timeout`) and,
    with `sync`, syncs (as the leader, assigning itself the topic's partition 0); its member
    id and generation are learned per broker."""
    await find_coordinator(pair, group)
    chosen = pair.versions(11)[-1] if version is None else version

    def join(side: Side) -> Any:
        return request(
            11,
            chosen,
            group_id=group,
            session_timeout=timeout,
            rebalance_timeout=timeout,
            member_id=side.learned.get(("member", group), ""),
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": protocol, "metadata": subscription(topic)}],
            reason=None,
        )

    first = await pair.step(join)
    if chosen >= 4:  # KIP-394: a new member is given its id and asked to join again
        for side in pair.sides:
            side.learned["member", group] = first[side].member_id
        first = await pair.step(join)
    for side in pair.sides:
        side.learned["member", group] = first[side].member_id
        side.learned["generation", group] = first[side].generation_id
    if not sync:
        return first
    sync_version = min(pair.versions(14)[-1], max(pair.versions(14)[0], chosen - 4))
    await pair.step(
        lambda side: request(
            14,
            sync_version,
            group_id=group,
            generation_id=side.learned["generation", group],
            member_id=side.learned["member", group],
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name=protocol,
            assignments=[
                {"member_id": side.learned["member", group], "assignment": assignment(topic)}
            ],
        )
    )
    return first


def member(side: Side, group: str) -> str:
    return side.learned["member", group]  # type: ignore[no-any-return]


def generation(side: Side, group: str) -> int:
    return side.learned["generation", group]  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Log:
    """What a consumer reads of a partition, fetch after fetch, from an offset to the end
    (the high watermark, or the last stable offset under read_committed)."""

    error_code: int
    batches: tuple[Any, ...]
    aborted_transactions: tuple[Any, ...]
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


async def read_log(
    pair: Pair, topic: str, version: int, isolation_level: int, start: int = 0
) -> None:
    """Read a partition whole on each broker and compare what was read: batch by batch,
    record by record, and the aborted transactions listed on the way. A broker may end a
    Fetch answer early (Kafka 4.1.1 stops one at the next transaction marker now and then),
    so answers are compared as the log a consumer assembles from them, not one by one."""
    logs = [await _read_log(side, topic, version, isolation_level, start) for side in pair.sides]
    pair.record(1, version, Answers(*logs), name="FetchLog")


async def _read_log(side: Side, topic: str, version: int, isolation_level: int, start: int) -> Log:
    batches: list[Any] = []
    aborted: set[Any] = set()
    offset = start
    empty = 0
    for _ in range(100):
        answer = await side.ask(
            fetch_request(side, version, topic, offset, isolation_level=isolation_level)
        )
        (partition,) = answer.responses[0].partitions
        aborted.update(partition.aborted_transactions or ())
        found = decoded_batches(partition.records) or ()
        end = partition.last_stable_offset if isolation_level else partition.high_watermark
        batches += [
            batch for batch in found if batch.base_offset + batch.last_offset_delta >= offset
        ]
        if found:
            offset = found[-1].base_offset + found[-1].last_offset_delta + 1
        else:
            empty += 1
        # An empty answer below the end is fetched again, as a consumer would (Kafka 4.1.1
        # sends one now and then under read_committed); ten in a row end the read.
        if offset >= end or partition.error_code or empty >= 10:
            return Log(
                partition.error_code,
                tuple(batches),
                tuple(sorted(aborted, key=lambda entry: (entry.first_offset, entry.producer_id))),
                partition.high_watermark,
                partition.last_stable_offset,
                getattr(partition, "log_start_offset", -1),  # from v5
            )
        if not found:
            await trio.sleep(0.05)
    raise AssertionError(f"{side.name}: {topic} not read to its end in 100 fetches")


def list_offsets_request(
    version: int,
    topic: str,
    timestamp: int,
    isolation_level: int = 0,
    partition: int = 0,
    current_leader_epoch: int = -1,
    partitions: Iterable[int] | None = None,
) -> Any:
    """ListOffsets of one partition (or of `partitions`) at one timestamp (-1 latest, -2
    earliest, -3 max)."""
    return request(
        2,
        version,
        replica_id=-1,
        isolation_level=isolation_level,
        timeout=datetime.timedelta(seconds=10),
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": index,
                        "current_leader_epoch": current_leader_epoch,
                        "timestamp": timestamp,
                    }
                    for index in ([partition] if partitions is None else partitions)
                ],
            }
        ],
    )


async def commit_classic(pair: Pair, group: str, topic: str, offset: int) -> Answers:
    """OffsetCommit of partition 0 by a classic group's member, at its generation."""
    return await pair.step(
        lambda side: request(
            8,
            pair.versions(8)[-1],
            group_id=group,
            generation_id_or_member_epoch=generation(side, group),
            member_id=member(side, group),
            topics=[
                {
                    "name": topic,
                    "topic_id": side.learned["topic_id", topic],
                    "partitions": [
                        {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
                    ],
                }
            ],
        )
    )


def txn_offset_commit_request(
    side: Side,
    version: int,
    transactional_id: str,
    group: str,
    topic: str,
    offset: int,
    metadata: str = "txn",
    member_id: str = "",
    generation_id: int = -1,
) -> Any:
    """TxnOffsetCommit of partition 0 by the transactional producer (no group member
    unless `member_id` and its `generation_id`, or member epoch, are given)."""
    return request(
        28,
        version,
        transactional_id=transactional_id,
        group_id=group,
        producer_id=side.learned["producer_id", transactional_id],
        producer_epoch=side.learned["producer_epoch", transactional_id],
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            {
                "name": topic,  # v0-5; v6 names it by id
                "topic_id": side.learned.get(("topic_id", topic)),
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": metadata,
                    }
                ],
            }
        ],
    )
