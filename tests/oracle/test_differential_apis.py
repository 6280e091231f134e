"""Every API key nullbroker serves, at every version both brokers serve, asked of Kafka 4.1.1
and of nullbroker alike (tests/support/differential.py), error paths included: the answers must be
equal but for data. Each sequence returns the KNOWN differences it meets."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.differential import (
    Listed,
    Pair,
    Side,
    commit_classic,
    consumer_group_join,
    create_topic,
    fetch_request,
    find_coordinator,
    for_each_version,
    generation,
    init_producer,
    join_classic,
    list_offsets_request,
    member,
    no_error,
    outcome_of_version,
    pair,
    produce,
    producer_batch,
    records_batch,
    request,
    set_assignment_interval,
    subscription,
    txn_offset_commit_request,
    uncompared_versions,
    unique,
)
from tests.support.kafka_wire import decode_response, request_frame, size_prefix

pytestmark = pytest.mark.differential
__all__ = ["pair"]

Sequence_ = Callable[[Pair], Awaitable[tuple[str, ...]]]
SWEEP: dict[int, Sequence_] = {}
ZERO = uuid.UUID(int=0)
SECONDS = datetime.timedelta(seconds=10)
CONCURRENT_TRANSACTIONS = 51


def sweep(api_key: int) -> Callable[[Sequence_], Sequence_]:
    def register(run: Sequence_) -> Sequence_:
        SWEEP[api_key] = run
        return run

    return register


@sweep(3)
async def metadata(pair: Pair) -> tuple[str, ...]:
    topic = unique("metadata")
    await create_topic(pair, topic, partitions=2)
    await find_coordinator(pair, unique("group"))  # Kafka creates __consumer_offsets
    made = {topic, "__consumer_offsets"}

    def asked(version: int, names: list[str], create: bool = False) -> object:
        return request(
            3,
            version,
            topics=[{"name": name, "topic_id": ZERO} for name in names],
            allow_auto_topic_creation=create,
            include_topic_authorized_operations=True,
            include_cluster_authorized_operations=version <= 10,
        )

    async def run(version: int) -> None:
        missing = unique("missing")
        await pair.step(asked(version, [topic, missing, "__consumer_offsets"]))
        if version >= 4:  # a topic made by the request that names it, as v0-v3 always may
            missing = unique("auto")
            await pair.step(asked(version, [topic, missing], create=True))
        # Kafka makes the topic a moment after it answers (unknown, as nullbroker answers):
        # asked again until it is known on both.
        made.add(missing)
        await pair.step(asked(version, [missing]), until=no_error)
        # Every topic (v0: an empty list, v1+: null), of which the sequence's are compared.
        await pair.step(
            request(
                3,
                version,
                topics=[] if version == 0 else None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=True,
                include_cluster_authorized_operations=version <= 10,
            ),
            only=Listed.of("topics", "name", made, made),
        )

    await for_each_version(pair, 3, run)
    return ()


@sweep(19)
async def create_topics(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        good = unique(f"create-v{version}")
        await pair.step(
            request(
                19,
                version,
                topics=[
                    topic_spec(good, 3, {"retention.ms": "1000"}),
                    topic_spec(unique("rf"), 1, {}, replication_factor=3),
                    topic_spec(unique("badname"), 1, {"no.such.config": "1"}),
                    topic_spec(unique("badvalue"), 1, {"retention.ms": "soon"}),
                    topic_spec(unique("zero"), 0, {}),
                ],
                timeout=SECONDS,
                validate_only=False,
            )
        )
        await pair.step(  # again: TOPIC_ALREADY_EXISTS
            request(19, version, topics=[topic_spec(good, 3, {})], timeout=SECONDS)
        )

    await for_each_version(pair, 19, run)
    return ()


def topic_spec(
    name: str, partitions: int, configs: dict[str, str], replication_factor: int = 1
) -> dict[str, object]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication_factor,
        "assignments": [],
        "configs": [{"name": key, "value": value} for key, value in configs.items()],
    }


@sweep(20)
async def delete_topics(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        topic = unique(f"delete-v{version}")
        missing = unique("missing")
        await create_topic(pair, topic)
        await pair.step(
            lambda side: request(
                20,
                version,
                topic_names=[topic, missing],
                topics=[
                    {"name": None, "topic_id": side_topic_id(side, topic)},
                    {"name": missing, "topic_id": ZERO},
                ],
                timeout=SECONDS,
            )
        )

    await for_each_version(pair, 20, run)
    return ()


def side_topic_id(side: Side, topic: str) -> uuid.UUID:
    return side.learned.get(("topic_id", topic), ZERO)  # type: ignore[no-any-return]


@sweep(37)
async def create_partitions(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        topic = unique(f"partitions-v{version}")
        await create_topic(pair, topic)
        for count in (3, 2):  # growing, then shrinking (INVALID_PARTITIONS)
            await pair.step(
                request(
                    37,
                    version,
                    topics=[
                        {"name": topic, "count": count, "assignments": None},
                        {"name": unique("missing"), "count": 2, "assignments": None},
                    ],
                    timeout=SECONDS,
                    validate_only=False,
                )
            )

    await for_each_version(pair, 37, run)
    return ()


@sweep(0)
async def produce_every_version(pair: Pair) -> tuple[str, ...]:
    topic = unique("produce")
    await create_topic(pair, topic)
    # Its own topic: nullbroker takes the batch over the limit, which moves the offsets.
    small = unique("small")
    await create_topic(pair, small, configs={"max.message.bytes": "2000"})

    async def run(version: int) -> None:
        await produce(pair, topic, records_batch([b"v%d" % version] * 3), version=version)
        await produce(pair, topic, records_batch([b"x"]), version=version, partition=7)
        await produce(pair, small, records_batch([b"x" * 3000]), version=version)

    await for_each_version(pair, 0, run)
    return ()


@sweep(1)
async def fetch_every_version(pair: Pair) -> tuple[str, ...]:
    topic = unique("fetch")
    await create_topic(pair, topic)
    await produce(pair, topic, records_batch([b"a", b"b", b"c"]))
    await produce(pair, topic, records_batch([b"d"], timestamp_ms=1_767_225_700_000))

    async def run(version: int) -> None:
        for offset in (0, 1, 3):
            await pair.step(lambda side, offset=offset: fetch_request(side, version, topic, offset))
        await pair.step(lambda side: fetch_request(side, version, topic, 99))  # out of range
        await pair.step(lambda side: fetch_request(side, version, topic, 0, partition=5))
        for epoch in (0, 5):  # the current leader epoch, and one the broker never had
            await pair.step(
                lambda side, epoch=epoch: fetch_request(
                    side, version, topic, 0, current_leader_epoch=epoch
                )
            )
        await pair.step(
            lambda side: fetch_request(side, version, topic, 0, isolation_level=1, partition=5)
        )
        await pair.step(lambda side: fetch_request(side, version, topic, 99, isolation_level=1))
        if version >= 13:  # a topic named by the zero id, without and with a fetch session
            for session_epoch in (-1, 0):
                await pair.step(
                    lambda side, epoch=session_epoch: dataclasses.replace(
                        fetch_request(side, version, unique("by-zero-id"), 0),
                        session_epoch=epoch,
                    )
                )

    await for_each_version(pair, 1, run)
    return ()


@sweep(2)
async def list_offsets(pair: Pair) -> tuple[str, ...]:
    topic = unique("offsets")
    await create_topic(pair, topic)
    await produce(pair, topic, records_batch([b"a", b"b", b"c"], timestamp_ms=1_767_225_600_000))
    await produce(pair, topic, records_batch([b"d", b"e"], timestamp_ms=1_767_225_500_000))

    async def run(version: int) -> None:
        timestamps = [-2, -1, 1_767_225_600_001, 1_767_225_500_000, 1_900_000_000_000]
        if version >= 7:
            timestamps.append(-3)  # max timestamp
        if version >= 8:
            timestamps.append(-4)  # earliest local (KIP-405)
        if version >= 9:
            timestamps.append(-5)  # latest tiered
        if version >= 11:
            timestamps.append(-6)  # earliest pending upload (KIP-1023)
        for isolation_level in (0, 1):
            await pair.step(
                request(
                    2,
                    version,
                    replica_id=-1,
                    isolation_level=isolation_level,
                    timeout=SECONDS,
                    topics=[
                        {
                            "name": topic,
                            "partitions": [
                                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": t}
                                for t in timestamps[:1]
                            ]
                            + [{"partition_index": 9, "current_leader_epoch": -1, "timestamp": -1}],
                        },
                        {
                            "name": unique("missing"),
                            "partitions": [
                                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                            ],
                        },
                    ],
                )
            )
            for timestamp in timestamps:
                await pair.step(list_offsets_request(version, topic, timestamp, isolation_level))
        if version >= 4:  # with the current leader epoch: this one, and one never had
            for epoch in (0, 5):
                await pair.step(
                    list_offsets_request(version, topic, -1, current_leader_epoch=epoch)
                )

    await for_each_version(pair, 2, run)
    return ()


@sweep(23)
async def offset_for_leader_epoch(pair: Pair) -> tuple[str, ...]:
    topic = unique("epochs")
    await create_topic(pair, topic)
    await produce(pair, topic, records_batch([b"a", b"b", b"c"]))
    # (current leader epoch, leader epoch): the current epoch, none, one after it, and
    # a current epoch the broker never had
    asked = ((-1, 0), (0, 0), (-1, -1), (0, 3), (5, 0))

    async def run(version: int) -> None:
        for current, epoch in asked:
            await pair.step(
                request(
                    23,
                    version,
                    replica_id=-1,
                    topics=[
                        {
                            "topic": topic,
                            "partitions": [
                                {
                                    "partition": index,
                                    "current_leader_epoch": current,
                                    "leader_epoch": epoch,
                                }
                                for index in (0, 5)
                            ],
                        },
                        {
                            "topic": unique("missing"),
                            "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}
                            ],
                        },
                    ],
                )
            )

    await for_each_version(pair, 23, run)
    return ()


@sweep(21)
async def delete_records(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        topic = unique(f"deleterecords-v{version}")
        await create_topic(pair, topic)
        await produce(pair, topic, records_batch([b"a", b"b", b"c", b"d"]))
        for offset in (2, 1, 9, -1):
            await pair.step(
                request(
                    21,
                    version,
                    topics=[
                        {"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]},
                        {
                            "name": unique("missing"),
                            "partitions": [{"partition_index": 0, "offset": 1}],
                        },
                    ],
                    timeout=SECONDS,
                )
            )

    await for_each_version(pair, 21, run)
    return ()


@sweep(32)
async def describe_configs(pair: Pair) -> tuple[str, ...]:
    topic = unique("configs")
    await create_topic(pair, topic, configs={"retention.ms": "12345"})

    async def run(version: int) -> None:
        for keys in (None, ["retention.ms", "cleanup.policy", "no.such.config"]):
            await pair.step(
                request(
                    32,
                    version,
                    resources=[
                        {"resource_type": 2, "resource_name": topic, "configuration_keys": keys},
                        {
                            "resource_type": 2,
                            "resource_name": unique("missing"),
                            "configuration_keys": keys,
                        },
                    ],
                    include_synonyms=True,
                    include_documentation=True,
                )
            )
        # The broker asked (each its own node id), with and without keys, synonyms and
        # documentation; every broker (""); a broker that is not the one asked, and no id.
        for keys, described in ((None, True), (None, False), (BROKER_KEYS, True)):
            await pair.step(
                lambda side, keys=keys, described=described: describe_broker(
                    side, version, keys, synonyms=described, documentation=described
                )
            )
        for name in ("", "7", "abc"):
            await pair.step(describe_broker(name, version, None))

    await for_each_version(pair, 32, run)
    return ()


BROKER_RESOURCE = 4
BROKER_KEYS = [
    "message.max.bytes",
    "log.retention.ms",
    "log.retention.hours",
    "num.partitions",
    "min.insync.replicas",
    "node.id",
    "ssl.keystore.password",
    "no.such.config",
]
"""Configs of a broker that set a topic's defaults, in one unit of several, of the node
(set at start), set for every broker, a password, and none."""


def broker_name(side: Side) -> str:
    """A broker's config resource: its node id (Kafka's fixture: kafka.node_id, nullbroker's
    only node: 0)."""
    return str(side.learned["node id"])


def describe_broker(
    side_or_name: Side | str,
    version: int,
    keys: list[str] | None,
    synonyms: bool = True,
    documentation: bool = True,
) -> object:
    """DescribeConfigs of one broker resource: the side's own, or the one named."""
    name = side_or_name if isinstance(side_or_name, str) else broker_name(side_or_name)
    return request(
        32,
        version,
        resources=[
            {"resource_type": BROKER_RESOURCE, "resource_name": name, "configuration_keys": keys}
        ],
        include_synonyms=synonyms,
        include_documentation=documentation,
    )


