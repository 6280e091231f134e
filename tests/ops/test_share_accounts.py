"""Share groups' accounts (BrokerStats.share) in every view: /metrics, the summary JSON
(and /accounts), the Python Accounts and the console line."""

from __future__ import annotations

from nullbroker.app.accounts import Accounts, ShareCounts
from nullbroker.ops.metrics import exposition, make_registry
from nullbroker.ops.report import ConsoleReporter, summary
from nullbroker.stats import BrokerStats


def stats_with_share() -> BrokerStats:
    stats = BrokerStats()
    first = stats.share_counters("queue", "orders", 0)
    first.acquired, first.accepted, first.released, first.redelivered = 12, 9, 2, 1
    first.lock_timeouts, first.in_flight, first.start_offset = 1, 1, 10
    second = stats.share_counters("queue", "orders", 1)
    second.acquired, second.rejected, second.archived, second.renewed = 4, 1, 1, 3
    return stats


def test_metrics_name_each_share_count_by_group_topic_and_partition() -> None:
    text = exposition(make_registry(stats_with_share())).decode()
    labels = 'group="queue",partition="0",topic="orders"'
    for line in (
        f"nullbroker_share_records_acquired_total{{{labels}}} 12.0",
        f"nullbroker_share_records_redelivered_total{{{labels}}} 1.0",
        f"nullbroker_share_lock_timeouts_total{{{labels}}} 1.0",
        f"nullbroker_share_records_in_flight{{{labels}}} 1.0",
        f"nullbroker_share_start_offset{{{labels}}} 10.0",
        'nullbroker_share_records_acknowledged_total{group="queue",partition="0",'
        'topic="orders",type="release"} 2.0',
        'nullbroker_share_records_archived_total{group="queue",partition="1",topic="orders"} 1.0',
    ):
        assert line in text, line


def test_the_summary_and_the_python_accounts_carry_them() -> None:
    accounts = Accounts.from_json(summary(stats_with_share()))
    assert accounts.share.totals.acquired == 16
    group = accounts.share.by_group["queue"]
    assert group.totals.accepted == 9 and group.totals.renewed == 3
    assert group.partitions["orders"][0] == ShareCounts(
        acquired=12,
        accepted=9,
        released=2,
        redelivered=1,
        lock_timeouts=1,
        in_flight=1,
        start_offset=10,
    )
    assert Accounts.from_json(summary(BrokerStats())).share.by_group == {}


def test_the_console_line_says_what_share_groups_acquired_once_there_are_some() -> None:
    stats = BrokerStats()
    stats.api("ShareFetch").requests = 1
    assert "share-acquired" not in (ConsoleReporter(stats).line(1.0) or "x share-acquired")
    stats = stats_with_share()
    stats.api("ShareFetch").requests = 2
    line = ConsoleReporter(stats).line(2.0)
    assert line is not None and "8.0 records/sec share-acquired (4.5 accepted)" in line
