"""ApiVersions as Kafka's: nullbroker and Apache Kafka 4.4.0 (the session's `kafka`) are asked
the same ApiVersions requests, at every version, and their answers compared field by field.
Every API key Kafka lists is served at Kafka's version range, or named in codec.NOT_SERVED
with its reason; nullbroker lists no key Kafka does not; the supported and finalized features
are Kafka's but those of what is not served (NOT_SERVED_FEATURES; the epoch of the finalized
ones is Kafka's metadata offset: data, not compared). v5 (KIP-1242) checks the cluster and
node a client means to reach, as Kafka does."""

from __future__ import annotations

import struct
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from codec import NOT_SERVED, ApiKey
from codec.apis import request_schema
from nullbroker.app.pytest_plugin import StartBroker
from perf.kafka_broker import KafkaBroker
from tests.support.kafka_wire import FrameStream, size_prefix


async def connect(bootstrap: str) -> FrameStream:
    host, port = bootstrap.rsplit(":", 1)
    return FrameStream(await trio.open_tcp_stream(host, int(port)))


async def api_versions(bootstrap: str, version: int, **addressed: Any) -> Any:
    """The ApiVersions answer to a request at `version`, as a Java 4.x client sends it
    (from v5, `addressed` to a cluster id and node id, or to none)."""
    fields = (
        {"client_software_name": "tests", "client_software_version": "1"} if version >= 3 else {}
    )
    fields.update(addressed)
    stream = await connect(bootstrap)
    try:
        return await stream.request(request_schema(ApiKey.API_VERSIONS, version)(**fields))
    finally:
        await stream.aclose()


NOT_SERVED_FEATURES = {"streams.version": ApiKey.STREAMS_GROUP_HEARTBEAT}
"""Features Kafka 4.4.0 lists whose APIs nullbroker does not serve (in NOT_SERVED): a client
that saw them would use APIs it would not get."""


def ranges(answer: Any) -> dict[int, tuple[int, int]]:
    return {api.api_key: (api.min_version, api.max_version) for api in answer.api_keys}


def features(listed: Any) -> set[Any]:
    """Supported or finalized features but those of what is not served."""
    return {
        feature for feature in listed if NOT_SERVED_FEATURES.get(feature.name) not in NOT_SERVED
    }


def differences(kafka: dict[int, tuple[int, int]], ours: dict[int, tuple[int, int]]) -> list[str]:
    """Every way nullbroker's ranges differ from Kafka's that codec.NOT_SERVED does not name."""
    found = []
    for key, kafka_range in sorted(kafka.items()):
        if key in NOT_SERVED:
            if key in ours:
                found.append(f"{key} is served at {ours[key]} yet listed in NOT_SERVED")
        elif ours.get(key) != kafka_range:
            found.append(f"{key}: Kafka {kafka_range}, nullbroker {ours.get(key)}")
    found += [
        f"{key}: nullbroker {ours[key]}, Kafka lists none"
        for key in sorted(ours.keys() - kafka.keys())
    ]
    found += [
        f"{key} in NOT_SERVED, Kafka lists none" for key in sorted(NOT_SERVED.keys() - kafka.keys())
    ]
    return found


@pytest.mark.parametrize("version", range(6))
async def test_every_api_kafka_lists_is_served_at_kafkas_range_or_named_not_served(
    kafka: KafkaBroker, nullbroker_factory: StartBroker, version: int
) -> None:
    ours = await api_versions(nullbroker_factory().bootstrap, version)
    theirs = await api_versions(kafka.bootstrap, version)
    assert ours.error_code == theirs.error_code
    assert differences(ranges(theirs), ranges(ours)) == []


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_the_features_are_kafkas(
    kafka: KafkaBroker, nullbroker_factory: StartBroker, version: int
) -> None:
    ours = await api_versions(nullbroker_factory().bootstrap, version)
    theirs = await api_versions(kafka.bootstrap, version)
    assert features(ours.supported_features) == features(theirs.supported_features)
    assert features(ours.finalized_features) == features(theirs.finalized_features)
    finalized = {feature.name: feature.max_version_level for feature in ours.finalized_features}
    assert finalized["transaction.version"] == 2 and finalized["group.version"] == 1
    assert ours.finalized_features_epoch >= 0, "a client ignores features of epoch -1"
    assert ours.zk_migration_ready == theirs.zk_migration_ready
    assert ours.throttle_time == theirs.throttle_time


