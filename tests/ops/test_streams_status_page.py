"""The status page's "Streams groups" table, in a real browser (headless Chromium,
tests/support/chromium.py): hidden while no streams group exists, then a row per streams
group (never one of another kind) showing the very numbers of the /accounts document the page
polled. Served as in tests/ops/test_share_status_page.py, its /accounts made by
report.summary from group snapshots the test makes (Broker.current_accounts reads them from
the coordinator in a running broker)."""

from __future__ import annotations

from nullbroker.stats import BrokerStats, GroupMember, GroupSnapshot, StreamsSnapshot
from tests.ops.test_share_status_page import browser
from tests.support.chromium import Chromium
from tests.support.page_server import PageServer

__all__ = ["browser"]

NO_VALUE = "\N{EN DASH}"
"""What the page shows for a topology epoch of -1 (no topology yet)."""

READ_STREAMS = """(() => ({
  hidden: document.getElementById("streams").hidden,
  rows: Object.fromEntries([...document.querySelectorAll("#streams-groups tbody tr")].map(
    (row) => [row.dataset.streams, Object.fromEntries([...row.cells].map(
      (cell) => [cell.dataset.key, cell.textContent]))])),
}))()"""


def with_groups(*, streams: bool) -> BrokerStats:
    """A classic group, and (`streams`) two streams groups: "wordcount" running with two
    members, "starting" empty and without a topology yet."""
    stats = BrokerStats()
    threads = tuple(
        GroupMember(f"m-{n}", f"wordcount-StreamThread-{n}", "/127.0.0.1") for n in (1, 2)
    )
    stats.group_snapshots["billing"] = GroupSnapshot("classic", "Stable", threads[:1], {})
    if streams:
        stats.group_snapshots["wordcount"] = GroupSnapshot(
            "streams",
            "Reconciling",
            threads,
            {},
            StreamsSnapshot(
                topology_epoch=3,
                epoch=1204,
                assignment_epoch=1203,
                active_tasks=12,
                standby_tasks=4,
                warmup_tasks=1,
                rebalances=1100,
            ),
        )
        stats.group_snapshots["starting"] = GroupSnapshot(
            "streams", "Empty", (), {}, StreamsSnapshot(-1, 1, 1, 0, 0, 0, 0)
        )
    return stats


def test_the_status_page_shows_a_row_per_streams_group_only_when_there_are_some(
    browser: Chromium,
) -> None:
    server = PageServer()
    server.stats = with_groups(streams=False)
    try:
        page = browser.open(server.url)
        page.wait_for('document.querySelector("#groups tbody tr")?.dataset.group === "billing"')
        before = page.evaluate(READ_STREAMS)
        assert before["hidden"] is True and before["rows"] == {}

        server.stats = with_groups(streams=True)
        shown = page.wait_for(
            f"(() => {{ const read = {READ_STREAMS}; return read.hidden ? null : read; }})()"
        )
    finally:
        server.close()

    assert shown["rows"] == {
        "wordcount": {
            "group": "wordcount",
            "state": "Reconciling",
            "members": "2",
            "active_tasks": "12",
            "standby_tasks": "4",
            "warmup_tasks": "1",
            "topology_epoch": "3",
            "epoch": "1,204",
            "assignment_epoch": "1,203",
            "rebalances": "1,100",
        },
        "starting": {
            "group": "starting",
            "state": "Empty",
            "members": "0",
            "active_tasks": "0",
            "standby_tasks": "0",
            "warmup_tasks": "0",
            "topology_epoch": NO_VALUE,
            "epoch": "1",
            "assignment_epoch": "1",
            "rebalances": "0",
        },
    }
