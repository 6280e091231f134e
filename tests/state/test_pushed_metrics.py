"""What clients push (KIP-714), as nullbroker.state.pushed_metrics keeps it: delta sums added
up, cumulative sums and gauges replaced by their latest value, instances and series bounded
(an ended instance pushed out first, series over the bound counted), a silent instance marked
ended after Kafka's expiry, and the snapshots the accounts are made of."""

from __future__ import annotations

import uuid

from nullbroker.state.pushed_metrics import Point, PushedMetrics
from nullbroker.stats import GAUGE, SUM, UP_DOWN_SUM, ClientSnapshot, one_per_instance

T0 = 1_800_000_000_000
INTERVAL_MS = 5000
SEND_TOTAL = "org.apache.kafka.producer.record.send.total"
QUEUE_TIME = "org.apache.kafka.producer.record.queue.time.avg"
CONSUMED = "org.apache.kafka.consumer.fetch.manager.records.consumed.total"


def client(client_id: str = "producer-1") -> dict[str, str]:
    return {
        "client_id": client_id,
        "client_software_name": "apache-kafka-java",
        "client_software_version": "4.4.0",
        "client_source_address": "127.0.0.1",
    }


def instance(n: int) -> uuid.UUID:
    return uuid.UUID(int=n + 2)


def push(
    pushed: PushedMetrics,
    n: int,
    points: list[Point],
    now_ms: int,
    terminating: bool = False,
    client_id: str = "producer-1",
    connection: str = "127.0.0.1:50000",
) -> None:
    pushed.record(
        instance(n),
        client(client_id),
        INTERVAL_MS,
        {},
        points,
        100,
        terminating,
        now_ms,
        connection,
    )


def delta(name: str, value: float, **attributes: str) -> Point:
    return (name, SUM, tuple(sorted(attributes.items())), value, True)


def cumulative(name: str, value: float) -> Point:
    return (name, SUM, (), value, False)


def gauge(name: str, value: float, **attributes: str) -> Point:
    return (name, GAUGE, tuple(sorted(attributes.items())), value, False)


def only(pushed: PushedMetrics, now_ms: int = T0) -> ClientSnapshot:
    (snapshot,) = pushed.snapshots(now_ms)
    return snapshot


def test_delta_sums_add_up_over_pushes() -> None:
    pushed = PushedMetrics()
    for step, sent in enumerate([100, 250, 0, 7]):
        push(pushed, 1, [delta(SEND_TOTAL, sent)], T0 + step * INTERVAL_MS)
    assert only(pushed).metrics[SEND_TOTAL] == 357


def test_cumulative_sums_are_replaced_by_their_latest_total() -> None:
    pushed = PushedMetrics()
    for step, total in enumerate([100, 350, 357]):
        push(pushed, 1, [cumulative(SEND_TOTAL, total)], T0 + step * INTERVAL_MS)
    assert only(pushed).metrics[SEND_TOTAL] == 357


def test_gauges_keep_their_latest_value() -> None:
    pushed = PushedMetrics()
    for step, value in enumerate([3.5, 1.25, 9.0]):
        push(pushed, 1, [gauge(QUEUE_TIME, value)], T0 + step * INTERVAL_MS)
    assert only(pushed).metrics[QUEUE_TIME] == 9.0


def test_series_of_one_name_with_attributes_are_kept_apart() -> None:
    pushed = PushedMetrics()
    push(
        pushed,
        1,
        [
            delta("org.apache.kafka.producer.topic.record.send.total", 10, topic="a"),
            delta("org.apache.kafka.producer.topic.record.send.total", 5, topic="b"),
            gauge("org.apache.kafka.producer.node.request.latency.avg", 2.0, node_id="0"),
            gauge("org.apache.kafka.producer.node.request.latency.avg", 4.0, node_id="1"),
        ],
        T0,
    )
    snapshot = only(pushed)
    assert len(snapshot.series) == 4
    # A sum's series add up; a gauge of several series has no one value.
    assert snapshot.metrics == {"org.apache.kafka.producer.topic.record.send.total": 15}


