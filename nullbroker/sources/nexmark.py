"""Nexmark events for source topics declared with `format=nexmark`: the Person, Auction and
Bid events of the Nexmark benchmark, as JSON, for pipelines that run its queries.

The generator follows the benchmark's (Apache Beam's, and the Nexmark Flink project's): out
of every 50 events 1 is a person, 3 are auctions and 46 are bids; person and auction ids
advance with the event number (from 1000); an auction's seller and a bid's bidder are
mostly a "hot" person (one of every 100), a bid's auction mostly a hot auction, the others
picked among the 1,000 newest people and the 100 newest auctions; prices are log-uniform
from 1 to 1,000,000 cents; events are padded to Beam's average sizes (200, 500 and 100
bytes before JSON's field names) with an `extra` string; event `n` happens
`n * delay_us // 1000` ms after the topic's start, where `delay_us = 1_000_000 // rate`
(`nexmark-rate`, events/s). Each value is

    {"event_type": 0|1|2, "person"|"auction"|"bid": {...}}

with Beam's field names (times as epoch milliseconds). The random parts of event `n` come
from a generator seeded with its number, so they are the same in every run.

Numbering: with P partitions, the record at offset `o` of partition `p` is event
`o * P + p`: the partitions together hold events 0, 1, 2, ... in turn.

What repeats: events are served from pre-encoded batches of BATCH_EVENTS, a pool of
SLOTS_PER_PARTITION (20) of them per partition, about 59 KiB each: 1.2 MiB a partition.
That is more than a 1 MiB partition fetch holds, so the batches of one response never
share a template and each is written in its template's own buffer (see render). The pool
covers the first `C = P * 20 * BATCH_EVENTS` events (4,000 a partition); event `n` is
event `n mod C` with its person ids moved on by `(n div C) * C / 50`, its auction ids by
`(n div C) * 3C / 50` and its times by `(n div C) * C * delay_us / 1000` ms. So ids and
times advance for ever and the relations between events hold (a bid's auction and bidder
exist; a hot id, a multiple of 100 in the pool, stays one id reused by many events), while
names, prices and strings repeat every C events. A batch is served by writing its ids and
times into its template's records (codec.batch_template.write_decimals, in C), each in a
place of fixed width: the widest its kind reaches up to the topic's last event (for a
topic without `records`, within the stretch of C events), the number first and spaces
after it (JSON allows them), so a bounded topic's templates are made once.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from codec.batch_template import (
    BatchTemplate,
    TemplateRecord,
    build_template,
    places,
    write_decimals,
)
from codec.record_batch import HEADER_BYTES

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
CATEGORIES = 5
PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
ACTIVE_PEOPLE = 1000
IN_FLIGHT_AUCTIONS = 100
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
# One in HOT_*_RATIO picks is not hot; hot ids are multiples of HOT_GROUP.
HOT_AUCTION_RATIO, HOT_SELLER_RATIO, HOT_BIDDER_RATIO, HOT_CHANNEL_RATIO = 2, 4, 4, 100
HOT_GROUP = 100
AVERAGE_PERSON_BYTES, AVERAGE_AUCTION_BYTES, AVERAGE_BID_BYTES = 200, 500, 100
CHANNELS = 10_000
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
    "Seattle", "Kent", "Cheyenne",
)  # fmt: skip
FIRST_NAMES = (
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter",
    "Walter",
)  # fmt: skip
LAST_NAMES = (
    "Shultz",
    "Abrams",
    "Spencer",
    "White",
    "Bartels",
    "Walton",
    "Smith",
    "Jones",
    "Noris",
)
DEFAULT_RATE = 10_000.0
"""Events/s of event time when neither nexmark-rate nor the topic's rate says: Beam's."""
BATCH_EVENTS = 200
SLOTS_PER_PARTITION = 20
"""Distinct batches a Nexmark topic keeps a partition: 1.2 MiB, more than a 1 MiB fetch."""
# Every id and time moves by a whole number when the pool repeats: C / 50 and 3C / 50 ids,
# C * delay_us / 1000 ms.
CYCLE_MULTIPLE = 1000

Made = tuple[BatchTemplate, bytearray, bytes]
"""A template's header, its records and the places of their ids and times."""
MakeRecords = Callable[[Sequence[bytes]], Sequence[TemplateRecord]]
"""Makes a batch's records (keys, headers, timestamps) around the values it is given."""