@sweep(44)
async def incremental_alter_configs(pair: Pair) -> tuple[str, ...]:
    topic = unique("alter")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        for name, operation, value in (
            ("retention.ms", 0, str(1000 + version)),
            ("retention.ms", 1, None),
            ("cleanup.policy", 2, "compact"),
            ("cleanup.policy", 3, "compact"),
            ("retention.ms", 0, "soon"),
            ("no.such.config", 0, "1"),
        ):
            await pair.step(
                request(
                    44,
                    version,
                    resources=[
                        {
                            "resource_type": 2,
                            "resource_name": topic,
                            "configs": [
                                {"name": name, "config_operation": operation, "value": value}
                            ],
                        }
                    ],
                    validate_only=False,
                )
            )
        await pair.step(
            request(
                44,
                version,
                resources=[
                    {
                        "resource_type": 2,
                        "resource_name": unique("missing"),
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
                    }
                ],
                validate_only=False,
            )
        )
        await pair.step(
            request(
                32,
                pair.versions(32)[-1],
                resources=[
                    {
                        "resource_type": 2,
                        "resource_name": topic,
                        "configuration_keys": ["retention.ms", "cleanup.policy"],
                    }
                ],
                include_synonyms=False,
                include_documentation=False,
            )
        )
        for every_broker in (False, True):
            await alter_broker(pair, version, topic, every_broker)

    await for_each_version(pair, 44, run)
    return ()