def test_series_are_listed_by_name_and_attributes_whatever_order_they_came_in() -> None:
    # The snapshot lists the series as the dict holds them: put in order when a push brings
    # a new one (here in the second push, between the others), not sorted at every read.
    pushed = PushedMetrics()
    push(pushed, 1, [gauge("c", 3.0), delta("a", 1, topic="y"), gauge("b", 2.0)], T0)
    first = only(pushed)
    push(
        pushed,
        1,
        [delta("a", 1, topic="x"), gauge("c", 4.0), delta("a", 1, topic="y"), gauge("b", 2.0)],
        T0 + INTERVAL_MS,
    )
    second = only(pushed, T0 + INTERVAL_MS)
    assert [series[:3] for series in first.series] == [
        ("a", SUM, (("topic", "y"),)),
        ("b", GAUGE, ()),
        ("c", GAUGE, ()),
    ]
    assert [(series[0], series[2], series[3]) for series in second.series] == [
        ("a", (("topic", "x"),), 1),
        ("a", (("topic", "y"),), 2),
        ("b", (), 2.0),
        ("c", (), 4.0),
    ]
    # One metric read by bisection is what the whole mapping says of it.
    assert {name: second.metric(name) for name in "abc"} == second.metrics
    assert second.metric("absent") is None and second.metric("") is None


def test_a_metric_pushed_for_the_client_and_per_topic_is_the_clients() -> None:
    # The Java consumer pushes records.consumed.total twice under one name: for itself
    # and for each topic. Its value is the client's, not the two added up.
    pushed = PushedMetrics()
    push(pushed, 1, [delta(CONSUMED, 600), delta(CONSUMED, 600, topic="src")], T0)
    push(pushed, 1, [delta(CONSUMED, 400), delta(CONSUMED, 400, topic="src")], T0 + INTERVAL_MS)
    assert only(pushed).metrics[CONSUMED] == 1000


def test_series_beyond_the_bound_are_dropped_and_counted_but_known_ones_still_move() -> None:
    pushed = PushedMetrics(max_series=3)
    push(pushed, 1, [gauge(f"g{i}", i) for i in range(5)], T0)
    assert (pushed.series_kept, pushed.dropped_series) == (3, 2)
    push(pushed, 2, [gauge("other", 1.0)], T0 + 1)
    assert (pushed.series_kept, pushed.dropped_series) == (3, 3)
    push(pushed, 1, [gauge("g0", 42.0), gauge("g4", 1.0)], T0 + INTERVAL_MS)
    first, second = pushed.snapshots(T0 + INTERVAL_MS)
    assert first.metrics == {"g0": 42.0, "g1": 1.0, "g2": 2.0}
    assert second.series == ()
    assert pushed.dropped_series == 4
    totals = pushed.totals()
    assert totals.pop("cpu_ns") == pushed.cpu_ns  # the snapshots' time: measured, not counted
    assert totals == {
        "series_kept": 3,
        "dropped_series": 4,
        "dropped_clients": 0,
        "refused_payloads": 0,
    }


def test_a_new_instance_beyond_the_bound_pushes_out_an_ended_one_first() -> None:
    pushed = PushedMetrics(max_clients=3)
    push(pushed, 1, [gauge("a", 1)], T0)
    push(pushed, 2, [gauge("b", 1)], T0 + 1, terminating=True)
    push(pushed, 3, [gauge("c", 1)], T0 + 2)
    push(pushed, 1, [gauge("a", 2)], T0 + 3)  # 1 pushed again: 3 is now the oldest
    push(pushed, 4, [gauge("d", 1)], T0 + 4)
    assert set(pushed.clients) == {str(instance(n)) for n in (1, 3, 4)}
    assert pushed.dropped_clients == 1
    assert pushed.series_kept == 3  # the ended instance's series went with it
    # None ended: the one that pushed least recently goes.
    push(pushed, 5, [gauge("e", 1)], T0 + 5)
    assert set(pushed.clients) == {str(instance(n)) for n in (1, 4, 5)}
    assert (pushed.dropped_clients, pushed.series_kept) == (2, 3)


