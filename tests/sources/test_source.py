"""Synthetic source topics: how they are declared, and the records they hold by the rules
nullbroker/sources/synthetic.py's docstring states (values, keys, headers, timestamps, batches)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec.batch_template import TemplateRecord
from codec.record_batch import HEADER_BYTES, read_batch_header
from nullbroker.app.configuration import load
from nullbroker.broker import Broker
from nullbroker.settings import Config, ConfigError
from nullbroker.sources.synthetic import (
    MAX_BATCH_RECORDS,
    PAYLOAD_POOL_BATCHES,
    RecordShape,
    SourceSpec,
    SourceSpecError,
    compressor,
    key_pattern,
    value_pattern,
)
from tests.codec.test_batch_template import kio_batch

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# Whole-number rates, for which the docstring's floor(n * 1000 / rate) has one exact value.
rates = st.none() | st.integers(min_value=1, max_value=2_000_000).map(float)


def exact_ms(records: int, rate: float | None) -> int:
    """floor(records * 1000 / rate) in exact arithmetic; 1 ms per record without a rate."""
    return math.floor(Fraction(records * 1000) / Fraction(rate or 1000))


def docstring_timestamp(offset: int, batch_records: int, rate: float | None) -> int:
    """`start_ms + floor(batch_base * 1000 / rate) + floor(i * 1000 / rate)`."""
    index = offset % batch_records
    return START_MS + exact_ms(offset - index, rate) + exact_ms(index, rate)


# Declaring source topics


def test_a_source_spec_parses_every_option() -> None:
    spec = SourceSpec.parse(
        "clicks:partitions=3,records=1000,size=64,key-size=8,rate=250.5,compression=zstd,headers=2"
    )
    assert spec == SourceSpec(
        "clicks",
        partitions=3,
        records=1000,
        size=64,
        key_size=8,
        rate=250.5,
        compression="zstd",
        headers=2,
    )


def test_a_source_spec_defaults_to_one_partition_of_100_byte_uncompressed_records() -> None:
    assert SourceSpec.parse("s:records=5") == SourceSpec(
        "s", partitions=1, records=5, size=100, key_size=0, rate=None, compression="none"
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("s:partitions=x,records=1", "partitions='x'"),
        ("s:records=1,size=big", "size='big'"),
        ("s:records=1,rate=fast", "rate='fast'"),
        ("s:records=1,colour=red", "'colour'"),
        ("s:records=1,size", "'size' is not option=value"),
        ("s:partitions=0,records=1", "partitions must be at least 1"),
        ("s:records=-1", "records must not be negative"),
        ("s:rate=0", "rate must be positive"),
        ("s:records=1,key-size=-1", "key-size"),
        ("s:records=1,compression=brotli", "compression must be one of"),
        ("s:partitions=2", "records=N, rate=R"),
        ("bad name:records=1", "characters outside"),
        (":records=1", "expected NAME:option=value"),
    ],
)
def test_a_bad_source_spec_is_refused_with_a_message_naming_the_option(
    text: str, named: str
) -> None:
    with pytest.raises(SourceSpecError) as refused:
        SourceSpec.parse(text)
    assert named in str(refused.value)


def test_an_unknown_option_lists_the_known_ones_with_dashes() -> None:
    with pytest.raises(SourceSpecError, match=r"known: partitions, records, size, key-size"):
        SourceSpec.from_mapping("s", {"records": 1, "keysize": 3})


def test_a_mapping_takes_dashes_or_underscores_and_ignores_its_name_key() -> None:
    spec = SourceSpec.from_mapping(
        "s", {"name": "s", "records": 10, "key_size": 4, "key-size": 6, "rate": 5}
    )
    # The later spelling wins, as a later TOML key or flag would.
    assert (spec.key_size, spec.rate, spec.records) == (6, 5.0, 10)


def test_toml_source_tables_declare_source_topics(tmp_path: Path) -> None:
    path = tmp_path / "nullbroker.toml"
    path.write_text(
        "[[source]]\n"
        'name = "clicks"\npartitions = 4\nrecords = 1000\nsize = 32\nkey-size = 6\n'
        "[[source]]\n"
        'name = "ticks"\nrate = 500\ncompression = "lz4"\nheaders = 1\n'
    )
    config = load({}, str(path), environ={})
    assert config.sources == (
        SourceSpec("clicks", partitions=4, records=1000, size=32, key_size=6),
        SourceSpec("ticks", rate=500.0, compression="lz4", headers=1),
    )


def test_a_bad_toml_source_table_names_the_file_and_the_option(tmp_path: Path) -> None:
    path = tmp_path / "nullbroker.toml"
    path.write_text('[[source]]\nname = "clicks"\nrecords = 10\nsize = "big"\n')
    with pytest.raises(ConfigError) as refused:
        load({}, str(path), environ={})
    assert str(path) in str(refused.value)
    assert "size='big'" in str(refused.value)
    path.write_text("[[source]]\nrecords = 10\n")
    with pytest.raises(ConfigError, match="needs a name"):
        load({}, str(path), environ={})


def test_repeated_source_flags_declare_one_topic_each() -> None:
    config = load({"source": ["a:records=1", "b:partitions=2,rate=10"]}, environ={})
    assert config.sources == (
        SourceSpec("a", records=1),
        SourceSpec("b", partitions=2, rate=10.0),
    )


def test_the_source_variable_separates_topics_with_semicolons() -> None:
    config = load({}, environ={"NULLBROKER_SOURCE": "a:records=1;b:records=2,size=8;"})
    assert config.sources == (SourceSpec("a", records=1), SourceSpec("b", records=2, size=8))


def test_source_flags_replace_the_variable_and_the_variable_replaces_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "nullbroker.toml"
    path.write_text('[[source]]\nname = "from-file"\nrecords = 1\n')
    environ = {"NULLBROKER_SOURCE": "from-env:records=1"}
    assert [s.name for s in load({}, str(path), environ={}).sources] == ["from-file"]
    assert [s.name for s in load({}, str(path), environ=environ).sources] == ["from-env"]
    flags = {"source": ["from-flag:records=1"]}
    assert [s.name for s in load(flags, str(path), environ=environ).sources] == ["from-flag"]


def test_a_topic_declared_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="'a' is declared more than once"):
        load({"source": ["a:records=1", "a:records=2"]}, environ={})


def test_a_bad_source_variable_names_the_variable_and_the_option() -> None:
    with pytest.raises(ConfigError, match=r"^NULLBROKER_SOURCE: .*rate must be positive"):
        load({}, environ={"NULLBROKER_SOURCE": "a:rate=-3"})


# Record contents


def test_values_are_letters_starting_at_a_plus_the_index_within_the_batch() -> None:
    assert value_pattern(0, 5) == b"ABCDE"
    assert value_pattern(2, 30) == b"CDEFGHIJKLMNOPQRSTUVWXYZABCDEF"
    assert value_pattern(27, 3) == b"BCD"  # index 27 starts where index 1 does
    assert value_pattern(7, 0) == b""


@given(index=st.integers(min_value=0, max_value=10**6), size=st.integers(0, 300))
def test_a_value_is_size_letters_each_one_after_the_last(index: int, size: int) -> None:
    value = value_pattern(index, size)
    assert len(value) == size
    expected = bytes(ord("A") + (index + position) % 26 for position in range(size))
    assert value == expected


def test_keys_are_the_zero_padded_index_cut_to_the_key_size() -> None:
    assert key_pattern(7, 0) is None
    assert key_pattern(7, 4) == b"0007"
    assert key_pattern(12345, 3) == b"345"
    assert key_pattern(0, 1) == b"0"


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=200),
    key_size=st.integers(min_value=0, max_value=8),
    headers=st.integers(min_value=0, max_value=3),
    rate=rates,
    batch=st.integers(min_value=0, max_value=10**6),
    cut=st.integers(min_value=1, max_value=MAX_BATCH_RECORDS),
)
def test_a_source_batch_holds_the_records_its_offsets_define(
    size: int, key_size: int, headers: int, rate: float | None, batch: int, cut: int
) -> None:
    """Each record's key, value, headers and timestamp are those the module docstring
    states, for a batch aligned at a multiple of batch_records and one cut by the log end."""
    shape = RecordShape(size=size, key_size=key_size, headers=headers, rate=rate)
    base = batch * shape.batch_records
    end = base + min(cut, shape.batch_records)
    expected = [
        TemplateRecord(
            key=None if key_size == 0 else str(i).zfill(key_size)[-key_size:].encode(),
            value=value_pattern(i, size),
            headers=tuple((f"h{h}", str(i).encode()) for h in range(headers)),
            timestamp_delta_ms=exact_ms(i, rate),
        )
        for i in range(end - base)
    ]
    rendered = b"".join(shape.batch(base, end, START_MS))
    assert bytes(rendered) == kio_batch(
        expected, base, docstring_timestamp(base, shape.batch_records, rate)
    )
    assert read_batch_header(rendered).record_count == end - base


def test_batches_hold_as_many_records_as_fit_16_kib_within_1_to_1000() -> None:
    assert RecordShape(size=100).batch_records == 16 * 1024 // 116
    assert RecordShape(size=0).batch_records == MAX_BATCH_RECORDS
    assert RecordShape(size=1_000_000).batch_records == 1
    assert RecordShape(size=84, key_size=8, headers=1).batch_records == 16 * 1024 // 116


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_a_compressed_source_batch_inflates_to_the_uncompressed_one(compression: str) -> None:
    plain = RecordShape(size=50, key_size=4, headers=1)
    packed = RecordShape(
        size=50, key_size=4, headers=1, compression=compression, compress=compressor(compression)
    )
    base = 3 * plain.batch_records
    expected = b"".join(plain.batch(base, base + 100, START_MS))
    rendered = b"".join(packed.batch(base, base + 100, START_MS))
    assert read_batch_header(rendered).compression == compression
    # Value letters repeat, so every codec shrinks the batch.
    assert len(rendered) < len(expected)
    decompress = {
        "gzip": cramjam.gzip.decompress,
        "snappy": cramjam.snappy.decompress_raw,
        "lz4": cramjam.lz4.decompress,
        "zstd": cramjam.zstd.decompress,
    }[compression]
    assert bytes(decompress(bytes(rendered[HEADER_BYTES:]))) == expected[HEADER_BYTES:]


# Timestamps


@given(
    rate=rates,
    size=st.integers(min_value=0, max_value=2000),
    offsets=st.lists(st.integers(min_value=0, max_value=10**9), min_size=2, max_size=20),
)
def test_timestamps_follow_the_docstring_and_never_fall_as_offsets_rise(
    rate: float | None, size: int, offsets: list[int]
) -> None:
    shape = RecordShape(size=size, rate=rate)
    offsets.sort()
    stamps = [shape.timestamp_ms(START_MS, offset) for offset in offsets]
    assert stamps == [docstring_timestamp(offset, shape.batch_records, rate) for offset in offsets]
    assert stamps == sorted(stamps)


def test_without_a_rate_records_are_one_millisecond_apart() -> None:
    shape = RecordShape(size=100)
    assert [shape.timestamp_ms(START_MS, o) for o in range(0, 1000, 137)] == [
        START_MS + o for o in range(0, 1000, 137)
    ]


def test_records_of_a_slow_source_are_a_period_apart_and_rise_strictly() -> None:
    shape = RecordShape(size=100, rate=3.0)
    stamps = [shape.timestamp_ms(START_MS, o) for o in range(2000)]
    assert all(later > earlier for earlier, later in itertools.pairwise(stamps))
    # 3 records/s: offset 195 is at 65 s exactly (a rounded 1000/3 per record makes it 64.999).
    assert stamps[195] == START_MS + 65_000


@given(
    rate=rates,
    size=st.integers(min_value=0, max_value=2000),
    low=st.integers(min_value=0, max_value=10**6),
    length=st.integers(min_value=1, max_value=10**5),
    pick=st.integers(min_value=0),
)
def test_offset_for_timestamp_finds_the_first_offset_with_that_timestamp(
    rate: float | None, size: int, low: int, length: int, pick: int
) -> None:
    shape = RecordShape(size=size, rate=rate)
    high = low + length
    offset = low + pick % length
    stamp = shape.timestamp_ms(START_MS, offset)
    found = shape.offset_for_timestamp(START_MS, stamp, low, high)
    assert low <= found <= offset
    assert shape.timestamp_ms(START_MS, found) == stamp
    if found > low:
        assert shape.timestamp_ms(START_MS, found - 1) < stamp
    if rate is None or rate <= 1000:
        assert found == offset, "at most one record per millisecond: the search is exact"
    last = shape.timestamp_ms(START_MS, high - 1)
    assert shape.offset_for_timestamp(START_MS, last + 1, low, high) == high
    assert shape.offset_for_timestamp(START_MS, 0, low, high) == low


# Growing source topics


def test_a_growing_source_gains_its_rate_per_partition_up_to_its_records() -> None:
    broker = Broker(Config(sources=(SourceSpec("ticks", partitions=2, rate=250.0, records=1000),)))
    topic = broker.topics.get("ticks")
    assert topic is not None
    assert [p.log_end_offset for p in topic.partitions] == [0, 0]
    topic.advance(topic.created_ms + 2_003)
    assert [p.log_end_offset for p in topic.partitions] == [500, 500]
    # A clock stepping back does not shrink a log.
    topic.advance(topic.created_ms + 1_000)
    assert [p.log_end_offset for p in topic.partitions] == [500, 500]
    topic.advance(topic.created_ms + 60_000)
    assert [p.log_end_offset for p in topic.partitions] == [1000, 1000]


def test_a_bounded_source_holds_its_records_from_the_start_in_every_partition() -> None:
    broker = Broker(Config(sources=(SourceSpec("fixed", partitions=3, records=42),)))
    topic = broker.topics.get("fixed")
    assert topic is not None
    assert [(p.log_start_offset, p.log_end_offset) for p in topic.partitions] == [(0, 42)] * 3
    topic.advance(topic.created_ms + 10**9)
    assert [p.log_end_offset for p in topic.partitions] == [42] * 3


# Payload files: values a pipeline can parse, cycled by offset


def payload_file(tmp_path: Path, payloads: list[bytes], delimiter: bytes = b"\n") -> str:
    path = tmp_path / "payloads.txt"
    path.write_bytes(delimiter.join(payloads) + delimiter)
    return str(path)


def test_a_payload_file_and_its_delimiter_are_source_options(tmp_path: Path) -> None:
    path = payload_file(tmp_path, [b'{"a":1}', b'{"a":2}'], b"|")
    spec = SourceSpec.parse(f"events:records=10,payload-file={path},payload-delimiter=|")

    assert spec.payload_file == path and spec.payloads() == (b'{"a":1}', b'{"a":2}')
    # Kafka's perf test splits at a newline unless told otherwise; `\n` is written as such.
    lines = payload_file(tmp_path, [b"one", b"", b"two"])
    assert SourceSpec.parse(f"e:records=1,payload-file={lines}").payloads() == (b"one", b"two")
    tabs = payload_file(tmp_path, [b"x", b"y"], b"\t")
    spec = SourceSpec.parse(f"e:records=1,payload-file={tabs},payload-delimiter=\\t")
    assert spec.payloads() == (b"x", b"y")


@pytest.mark.parametrize(
    ("contents", "complaint"),
    [(None, "No such file or directory"), (b"\n\n", "holds no records")],
)
def test_a_payload_file_that_cannot_be_used_stops_the_start_naming_source_and_file(
    tmp_path: Path, contents: bytes | None, complaint: str
) -> None:
    path = tmp_path / "payloads.txt"
    if contents is not None:
        path.write_bytes(contents)
    with pytest.raises(SourceSpecError) as refused:
        SourceSpec.parse(f"events:records=10,payload-file={path}")
    assert str(refused.value) == f"source 'events': payload-file {str(path)!r}: {complaint}"


@settings(max_examples=60, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=40),
    batch=st.integers(min_value=0, max_value=10**5),
    cut=st.integers(min_value=1, max_value=MAX_BATCH_RECORDS),
)
def test_a_payload_batch_holds_the_files_records_cycled_by_offset(
    payloads: list[bytes], batch: int, cut: int
) -> None:
    """Without the pool's cap (it holds every distinct batch here), the record at offset `o`
    has value payloads[o % n]; keys, headers and timestamps are as for any source."""
    shape = RecordShape(size=0, key_size=4, payloads=tuple(payloads))
    base = batch * shape.batch_records
    end = base + min(cut, shape.batch_records)
    expected = [
        TemplateRecord(
            key=str(i).zfill(4)[-4:].encode(),
            value=payloads[(base + i) % len(payloads)],
            headers=(),
            timestamp_delta_ms=exact_ms(i, None),
        )
        for i in range(end - base)
    ]
    rendered = b"".join(shape.batch(base, end, START_MS))
    assert bytes(rendered) == kio_batch(
        expected, base, docstring_timestamp(base, shape.batch_records, None)
    )


def test_a_large_payload_file_repeats_its_batches_after_the_pool() -> None:
    """A prime number of payloads would make every batch distinct: the pool keeps
    PAYLOAD_POOL_BATCHES of them, and batch PAYLOAD_POOL_BATCHES is batch 0 again."""
    payloads = tuple(f"payload-{n:05d}".encode() for n in range(4099))
    shape = RecordShape(size=0, payloads=payloads)
    per_batch = shape.batch_records
    assert shape.pool == PAYLOAD_POOL_BATCHES
    first = bytes(b"".join(shape.batch(0, per_batch, START_MS)))
    again_at = PAYLOAD_POOL_BATCHES * per_batch
    again = bytes(b"".join(shape.batch(again_at, again_at + per_batch, START_MS)))
    # The same records; only the header's base offset, timestamps and CRC differ.
    assert again[HEADER_BYTES:] == first[HEADER_BYTES:]
    assert shape.value(per_batch - 1, slot=1) == payloads[2 * per_batch - 1]


def test_batches_cut_by_a_growing_log_end_do_not_pile_up_a_template_per_length_and_slot() -> None:
    # 1 KiB payloads, 15 to a batch: every cut length of every slot is 3,840 batches.
    payloads = tuple(f"p{n:04d}".encode().ljust(1000, b".") for n in range(4099))
    shape = RecordShape(size=0, payloads=payloads, rate=1000.0)
    per_batch = shape.batch_records
    for batch in range(PAYLOAD_POOL_BATCHES):
        for cut in range(1, per_batch + 1):
            base = batch * per_batch
            shape.batch(base, base + cut, START_MS)
    assert len(shape._templates) <= shape.pool + per_batch


def batches_one_by_one(
    shape: RecordShape, offset: int, end: int, limit: int, first: bool, start_ms: int = START_MS
) -> tuple[bytes, int, int]:
    """What RecordShape.read serves, batch by batch: each batch from the one holding
    `offset`, until the log end or one that exceeds the limit (the first of a response
    excepted); the records at or after `offset`, and the size."""
    served, count, size = b"", 0, 0
    base = shape.batch_base(offset)
    while offset < end and base < end:
        batch = b"".join(shape.batch(base, end, start_ms))
        if size + len(batch) > limit and (served or not first):
            break
        served += batch
        count += min(base + shape.batch_records, end) - max(base, offset)
        size += len(batch)
        base += shape.batch_records
    return served, count, size


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(min_value=0, max_value=3000),
    rate=rates,
    offset=st.integers(min_value=0, max_value=5000),
    records=st.integers(min_value=0, max_value=5000),
    limit=st.integers(min_value=0, max_value=300_000),
    first=st.booleans(),
    payloads=st.sampled_from([(), tuple(b"v%d" % n * 40 for n in range(7))]),
)
def test_a_read_serves_what_batches_one_by_one_would_and_again_from_its_kept_run(
    size: int,
    rate: float | None,
    offset: int,
    records: int,
    limit: int,
    first: bool,
    payloads: tuple[bytes, ...],
) -> None:
    """Whole batches counted by arithmetic, a cut one at the log end, the limit and the
    first batch's exception; reads again from the same offset (another partition, a
    lower limit, another topic's start) give the bytes batches one by one give."""
    shape = RecordShape(size=size, rate=rate, payloads=payloads)
    end = offset + records
    for read_limit, start_ms in ((limit, START_MS), (limit // 2, START_MS), (limit, START_MS),
                                 (limit, START_MS + 1)):  # fmt: skip
        parts, count, served = shape.read(offset, end, read_limit, first, start_ms)
        expected = batches_one_by_one(shape, offset, end, read_limit, first, start_ms)
        assert (b"".join(parts), count, served) == expected