@sweep(33)
async def alter_configs(pair: Pair) -> tuple[str, ...]:
    """The legacy AlterConfigs: a topic's overrides replaced by the set given (those it does
    not name removed), read back; what Kafka refuses; a broker's, and every broker's, only
    validated (the session's Kafka is every test's: a replacement would drop what others
    set); a group's; a broker logger's, which AlterConfigs cannot alter."""
    topic = unique("legacy")
    await create_topic(pair, topic, configs={"segment.ms": "100000"})
    group = unique("legacy")

    def resource(kind: int, name: str, **configs: str | None) -> dict[str, object]:
        return {
            "resource_type": kind,
            "resource_name": name,
            "configs": [{"name": key.replace("_", "."), "value": v} for key, v in configs.items()],
        }

    async def run(version: int) -> None:
        async def alter(*resources: object, validate_only: bool = False) -> None:
            await pair.step(
                lambda side: request(
                    33,
                    version,
                    resources=[r(side) if callable(r) else r for r in resources],
                    validate_only=validate_only,
                )
            )

        async def read_back() -> None:
            await pair.step(
                request(
                    32,
                    pair.versions(32)[-1],
                    resources=[
                        {
                            "resource_type": 2,
                            "resource_name": topic,
                            "configuration_keys": ["segment.ms", "retention.ms", "cleanup.policy"],
                        }
                    ],
                    include_synonyms=False,
                    include_documentation=False,
                )
            )

        await alter(resource(2, topic, retention_ms=str(1000 + version)))
        await read_back()  # segment.ms is gone: the set replaced it
        await alter(resource(2, topic, cleanup_policy="compact"), validate_only=True)
        await read_back()
        for refused in (
            resource(2, topic, retention_ms="soon"),
            resource(2, topic, no_such_config="1"),
            resource(2, topic, retention_ms=None),
            resource(2, unique("missing"), retention_ms="1"),
            resource(8, "1", kafka="DEBUG"),
        ):
            await alter(refused)
        await alter(resource(32, group, consumer_session_timeout_ms="50000"))
        await alter(resource(2, topic))  # no overrides left
        await read_back()
        for configs in (
            {"message_max_bytes": "2000000"},
            {"log_dirs": "/x"},
            {"message_max_bytes": "big"},
        ):
            await alter(
                lambda side, configs=configs: resource(4, broker_name(side), **configs),
                validate_only=True,
            )
        for configs in (
            {"message_max_bytes": "2000000"},  # drops min.insync.replicas: refused
            {"min_insync_replicas": "1", "message_max_bytes": "2000000"},
        ):
            await alter(resource(4, "", **configs), validate_only=True)

    await for_each_version(pair, 33, run)
    return ()


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKER_ALTERATIONS: tuple[tuple[tuple[tuple[str, int, str | None], ...], bool], ...] = (
    # (configs, validate_only): what Kafka takes, for one broker or for every one...
    ((("message.max.bytes", SET, "2000000"),), True),
    ((("log.cleanup.policy", APPEND, "compact"),), True),
    ((("log.cleanup.policy", SUBTRACT, "delete"),), True),
    ((("ssl.cipher.suites", SET, "TLS_AES_128_GCM_SHA256"),), True),
    ((("listener.name.plaintext.ssl.keystore.location", SET, "/x"),), True),
    ((("listener.name.plaintext.max.connections", SET, "10"),), True),
    ((("min.insync.replicas", SET, "1"),), True),
    ((("log.retention.ms", DELETE, None),), True),
    # ... and what it refuses: read-only configs, values of the wrong type or out of
    # range, security configs without their listener, a list operation on another type,
    # no value, a config named twice, an operation it does not know
    ((("auto.create.topics.enable", SET, "false"), ("broker.id", SET, "3")), True),
    ((("message.max.bytes", SET, "big"),), True),
    ((("message.max.bytes", SET, "-5"),), False),
    ((("log.message.timestamp.type", SET, "Bogus"),), True),
    ((("compression.gzip.level", SET, "12"),), True),
    ((("log.cleanup.policy", APPEND, "bogus"),), True),
    ((("ssl.keystore.location", SET, "/x"),), True),
    ((("message.max.bytes", APPEND, "1"),), True),
    ((("message.max.bytes", SET, None),), True),
    ((("message.max.bytes", SET, "1"), ("message.max.bytes", SET, "2")), True),
    ((("message.max.bytes", 7, "1"),), True),
)
BROKER_SET = (
    ("message.max.bytes", SET, " 2000000 "),
    ("log.retention.ms", SET, "604800001"),
    ("log.cleaner.backoff.ms", SET, "15001"),
    ("no.such.config", SET, "1"),
)
"""Configs set for real, and deleted before the sequence ends: the session's Kafka is
every test's, so none that changes what another test sees once it is gone (a larger batch
limit, a longer retention, a cleaner's pause, a config no one reads)."""


async def alter_broker(pair: Pair, version: int, topic: str, every_broker: bool) -> None:
    """IncrementalAlterConfigs of the broker asked (each its own node id) or of every broker
    (""): what Kafka takes and refuses, then configs set for real and read back (the broker,
    every broker, a topic whose defaults they are), then deleted."""

    def alter(
        configs: tuple[tuple[str, int, str | None], ...], validate_only: bool
    ) -> Callable[[Side], object]:
        return lambda side: request(
            44,
            version,
            resources=[
                {
                    "resource_type": BROKER_RESOURCE,
                    "resource_name": "" if every_broker else broker_name(side),
                    "configs": [
                        {"name": name, "config_operation": operation, "value": value}
                        for name, operation, value in configs
                    ],
                }
            ],
            validate_only=validate_only,
        )

    for configs, validate_only in BROKER_ALTERATIONS:
        await pair.step(alter(configs, validate_only))
    # Kafka's controller takes an alteration, and the broker applies it a moment after it
    # answers: what is read back is asked again until it shows (the same on both).
    try:
        await pair.step(alter(BROKER_SET, False))
        for own in (True, False):
            await pair.step(
                lambda side, own=own: describe_broker(
                    broker_name(side) if own else "",
                    pair.versions(32)[-1],
                    [*BROKER_KEYS, "log.cleaner.backoff.ms"],
                ),
                # ("" lists it only where it was set for every broker)
                until=lambda answer, own=own: (
                    not (own or every_broker)
                    or config_value(answer, "log.cleaner.backoff.ms") == "15001"
                ),
            )
        await pair.step(
            request(
                32,
                pair.versions(32)[-1],
                resources=[
                    {
                        "resource_type": 2,
                        "resource_name": topic,
                        "configuration_keys": ["max.message.bytes", "retention.ms"],
                    }
                ],
                include_synonyms=True,
                include_documentation=False,
            ),
            until=lambda answer: config_value(answer, "max.message.bytes") == "2000000",
        )
    finally:
        await pair.step(alter(tuple((name, DELETE, None) for name, _, _ in BROKER_SET), False))
    await pair.step(
        lambda side: describe_broker(side, pair.versions(32)[-1], BROKER_KEYS),
        until=lambda answer: config_value(answer, "message.max.bytes") == "1048588",
    )


def config_value(answer: object, name: str) -> str | None:
    """The value of a config in a DescribeConfigs answer of one resource (None: not listed)."""
    (result,) = answer.results  # type: ignore[attr-defined]
    return next((entry.value for entry in result.configs if entry.name == name), None)


@sweep(60)
async def describe_cluster(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        for operations in (False, True):
            await pair.step(
                request(
                    60,
                    version,
                    include_cluster_authorized_operations=operations,
                    endpoint_type=1,
                    include_fenced_brokers=False,
                )
            )

    await for_each_version(pair, 60, run)
    return ()


@sweep(75)
async def describe_topic_partitions(pair: Pair) -> tuple[str, ...]:
    topic = unique("dtp")
    await create_topic(pair, topic, partitions=3)

    async def run(version: int) -> None:
        await pair.step(
            request(
                75,
                version,
                topics=[{"name": topic}, {"name": unique("missing")}],
                response_partition_limit=2,
                cursor=None,
            )
        )
        await pair.step(
            request(
                75,
                version,
                topics=[{"name": topic}],
                response_partition_limit=2000,
                cursor={"topic_name": topic, "partition_index": 1},
            )
        )

    await for_each_version(pair, 75, run)
    return ()


@sweep(10)
async def find_coordinators(pair: Pair) -> tuple[str, ...]:
    group = unique("coordinator")
    await find_coordinator(pair, group)

    async def run(version: int) -> None:
        await pair.step(request(10, version, key=group, key_type=0, coordinator_keys=[group]))
        await pair.step(request(10, version, key=group, key_type=7, coordinator_keys=[group]))

    await for_each_version(pair, 10, run)
    return ()


@sweep(11)
async def join_group(pair: Pair) -> tuple[str, ...]:
    topic = unique("join")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        await join_classic(pair, unique(f"join-v{version}"), topic, version=version)

    await for_each_version(pair, 11, run)
    return ()


async def classic_group(pair: Pair, name: str) -> tuple[str, str]:
    topic = unique(f"{name}-topic")
    group = unique(name)
    await create_topic(pair, topic)
    await join_classic(pair, group, topic)
    return topic, group


@sweep(12)
async def heartbeat(pair: Pair) -> tuple[str, ...]:
    _, group = await classic_group(pair, "heartbeat")

    async def run(version: int) -> None:
        for generation_offset in (0, 1):
            await pair.step(
                lambda side, generation_offset=generation_offset: request(
                    12,
                    version,
                    group_id=group,
                    generation_id=generation(side, group) + generation_offset,
                    member_id=member(side, group),
                    group_instance_id=None,
                )
            )
        await pair.step(request(12, version, group_id=group, generation_id=1, member_id="nobody"))
        await pair.step(
            request(12, version, group_id=unique("missing"), generation_id=1, member_id="nobody")
        )

    await for_each_version(pair, 12, run)
    return ()


@sweep(14)
async def sync_group(pair: Pair) -> tuple[str, ...]:
    _, group = await classic_group(pair, "sync")

    async def run(version: int) -> None:
        await pair.step(
            lambda side: request(
                14,
                version,
                group_id=group,
                generation_id=generation(side, group),
                member_id=member(side, group),
                protocol_type="consumer",
                protocol_name="range",
                assignments=[],
            )
        )
        await pair.step(
            request(14, version, group_id=group, generation_id=1, member_id="x", assignments=[])
        )

    await for_each_version(pair, 14, run)
    return ()


@sweep(13)
async def leave_group(pair: Pair) -> tuple[str, ...]:
    topic = unique("leave")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        group = unique(f"leave-v{version}")
        await join_classic(pair, group, topic)
        await pair.step(
            lambda side: request(
                13,
                version,
                group_id=group,
                member_id=member(side, group),
                members=[{"member_id": member(side, group), "group_instance_id": None}],
            )
        )
        await pair.step(
            request(
                13,
                version,
                group_id=group,
                member_id="nobody",
                members=[{"member_id": "nobody", "group_instance_id": None}],
            )
        )

    await for_each_version(pair, 13, run)
    return ()


@sweep(8)
async def offset_commit(pair: Pair) -> tuple[str, ...]:
    topic, group = await classic_group(pair, "commit")

    async def run(version: int) -> None:
        for generation_id, offset in ((None, 5 + version), (-1, 7), (99, 8)):
            await pair.step(
                lambda side, generation_id=generation_id, offset=offset: request(
                    8,
                    version,
                    group_id=group,
                    generation_id_or_member_epoch=(
                        generation(side, group) if generation_id is None else generation_id
                    ),
                    member_id=member(side, group) if generation_id != -1 else "",
                    group_instance_id=None,
                    retention_time=datetime.timedelta(milliseconds=-1),
                    topics=[
                        {
                            "name": topic,
                            "topic_id": side_topic_id(side, topic),
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": offset,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "m",
                                }
                            ],
                        }
                    ],
                )
            )

    await for_each_version(pair, 8, run)
    return ()


