"""Streams groups' accounts (KIP-1071) in every view: /metrics, the summary JSON (and
/accounts) and the Python Accounts; from a broker whose streams group is driven by raw
StreamsGroupHeartbeat requests (no Kafka Streams), and from snapshots made by hand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from nullbroker.app.accounts import Accounts, StreamsGroup
from nullbroker.broker import Broker
from nullbroker.ops.metrics import exposition, make_registry
from nullbroker.ops.report import summary
from nullbroker.settings import Config
from nullbroker.stats import BrokerStats, GroupMember, GroupSnapshot, StreamsSnapshot
from tests.support.broker_counts import samples
from tests.support.kio_calls import send
from tests.support.module_command import run_checked
from tests.support.streams_app import StreamsApp

APP = "wordcount"
SOURCE = "lines"
STREAMS_SERIES = (
    "nullbroker_streams_group_tasks",
    "nullbroker_streams_group_rebalances_total",
    "nullbroker_streams_group_topology_epoch",
    "nullbroker_streams_group_epoch",
    "nullbroker_streams_group_assignment_epoch",
)
Series = dict[str, dict[tuple[str, ...], float]]


def numbers(**given: int) -> StreamsGroup:
    """A streams group's numbers in the Accounts: no standby or warm-up task unless given."""
    return StreamsGroup(**{"standby_tasks": 0, "warmup_tasks": 0, **given})


def streams_series(accounts: BrokerStats | Callable[[], BrokerStats]) -> Series:
    """Every nullbroker_streams_group_* sample of the Prometheus text /metrics serves, by name
    and then by its label values (group, and kind for tasks)."""
    text = exposition(make_registry(accounts)).decode()
    families = list(text_string_to_metric_families(text))
    return {
        name: {tuple(dict(key).values()): value for key, value in samples(families, name).items()}
        for name in STREAMS_SERIES
    }


def as_metrics(group: str, streams: StreamsGroup) -> Series:
    """The series /metrics must show for one streams group with these numbers."""
    return {
        "nullbroker_streams_group_tasks": {
            (group, "active"): streams.active_tasks,
            (group, "standby"): streams.standby_tasks,
            (group, "warmup"): streams.warmup_tasks,
        },
        "nullbroker_streams_group_rebalances_total": {(group,): streams.rebalances},
        "nullbroker_streams_group_topology_epoch": {(group,): streams.topology_epoch},
        "nullbroker_streams_group_epoch": {(group,): streams.epoch},
        "nullbroker_streams_group_assignment_epoch": {(group,): streams.assignment_epoch},
    }


async def word_count_app(standby_replicas: int = 0) -> tuple[Broker, StreamsApp]:
    """A broker with the source topic (two partitions: WordCount's four tasks) and a streams
    group configured, its members' requests answered in process."""
    broker = Broker(Config(partitions=2))

    async def in_process(body: Any) -> Any:
        return send(broker, body)

    app = StreamsApp(in_process, APP, SOURCE)
    await app.create_source()
    await app.configure(standby_replicas)
    return broker, app


def group_of(broker: Broker) -> tuple[str, int, StreamsGroup | None]:
    """The group's state, members and streams numbers, as the Python API reads /accounts."""
    group = Accounts.from_json(summary(broker.current_accounts())).groups.by_group[APP]
    assert group.protocol == "streams"
    return group.state, len(group.members), group.streams


async def test_one_member_runs_word_counts_four_tasks_once_its_internal_topics_exist() -> None:
    broker, app = await word_count_app()

    await app.join("a")
    # Joining moved the group to epoch 2, assigned (nothing: its repartition and changelog
    # topics are created by that heartbeat) at once.
    joined = numbers(topology_epoch=0, epoch=2, assignment_epoch=2, active_tasks=0, rebalances=1)
    assert group_of(broker) == ("NotReady", 1, joined)
    assert streams_series(broker.current_accounts) == as_metrics(APP, joined)

    await app.beat("a")
    # The topics exist now: the topology is ready, the epoch moves, the four tasks (two
    # subtopologies over two partitions) are assigned again, all to the one member.
    running = numbers(topology_epoch=0, epoch=3, assignment_epoch=3, active_tasks=4, rebalances=2)
    assert group_of(broker) == ("Stable", 1, running)
    assert streams_series(broker.current_accounts) == as_metrics(APP, running)

    await app.beat("a")
    assert group_of(broker) == ("Stable", 1, running)


