"""The differential harness's own checks, without Kafka: every API key nullbroker serves is
compared, every known difference is named by a sequence that meets it, and the comparison
reports what differs where."""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from pathlib import Path

from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

from nullbroker.handlers import SERVED_KEYS
from tests.oracle.test_differential_apis import SWEEP
from tests.oracle.test_differential_share import SHARE_SWEEP
from tests.oracle.test_differential_streams import STREAMS_SWEEP
from tests.oracle.test_differential_telemetry import TELEMETRY_SWEEP
from tests.support.differential import (
    Difference,
    Listed,
    Seen,
    compare,
    is_cluster_id,
    matching,
    uncompared_versions,
)
from tests.support.differential_allowed import ALLOWED, KNOWN

COMPARED_ELSEWHERE = {
    18: "tests/oracle/test_api_versions_as_kafka.py compares ApiVersions",
    **dict.fromkeys(
        TELEMETRY_SWEEP,
        "tests/oracle/test_differential_telemetry.py sweeps client telemetry (KIP-714), on a "
        "pair whose nullbroker has the session Kafka's subscriptions",
    ),
}
SEQUENCES = sorted(Path(__file__).parent.glob("test_differential_*.py"))


def test_every_api_key_nullbroker_serves_is_compared_with_kafka() -> None:
    # Share and streams groups' APIs have sweeps of their own (test_differential_share.py,
    # test_differential_streams.py).
    swept = set(SWEEP) | set(SHARE_SWEEP) | set(STREAMS_SWEEP)
    assert swept | set(COMPARED_ELSEWHERE) == set(SERVED_KEYS)


def test_every_known_difference_is_named_by_a_sequence() -> None:
    sources = "".join(path.read_text() for path in SEQUENCES)
    unnamed = sorted({entry.name for entry in KNOWN if f'"{entry.name}"' not in sources})
    assert not unnamed, f"known differences no sequence names: {unnamed}"


def test_every_entry_says_why() -> None:
    for entry in (*ALLOWED, *KNOWN):
        assert entry.reason.strip(), entry.name


def metadata(leader: int, epoch: int, port: int, partitions: tuple[int, ...]) -> MetadataResponse:
    return MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=(MetadataResponseBroker(node_id=leader, host="127.0.0.1", port=port, rack=None),),
        cluster_id="c",
        controller_id=leader,
        topics=(
            MetadataResponseTopic(
                error_code=0,
                name="t",
                topic_id=None,
                is_internal=False,
                partitions=tuple(
                    MetadataResponsePartition(
                        error_code=0,
                        partition_index=index,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=(leader,),
                        isr_nodes=(leader,),
                        offline_replicas=(),
                    )
                    for index in partitions
                ),
                topic_authorized_operations=-2147483648,
            ),
        ),
    )


def test_differences_are_reported_with_their_path_and_partitions_matched_by_index() -> None:
    kafka = metadata(leader=1, epoch=0, port=9092, partitions=(1, 0))
    nullbroker = metadata(leader=0, epoch=-1, port=9093, partitions=(0, 1))
    found = compare(kafka, nullbroker, "MetadataResponse")
    assert ("MetadataResponse.topics[t].partitions[0].leader_epoch", 0, -1) in found
    assert ("MetadataResponse.brokers[0].port", 9092, 9093) in found
    assert not [path for path, _, _ in found if path.endswith("partition_index")]


def test_node_ids_and_ports_may_differ_only_as_each_broker_s_own() -> None:
    identities = {"node": (1, 0), "port": (9092, 9093)}
    own = Difference("Metadata", 12, "MetadataResponse.brokers[0].node_id", 1, 0)
    wrong = Difference("Metadata", 12, "MetadataResponse.brokers[0].node_id", 1, 2)
    assert matching(ALLOWED, own, identities)
    assert not matching(ALLOWED, wrong, identities)
    epoch = Difference(
        "Metadata", 12, "MetadataResponse.topics[t].partitions[0].leader_epoch", 0, -1
    )
    assert not matching(ALLOWED, epoch, identities)
    assert not matching(KNOWN, epoch)


def topic_id(path: str, kafka: object, nullbroker: object, seen: Seen) -> bool:
    difference = Difference("Metadata", 12, path, kafka, nullbroker)
    return bool(matching(ALLOWED, difference, seen=seen))


