"""StreamsGroupHeartbeat refusals nullbroker words itself, where Kafka 4.4.0 gives none to
compare with (tests/oracle/test_differential_streams.py compares the rest): a topology whose
copartition groups name topics it does not have is refused, not a crash."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from nullbroker.broker import Broker
from nullbroker.settings import Config
from tests.oracle.test_differential_streams import heartbeat, word_count
from tests.support.kio_calls import send


async def test_a_copartition_group_naming_a_topic_its_subtopology_lacks_is_refused() -> None:
    broker = Broker(Config())
    topology = word_count("app", "lines")
    topology["subtopologies"][1]["copartition_groups"] = [
        {"source_topics": [], "source_topic_regex": [], "repartition_source_topics": [7]}
    ]
    answer = send(broker, heartbeat(1, "app", str(uuid.uuid4()), 0, topology=topology, process="p"))
    assert answer.error_code is ErrorCode.streams_invalid_topology
    assert "subtopology 1" in answer.error_message
    valid = send(
        broker,
        heartbeat(1, "app", str(uuid.uuid4()), 0, topology=word_count("app", "lines"), process="p"),
    )
    assert valid.error_code is ErrorCode.none  # the broker still answers, the group joins
