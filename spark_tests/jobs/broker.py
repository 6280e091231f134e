"""The jobs' dealings with the broker itself: `--start-broker` (a `nullbroker serve` on an
OS-picked port of 127.0.0.1, through nullbroker.app.launcher), creating the topics a write
needs, and checking that a read's source topic holds the records asked for."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from nullbroker.app.launcher import start_broker
from nullbroker.spark.cluster import Cluster

from .settings import TopicShape

ADMIN_TIMEOUT_S = 30.0


@contextmanager
def started_broker(flags: Sequence[str]) -> Iterator[str]:
    """`nullbroker serve --listen 127.0.0.1:0 FLAGS`: its bootstrap server. What it counted
    is printed to stderr when it stops, at the block's end."""
    with start_broker(*flags) as broker:
        yield broker.bootstrap
        print(broker_counts(broker.stop()), file=sys.stderr)


def broker_counts(summary: dict[str, Any]) -> str:
    """The broker's totals, warm-up included: what it was sent and what it served (a
    consumer that fetches past the end of its range is served more than it reads)."""
    produced = summary["produced"]["records"]
    fetched = summary["fetched"]["records"]
    return f"the broker counted {produced:,.0f} records produced, {fetched:,.0f} fetched"


def ensure_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create `name` with `partitions` partitions unless it exists with at least that many:
    writes name their partition, so a topic auto-created with fewer would refuse them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics(
        [NewTopic(name, partitions)], request_timeout=ADMIN_TIMEOUT_S
    ).values()
    try:
        future.result()
        return
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    existing = len(admin.list_topics(name, timeout=ADMIN_TIMEOUT_S).topics[name].partitions)
    if existing < partitions:
        raise SystemExit(f"topic {name!r} has {existing} partitions, fewer than {partitions}")


def check_source(bootstrap: str, topic: TopicShape) -> None:
    """Stop with the broker flag to use when `topic` does not hold the records to read."""
    partitions = [(topic.name, partition) for partition in range(topic.partitions)]
    try:
        latest = Cluster({"bootstrap.servers": bootstrap}).latest(partitions)
    except RuntimeError as error:  # the topic or a partition is missing
        short, problem = list(range(topic.partitions)), str(error)
    else:
        short = [partition for (_, partition), end in latest.items() if end < topic.records]
        problem = f"partitions {short} hold fewer than {topic.records} records"
    if short:
        raise SystemExit(
            f"topic {topic.name!r} cannot be read as asked ({problem}); start the broker with "
            f"--source '{topic.source_flag()}' (or pass --start-broker)"
        )