def test_topic_ids_may_differ_only_as_one_real_id_a_topic_on_each_side() -> None:
    seen = Seen.starting_now()
    kafka_a, ours_a, kafka_b, ours_b = (uuid.uuid4() for _ in range(4))
    path = "MetadataResponse.topics[a].topic_id"
    assert not topic_id(path, kafka_a, uuid.UUID(int=0), seen), "zero against a real id"
    assert not topic_id(path, uuid.UUID(int=0), ours_a, seen), "a real id against zero"
    assert not topic_id(path, kafka_a, None, seen), "no id at all"
    assert topic_id(path, kafka_a, ours_a, seen)
    assert topic_id("FetchResponse.responses[0].topic_id", kafka_a, ours_a, seen), "again"
    assert not topic_id(path, kafka_a, ours_b, seen), "the topic's id changed"
    assert not topic_id("MetadataResponse.topics[b].topic_id", kafka_b, ours_a, seen), (
        "two topics with one id"
    )
    assert topic_id("MetadataResponse.topics[b].topic_id", kafka_b, ours_b, seen)


def test_cluster_ids_may_differ_only_as_kraft_ids_stable_for_the_sequence() -> None:
    seen = Seen.starting_now()
    kafka, ours, other = (
        "Zp0YF_UlRAWHUmpJMGkhkg",
        "bnVsbGJyb2tlci1jbHN0cg",
        "AAECAwQFBgcICQoLDA0ODw",
    )
    path = "MetadataResponse.cluster_id"

    def allowed(left: object, right: object) -> bool:
        return bool(matching(ALLOWED, Difference("Metadata", 12, path, left, right), seen=seen))

    assert not allowed(kafka, "nullbroker-cluster-0001"), "not a KRaft cluster id"
    assert not allowed(kafka, "bnVsbGJyb2tlci1jbHN0ch"), "22 characters of 16.5 bytes"
    assert not allowed(kafka, None)
    assert allowed(kafka, ours)
    assert allowed(kafka, ours)
    assert not allowed(kafka, other), "the cluster's id changed"
    assert is_cluster_id(other) and not is_cluster_id("bnVsbGJyb2tlci1jbHN0cg==")


def test_a_broker_s_time_may_differ_only_as_a_time_within_the_sequence() -> None:
    now = time.time_ns() // 1_000_000
    seen = Seen(since_ms=now - 1000)
    path = "DescribeProducersResponse.topics[t].partitions[0].active_producers[0].last_timestamp"

    def allowed(left: object, right: object, at: str = path) -> bool:
        return bool(matching(ALLOWED, Difference("Api", 0, at, left, right), seen=seen))

    assert allowed(now, now - 10)
    assert not allowed(now, -1), "-1 where Kafka gives a time"
    assert not allowed(-1, now)
    assert not allowed(now, now - 1001), "a time before the sequence began"
    assert not allowed(now, now + 86_400_000), "a time after the comparison"
    assert not allowed(now, 1_767_225_600_000), "a record's own timestamp, not the clock"
    start = "DescribeTransactionsResponse.transaction_states[t].transaction_start_time"
    as_datetime = datetime.datetime.fromtimestamp(now / 1000, datetime.UTC)
    minus_one = datetime.datetime.fromtimestamp(-1 / 1000, datetime.UTC)
    assert allowed(as_datetime, as_datetime - datetime.timedelta(milliseconds=1), start)
    assert not allowed(as_datetime, minus_one, start)
    marker = "FetchLog.batches[2].control.records[0].timestamp"
    # kio keeps a record's time to the second: one a second before the sequence may be its
    seen.since_ms = now
    in_seconds = as_datetime.replace(microsecond=0)
    assert allowed(in_seconds, as_datetime, marker)


def test_every_version_both_advertise_is_compared_by_the_sweep() -> None:
    compared = {(3, version) for version in range(4, 13)} | {(16, 0), (16, 2)}
    assert uncompared_versions(compared, 3, range(0, 14)) == [0, 1, 2, 3, 13]
    assert uncompared_versions(compared, 16, range(0, 3)) == [1]


def test_a_listing_is_compared_on_what_the_sequence_made_and_must_list_it() -> None:
    @dataclasses.dataclass(frozen=True)
    class Group:
        group_id: str

    @dataclasses.dataclass(frozen=True)
    class Listing:
        groups: tuple[Group, ...]

    listed = Listed.of("groups", "group_id", made=["a", "b"], expected=["a"])
    answer = Listing((Group("x"), Group("a"), Group("y")))
    assert listed.restrict(answer) == Listing((Group("a"),))
    listed.check_listed(listed.restrict(answer))
    assert listed.until(None)(answer)
    assert not listed.until(None)(Listing((Group("b"),)))
    try:
        listed.check_listed(Listing(()))
    except AssertionError:
        pass
    else:
        raise AssertionError("a listing without what was expected must fail")