@sweep(9)
async def offset_fetch(pair: Pair) -> tuple[str, ...]:
    topic, group = await classic_group(pair, "fetchoffsets")
    await commit_classic(pair, group, topic, 3)

    no_group = unique("nogroup")

    async def run(version: int) -> None:
        for topics in (None, [(topic, [0, 1]), (unique("missing"), [0])]):
            if topics is None and version < 2:
                continue
            listed = (
                None
                if topics is None
                else [{"name": name, "partition_indexes": parts} for name, parts in topics]
            )
            await pair.step(
                lambda side, listed=listed, topics=topics: request(
                    9,
                    version,
                    group_id=group,
                    topics=listed,
                    groups=[
                        {
                            "group_id": group,
                            "member_id": None,
                            "member_epoch": -1,
                            "topics": None
                            if topics is None
                            else [
                                {
                                    "name": name,
                                    "topic_id": side_topic_id(side, name),
                                    "partition_indexes": parts,
                                }
                                for name, parts in topics
                            ],
                        },
                        {"group_id": no_group, "member_epoch": -1, "topics": None},
                    ],
                    require_stable=True,
                )
            )

    await for_each_version(pair, 9, run)
    return ()


@sweep(15)
async def describe_groups(pair: Pair) -> tuple[str, ...]:
    _, group = await classic_group(pair, "describe")

    async def run(version: int) -> None:
        await pair.step(
            request(
                15, version, groups=[group, unique("missing")], include_authorized_operations=True
            )
        )

    await for_each_version(pair, 15, run)
    return ()


GROUP_STATES = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
    "NotReady",
    "stable",  # Kafka matches a state whatever its case
    "Nonsense",
)
"""Every state a group of Kafka 4.1 can be in (classic, consumer, streams), and two more."""
GROUP_TYPES = ("classic", "consumer", "share", "streams", "Consumer", "nonsense")
LONG = datetime.timedelta(minutes=5)
"""A member's session and rebalance timeouts where it must keep its state for the sequence."""


@sweep(16)
async def list_groups(pair: Pair) -> tuple[str, ...]:
    """Groups of both protocols in each state a sequence can hold them in, listed with every
    filter of every version; the session's other groups are left out on both sides."""
    topic = unique("listgroups")
    await create_topic(pair, topic, partitions=2)
    made: dict[str, tuple[str, str]] = {}
    """Each group the sequence makes, with its type and state."""
    group = unique("stable")
    await join_classic(pair, group, topic, timeout=LONG)
    made[group] = ("classic", "Stable")
    group = unique("completing")  # joined, never synced
    await join_classic(pair, group, topic, timeout=LONG, sync=False)
    made[group] = ("classic", "CompletingRebalance")
    group = unique("empty")  # offsets committed by a consumer with no group membership
    await find_coordinator(pair, group)
    await commit_without_member(pair, group, topic)
    made[group] = ("classic", "Empty")
    group = unique("preparing")
    await join_classic(pair, group, topic, timeout=LONG)
    held = await join_second_member(pair, group, topic)
    made[group] = ("classic", "PreparingRebalance")
    members = []
    for state in ("Stable", "Reconciling", "Assigning", "Empty"):
        group = unique(f"consumer-{state.lower()}")
        members += await consumer_group(pair, group, topic, state)
        made[group] = ("consumer", state)

    async def run(version: int) -> None:
        for group, member_id in members:  # their session is the broker's: 45 s
            await pair.step(
                lambda side, group=group, member_id=member_id: request(
                    68,
                    pair.versions(68)[-1],
                    group_id=group,
                    member_id=member_id,
                    member_epoch=side.learned["epoch", group, member_id],
                    topic_partitions=None,
                )
            )
        filters: list[tuple[list[str], list[str]]] = [([], [])]
        if version >= 4:
            filters += [([state], []) for state in GROUP_STATES]
        if version >= 5:
            filters += [([], [kind]) for kind in GROUP_TYPES]
            filters += [(["Stable"], ["consumer"]), (["Empty", "Stable"], ["classic", "share"])]
        for states, kinds in filters:
            expected = [
                group
                for group, (kind, state) in made.items()
                if (not states or state.lower() in {wanted.lower() for wanted in states})
                and (not kinds or kind in {wanted.lower() for wanted in kinds})
            ]
            await pair.step(
                request(16, version, states_filter=states, types_filter=kinds),
                only=Listed.of("groups", "group_id", made, expected),
            )

    try:
        await for_each_version(pair, 16, run)
    finally:
        for connection in held:
            await connection.stream.aclose()
    return ()


async def commit_without_member(pair: Pair, group: str, topic: str) -> None:
    await pair.step(
        lambda side: request(
            8,
            pair.versions(8)[-1],
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                {
                    "name": topic,
                    "topic_id": side_topic_id(side, topic),
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                    ],
                }
            ],
        )
    )


async def join_second_member(pair: Pair, group: str, topic: str) -> list[Side]:
    """A second member joins a Stable classic group: it is given its member id (compared),
    then its JoinGroup is sent on a connection of its own and left waiting, as the group
    waits in PreparingRebalance for its first member to join again; the connections."""

    def join(side: Side) -> object:
        return request(
            11,
            pair.versions(11)[-1],
            group_id=group,
            session_timeout=LONG,
            rebalance_timeout=LONG,
            member_id=side.learned.get(("second member", group), ""),
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": subscription(topic)}],
            reason=None,
        )

    answers = await pair.step(join)  # MEMBER_ID_REQUIRED
    held = []
    for side in pair.sides:
        side.learned["second member", group] = answers[side].member_id
        connection = await side.connection()
        connection.correlation += 1
        await connection.stream.send(
            size_prefix(request_frame(join(connection), connection.correlation))
        )
        held.append(connection)
    await pair.step(  # the join taken (on its own connection, so in its own time)
        request(15, pair.versions(15)[-1], groups=[group], include_authorized_operations=False),
        until=lambda answer: answer.groups[0].group_state == "PreparingRebalance",
    )
    return held


