"""The status page's "Share groups" table, in a real browser (headless Chromium,
tests/support/chromium.py): hidden while no share group exists, then a row per group and
partition showing the very counts of the /accounts document the page polled. The page is
served as the --metrics listener serves it (status_page_handler), its /accounts made by
report.summary from BrokerStats whose share counters the test fills (the share-group
handlers fill them in a running broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nullbroker.ops.report import summary
from nullbroker.stats import BrokerStats
from tests.support.chromium import Chromium, find_chromium
from tests.support.page_server import PageServer

READ_SHARE = """(() => ({
  hidden: document.getElementById("share").hidden,
  uptime: document.body.dataset.uptime ?? null,
  rows: Object.fromEntries([...document.querySelectorAll("#share-groups tbody tr")].map(
    (row) => [row.dataset.share, Object.fromEntries([...row.cells].map(
      (cell) => [cell.dataset.key, cell.textContent]))])),
}))()"""
COLUMNS = (
    "acquired",
    "accepted",
    "released",
    "rejected",
    "redelivered",
    "archived",
    "lock_timeouts",
    "in_flight",
    "start_offset",
)


def share_stats() -> BrokerStats:
    """Two share groups: "jobs" on two partitions of "orders" and one of "audit", "idle" on
    one partition it has done nothing with yet."""
    stats = BrokerStats()
    first = stats.share_counters("jobs", "orders", 0)
    first.acquired, first.accepted, first.released, first.rejected = 10, 6, 2, 1
    first.redelivered, first.archived, first.lock_timeouts = 2, 1, 1
    first.in_flight, first.start_offset = 1, 7
    second = stats.share_counters("jobs", "orders", 1)
    second.acquired, second.accepted, second.in_flight, second.start_offset = 5, 4, 1, 1200
    stats.share_counters("jobs", "audit", 0).acquired = 2
    stats.share_counters("idle", "orders", 0)
    return stats


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no headless Chromium: scripts/ensure-test-tools installs Debian's")
    profile = tmp_path / "chromium"
    profile.mkdir()
    chromium = Chromium(binary, profile)
    try:
        yield chromium
    finally:
        chromium.close()


def test_the_status_page_shows_share_groups_per_partition_only_when_there_are_some(
    browser: Chromium,
) -> None:
    server = PageServer()
    try:
        page = browser.open(server.url)
        page.wait_for("document.body?.dataset.uptime !== undefined")
        before = page.evaluate(READ_SHARE)
        assert before["hidden"] is True and before["rows"] == {}

        server.stats = share_stats()
        shown = page.wait_for(
            f"(() => {{ const read = {READ_SHARE}; return read.hidden ? null : read; }})()"
        )
    finally:
        server.close()

    share = summary(server.stats)["share"]["by_group"]
    expected = {
        f"{group}/{topic}/{index}": {
            "group": group,
            "topic": topic,
            "partition": index,
            **{column: f"{counts[column]:,}" for column in COLUMNS},
        }
        for group, entry in share.items()
        for topic, partitions in entry["partitions"].items()
        for index, counts in partitions.items()
    }
    assert shown["rows"] == expected
    assert set(shown["rows"]) == {"jobs/orders/0", "jobs/orders/1", "jobs/audit/0", "idle/orders/0"}
