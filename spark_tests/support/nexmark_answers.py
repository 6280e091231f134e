"""The Nexmark queries of spark_tests/jobs/nexmark.py answered in plain Python, from the
events the generator defines for each offset (nullbroker.sources.nexmark.NexmarkLayout.event), not
from anything the broker served: what Spark's answers are checked against.

Each answer is a sorted list of tuples in the query's column order."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from nullbroker.sources.nexmark import AUCTION, BID, PERSON, NexmarkLayout
from spark_tests.jobs.nexmark import AUCTION_SKIP, EURO_RATE, LOCAL_CATEGORY, LOCAL_STATES, QUERIES

HOT_WINDOW_MS, HOT_SLIDE_MS, HIGHEST_WINDOW_MS = 10_000, 5_000, 10_000

Event = dict[str, Any]
Answer = list[tuple[Any, ...]]


def events(partitions: int, per_partition: int, rate: float, start_ms: int) -> list[Event]:
    """Every event of a topic of `per_partition` records in each of `partitions`."""
    layout = NexmarkLayout(partitions, rate)
    return [layout.event(number, start_ms) for number in range(partitions * per_partition)]


def _of(events: list[Event], kind: int) -> list[dict[str, Any]]:
    name = ("person", "auction", "bid")[kind]
    return [event[name] for event in events if event["event_type"] == kind]


def q0(events: list[Event]) -> Answer:
    columns = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra")
    return sorted(tuple(bid[c] for c in columns) for bid in _of(events, BID))


def q1(events: list[Event]) -> Answer:
    return sorted(
        (bid["auction"], bid["bidder"], bid["price"] * EURO_RATE, bid["dateTime"])
        for bid in _of(events, BID)
    )


def q2(events: list[Event]) -> Answer:
    return sorted(
        (bid["auction"], bid["price"])
        for bid in _of(events, BID)
        if bid["auction"] % AUCTION_SKIP == 0
    )


def q3(events: list[Event]) -> Answer:
    people = {person["id"]: person for person in _of(events, PERSON)}
    answer = []
    for auction in _of(events, AUCTION):
        seller = people.get(auction["seller"])
        if auction["category"] == LOCAL_CATEGORY and seller and seller["state"] in LOCAL_STATES:
            answer.append((seller["name"], seller["city"], seller["state"], auction["id"]))
    return sorted(answer)


def q5(events: list[Event]) -> Answer:
    counts: Counter[tuple[int, int]] = Counter()
    for bid in _of(events, BID):
        # Every window [start, start + 10 s) that holds the bid, starts every 5 s.
        latest = bid["dateTime"] // HOT_SLIDE_MS * HOT_SLIDE_MS
        for start in range(latest, bid["dateTime"] - HOT_WINDOW_MS, -HOT_SLIDE_MS):
            counts[start, bid["auction"]] += 1
    most: dict[int, int] = defaultdict(int)
    for (start, _), count in counts.items():
        most[start] = max(most[start], count)
    return sorted(
        (start, auction, count)
        for (start, auction), count in counts.items()
        if count == most[start]
    )


def q7(events: list[Event]) -> Answer:
    windows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for bid in _of(events, BID):
        windows[bid["dateTime"] // HIGHEST_WINDOW_MS * HIGHEST_WINDOW_MS].append(bid)
    answer = []
    for start, bids in windows.items():
        highest = max(bid["price"] for bid in bids)
        answer += [
            (start, bid["auction"], bid["bidder"], bid["price"], bid["dateTime"])
            for bid in bids
            if bid["price"] == highest
        ]
    return sorted(answer)


ANSWERS: dict[str, Callable[[list[Event]], Answer]] = {name: globals()[name] for name in QUERIES}