ASSIGNMENT_INTERVALS = {"Reconciling": 0, "Assigning": 15000}
"""consumer.assignment.interval.ms of the groups whose second member's joining shows them
in that state (Kafka 4.4's default, 1 s, would make it depend on the machine's speed)."""


async def consumer_group(pair: Pair, group: str, topic: str, state: str) -> list[tuple[str, str]]:
    """A consumer group (KIP-848) brought to `state`: one member owning both partitions
    (Stable), then a second joining, the first not yet giving one up (Reconciling: the group
    assigns at every change), or the assignment waiting for its interval (Assigning: 15 s),
    or the first leaving (Empty); the members left in it, whose epochs each side learns."""
    first, second = (str(uuid.uuid4()) for _ in range(2))
    await find_coordinator(pair, group)
    if state in ASSIGNMENT_INTERVALS:
        await set_assignment_interval(pair, group, ASSIGNMENT_INTERVALS[state])
    await consumer_heartbeat(pair, group, first, 0, subscribed_topic_names=[topic])
    await consumer_heartbeat(
        pair,
        group,
        first,
        None,
        topic_partitions=lambda side: [
            {"topic_id": side_topic_id(side, topic), "partitions": [0, 1]}
        ],
    )
    if state == "Empty":
        await consumer_heartbeat(pair, group, first, -1)
        return []
    if state == "Stable":
        return [(group, first)]
    await consumer_heartbeat(pair, group, second, 0, subscribed_topic_names=[topic])
    return [(group, first), (group, second)]


async def consumer_heartbeat(
    pair: Pair, group: str, member_id: str, epoch: int | None, **fields: object
) -> None:
    """ConsumerGroupHeartbeat of a member at `epoch` (None: the one each side learned)."""

    def beat(side: Side) -> object:
        given = {name: value(side) if callable(value) else value for name, value in fields.items()}
        if epoch == 0:  # joining: everything about the member, none owned
            given = {"rebalance_timeout": LONG, "server_assignor": "uniform"} | given
            given.setdefault("topic_partitions", [])
        given.setdefault("topic_partitions", None)  # else what did not change is left out
        return request(
            68,
            pair.versions(68)[-1],
            group_id=group,
            member_id=member_id,
            member_epoch=side.learned["epoch", group, member_id] if epoch is None else epoch,
            **given,
        )

    answers = await pair.step(beat)
    for side in pair.sides:
        side.learned["epoch", group, member_id] = answers[side].member_epoch


@sweep(42)
async def delete_groups(pair: Pair) -> tuple[str, ...]:
    topic = unique("deletegroups")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        alive = unique(f"alive-v{version}")
        await join_classic(pair, alive, topic)
        await pair.step(request(42, version, groups_names=[alive, unique("missing")]))

    await for_each_version(pair, 42, run)
    return ()