def test_an_instance_silent_past_its_expiry_is_marked_ended() -> None:
    pushed = PushedMetrics()
    push(pushed, 1, [gauge("a", 1)], T0)
    expiry_ms = max(60_000, 3 * INTERVAL_MS)
    assert only(pushed, T0 + expiry_ms - 1).ended == ""
    assert only(pushed, T0 + expiry_ms).ended == "silent"
    # A push brings it back.
    push(pushed, 1, [gauge("a", 2)], T0 + expiry_ms + 1)
    assert only(pushed, T0 + expiry_ms + 1).ended == ""


def test_the_snapshots_are_made_again_only_when_an_instance_changed() -> None:
    # Read every second by the status page's history: between pushes, the same snapshots.
    pushed = PushedMetrics(max_clients=1)
    push(pushed, 1, [gauge("a", 1)], T0)
    first = pushed.snapshots(T0 + 1000)
    assert pushed.snapshots(T0 + 2000) is first
    push(pushed, 1, [gauge("a", 2)], T0 + INTERVAL_MS)
    pushed_again = pushed.snapshots(T0 + INTERVAL_MS)
    assert pushed_again is not first and pushed_again[0].metrics == {"a": 2}
    silent = pushed.snapshots(T0 + INTERVAL_MS + 60_000)
    assert silent is not pushed_again and silent[0].ended == "silent"
    assert pushed.snapshots(T0 + INTERVAL_MS + 61_000) is silent
    push(pushed, 2, [gauge("b", 3)], T0 + 70_000)  # pushes the silent one out
    assert [snapshot.metrics for snapshot in pushed.snapshots(T0 + 70_000)] == [{"b": 3}]


def test_a_terminating_push_ends_the_instance() -> None:
    pushed = PushedMetrics()
    push(pushed, 1, [delta(SEND_TOTAL, 10)], T0)
    push(pushed, 1, [delta(SEND_TOTAL, 5)], T0 + 100, terminating=True)
    snapshot = only(pushed, T0 + 100)
    assert (snapshot.ended, snapshot.pushes, snapshot.metrics[SEND_TOTAL]) == (
        "terminated",
        2,
        15,
    )


def test_an_instance_ends_closed_when_the_connection_of_its_last_push_closes() -> None:
    # A Java producer can close without its closing push: its connection's close ends it.
    pushed = PushedMetrics()
    push(pushed, 1, [delta(SEND_TOTAL, 10)], T0, connection="a:1")
    push(pushed, 2, [delta(SEND_TOTAL, 10)], T0, connection="b:2")
    push(pushed, 3, [delta(SEND_TOTAL, 10)], T0, terminating=True, connection="a:1")
    before = pushed.snapshots(T0)
    pushed.closed("c:3")  # no instance pushed on it
    assert pushed.snapshots(T0) is before
    pushed.closed("a:1")
    assert ended_by_instance(pushed, T0) == {1: "closed", 2: "", 3: "terminated"}
    # An instance that pushes again on another connection is back, and that one counts now.
    push(pushed, 1, [delta(SEND_TOTAL, 5)], T0 + INTERVAL_MS, connection="d:4")
    pushed.closed("a:1")
    assert ended_by_instance(pushed, T0 + INTERVAL_MS) == {1: "", 2: "", 3: "terminated"}
    pushed.closed("d:4")
    assert ended_by_instance(pushed, T0 + INTERVAL_MS)[1] == "closed"
    (first,) = (s for s in pushed.snapshots(T0 + INTERVAL_MS) if s.instance_id == str(instance(1)))
    assert first.metrics[SEND_TOTAL] == 15


