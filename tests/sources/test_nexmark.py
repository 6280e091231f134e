"""Nexmark source topics (`format=nexmark`): the benchmark's proportions and relations,
every served batch equal to the reference events for its offsets (across the pool's
repeats, where ids and times move on and their places widen), and a real consumer
parsing them."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec.batch_template import places, write_decimals_python
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources import nexmark
from nullbroker.sources.nexmark import BATCH_EVENTS, NexmarkLayout, generate
from nullbroker.sources.synthetic import RecordShape, SourceSpec, SourceSpecError
from tests.clients.test_clients_consume import read_whole_topic
from tests.handlers.test_fetch import records_of

START_MS = 1_764_000_000_000


def events(layout: NexmarkLayout, count: int) -> list[dict]:
    return [layout.event(number, START_MS) for number in range(count)]


def test_one_person_three_auctions_and_forty_six_bids_in_every_fifty_events() -> None:
    kinds = Counter(event["event_type"] for event in events(NexmarkLayout(1), 5_000))
    assert kinds == {nexmark.PERSON: 100, nexmark.AUCTION: 300, nexmark.BID: 4_600}


def test_ids_and_times_advance_and_every_bid_and_auction_refers_to_what_exists() -> None:
    layout = NexmarkLayout(4, rate=1_000)
    people: list[int] = []
    auctions: list[int] = []
    last_time = 0
    # Past the pool's first repeat: the moved ids and times keep these relations.
    for number, event in enumerate(events(layout, layout.cycle + 10_000)):
        body = event[nexmark.EVENT_NAMES[event["event_type"]]]
        assert body["dateTime"] == START_MS + number  # 1 ms an event at 1,000/s
        assert body["dateTime"] >= last_time
        last_time = body["dateTime"]
        if event["event_type"] == nexmark.PERSON:
            people.append(body["id"])
        elif event["event_type"] == nexmark.AUCTION:
            auctions.append(body["id"])
            assert body["seller"] <= people[-1] + nexmark.PERSON_ID_LEAD
            assert body["expires"] > body["dateTime"]
            assert body["reserve"] >= body["initialBid"] >= 1
        else:
            assert body["auction"] <= auctions[-1] + nexmark.AUCTION_ID_LEAD
            assert body["bidder"] <= people[-1] + nexmark.PERSON_ID_LEAD + 1
    assert people == list(range(1000, 1000 + len(people)))
    assert auctions == list(range(1000, 1000 + len(auctions)))


def test_most_bids_go_to_hot_auctions_and_come_from_hot_bidders() -> None:
    layout = NexmarkLayout(1)  # hot ids are multiples of 100 in the pool's first events
    pool = events(layout, layout.cycle)
    bids = [event["bid"] for event in pool if event["event_type"] == nexmark.BID]
    hot_auctions = sum(bid["auction"] % nexmark.HOT_GROUP == 0 for bid in bids) / len(bids)
    hot_bidders = sum(bid["bidder"] % nexmark.HOT_GROUP == 1 for bid in bids) / len(bids)
    assert 0.45 < hot_auctions < 0.6  # 1 - 1/2, and a few picked at random
    assert 0.7 < hot_bidders < 0.8  # 1 - 1/4


@pytest.mark.parametrize("partitions", [1, 3, 4, 16])
def test_the_pool_is_a_multiple_of_a_thousand_events(partitions: int) -> None:
    layout = NexmarkLayout(partitions)
    assert layout.cycle % 1000 == 0
    assert layout.cycle == partitions * layout.slots * BATCH_EVENTS
    assert nexmark.SLOTS_PER_PARTITION <= layout.slots < nexmark.SLOTS_PER_PARTITION + 5


def served_values(shape: RecordShape, partition: int, base: int, end: int) -> list[bytes]:
    header, records = shape.batch(base, end, START_MS, partition)
    return [record.value for record in records_of(bytes(header) + bytes(records))]


@settings(max_examples=60, deadline=None)
@given(
    partitions=st.sampled_from([1, 2, 4, 7]),
    repeat=st.integers(0, 400),
    batch=st.integers(0, 300),
    cut=st.integers(1, BATCH_EVENTS),
    data=st.data(),
)
def test_every_served_batch_holds_the_reference_events_of_its_offsets(
    partitions: int, repeat: int, batch: int, cut: int, data: st.DataObject
) -> None:
    """Across repeats of the pool (ids gaining digits on the way), and for batches cut
    short by a log end."""
    layout = NexmarkLayout(partitions, rate=5_000)
    shape = RecordShape(size=0, key_size=4, nexmark=layout)
    partition = data.draw(st.integers(0, partitions - 1))
    base = repeat * layout.slots * BATCH_EVENTS + batch % layout.slots * BATCH_EVENTS
    values = served_values(shape, partition, base, base + cut)
    assert len(values) == cut
    for index, value in enumerate(values):
        number = layout.event_number(partition, base + index)
        assert json.loads(value) == layout.event(number, START_MS)
        assert value == layout.value(partition, base + index, START_MS)


def test_a_place_is_padded_only_where_its_stretch_of_events_gains_a_digit() -> None:
    layout = NexmarkLayout(1)
    per_repeat = 3 * layout.cycle // 50  # auction ids a repeat of the pool moves on
    crossing = (10_000 - 1000 - 1) // per_repeat  # the repeat whose auction ids reach 10,000
    # Its four-digit auction ids are padded to five places...
    value = layout.value(0, crossing * layout.cycle + 3, START_MS)
    assert b'"id":%d ,' % (1002 + crossing * per_repeat) in value
    # ...and neither the first repeat's (all four digits) nor the next one's (all five) are.
    assert b'"id":1002,' in layout.value(0, 3, START_MS)
    value = layout.value(0, (crossing + 1) * layout.cycle + 3, START_MS)
    assert b'"id":%d,' % (1002 + (crossing + 1) * per_repeat) in value


def test_a_bounded_topic_pads_to_its_last_event_so_its_templates_are_made_once() -> None:
    layout = NexmarkLayout(1, events=1000 * NexmarkLayout(1).cycle)
    assert layout.widths(0, START_MS) == layout.widths(999, START_MS)
    assert b'"id":1002  ,' in layout.value(0, 3, START_MS)  # 6 digits by the end


def test_a_batch_still_being_sent_is_never_written_over() -> None:
    layout = NexmarkLayout(1)
    shape = RecordShape(size=0, nexmark=layout)
    repeat = shape.batch_records * shape.pool
    header, records = shape.batch(0, 10**9, START_MS)
    sent = bytes(header) + bytes(records)
    # The same template a repeat later, while the first batch is still held (being sent).
    _, later = shape.batch(repeat, 10**9, START_MS)
    assert later is not records
    assert bytes(header) + bytes(records) == sent
    # Once nothing holds it, its buffer is written again, in place.
    records_id = id(records)
    del header, records, later
    _, reused = shape.batch(repeat, 10**9, START_MS)
    assert id(reused) == records_id
    expected = [layout.event(repeat + index, START_MS) for index in range(shape.batch_records)]
    values = [
        record.value
        for record in records_of(bytes(shape.batch(repeat, 10**9, START_MS)[0]) + bytes(reused))
    ]
    assert [json.loads(value) for value in values] == expected


def test_generated_events_are_the_same_every_time() -> None:
    assert [generate(n, 100) for n in range(200)] == [generate(n, 100) for n in range(200)]


def test_the_decimal_writer_keeps_widths_and_refuses_what_does_not_fit() -> None:
    buffer = bytearray(b'{"a":999 ,"b":7}')
    write_decimals_python(buffer, places([(5, 4, 0, 999), (14, 1, 1, 7)]), (1, 2))
    assert buffer == bytearray(b'{"a":1000,"b":9}')
    write_decimals_python(buffer, places([(5, 4, 0, 999)]), (-990,))
    assert buffer == bytearray(b'{"a":9   ,"b":9}')
    with pytest.raises(ValueError, match="too narrow"):
        write_decimals_python(buffer, places([(14, 1, 0, 7)]), (5,))
    with pytest.raises(ValueError, match="negative"):
        write_decimals_python(buffer, places([(14, 1, 0, 7)]), (-8,))
    with pytest.raises(ValueError, match="past the end"):
        write_decimals_python(buffer, places([(14, 4, 0, 7)]), (0,))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("n:records=10,format=nexmark,compression=lz4", "format=nexmark is served uncompressed"),
        ("n:records=10,format=nexmark,payload-file=x", "no schema or payload-file"),
        ("n:records=10,format=nexmark,nexmark-rate=0", "nexmark-rate must be"),
        ("n:records=10,nexmark-rate=5", "nexmark-rate is for format=nexmark"),
    ],
)
def test_a_nexmark_source_refuses_what_it_cannot_serve(spec: str, message: str) -> None:
    with pytest.raises(SourceSpecError, match=message):
        SourceSpec.parse(spec)


def test_event_time_follows_the_topic_rate_unless_nexmark_rate_says() -> None:
    assert (
        SourceSpec.parse("n:rate=50,partitions=4,format=nexmark").nexmark_events_per_second() == 200
    )
    assert SourceSpec.parse("n:records=9,format=nexmark").nexmark_events_per_second() == 10_000
    spec = SourceSpec.parse("n:records=9,format=nexmark,nexmark-rate=20")
    assert spec.nexmark_events_per_second() == 20


@pytest.mark.clients
def test_a_consumer_parses_the_reference_event_at_every_offset(
    nullbroker_factory: StartBroker,
) -> None:
    records = 2_500
    broker = nullbroker_factory(
        "--source", f"auctions:partitions=3,records={records},format=nexmark"
    )
    consumed = read_whole_topic(broker, "auctions", 3, records)

    layout = NexmarkLayout(3)
    start = {m.partition(): m.timestamp()[1] for m in consumed.messages if m.offset() == 0}
    assert len(set(start.values())) == 1  # the topic's start, the first record's time
    for message in consumed.messages:
        number = layout.event_number(message.partition(), message.offset())
        assert json.loads(message.value()) == layout.event(number, start[0])
