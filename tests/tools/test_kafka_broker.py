"""perf.kafka_broker: what it hands Kafka's tools when it starts a Kafka."""

from __future__ import annotations

import base64
from collections.abc import Iterator

from perf.kafka_broker import kraft_cluster_id

LEADING_DASH = bytes([0xF8]) + bytes(15)
"""A uuid whose URL-safe base64 begins with '-' (0xF8's first six bits are 62)."""


def test_a_cluster_id_never_begins_with_a_dash_which_storage_tool_takes_for_an_option() -> None:
    assert base64.urlsafe_b64encode(LEADING_DASH).startswith(b"-")
    uuids: Iterator[bytes] = iter([LEADING_DASH, LEADING_DASH, bytes(range(16))])
    cluster_id = kraft_cluster_id(lambda: next(uuids))
    assert cluster_id == "AAECAwQFBgcICQoLDA0ODw"
    assert len(cluster_id) == 22