def ended_by_instance(pushed: PushedMetrics, now_ms: int) -> dict[int, str]:
    return {
        next(n for n in range(8) if str(instance(n)) == snapshot.instance_id): snapshot.ended
        for snapshot in pushed.snapshots(now_ms)
    }


def test_a_snapshot_carries_the_client_and_its_series_in_plain_values() -> None:
    pushed = PushedMetrics()
    pushed.record(
        instance(1),
        client("orders"),
        INTERVAL_MS,
        {"group_id": "g", "member_id": "m-1"},
        [
            gauge(QUEUE_TIME, 1.5),
            ("org.apache.kafka.producer.buffer.available.bytes", UP_DOWN_SUM, (), 7.0, False),
            delta(SEND_TOTAL, 3),
        ],
        321,
        False,
        T0,
    )
    push(pushed, 2, [], T0 + 10, client_id="later")
    first, second = pushed.snapshots(T0 + 10)
    assert first == ClientSnapshot(
        instance_id=str(instance(1)),
        client_id="orders",
        software_name="apache-kafka-java",
        software_version="4.4.0",
        address="127.0.0.1",
        first_push_ms=T0,
        last_push_ms=T0,
        pushes=1,
        payload_bytes=321,
        interval_ms=INTERVAL_MS,
        ended="",
        resource=(("group_id", "g"), ("member_id", "m-1")),
        series=(
            ("org.apache.kafka.producer.buffer.available.bytes", UP_DOWN_SUM, (), 7.0),
            (QUEUE_TIME, GAUGE, (), 1.5),
            (SEND_TOTAL, SUM, (), 3.0),
        ),
    )
    assert first.metrics == {
        "org.apache.kafka.producer.buffer.available.bytes": 7.0,
        QUEUE_TIME: 1.5,
        SEND_TOTAL: 3.0,
    }
    assert (second.client_id, second.pushes, second.series) == ("later", 1, ())


def test_long_names_and_values_are_cut_and_resource_attributes_bounded() -> None:
    pushed = PushedMetrics()
    resource = {f"key{i}": "v" * 1000 for i in range(100)}
    pushed.record(instance(1), client("c" * 1000), INTERVAL_MS, resource, [], 1, False, T0)
    pushed.record(instance(1), client(), INTERVAL_MS, {}, [gauge("n" * 1000, 1)], 1, False, T0 + 1)
    snapshot = only(pushed, T0 + 1)
    assert len(snapshot.client_id) == 256
    assert len(snapshot.resource) == 32
    assert all(len(value) == 256 for _, value in snapshot.resource)
    assert [len(name) for name, *_ in snapshot.series] == [256]


def test_an_instance_whose_pushes_went_to_two_processes_is_one_in_the_accounts() -> None:
    # A cluster's supervisor adds its workers' accounts: the Java producer pushed to one
    # node, and its closing push to the other.
    first, second, other = PushedMetrics(), PushedMetrics(), PushedMetrics()
    for step in range(3):
        push(first, 1, [delta(SEND_TOTAL, 100), gauge(QUEUE_TIME, step)], T0 + step * 500)
    push(second, 1, [delta(SEND_TOTAL, 40), gauge(QUEUE_TIME, 9.0)], T0 + 1600, terminating=True)
    push(other, 2, [delta(SEND_TOTAL, 5)], T0 + 100, client_id="producer-2")
    now = T0 + 1600
    merged = one_per_instance(first.snapshots(now) + other.snapshots(now) + second.snapshots(now))
    assert [(c.instance_id, c.client_id) for c in merged] == [
        (str(instance(1)), "producer-1"),
        (str(instance(2)), "producer-2"),
    ]
    one = merged[0]
    assert (one.pushes, one.payload_bytes, one.first_push_ms, one.last_push_ms, one.ended) == (
        4,
        400,
        T0,
        T0 + 1600,
        "terminated",
    )
    assert one.metrics == {SEND_TOTAL: 340, QUEUE_TIME: 9.0}
    assert merged[1] == other.snapshots(now)[0]