async def test_the_features_left_out_are_those_of_apis_not_served(
    kafka: KafkaBroker, nullbroker_factory: StartBroker
) -> None:
    ours = await api_versions(nullbroker_factory().bootstrap, 4)
    theirs = await api_versions(kafka.bootstrap, 4)
    left_out = {f.name for f in theirs.supported_features} - {
        f.name for f in ours.supported_features
    }
    assert left_out == {name for name, key in NOT_SERVED_FEATURES.items() if key in NOT_SERVED}
    for name in left_out:  # Kafka lists their APIs: what the feature enables
        assert NOT_SERVED_FEATURES[name] in ranges(theirs)


async def identity(bootstrap: str) -> tuple[str, int]:
    """A one-node cluster's id and its node's, as Metadata tells them."""
    stream = await connect(bootstrap)
    try:
        metadata = request_schema(ApiKey.METADATA, 12)
        answer = await stream.request(
            metadata(
                topics=(),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    finally:
        await stream.aclose()
    (node,) = answer.brokers
    return str(answer.cluster_id), int(node.node_id)


async def test_api_versions_v5_checks_the_cluster_and_node_as_kafka_4_4_does(
    kafka: KafkaBroker, nullbroker_factory: StartBroker
) -> None:
    """KIP-1242: a client names the cluster and node it means to reach (null and -1 from a
    bootstrap address); a node that is not that one answers REBOOTSTRAP_REQUIRED, half of
    the pair INVALID_REQUEST, each with no APIs and no features."""
    answers = []
    for bootstrap in (nullbroker_factory().bootstrap, kafka.bootstrap):
        own, node = await identity(bootstrap)
        cases = [
            (None, -1), (own, node), (own, -1), (None, node), (None, -2), (own, node + 98),
            ("another-cluster-id0000", node), ("", -1),
        ]  # fmt: skip
        answers.append(
            [await api_versions(bootstrap, 5, cluster_id=id_, node_id=n) for id_, n in cases]
        )
    ours, theirs = answers
    assert [a.error_code for a in ours] == [a.error_code for a in theirs]
    assert [a.error_code for a in ours][:2] == [ErrorCode.none, ErrorCode.none]
    assert {a.error_code for a in ours[2:]} == {
        ErrorCode.invalid_request,
        ErrorCode.rebootstrap_required,
    }
    assert ours[2:] == theirs[2:]  # refused alike, field by field


@pytest.mark.parametrize("version", [6, 127])
async def test_an_unknown_api_versions_version_gets_kafkas_v0_fallback_byte_for_byte(
    kafka: KafkaBroker, nullbroker_factory: StartBroker, version: int
) -> None:
    """KIP-511's client probe (a v4 body behind a request header v2 naming `version`),
    answered in v0 with UNSUPPORTED_VERSION and ApiVersions' own range: Kafka 4.4.0's."""
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, version, 9, 5) + b"tests" + b"\x00"
    frame += b"\x06tests\x021\x00"
    answers = []
    for bootstrap in (nullbroker_factory().bootstrap, kafka.bootstrap):
        stream = await connect(bootstrap)
        await stream.send(size_prefix(frame))
        answers.append(await stream.receive_frame())
        await stream.aclose()
    ours, theirs = answers
    assert ours == theirs


@pytest.mark.parametrize("version", [0, 2])
async def test_a_produce_below_v3_closes_the_connection_though_v0_is_advertised(
    kafka: KafkaBroker, nullbroker_factory: StartBroker, version: int
) -> None:
    """Kafka lists Produce from v0 (KAFKA-18659) and closes a connection that sends one."""
    topic = b"api-versions-produce"
    body = struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", len(topic)) + topic
    body += struct.pack(">iii", 1, 0, 0)  # one partition, an empty message set
    frame = struct.pack(">hhih", 0, version, 3, 5) + b"tests" + body
    for bootstrap in (nullbroker_factory().bootstrap, kafka.bootstrap):
        stream = await connect(bootstrap)
        await stream.send(size_prefix(frame))
        assert await stream.is_closed_by_peer(), bootstrap
        await stream.aclose()
