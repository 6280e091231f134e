"""The C lane's contract (nullbroker/handlers/produce_lane.h) against the Python it reads.

The lane (handlers/_produce_lane.c) and the connection's C reader (net/_lane_reader.c) act
on the broker's Python objects by attribute name. The header's table names every one of
them once, with its owner class, the kind of value it holds and what the C does with it;
these tests hold the table to the C that uses it (no name spelled outside it, no entry
unused) and to the Python twin's objects (a rename, a new type or a frozen field fails here,
not in a request). The accounts are held to dispatch's: the fields the lane moves are
exactly those a request served by the Python path moves. tests/broker/test_produce_lane.py
compares the accounts themselves, request by request.

Runs with NULLBROKER_NATIVE=off too: it reads the header, not the built module.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import importlib
import re
from collections import deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
import trio.testing

import nullbroker
from codec import ApiKey, api_name
from nullbroker import stats
from nullbroker.broker import Broker
from nullbroker.net.connection import Wire
from nullbroker.net.host_loop import ReceiveBuffer
from nullbroker.settings import Config
from nullbroker.state.producers import RecentBatch
from nullbroker.stats import BrokerStats, LatencyHistogram
from tests.support.kafka_wire import record_batch
from tests.support.kio_calls import call, dispatch_of, types

PACKAGE = Path(nullbroker.__file__).parent
"""Found from the package, not from this file: the test may move."""
HEADER = PACKAGE / "handlers" / "produce_lane.h"
C_SOURCES = (PACKAGE / "handlers" / "_produce_lane.c", PACKAGE / "net" / "_lane_reader.c")
TOPIC = "contract"
PRODUCER_ID = 0
"""The first producer id InitProducerId gives."""


class Entry(NamedTuple):
    """One line of LANE_ATTRIBUTES: A(owner, attribute, kind, access)."""

    owner: str
    attribute: str
    kind: str
    access: str


def header() -> str:
    return HEADER.read_text()


def owners(text: str) -> dict[str, str]:
    """LANE_OWNERS: each owner class's module."""
    return dict(re.findall(r'^\s*O\((\w+), "([\w.]+)"\)', text, re.MULTILINE))


def entries(text: str) -> list[Entry]:
    return [
        Entry(*found)
        for found in re.findall(r"^\s*A\((\w+), (\w+), (\w+), (\w+)\)", text, re.MULTILINE)
    ]


def owner_class(owner: str, module: str) -> type:
    found = getattr(importlib.import_module(module), owner, None)
    assert isinstance(found, type), f"{module}.{owner}: no such class (produce_lane.h)"
    return found


PRIMITIVE_KINDS: Mapping[str, Any] = {
    "int": lambda value: type(value) is int,
    "bool": lambda value: type(value) is bool,
    "str": lambda value: type(value) is str,
    "list": lambda value: type(value) is list,
    "dict": lambda value: isinstance(value, dict),
    "deque": lambda value: isinstance(value, deque),
    "memoryview": lambda value: type(value) is memoryview,
    "optional": lambda value: True,  # the C compares it with None: any value is the Python way
    "truth": lambda value: True,  # the C tests its truth: any value has one
    "method": callable,
}


def problems(table: list[Entry], instances: Mapping[str, object]) -> Iterator[str]:
    """What in the table the Python objects do not hold to, one line each."""
    for entry in table:
        where = f"{entry.owner}.{entry.attribute}"
        instance = instances[entry.owner]
        if not hasattr(instance, entry.attribute):
            yield f"{where}: no such attribute on {type(instance).__qualname__}"
            continue
        value = getattr(instance, entry.attribute)
        if entry.kind in PRIMITIVE_KINDS:
            holds = PRIMITIVE_KINDS[entry.kind](value)
        else:  # another owner: an object the C reads on
            holds = type(value) is type(instances[entry.kind])
        if not holds:
            yield f"{where}: {type(value).__qualname__}, not {entry.kind}"
        if entry.access in ("set", "moved") and entry.kind == "int":
            try:
                setattr(instance, entry.attribute, value)
            except (AttributeError, TypeError, dataclasses.FrozenInstanceError) as error:
                yield f"{where}: the C sets it, Python refuses ({error})"