PERSON, AUCTION, BID = 0, 1, 2
EVENT_NAMES = ("person", "auction", "bid")
# What kind of number a field holds: ids and times move on with the event number.
PERSON_ID, AUCTION_ID, TIME = 0, 1, 2
# Strings are letters with about one space in 13, as Beam's; made from random bytes.
_STRING_BYTES = bytes(0x20 if byte < 20 else ord("a") + (byte - 20) % 26 for byte in range(256))


class Field(NamedTuple):
    name: str
    value: int | str
    moves: int | None = None
    """PERSON_ID, AUCTION_ID or TIME when the value moves on with the event number."""


class Event(NamedTuple):
    """One event as generated for its number within the pool (times from the start)."""

    kind: int
    fields: tuple[Field, ...]


def slots_per_partition(partitions: int) -> int:
    """Pool batches per partition: SLOTS_PER_PARTITION, or the next number that keeps the
    pool's events a multiple of CYCLE_MULTIPLE."""
    step = CYCLE_MULTIPLE // math.gcd(CYCLE_MULTIPLE, partitions * BATCH_EVENTS)
    return -(-SLOTS_PER_PARTITION // step) * step


def delay_us(rate: float) -> int:
    """Microseconds between events at `rate` events/s (at least 1)."""
    return max(1, int(1_000_000 // rate))


def last_person(event: int) -> int:
    """The base-0 id of the newest person at event number `event`."""
    epoch, offset = divmod(event, TOTAL_PROPORTION)
    return epoch * PERSON_PROPORTION + min(offset, PERSON_PROPORTION - 1)


def last_auction(event: int) -> int:
    """The base-0 id of the newest auction at event number `event` (-1 before the first)."""
    epoch, offset = divmod(event, TOTAL_PROPORTION)
    if offset < PERSON_PROPORTION:
        epoch, offset = epoch - 1, AUCTION_PROPORTION - 1
    else:
        offset = min(offset - PERSON_PROPORTION, AUCTION_PROPORTION - 1)
    return epoch * AUCTION_PROPORTION + offset


def _some_person(event: int, rng: random.Random) -> int:
    people = last_person(event) + 1
    active = min(people, ACTIVE_PEOPLE)
    return people - active + rng.randrange(active + PERSON_ID_LEAD)


def _some_auction(event: int, rng: random.Random) -> int:
    newest = last_auction(event)
    oldest = max(newest - IN_FLIGHT_AUCTIONS, 0)
    return oldest + rng.randrange(newest - oldest + 1 + AUCTION_ID_LEAD)


def _string(rng: random.Random, length: int) -> str:
    return rng.randbytes(length).translate(_STRING_BYTES).decode()


def _short_string(rng: random.Random, longest: int) -> str:
    return _string(rng, 3 + rng.randrange(longest - 3))


def _extra(rng: random.Random, size: int, average: int) -> str:
    """Padding that brings an event to about `average` bytes, give or take a fifth."""
    if size > average:
        return ""
    wanted = average - size
    spread = round(wanted * 0.2)
    return _string(rng, wanted - spread + (rng.randrange(2 * spread) if spread else 0))


def _price(rng: random.Random) -> int:
    return round(10 ** (rng.random() * 6) * 100)


def _time_ms(event: int, delay: int) -> int:
    return event * delay // 1000


def _auction_length_ms(rng: random.Random, delay: int) -> int:
    """Auctions close within about twice the time it takes IN_FLIGHT_AUCTIONS to start."""
    horizon = _time_ms(IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION, delay)
    return 1 + rng.randrange(max(horizon * 2, 1))


def _channel(rng: random.Random) -> tuple[str, str]:
    if rng.randrange(HOT_CHANNEL_RATIO) > 0:
        name = HOT_CHANNELS[rng.randrange(len(HOT_CHANNELS))]
        return name, _HOT_URLS[name]
    number = rng.randrange(CHANNELS)
    return f"channel-{number}", f"{_base_url(rng)}&channel_id={number}"


def _base_url(rng: random.Random) -> str:
    parts = "/".join(_short_string(rng, 5) for _ in range(3))
    return f"https://www.nexmark.com/{parts}/item.htm?query=1"


_HOT_URLS = {name: _base_url(random.Random(name)) for name in HOT_CHANNELS}


def generate(event: int, delay: int) -> Event:
    """Event number `event` (below the pool's size), its times from the start."""
    rng = random.Random(event)
    now = _time_ms(event, delay)
    position = event % TOTAL_PROPORTION
    if position < PERSON_PROPORTION:
        return _person(event, rng, now)
    if position < PERSON_PROPORTION + AUCTION_PROPORTION:
        return _auction(event, rng, now, delay)
    return _bid(event, rng, now)


def _person(event: int, rng: random.Random, now: int) -> Event:
    name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
    email = f"{_short_string(rng, 7)}@{_short_string(rng, 5)}.com"
    card = " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4))
    city, state = rng.choice(US_CITIES), rng.choice(US_STATES)
    size = 8 + len(name) + len(email) + len(card) + len(city) + len(state)
    return Event(
        PERSON,
        (
            Field("id", FIRST_PERSON_ID + last_person(event), PERSON_ID),
            Field("name", name),
            Field("emailAddress", email),
            Field("creditCard", card),
            Field("city", city),
            Field("state", state),
            Field("dateTime", now, TIME),
            Field("extra", _extra(rng, size, AVERAGE_PERSON_BYTES)),
        ),
    )


def _auction(event: int, rng: random.Random, now: int, delay: int) -> Event:
    if rng.randrange(HOT_SELLER_RATIO) > 0:
        seller = last_person(event) // HOT_GROUP * HOT_GROUP
    else:
        seller = _some_person(event, rng)
    category = FIRST_CATEGORY_ID + rng.randrange(CATEGORIES)
    initial_bid = _price(rng)
    expires = now + _auction_length_ms(rng, delay)
    item, description = _short_string(rng, 20), _short_string(rng, 100)
    reserve = initial_bid + _price(rng)
    size = 8 + len(item) + len(description) + 40
    return Event(
        AUCTION,
        (
            Field("id", FIRST_AUCTION_ID + last_auction(event), AUCTION_ID),
            Field("itemName", item),
            Field("description", description),
            Field("initialBid", initial_bid),
            Field("reserve", reserve),
            Field("dateTime", now, TIME),
            Field("expires", expires, TIME),
            Field("seller", FIRST_PERSON_ID + seller, PERSON_ID),
            Field("category", category),
            Field("extra", _extra(rng, size, AVERAGE_AUCTION_BYTES)),
        ),
    )


def _bid(event: int, rng: random.Random, now: int) -> Event:
    if rng.randrange(HOT_AUCTION_RATIO) > 0:
        auction = last_auction(event) // HOT_GROUP * HOT_GROUP
    else:
        auction = _some_auction(event, rng)
    if rng.randrange(HOT_BIDDER_RATIO) > 0:
        bidder = last_person(event) // HOT_GROUP * HOT_GROUP + 1
    else:
        bidder = _some_person(event, rng)
    price = _price(rng)
    channel, url = _channel(rng)
    return Event(
        BID,
        (
            Field("auction", FIRST_AUCTION_ID + auction, AUCTION_ID),
            Field("bidder", FIRST_PERSON_ID + bidder, PERSON_ID),
            Field("price", price),
            Field("channel", channel),
            Field("url", url),
            Field("dateTime", now, TIME),
            Field("extra", _extra(rng, 32, AVERAGE_BID_BYTES)),
        ),
    )


def encode(
    event: Event, widths: tuple[int, int, int]
) -> tuple[bytes, list[tuple[int, int, int, int]]]:
    """The JSON value of `event` with each moving number in a place of `widths[kind]` bytes
    (the number, then spaces), and those places: (position in the value, width, kind,
    number), as codec.batch_template.write_decimals takes them."""
    out = bytearray(b'{"event_type":%d,"%s":{' % (event.kind, EVENT_NAMES[event.kind].encode()))
    spots = []
    for index, (name, value, moves) in enumerate(event.fields):
        out += b'%s"%s":' % (b"," if index else b"", name.encode())
        if moves is not None:
            assert isinstance(value, int)  # ids and times
            spots.append((len(out), widths[moves], moves, value))
            out += str(value).encode().ljust(widths[moves])
        elif isinstance(value, str):
            # The generated strings hold letters, digits, spaces and URL characters only.
            out += b'"%s"' % value.encode()
        else:
            out += str(value).encode()
    out += b"}}"
    return bytes(out), spots


@dataclass(slots=True)
class NexmarkLayout:
    """Where a Nexmark topic's events are and how its batches are made: the pool of
    templates, and the moves that make any batch from one of them."""

    partitions: int
    rate: float = DEFAULT_RATE
    events: int | None = None
    """Events in all when the topic is bounded (records x partitions); None if it grows for
    ever (its places then widen, and its templates are remade, as its ids gain digits)."""
    delay: int = field(init=False)
    slots: int = field(init=False)
    """Pool batches per partition."""
    cycle: int = field(init=False)
    """Events in the pool (C)."""
    _templates: dict[tuple[int, int, int, tuple[int, int, int]], Made] = field(
        init=False, default_factory=dict
    )
    _repeats: dict[tuple[int, int], tuple[tuple[int, int, int], tuple[int, int, int]]] = field(
        init=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        self.delay = delay_us(self.rate)
        self.slots = slots_per_partition(self.partitions)
        self.cycle = self.partitions * self.slots * BATCH_EVENTS

    @property
    def batch_events(self) -> int:
        return BATCH_EVENTS

    def event_number(self, partition: int, offset: int) -> int:
        return offset * self.partitions + partition

    def moves(self, repeat: int, start_ms: int) -> tuple[int, int, int]:
        """What the pool's person ids, auction ids and times gain in its `repeat`th repeat
        (times also gain the topic's start)."""
        people = repeat * self.cycle // TOTAL_PROPORTION * PERSON_PROPORTION
        auctions = repeat * self.cycle // TOTAL_PROPORTION * AUCTION_PROPORTION
        return people, auctions, start_ms + _time_ms(repeat * self.cycle, self.delay)

    def widths(self, repeat: int, start_ms: int) -> tuple[int, int, int]:
        """The places ids and times take in the `repeat`th repeat: wide enough for the
        largest each can be there, and at least as wide as the topic's last repeat needs
        (of a topic with `events`), so that a bounded topic has one width per kind from its
        first event to its last and its templates are made once."""
        last = (self.events - 1) // self.cycle if self.events else 0
        person, auction, time = self._needed(repeat, start_ms)
        last_person, last_auction, last_time = self._needed(last, start_ms)
        return max(person, last_person), max(auction, last_auction), max(time, last_time)

    def _needed(self, repeat: int, start_ms: int) -> tuple[int, int, int]:
        """The digits of the largest person id, auction id and time of a repeat."""
        people, auctions, times = self.moves(repeat, start_ms)
        largest = (
            FIRST_PERSON_ID + last_person(self.cycle) + PERSON_ID_LEAD + 1 + people,
            FIRST_AUCTION_ID + last_auction(self.cycle) + AUCTION_ID_LEAD + auctions,
            _time_ms(self.cycle, self.delay) + 2 * _auction_length_ms_bound(self.delay) + times,
        )
        return len(str(largest[0])), len(str(largest[1])), len(str(largest[2]))

    def event(self, number: int, start_ms: int) -> dict[str, Any]:
        """Event `number` as a consumer parses it: the reference the tests check against."""
        repeat, within = divmod(number, self.cycle)
        moves = self.moves(repeat, start_ms)
        generated = generate(within, self.delay)
        return {
            "event_type": generated.kind,
            EVENT_NAMES[generated.kind]: {
                name: value if kind is None else value + moves[kind]  # type: ignore[operator]
                for name, value, kind in generated.fields
            },
        }

    def value(self, partition: int, offset: int, start_ms: int) -> bytes:
        """The value of the record at `offset` of `partition`, as served."""
        repeat, within = divmod(self.event_number(partition, offset), self.cycle)
        data, spots = encode(generate(within, self.delay), self.widths(repeat, start_ms))
        patched = bytearray(data)
        write_decimals(patched, places(spots), self.moves(repeat, start_ms))
        return bytes(patched)

    def render(
        self,
        records: MakeRecords,
        partition: int,
        base: int,
        count: int,
        start_ms: int,
        timestamp_ms: int,
    ) -> tuple[bytearray, bytearray]:
        """The batch of `count` records from aligned offset `base` of `partition`, as header
        and records; `records(values)` makes its TemplateRecords from the values."""
        repeat, slot_offset = divmod(base, self.slots * BATCH_EVENTS)
        # Both looked up once per repeat: this runs for every batch a Fetch serves.
        known = self._repeats.get((repeat, start_ms))
        if known is None:
            known = self._repeats[repeat, start_ms] = (
                self.widths(repeat, start_ms),
                self.moves(repeat, start_ms),
            )
            if len(self._repeats) > 64:
                self._repeats = {(repeat, start_ms): known}
        widths, moves = known
        key = (partition, slot_offset, count, widths)
        made = self._templates.get(key)
        if made is None:
            made = self._templates[key] = self._template(
                records, partition, slot_offset, count, widths
            )
        template, holes = made[0], made[2]
        # The batch is written into the template's own buffer when nothing else refers to
        # it any more (the response that last carried it has been sent: only `made` does,
        # and getrefcount's argument), else into a copy. Fresh memory for every batch cost
        # more than the rest of serving it: each response's megabytes went back to the
        # kernel once sent and were faulted in again for the next, and copying them
        # doubled what the CPU pulled through its caches.
        buffer = made[1] if sys.getrefcount(made[1]) == 2 else bytearray(made[1])
        write_decimals(buffer, holes, moves)
        header, _ = template.render_parts(base, timestamp_ms, buffer)
        return header, buffer

    def _template(
        self,
        records: MakeRecords,
        partition: int,
        slot_offset: int,
        count: int,
        widths: tuple[int, int, int],
    ) -> Made:
        """The batch's header template, its records (written in place: see render) and
        the places of its ids and times."""
        if len(self._templates) >= 2 * self.partitions * self.slots:
            # Batches cut by a growing log end and places widened by a new digit each make
            # new templates: keep the pool's whole batches at the newest widths only.
            self._templates = {
                key: made
                for key, made in self._templates.items()
                if key[2] == BATCH_EVENTS and key[3] == widths
            }
        encoded = [
            encode(generate(self.event_number(partition, slot_offset + i), self.delay), widths)
            for i in range(count)
        ]
        template = build_template(records([data for data, _ in encoded]))
        # Find each value in the encoded records (in order: each follows the one before).
        holes = bytearray()
        cursor = 0
        buffer = bytearray(template.records)
        for data, spots in encoded:
            at = buffer.index(data, cursor)
            holes += places(
                [(at + position, width, kind, number) for position, width, kind, number in spots]
            )
            cursor = at + len(data)
        header = BatchTemplate(template.data[:HEADER_BYTES], count, template.max_timestamp_delta_ms)
        return header, buffer, bytes(holes)


def _auction_length_ms_bound(delay: int) -> int:
    return _time_ms(IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION, delay) + 1