async def test_a_second_member_takes_half_the_tasks_and_keeps_standbys_of_the_others() -> None:
    broker, app = await word_count_app(standby_replicas=1)
    await app.join("a")
    await app.beat("a")

    await app.join("b")
    # One more rebalance at the new epoch: "b" keeps a standby of a stateful task "a" runs
    # at once, and waits for the two tasks "a" is to give up (still counted as "a"'s, which
    # has not heartbeated since).
    assert group_of(broker) == (
        "Reconciling",
        2,
        numbers(topology_epoch=0, epoch=4, assignment_epoch=4, active_tasks=4, standby_tasks=1,
                rebalances=3),
    )  # fmt: skip
    await app.beat("a")
    # "a" was told to give them up: counted by neither member until "b" is given them.
    assert group_of(broker)[2] == numbers(
        topology_epoch=0, epoch=4, assignment_epoch=4, active_tasks=2, standby_tasks=1,
        rebalances=3,
    )  # fmt: skip
    for member in ("b", "a", "b"):
        await app.beat(member)
    settled = numbers(
        topology_epoch=0, epoch=4, assignment_epoch=4, active_tasks=4, standby_tasks=2,
        rebalances=3,
    )  # fmt: skip
    assert group_of(broker) == ("Stable", 2, settled)
    assert streams_series(broker.current_accounts) == as_metrics(APP, settled)

    await app.leave("b")
    await app.beat("a")
    # "b" left: a new epoch, a fourth assignment, every task to "a", which gives up its
    # standby first (not counted while it does) and is given the other two at its next.
    giving_up = numbers(topology_epoch=0, epoch=5, assignment_epoch=5, active_tasks=2,
                        rebalances=4)  # fmt: skip
    assert group_of(broker) == ("Reconciling", 1, giving_up)
    await app.beat("a")
    alone = numbers(topology_epoch=0, epoch=5, assignment_epoch=5, active_tasks=4, rebalances=4)
    assert group_of(broker) == ("Stable", 1, alone)
    assert streams_series(broker.current_accounts) == as_metrics(APP, alone)


async def test_a_reset_of_the_counts_leaves_a_streams_groups_own_numbers() -> None:
    broker, app = await word_count_app()
    await app.join("a")
    await app.beat("a")
    before = group_of(broker)

    broker.stats.reset_counts()

    assert group_of(broker) == before


def by_hand() -> BrokerStats:
    """A streams group and a classic one, as Broker.current_accounts reads them."""
    stats = BrokerStats()
    member = GroupMember("m-1", "wordcount-StreamThread-1", "/127.0.0.1")
    stats.group_snapshots = {
        "counts": GroupSnapshot(
            "streams",
            "Stable",
            (member,),
            {(SOURCE, 0): 5},
            StreamsSnapshot(
                topology_epoch=2,
                epoch=7,
                assignment_epoch=6,
                active_tasks=6,
                standby_tasks=3,
                warmup_tasks=1,
                rebalances=5,
            ),
        ),
        "billing": GroupSnapshot("classic", "Stable", (member,), {(SOURCE, 1): 2}),
    }
    stats.log_end_offsets = {(SOURCE, 0): 9, (SOURCE, 1): 2}
    return stats


def test_only_streams_groups_have_streams_numbers_in_every_view() -> None:
    stats = by_hand()
    document = summary(stats)["groups"]["by_group"]
    assert "streams" not in document["billing"]
    assert document["counts"]["streams"] == {
        "topology_epoch": 2,
        "epoch": 7,
        "assignment_epoch": 6,
        "active_tasks": 6,
        "standby_tasks": 3,
        "warmup_tasks": 1,
        "rebalances": 5,
    }
    groups = Accounts.from_json(summary(stats)).groups.by_group
    expected = numbers(
        topology_epoch=2, epoch=7, assignment_epoch=6, active_tasks=6, standby_tasks=3,
        warmup_tasks=1, rebalances=5,
    )  # fmt: skip
    assert groups["counts"].streams == expected
    assert groups["counts"].lag == 4 and groups["billing"].streams is None
    assert streams_series(stats) == as_metrics("counts", expected)
    assert streams_series(BrokerStats()) == {name: {} for name in STREAMS_SERIES}


def test_the_accounts_of_a_broker_without_streams_groups_load_no_streams_module() -> None:
    # In a process of its own: this one has loaded them for the tests above.
    code = """
import sys, trio
from nullbroker.broker import Broker
from nullbroker.ops.metrics import exposition, make_registry
from nullbroker.ops.report import summary
from nullbroker.settings import Config
from tests.support.differential import request
from tests.support.kio_calls import send

async def main():
    broker = Broker(Config())
    send(broker, request(3, 12, topics=[{"name": "orders", "topic_id": None}],
                         allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    committed = send(broker, request(8, 8, group_id="billing", generation_id_or_member_epoch=-1,
        member_id="", group_instance_id=None, topics=[{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]))
    assert committed.topics[0].partitions[0].error_code == 0, committed
    assert "streams" not in summary(broker.current_accounts())["groups"]["by_group"]["billing"]
    exposition(make_registry(broker.current_accounts))
    print(sorted(name for name in sys.modules if name.startswith("nullbroker.state.streams")))

trio.run(main)
"""
    assert run_checked([sys.executable, "-c", code], timeout=60).strip() == "[]"