def python_broker() -> Broker:
    """A broker whose Python path answers everything, after a topic was made and an
    idempotent producer wrote its first batch to it."""
    broker = Broker(Config(partitions=1))
    dispatch_of(broker).produce_lane = None
    broker.topics.get_or_auto_create(TOPIC)
    call(broker, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None,
         transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
         producer_epoch=-1)  # fmt: skip
    produce(broker, record_batch(2, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=0))
    return broker


def produce(broker: Broker, batch: bytes) -> None:
    t = types(ApiKey.PRODUCE, 9)
    topic = t.TopicProduceData(
        name=TOPIC, partition_data=(t.PartitionProduceData(index=0, records=batch),)
    )
    (answered,) = call(
        broker,
        ApiKey.PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(topic,),
    ).responses
    assert answered.partition_responses[0].error_code == 0


def instances(broker: Broker) -> dict[str, object]:
    """An instance of each owner of the table, as the lane and the reader meet it."""
    topic = broker.topics.get(TOPIC)
    assert topic is not None
    partition = topic.partitions[0]
    sequences = broker.producers.sequences_table()[(PRODUCER_ID, TOPIC, 0)]
    produce_stats = broker.stats.api(api_name(ApiKey.PRODUCE))
    return {
        "Topic": topic,
        "Partition": partition,
        "PartitionCounters": partition.produced,
        "PartitionSequences": sequences,
        "deque": sequences.recent,
        "Faults": broker.faults,
        "LogGrowth": broker.log_growth,
        "Cluster": broker.cluster,
        "BrokerStats": broker.stats,
        "ApiStats": produce_stats,
        "LatencyHistogram": produce_stats.latency,
        "Wire": Wire(trio.testing.memory_stream_pair()[0]),
        "ReceiveBuffer": ReceiveBuffer(),
    }


def test_the_c_names_an_attribute_only_through_the_table_and_uses_every_entry() -> None:
    table = {(entry.owner, entry.attribute) for entry in entries(header())}
    sources = "\n".join(path.read_text() for path in C_SOURCES)
    spelled = set(re.findall(r"\bATTRIBUTE\((\w+), (\w+)\)", sources))
    assert spelled == table, "produce_lane.h's table and the C's ATTRIBUTE(...) differ"
    # No other way to a Python attribute by name: C strings looked up, or interned apart.
    assert not re.findall(r"GetAttrString|SetAttrString|_Py_IDENTIFIER|CallMethod\(", sources)
    interned = re.findall(r"PyUnicode_InternFromString\((\w+)\)", sources)
    # Dict keys, not attribute names: the API's accounts, and the client ids beyond the bound.
    assert interned == ["PRODUCE_API_NAME", "OTHER_CLIENT_IDS"], "a name interned outside the table"


def test_every_entry_of_the_table_holds_for_the_python_objects() -> None:
    text = header()
    found = instances(python_broker())
    assert set(found) == set(owners(text)), "an owner of produce_lane.h with no instance here"
    for owner, module in owners(text).items():
        assert isinstance(found[owner], owner_class(owner, module)), owner
    kinds = set(PRIMITIVE_KINDS) | set(owners(text))
    accesses = {"read", "set", "moved", "called"}
    for entry in entries(text):
        assert entry.owner in found, f"{entry}: not an owner of LANE_OWNERS"
        assert entry.kind in kinds and entry.access in accesses, f"{entry}: unknown kind or access"
    assert list(problems(entries(text), found)) == []


def test_the_check_fails_when_python_renames_retypes_or_freezes_what_the_c_reads() -> None:
    """The check above can fail: Python objects changed as a refactoring might change them."""
    broker = python_broker()
    found = instances(broker)
    table = entries(header())
    topic = broker.topics.get(TOPIC)
    assert topic is not None

    @dataclasses.dataclass(frozen=True)
    class FrozenSequences:
        epoch: int = 0
        last_sequence: int = -1
        last_timestamp: int = -1
        recent: Any = dataclasses.field(default_factory=deque)

    changed = {
        **found,
        "LogGrowth": SimpleNamespace(waiters=0, notify=lambda: None),  # renamed
        "Topic": dataclasses.replace(topic, internal=0),  # type: ignore[arg-type]  # retyped
        "PartitionSequences": FrozenSequences(),  # frozen
    }
    assert list(problems(table, changed)) == [
        "Topic.internal: int, not bool",
        "PartitionSequences.last_sequence: the C sets it, Python refuses"
        " (cannot assign to field 'last_sequence')",
        "PartitionSequences.last_timestamp: the C sets it, Python refuses"
        " (cannot assign to field 'last_timestamp')",
        "LogGrowth.waiting: no such attribute on SimpleNamespace",
    ]
    with pytest.raises(AssertionError, match="no such class"):  # moved to another module
        owner_class("LogGrowth", "nullbroker.state.topics")


