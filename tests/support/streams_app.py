"""A streams group (KIP-1071) without Kafka Streams: members of one application running
Kafka's WordCount, each a raw StreamsGroupHeartbeat at a time (the request builders of
tests/oracle/test_differential_streams.py), sent however the test reaches its broker: in
process (tests.support.kio_calls.send) or over a connection (kafka_wire.FrameStream.request).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tests.oracle.test_differential_streams import GROUP_RESOURCE, heartbeat, word_count
from tests.support.differential import request

VERSION = 1
"""StreamsGroupHeartbeat's version the members send."""
TASK_KINDS = ("active", "standby", "warmup")

Send = Callable[[Any], Awaitable[Any]]
"""Sends a kio request entity, returns the decoded response entity."""


class StreamsApp:
    """Members of the streams group `app` running WordCount over `source`, each in a process
    of its own; a member heartbeats with the tasks it was last given, as a Kafka Streams
    thread says back what it runs."""

    def __init__(self, send: Send, app: str, source: str) -> None:
        self.send = send
        self.app = app
        self.source = source
        self.epochs: dict[str, int] = {}
        self.tasks: dict[str, dict[str, list[dict[str, Any]]]] = {}

    async def create_source(self) -> None:
        """The source topic, auto-created by Metadata (the broker's --partitions)."""
        metadata = request(
            3,
            12,
            topics=[{"name": self.source, "topic_id": None}],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        await self.send(metadata)
        answer = await self.send(metadata)
        assert answer.topics[0].error_code == 0, answer

    async def configure(self, standby_replicas: int = 0) -> None:
        """The group's configs: assigned at once (no initial delay, no interval between two
        assignments), with `standby_replicas` standbys of each stateful task."""
        configs = {
            "streams.initial.rebalance.delay.ms": "0",
            "streams.assignment.interval.ms": "0",
            "streams.num.standby.replicas": str(standby_replicas),
        }
        resource = {
            "resource_type": GROUP_RESOURCE,
            "resource_name": self.app,
            "configs": [
                {"name": name, "config_operation": 0, "value": value}
                for name, value in configs.items()
            ],
        }
        answer = await self.send(request(44, 1, resources=[resource], validate_only=False))
        assert answer.responses[0].error_code == 0, answer

    async def join(self, member: str) -> Any:
        topology = word_count(self.app, self.source)
        return await self._answered(
            member,
            heartbeat(VERSION, self.app, member, 0, topology=topology, process=str(uuid.uuid4())),
        )

    async def beat(self, member: str) -> Any:
        told = self.tasks[member]
        return await self._answered(
            member,
            heartbeat(
                VERSION,
                self.app,
                member,
                self.epochs[member],
                tasks=told["active"],
                standby_tasks=told["standby"],
                warmup_tasks=told["warmup"],
            ),
        )

    async def leave(self, member: str) -> Any:
        return await self._answered(member, heartbeat(VERSION, self.app, member, -1))

    async def _answered(self, member: str, beat: Any) -> Any:
        answer = await self.send(beat)
        assert answer.error_code == 0, answer
        self.epochs[member] = answer.member_epoch
        if answer.active_tasks is not None:
            self.tasks[member] = {
                kind: [
                    {"subtopology_id": task.subtopology_id, "partitions": list(task.partitions)}
                    for task in getattr(answer, f"{kind}_tasks")
                ]
                for kind in TASK_KINDS
            }
        return answer
