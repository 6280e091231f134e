"""The differential harness's own checks, without Kafka: every API key nullbroker serves is
compared, every known difference is named by a sequence that meets it, and the comparison
reports what differs where."""

from __future__ import annotations

import datetime
from pathlib import Path

from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

from nullbroker.handlers import SERVED_KEYS
from tests.differential import Difference, compare, matching
from tests.differential_allowed import ALLOWED, KNOWN
from tests.oracle.test_differential_apis import SWEEP

COMPARED_ELSEWHERE = {18: "tests/oracle/test_api_versions_as_kafka.py compares ApiVersions"}
SEQUENCES = sorted(Path(__file__).parent.glob("test_differential_*.py"))


def test_every_api_key_nullbroker_serves_is_compared_with_kafka() -> None:
    assert set(SWEEP) | set(COMPARED_ELSEWHERE) == set(SERVED_KEYS)


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