def test_recent_batches_are_made_in_the_named_tuple_s_field_order() -> None:
    (fields,) = re.findall(r"#define RECENT_BATCH_FIELDS\(F\)(.*)", header())
    assert tuple(re.findall(r"F\((\w+)\)", fields)) == RecentBatch._fields


def test_the_lane_accounts_produce_under_the_name_dispatch_uses() -> None:
    (name,) = re.findall(r'#define PRODUCE_API_NAME "(\w+)"', header())
    assert name == api_name(ApiKey.PRODUCE)


def test_the_lane_bounds_the_client_ids_as_the_python_path_does() -> None:
    (bound,) = re.findall(r"#define MAX_CLIENT_IDS (\d+)", header())
    (other,) = re.findall(r'#define OTHER_CLIENT_IDS "([^"]+)"', header())
    assert (int(bound), other) == (stats.MAX_CLIENT_IDS, stats.OTHER_CLIENT_IDS)


def account_fields(stats: BrokerStats) -> dict[tuple[Any, ...], tuple[str, str, Any]]:
    """Every number of the accounts by its path (attributes, and the keys of the tables of
    accounts objects: `("apis", "Produce", "requests")`), with the class that holds it and
    its attribute name. Not when they began (`started_at`, `counts_since`): two brokers
    differ in that."""
    fields: dict[tuple[Any, ...], tuple[str, str, Any]] = {}

    def is_accounts(value: object) -> bool:
        return dataclasses.is_dataclass(value) or isinstance(value, LatencyHistogram)

    def walk(holder: object, path: tuple[Any, ...]) -> None:
        names = holder.__slots__ if hasattr(holder, "__slots__") else vars(holder)
        for name in names:
            if name.startswith("_") or name in ("started_at", "counts_since"):
                continue
            value = getattr(holder, name)
            if is_accounts(value):
                walk(value, (*path, name))
            elif isinstance(value, dict) and all(map(is_accounts, value.values())):
                for key, item in value.items():
                    walk(item, (*path, name, key))
            else:
                fields[(*path, name)] = (type(holder).__name__, name, copy.deepcopy(value))

    walk(stats, ())
    return fields


def accounts(broker: Broker) -> dict[tuple[Any, ...], Any]:
    """The broker's accounts, every field, each latency histogram as its number of requests
    (the C and Python paths take different times, so fall in different buckets)."""
    return {
        path: (sum(value) if name == "counts" else value > 0)
        if holder == "LatencyHistogram"
        else value
        for path, (holder, name, value) in account_fields(broker.stats).items()
    }


def moved(
    before: dict[tuple[Any, ...], tuple[str, str, Any]],
    after: dict[tuple[Any, ...], tuple[str, str, Any]],
) -> set[tuple[str, str]]:
    """The (class, attribute) of every field that changed; a field that appeared still at
    zero (an API's first hold histogram) did not."""
    return {
        (holder, name)
        for path, (holder, name, value) in after.items()
        if value != (before[path][2] if path in before else nothing_like(value))
    }


def nothing_like(value: Any) -> Any:
    """Zero of a field's type: 0, [0, 0, ...], {}."""
    return [0] * len(value) if isinstance(value, list) else type(value)()


def test_the_lane_moves_exactly_the_accounts_a_request_served_by_dispatch_moves() -> None:
    """A count dispatch adds to what a request counts (stats.BrokerStats.served, or its own
    code) and the lane does not move fails here: each such field must be a `moved` entry of
    produce_lane.h's accounts, and the C then has the name to move it by."""
    text = header()
    broker = python_broker()
    before = account_fields(broker.stats)
    produce(broker, record_batch(3, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=2))
    accounted = moved(before, account_fields(broker.stats))
    stats_owners = {owner for owner, module in owners(text).items() if module == "nullbroker.stats"}
    lane_moves = {
        (entry.owner, entry.attribute)
        for entry in entries(text)
        if entry.access == "moved" and entry.owner in stats_owners
    }
    assert accounted == lane_moves