ACL_FILTERS = [
    # any topic, any pattern, any principal: what `kafka-acls --list` asks
    {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
     "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
    # a literal topic's READ grants for one user; the patterns matching a group's name
    {"resource_type_filter": 2, "resource_name_filter": "orders", "pattern_type_filter": 3,
     "principal_filter": "User:alice", "host_filter": "*", "operation": 3,
     "permission_type": 3},
    {"resource_type_filter": 3, "resource_name_filter": "etl", "pattern_type_filter": 2,
     "principal_filter": None, "host_filter": None, "operation": 2, "permission_type": 2},
]  # fmt: skip
"""DescribeAcls and DeleteAcls filters, the resource and pattern types as Kafka numbers
them (ANY 1, TOPIC 2, GROUP 3; MATCH 2, LITERAL 3; operation ANY 1, ALL 2, READ 3;
permission ANY 1, DENY 2, ALLOW 3)."""
UNREADABLE_ACL_FILTERS = [
    ACL_FILTERS[0] | {"resource_type_filter": 0},  # UNKNOWN resource type
    ACL_FILTERS[0] | {"pattern_type_filter": 9},  # a code no pattern type has
    ACL_FILTERS[0] | {"operation": 0},
    ACL_FILTERS[0] | {"permission_type": 0},
]
"""Filters with an UNKNOWN element or a code Kafka has no name for."""


async def outcome(side: Side, payload: Any) -> object:
    """What one broker does with `payload` on a connection of its own: its answer, or
    "closed" where it closes the connection unanswered (as Kafka does with a request its
    request classes refuse)."""
    connection = await side.connection()
    try:
        await connection.stream.send(size_prefix(request_frame(payload, 1)))
        try:
            frame = await connection.stream.receive_frame()
        except EOFError:
            return "closed"
        return decode_response(frame, payload.__api_key__, payload.__version__)[1]
    finally:
        await connection.stream.aclose()


async def same_outcome(pair: Pair, payload: Any) -> None:
    """Kafka and nullbroker answer `payload` alike, or both close the connection."""
    kafka, nullbroker = [await outcome(side, payload) for side in pair.sides]
    assert kafka == nullbroker, (payload, kafka, nullbroker)


@sweep(29)
async def describe_acls(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        for acl_filter in ACL_FILTERS:
            await pair.step(request(29, version, **acl_filter))
        for unreadable in UNREADABLE_ACL_FILTERS:
            await same_outcome(pair, request(29, version, **unreadable))

    await for_each_version(pair, 29, run)
    return ()


@sweep(30)
async def create_acls(pair: Pair) -> tuple[str, ...]:
    grant = {
        "resource_type": 2, "resource_name": unique("acl"), "resource_pattern_type": 3,
        "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3,
    }  # fmt: skip
    prefixed_deny = grant | {"resource_pattern_type": 4, "permission_type": 2}
    not_one_binding = [  # an ANY or MATCH element (answered), an UNKNOWN one (closed)
        grant | {"resource_type": 1}, grant | {"resource_pattern_type": 2},
        grant | {"operation": 1}, grant | {"resource_type": 0},
        grant | {"resource_pattern_type": 0}, grant | {"permission_type": 0},
    ]  # fmt: skip

    async def run(version: int) -> None:
        await pair.step(request(30, version, creations=[grant, prefixed_deny]))
        await pair.step(request(30, version, creations=[]))
        for creation in not_one_binding:
            await same_outcome(pair, request(30, version, creations=[grant, creation]))

    await for_each_version(pair, 30, run)
    return ()


@sweep(31)
async def delete_acls(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        await pair.step(request(31, version, filters=ACL_FILTERS))
        await pair.step(request(31, version, filters=[]))
        for unreadable in UNREADABLE_ACL_FILTERS:
            await same_outcome(pair, request(31, version, filters=[ACL_FILTERS[0], unreadable]))

    await for_each_version(pair, 31, run)
    return ()


@sweep(74)
async def list_config_resources(pair: Pair) -> tuple[str, ...]:
    """The config resources of each type asked, cut down to those the sequence made (three
    topics, a group with a config): the Kafka is the session's. Its own broker's and broker
    logger's entries name each broker's node id, checked apart."""
    topics = [unique("resources") for _ in range(3)]
    for topic in topics:
        await create_topic(pair, topic)
    group = unique("configured")
    await set_assignment_interval(pair, group, 500)
    made = [*topics, group]

    async def run(version: int) -> None:
        filters: list[list[int] | None] = [None]
        if version >= 1:
            filters = [[], [2], [4], [8], [16], [32], [32, 2], [2, 2], [99]]
        for types in filters:
            spec = {} if types is None else {"resource_types": types}
            expected = [
                name
                for name in made
                if types == [] or (types and (2 if name in topics else 32) in types)
            ]
            await pair.step(
                request(74, version, **spec),
                only=Listed.of("config_resources", "resource_name", made, expected),
            )
            answers = await pair.step(request(74, version, **spec), compared=False)
            for side in pair.sides:
                nodes = {
                    (entry.resource_type, entry.resource_name)
                    for entry in answers[side].config_resources
                    if version >= 1 and entry.resource_type in (4, 8)  # v0: client metrics'
                }
                listed = {kind for kind in (4, 8) if types == [] or (types and kind in types)}
                assert {kind for kind, _ in nodes} == listed, (side.name, types, nodes)
                assert len(nodes) == len(listed), (side.name, types, nodes)

    await for_each_version(pair, 74, run)
    return ()


def quota_entity(*components: tuple[str, str | None]) -> list[dict[str, str | None]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in components]


def quota(key: str, value: float = 0.0, remove: bool = False) -> dict[str, object]:
    return {"key": key, "value": value, "remove": remove}


@sweep(49)
async def alter_client_quotas(pair: Pair) -> tuple[str, ...]:
    """Quotas set, removed and validated on users, client ids, both, the default user and an
    IP address, and what Kafka refuses, each alone in its request (Kafka applies a request's
    entries in an order of its own). DescribeClientQuotas reads them back (sweep 48)."""

    async def run(version: int) -> None:
        user, client = unique(f"quota-user-v{version}"), unique(f"quota-app-v{version}")
        entries = [
            (quota_entity(("user", user)), [quota("producer_byte_rate", 1024.0),
                                            quota("consumer_byte_rate", 2048.0)]),
            (quota_entity(("client-id", client)), [quota("request_percentage", 50.5)]),
            (quota_entity(("user", user), ("client-id", client)),
             [quota("producer_byte_rate", 10.0)]),
            (quota_entity(("user", None)), [quota("controller_mutation_rate", 1.5)]),
            (quota_entity(("ip", "10.0.0.1")), [quota("connection_creation_rate", 5.0)]),
            (quota_entity(("user", user)), [quota("consumer_byte_rate", remove=True)]),
            (quota_entity(("user", user), ("user", user)), [quota("request_percentage", 5.0)]),
            # refused: an unknown key, one of another entity's, a fraction of a whole
            # quota, nothing above 0, a key twice, an entity type Kafka has not, an IP with a
            # user, an address that is none, no entity at all
            (quota_entity(("user", user)), [quota("no_such_key", 5.0)]),
            (quota_entity(("ip", "10.0.0.2")), [quota("producer_byte_rate", 5.0)]),
            (quota_entity(("user", user)), [quota("producer_byte_rate", 1.5)]),
            (quota_entity(("user", user)), [quota("producer_byte_rate", -1.0)]),
            (quota_entity(("user", user)), [quota("producer_byte_rate", 1.0),
                                            quota("producer_byte_rate", 2.0)]),
            (quota_entity(("group", "g")), [quota("producer_byte_rate", 5.0)]),
            (quota_entity(("ip", "10.0.0.3"), ("user", user)),
             [quota("connection_creation_rate", 5.0)]),
            (quota_entity(("ip", "not-an-ip")), [quota("connection_creation_rate", 5.0)]),
            ([], [quota("producer_byte_rate", 1.0)]),
        ]  # fmt: skip
        for entity, ops in entries:
            await pair.step(
                request(49, version, entries=[{"entity": entity, "ops": ops}], validate_only=False)
            )
        await pair.step(
            request(
                49,
                version,
                entries=[
                    {
                        "entity": quota_entity(("user", unique("validated"))),
                        "ops": [quota("producer_byte_rate", 1.0)],
                    }
                ],
                validate_only=True,
            )
        )
        await describe_quotas(pair, user, client)
        await remove_quotas(
            pair,
            [("user", user)], [("client-id", client)], [("user", user), ("client-id", client)],
            [("user", None)], [("ip", "10.0.0.1")],
        )  # fmt: skip

    await for_each_version(pair, 49, run)
    return ()


QUOTA_KEYS = {
    "user": ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
             "controller_mutation_rate"),
    "ip": ("connection_creation_rate",),
}  # fmt: skip


async def remove_quotas(pair: Pair, *entities: list[tuple[str, str | None]]) -> None:
    """Every quota of these entities removed (compared): the session's Kafka is every
    test's, and another sweep's DescribeClientQuotas of every entity must not see them."""
    for entity in entities:
        keys = QUOTA_KEYS["ip" if entity[0][0] == "ip" else "user"]
        await pair.step(
            request(
                49,
                pair.versions(49)[-1],
                entries=[
                    {
                        "entity": quota_entity(*entity),
                        "ops": [quota(key, remove=True) for key in keys],
                    }
                ],
                validate_only=False,
            )
        )


async def describe_quotas(pair: Pair, user: str, client: str) -> None:
    """DescribeClientQuotas of every filter kind, at every version, over what sweep 49 set."""
    for version in pair.versions(48):
        for components, strict in (
            ([], False),
            ([("user", 2, None)], False),
            ([("user", 2, None)], True),
            ([("user", 0, user)], False),
            ([("user", 1, None)], False),
            ([("client-id", 0, client)], False),
            ([("client-id", 0, client), ("user", 0, user)], True),
            ([("ip", 2, None)], False),
            # refused: a type Kafka has not, a match type, an exact match of nothing, a type
            # twice, an IP with a user
            ([("group", 0, "g")], False),
            ([("user", 5, None)], False),
            ([("user", 0, None)], False),
            ([("user", 2, None), ("user", 2, None)], False),
            ([("ip", 2, None), ("user", 2, None)], False),
        ):
            await pair.step(
                request(
                    48,
                    version,
                    components=[
                        {"entity_type": kind, "match_type": match_type, "match": match}
                        for kind, match_type, match in components
                    ],
                    strict=strict,
                )
            )


@sweep(48)
async def describe_client_quotas(pair: Pair) -> tuple[str, ...]:
    await pair.step(
        request(
            49,
            pair.versions(49)[-1],
            entries=[
                {
                    "entity": quota_entity(("user", "described")),
                    "ops": [quota("producer_byte_rate", 4096.0)],
                }
            ],
            validate_only=False,
        )
    )
    # Kafka applies a quota from its metadata log, a moment after it answers the alteration.
    await pair.step(
        request(
            48,
            pair.versions(48)[-1],
            components=[{"entity_type": "user", "match_type": 0, "match": "described"}],
            strict=False,
        ),
        until=lambda answer: bool(answer.entries),
    )
    await describe_quotas(pair, "described", "nobody")
    await remove_quotas(pair, [("user", "described")])
    return ()


SALTED = hashlib.pbkdf2_hmac("sha256", b"secret", b"salt", 4096)


def upsertion(user: str, mechanism: int = 1, iterations: int = 4096) -> dict[str, object]:
    return {
        "name": user, "mechanism": mechanism, "iterations": iterations,
        "salt": b"salt", "salted_password": SALTED,
    }  # fmt: skip


@sweep(51)
async def alter_user_scram_credentials(pair: Pair) -> tuple[str, ...]:
    """SCRAM credentials set, replaced and deleted for users of the sequence's own, and what
    Kafka refuses, then described (the users' listing cut down to them: the session's Kafka
    has its fixture's users, and nullbroker none), then deleted."""
    carol, dave, erin = (unique("scram") for _ in range(3))
    made = (carol, dave, erin)
    steps: list[tuple[list[dict[str, object]], list[dict[str, object]]]] = [
        ([], [upsertion(carol)]),
        ([], [upsertion(carol, 2, 8192)]),
        ([], [upsertion(dave), upsertion(erin, 2)]),
        ([{"name": carol, "mechanism": 1}], []),
        # refused: a mechanism Kafka has not, too few or too many iterations, no name, a
        # user twice, a deletion of nothing, of a mechanism Kafka has not
        ([], [upsertion(dave, 3)]),
        ([], [upsertion(dave, 0)]),
        ([], [upsertion(dave, 1, 100)]),
        ([], [upsertion(dave, 1, 20000)]),
        ([], [upsertion("")]),
        ([], [upsertion(dave), upsertion(dave, 2)]),
        ([{"name": carol, "mechanism": 2}], [upsertion(carol)]),
        ([{"name": unique("nobody"), "mechanism": 1}], []),
        ([{"name": dave, "mechanism": 3}], []),
    ]
    for version in pair.versions(51):
        for deletions, upsertions in steps:
            await pair.step(request(51, version, deletions=deletions, upsertions=upsertions))
        for users in (None, []):
            await pair.step(
                request(50, pair.versions(50)[-1], users=users),
                only=Listed.of("results", "user", made, made),
            )
        await pair.step(
            request(
                50,
                pair.versions(50)[-1],
                users=[{"name": carol}, {"name": unique("nobody")}, {"name": dave}],
            )
        )
        await pair.step(request(50, pair.versions(50)[-1], users=[{"name": erin}, {"name": erin}]))
        await pair.step(
            request(
                51,
                version,
                deletions=[
                    {"name": carol, "mechanism": 2},
                    {"name": dave, "mechanism": 1},
                    {"name": erin, "mechanism": 2},
                ],
                upsertions=[],
            )
        )
    return ()


@sweep(50)
async def describe_user_scram_credentials(pair: Pair) -> tuple[str, ...]:
    user = unique("described")
    await pair.step(request(51, pair.versions(51)[-1], deletions=[], upsertions=[upsertion(user)]))
    for version in pair.versions(50):
        for users in (None, []):
            await pair.step(
                request(50, version, users=users), only=Listed.of("results", "user", [user], [user])
            )
        await pair.step(request(50, version, users=[{"name": user}, {"name": unique("nobody")}]))
        await pair.step(request(50, version, users=[{"name": user}, {"name": user}]))
    await pair.step(
        request(
            51, pair.versions(51)[-1], deletions=[{"name": user, "mechanism": 1}], upsertions=[]
        )
    )
    return ()


@sweep(47)
async def offset_delete(pair: Pair) -> tuple[str, ...]:
    topic, group = await classic_group(pair, "offsetdelete")
    await commit_classic(pair, group, topic, 3)

    async def run(version: int) -> None:
        for name in (group, unique("missing")):
            await pair.step(
                request(
                    47,
                    version,
                    group_id=name,
                    topics=[{"name": topic, "partitions": [{"partition_index": 0}]}],
                )
            )

    await for_each_version(pair, 47, run)
    return ()


@sweep(17)
async def sasl_handshake(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        await pair.step(request(17, version, mechanism="PLAIN"))

    await for_each_version(pair, 17, run)
    return ()


@sweep(36)
async def sasl_authenticate(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        await pair.step(request(36, version, auth_bytes=b"\0user\0password"))

    await for_each_version(pair, 36, run)
    return ()


@sweep(22)
async def init_producer_id(pair: Pair) -> tuple[str, ...]:
    async def run(version: int) -> None:
        await init_producer(pair, None, version=version)
        await init_producer(pair, unique(f"txn-v{version}"), version=version)

    await for_each_version(pair, 22, run)
    return ()


async def open_transaction(
    pair: Pair, topic: str, timeout: datetime.timedelta = datetime.timedelta(seconds=60)
) -> str:
    """A transactional producer with a transaction open on the topic's partition 0 (aborted
    by the broker past `timeout`)."""
    transactional_id = unique("txn")
    await init_producer(pair, transactional_id, timeout=timeout)
    await add_partitions(pair, transactional_id, topic, pair.versions(24)[-1])
    await produce(
        pair,
        topic,
        producer_batch(transactional_id, [b"t1", b"t2"], 0, transactional=True),
        transactional_id=transactional_id,
    )
    return transactional_id


async def add_partitions(pair: Pair, transactional_id: str, topic: str, version: int) -> None:
    await pair.step(
        lambda side: request(
            24,
            version,
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=side.learned["producer_id", transactional_id],
            v3_and_below_producer_epoch=side.learned["producer_epoch", transactional_id],
            v3_and_below_topics=[{"name": topic, "partitions": [0]}],
            transactions=[
                {
                    "transactional_id": transactional_id,
                    "producer_id": side.learned["producer_id", transactional_id],
                    "producer_epoch": side.learned["producer_epoch", transactional_id],
                    "verify_only": False,
                    "topics": [{"name": topic, "partitions": [0]}],
                }
            ],
        )
    )


@sweep(24)
async def add_partitions_to_txn(pair: Pair) -> tuple[str, ...]:
    topic = unique("addpartitions")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        transactional_id = unique(f"txn-v{version}")
        await init_producer(pair, transactional_id)
        await add_partitions(pair, transactional_id, topic, version)
        await add_partitions(pair, transactional_id, unique("missing"), version)

    await for_each_version(pair, 24, run)
    return ()


@sweep(25)
async def add_offsets_to_txn(pair: Pair) -> tuple[str, ...]:
    topic = unique("addoffsets")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        transactional_id = await open_transaction(pair, topic)
        group = unique("g")
        await pair.step(lambda side: add_offsets(side, version, transactional_id, group))
        await pair.step(
            lambda side: request(
                25,
                version,
                transactional_id=transactional_id,
                producer_id=side.learned["producer_id", transactional_id],
                producer_epoch=side.learned["producer_epoch", transactional_id] + 1,
                group_id="g",
            )
        )

    await for_each_version(pair, 25, run)
    return ()


def add_offsets(side: Side, version: int, transactional_id: str, group: str) -> object:
    return request(
        25,
        version,
        transactional_id=transactional_id,
        producer_id=side.learned["producer_id", transactional_id],
        producer_epoch=side.learned["producer_epoch", transactional_id],
        group_id=group,
    )


@sweep(28)
async def txn_offset_commit(pair: Pair) -> tuple[str, ...]:
    topic = unique("txncommit")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        group = unique(f"txngroup-v{version}")
        transactional_id = await open_transaction(pair, topic)
        await find_coordinator(pair, group)
        await pair.step(
            lambda side: add_offsets(side, pair.versions(25)[-1], transactional_id, group)
        )
        for target in (group, unique("missing")):
            await pair.step(
                lambda side, target=target: txn_offset_commit_request(
                    side, version, transactional_id, target, topic, 1, metadata=""
                ),
                until=lambda answer: 51 not in error_codes_of(answer),
            )

    await for_each_version(pair, 28, run)
    return ()


def error_codes_of(answer: object) -> set[int]:
    from tests.support.differential import error_codes

    return set(error_codes(answer))


@sweep(26)
async def end_txn(pair: Pair) -> tuple[str, ...]:
    topic = unique("endtxn")
    await create_topic(pair, topic)

    async def run(version: int) -> None:
        for committed in (True, False):
            transactional_id = await open_transaction(pair, topic)
            for _ in range(2):  # the second: no transaction open any more
                await pair.step(
                    lambda side, committed=committed, transactional_id=transactional_id: request(
                        26,
                        version,
                        transactional_id=transactional_id,
                        producer_id=side.learned["producer_id", transactional_id],
                        producer_epoch=side.learned["producer_epoch", transactional_id],
                        committed=committed,
                    ),
                    until=lambda answer: answer.error_code != 51,
                )
            await transaction_ended(pair, transactional_id)

    await for_each_version(pair, 26, run)
    return ()


async def transaction_ended(pair: Pair, transactional_id: str) -> None:
    """DescribeTransactions (compared) until the transaction's end is complete on both: Kafka
    writes its markers and completes it after it answers EndTxn, so what comes next (a
    Produce to the partition, a listing of states) could meet it half done."""
    await pair.step(
        request(65, pair.versions(65)[-1], transactional_ids=[transactional_id]),
        until=lambda answer: (
            answer.transaction_states[0].transaction_state in ("CompleteCommit", "CompleteAbort")
        ),
    )


@sweep(27)
async def write_txn_markers(pair: Pair) -> tuple[str, ...]:
    """A broker's markers into a transaction's partition (as its coordinator sends them, and
    as nullbroker's workers send each other's): at the producer's epoch, at an older one, and
    for a partition and a topic that do not exist, with each transaction version."""
    topic = unique("markers")
    await create_topic(pair, topic)
    missing = unique("missing")

    async def run(version: int) -> None:
        for transaction_version in (0, 2) if version >= 2 else (0,):
            for older, topics in (
                (0, {topic: [0, 7]}),
                (0, {missing: [0]}),
                (1, {topic: [0]}),
            ):
                transactional_id = await open_transaction(pair, topic)
                marker = {
                    "transaction_result": True,
                    "topics": [
                        {"name": name, "partition_indexes": indexes}
                        for name, indexes in topics.items()
                    ],
                    "coordinator_epoch": 0,
                    "transaction_version": transaction_version,
                }
                await pair.step(
                    lambda side, older=older, marker=marker, tid=transactional_id: request(
                        27,
                        version,
                        markers=[
                            {
                                **marker,
                                "producer_id": side.learned["producer_id", tid],
                                "producer_epoch": side.learned["producer_epoch", tid] - older,
                            }
                        ],
                    )
                )

    await for_each_version(pair, 27, run)
    return ()


@sweep(61)
async def describe_producers(pair: Pair) -> tuple[str, ...]:
    topic = unique("producers")
    await create_topic(pair, topic)
    await init_producer(pair, None)
    await produce(pair, topic, producer_batch(None, [b"a", b"b"], 0))

    async def run(version: int) -> None:
        await pair.step(
            request(
                61,
                version,
                topics=[
                    {"name": topic, "partition_indexes": [0, 4]},
                    {"name": unique("missing"), "partition_indexes": [0]},
                ],
            )
        )

    await for_each_version(pair, 61, run)
    return ()


@sweep(65)
async def describe_transactions(pair: Pair) -> tuple[str, ...]:
    topic = unique("describetxn")
    await create_topic(pair, topic)
    transactional_id = await open_transaction(pair, topic)

    async def run(version: int) -> None:
        await pair.step(
            request(65, version, transactional_ids=[transactional_id, unique("missing")])
        )

    await for_each_version(pair, 65, run)
    return ()


TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
    "ongoing",  # Kafka knows a state by its name's case: unknown
    "Nonsense",
)
"""Every state of a transactional id in Kafka 4.1 (TransactionState), and two unknown."""
HOUR_MS = 3_600_000


@sweep(66)
async def list_transactions(pair: Pair) -> tuple[str, ...]:
    """Transactional ids in each state a sequence can hold them in (none begun, one open,
    one committed, one aborted), listed with every filter of every version; the session's
    other transactions are left out on both sides."""
    topic = unique("listtxn")
    await create_topic(pair, topic)
    empty = unique("txn-empty")
    await init_producer(pair, empty)
    ongoing = await open_transaction(pair, topic, timeout=LONG)  # open for the sequence
    made = {empty: "Empty", ongoing: "Ongoing"}
    for committed in (True, False):
        transactional_id = await open_transaction(pair, topic)
        await pair.step(
            lambda side, transactional_id=transactional_id, committed=committed: request(
                26,
                pair.versions(26)[-1],
                transactional_id=transactional_id,
                producer_id=side.learned["producer_id", transactional_id],
                producer_epoch=side.learned["producer_epoch", transactional_id],
                committed=committed,
            ),
            until=lambda answer: answer.error_code != CONCURRENT_TRANSACTIONS,
        )
        await transaction_ended(pair, transactional_id)
        made[transactional_id] = "CompleteCommit" if committed else "CompleteAbort"
    everything = set(made)

    def of_state(*states: str) -> set[str]:
        return {name for name, state in made.items() if state in states}

    async def run(version: int) -> None:
        cases: list[tuple[dict[str, object], set[str]]] = [({}, everything)]
        cases += [({"state_filters": [state]}, of_state(state)) for state in TRANSACTION_STATES]
        cases += [
            ({"state_filters": ["Ongoing", "CompleteAbort"]}, of_state("Ongoing", "CompleteAbort")),
            ({"producer_id_filters": "ongoing"}, {ongoing}),
            ({"producer_id_filters": [987654321]}, set()),
        ]
        if version >= 1:  # open for longer than this; none begun counts as open for ever
            cases += [
                ({"duration_filter": 0}, everything),
                ({"duration_filter": HOUR_MS}, {empty}),
                ({"duration_filter": 0, "state_filters": ["Ongoing"]}, {ongoing}),
            ]
        if version >= 2:  # a regular expression the whole id matches ("(": none is one)
            cases += [
                ({"transactional_id_pattern": re.escape(ongoing)}, {ongoing}),
                ({"transactional_id_pattern": "diff-.*"}, everything),
                ({"transactional_id_pattern": "diff-txn"}, set()),
                ({"transactional_id_pattern": ""}, everything),
                ({"transactional_id_pattern": "("}, set()),
            ]
        for spec, expected in cases:
            await pair.step(
                lambda side, spec=spec: request(
                    66,
                    version,
                    **{
                        "state_filters": [],
                        "producer_id_filters": [],
                        "duration_filter": -1,
                        "transactional_id_pattern": None,
                        **spec,
                        **(
                            {"producer_id_filters": [side.learned["producer_id", ongoing]]}
                            if spec.get("producer_id_filters") == "ongoing"
                            else {}
                        ),
                    },
                ),
                only=Listed.of("transaction_states", "transactional_id", made, expected),
            )

    await for_each_version(pair, 66, run)
    return ()


@sweep(68)
async def consumer_group_heartbeat(pair: Pair) -> tuple[str, ...]:
    topic = unique("cgh")
    await create_topic(pair, topic, partitions=2)

    async def run(version: int) -> None:
        group = unique(f"cgh-v{version}")
        member_id = str(uuid.uuid4())
        await find_coordinator(pair, group)
        answers = await pair.step(consumer_group_join(version, group, member_id, topic))
        for side in pair.sides:
            side.learned["epoch", group] = answers[side].member_epoch
        await pair.step(
            lambda side: request(
                68,
                version,
                group_id=group,
                member_id=member_id,
                member_epoch=side.learned["epoch", group],
                topic_partitions=[{"topic_id": side_topic_id(side, topic), "partitions": [0, 1]}],
            )
        )
        await pair.step(
            request(
                68,
                version,
                group_id=group,
                member_id=member_id,
                member_epoch=99,
                topic_partitions=None,
            )
        )
        await pair.step(
            lambda side: request(
                68,
                version,
                group_id=group,
                member_id=member_id,
                member_epoch=-1,
                topic_partitions=None,
            )
        )

    await for_each_version(pair, 68, run)
    return ()


@sweep(69)
async def consumer_group_describe(pair: Pair) -> tuple[str, ...]:
    topic = unique("cgd")
    await create_topic(pair, topic)
    group = unique("cgd")
    await find_coordinator(pair, group)
    await pair.step(
        request(
            68,
            pair.versions(68)[-1],
            group_id=group,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=[topic],
            server_assignor="uniform",
            topic_partitions=[],
        )
    )
    _, classic = await classic_group(pair, "cgd-classic")

    async def run(version: int) -> None:
        await pair.step(
            request(
                69,
                version,
                group_ids=[group, classic, unique("missing")],
                include_authorized_operations=True,
            )
        )

    await for_each_version(pair, 69, run)
    return ()


@pytest.mark.parametrize("api_key", sorted(SWEEP))
async def test_every_version_answers_as_kafka_does(pair: Pair, api_key: int) -> None:
    known = await SWEEP[api_key](pair)
    pair.check(*known)
    uncompared = uncompared_versions(pair.compared, api_key, pair.advertised(api_key))
    assert not uncompared, f"versions both advertise the sweep never compared: {uncompared}"


async def test_a_version_below_either_broker_s_minimum_is_refused_alike(pair: Pair) -> None:
    outcomes = {}
    for api_key in sorted(SWEEP):
        lows = {side.ranges[api_key][0] for side in pair.sides}
        for version in sorted(low - 1 for low in lows if low > 0):
            outcomes[api_key, version] = [
                await outcome_of_version(side, api_key, version) for side in pair.sides
            ]
    assert outcomes, "every API key starts at version 0 on both brokers"
    different = {key: both for key, both in outcomes.items() if both[0] != both[1]}
    assert not different, f"(key, version): [kafka, nullbroker]: {different}"
