"""Batch templates against kio's generic batch writer: the specialised path must produce
the very bytes the generic one does (DESIGN: "every specialised path is property-tested to
produce byte-identical output to the generic one")."""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch

from codec.batch_template import (
    COMPRESSION_CODES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TemplateRecord,
    build_template,
)
from codec.record_batch import ATTRIBUTES_OFFSET, HEADER_BYTES, crc_matches, read_batch_header
from nullbroker.sources.synthetic import compressor

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MAX_OFFSET = 2**63 - 1
# Timestamps a real topic can carry: from the epoch to about the year 2100.
MAX_TIMESTAMP_MS = 4_102_444_800_000
# The template's header writes partition leader epoch 0: kio's NewRecordBatch default.
TEMPLATE_LEADER_EPOCH = 0

DECOMPRESS: dict[str, Callable[[bytes], object]] = {
    "gzip": cramjam.gzip.decompress,
    "snappy": cramjam.snappy.decompress_raw,
    "lz4": cramjam.lz4.decompress,
    "zstd": cramjam.zstd.decompress,
}


def kio_timestamp(ms: int) -> datetime.datetime:
    """A datetime kio's writer turns back into exactly `ms`.

    kio computes `int(timestamp() * 1000)` in floating point, which truncates about one
    whole-millisecond datetime in a hundred to the millisecond below; half a millisecond
    more keeps the same wire value clear of that rounding.
    """
    return EPOCH + datetime.timedelta(milliseconds=ms, microseconds=500)


def kio_batch(
    records: list[TemplateRecord], base_offset: int, base_timestamp_ms: int, attributes: int = 0
) -> bytes:
    """The batch kio's generic writer makes of `records` at `base_offset`, the first one at
    `base_timestamp_ms`, with the producer fields of a batch that no producer wrote."""
    buffer = io.BytesIO()
    write_new_batch(
        buffer,
        NewRecordBatch(
            producer_id=NO_PRODUCER_ID,
            producer_epoch=NO_PRODUCER_EPOCH,
            base_sequence=NO_SEQUENCE,
            partition_leader_epoch=TEMPLATE_LEADER_EPOCH,
            attributes=attributes,
            records=tuple(
                Record(
                    attributes=0,
                    timestamp=kio_timestamp(base_timestamp_ms + record.timestamp_delta_ms),
                    offset=base_offset + delta,
                    key=record.key,
                    value=record.value,
                    headers=tuple(
                        RecordHeader(key=name.encode(), value=value)
                        for name, value in record.headers
                    ),
                )
                for delta, record in enumerate(records)
            ),
        ),
    )
    return buffer.getvalue()


optional_bytes = st.none() | st.binary(max_size=64)
template_records = st.builds(
    TemplateRecord,
    key=optional_bytes,
    value=optional_bytes,
    headers=st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3).map(tuple),
    timestamp_delta_ms=st.integers(min_value=0, max_value=10**9),
)


@st.composite
def batches(draw: st.DrawFn) -> list[TemplateRecord]:
    """Records as a batch holds them: the first at the batch's base timestamp, the others
    at or after it, not necessarily in order."""
    records = draw(st.lists(template_records, min_size=1, max_size=20))
    first = records[0]
    return [
        TemplateRecord(first.key, first.value, first.headers, timestamp_delta_ms=0),
        *records[1:],
    ]


@settings(deadline=None)
@given(
    records=batches(),
    base_offset=st.integers(min_value=0, max_value=MAX_OFFSET - 64),
    base_timestamp_ms=st.integers(min_value=0, max_value=MAX_TIMESTAMP_MS),
)
def test_an_uncompressed_template_renders_the_bytes_kio_writes(
    records: list[TemplateRecord], base_offset: int, base_timestamp_ms: int
) -> None:
    rendered = build_template(records).render(base_offset, base_timestamp_ms)
    assert bytes(rendered) == kio_batch(records, base_offset, base_timestamp_ms)


@settings(deadline=None)
@given(
    records=batches(),
    renders=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=MAX_OFFSET - 64),
            st.integers(min_value=0, max_value=MAX_TIMESTAMP_MS),
        ),
        min_size=2,
        max_size=4,
    ),
)
def test_rendering_again_at_other_offsets_leaves_earlier_renders_and_the_template_unchanged(
    records: list[TemplateRecord], renders: list[tuple[int, int]]
) -> None:
    template = build_template(records)
    original = template.data
    rendered = [template.render(offset, timestamp) for offset, timestamp in renders]
    assert template.data == original
    for (offset, timestamp), batch in zip(renders, rendered, strict=True):
        assert bytes(batch) == kio_batch(records, offset, timestamp)


@pytest.mark.parametrize("compression", [name for name in COMPRESSION_CODES if name != "none"])
@settings(deadline=None)
@given(
    records=batches(),
    base_offset=st.integers(min_value=0, max_value=MAX_OFFSET - 64),
    base_timestamp_ms=st.integers(min_value=0, max_value=MAX_TIMESTAMP_MS),
)
def test_a_compressed_template_decompresses_to_the_records_kio_writes(
    compression: str,
    records: list[TemplateRecord],
    base_offset: int,
    base_timestamp_ms: int,
) -> None:
    code = COMPRESSION_CODES[compression]
    rendered = build_template(records, compression, compressor(compression)).render(
        base_offset, base_timestamp_ms
    )
    header = read_batch_header(rendered)
    assert header.compression == compression
    assert header.length == len(rendered)
    assert crc_matches(rendered, header)

    # The same batch with its records inflated and the codec bits cleared is what kio
    # writes uncompressed; kio's reader then decodes it to the records given.
    expected = kio_batch(records, base_offset, base_timestamp_ms)
    inflated = bytes(DECOMPRESS[compression](bytes(rendered[HEADER_BYTES:])))
    assert inflated == expected[HEADER_BYTES:]
    assert rendered[ATTRIBUTES_OFFSET + 1] == code
    # Only the length, the CRC and the codec bits differ in the header.
    expected_header = read_batch_header(expected)
    assert (
        header.base_offset,
        header.partition_leader_epoch,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
    ) == (
        expected_header.base_offset,
        expected_header.partition_leader_epoch,
        expected_header.last_offset_delta,
        expected_header.base_timestamp,
        expected_header.max_timestamp,
        expected_header.producer_id,
        expected_header.producer_epoch,
        expected_header.base_sequence,
        expected_header.record_count,
    )
    decoded, size = read_batch(expected, 0)
    assert size == len(expected)
    assert [(r.offset, r.key, r.value) for r in decoded.records] == [
        (base_offset + delta, record.key, record.value) for delta, record in enumerate(records)
    ]


@pytest.mark.parametrize("compression", list(COMPRESSION_CODES))
@given(
    base_offset=st.integers(min_value=0, max_value=MAX_OFFSET - 64),
    base_timestamp_ms=st.integers(min_value=-(2**62), max_value=2**62),
)
def test_the_crc_is_valid_after_rendering_at_any_offset_and_timestamp(
    compression: str, base_offset: int, base_timestamp_ms: int
) -> None:
    records = [
        TemplateRecord(b"k%d" % i, b"value-%d" % i, (("h", b"x"),), timestamp_delta_ms=i)
        for i in range(5)
    ]
    rendered = build_template(records, compression, compressor(compression)).render(
        base_offset, base_timestamp_ms
    )
    header = read_batch_header(rendered)
    assert (header.base_offset, header.base_timestamp, header.max_timestamp) == (
        base_offset,
        base_timestamp_ms,
        base_timestamp_ms + 4,
    )
    assert header.crc == crc32c(bytes(rendered[ATTRIBUTES_OFFSET:]))


def test_a_template_needs_a_record_and_a_compress_function_for_its_codec() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_template([])
    with pytest.raises(ValueError, match="gzip"):
        build_template([TemplateRecord(None, b"v")], "gzip")


@settings(deadline=None, max_examples=50)
@given(
    records=batches(),
    base_offset=st.integers(min_value=0, max_value=MAX_OFFSET - 64),
    base_timestamp_ms=st.integers(min_value=0, max_value=MAX_TIMESTAMP_MS),
)
def test_rendered_parts_are_the_rendered_batch_and_share_the_templates_records(
    records: list[TemplateRecord], base_offset: int, base_timestamp_ms: int
) -> None:
    template = build_template(records)
    header, tail = template.render_parts(base_offset, base_timestamp_ms)
    assert len(header) == HEADER_BYTES
    assert bytes(header + tail) == kio_batch(records, base_offset, base_timestamp_ms)
    assert tail.obj is template.data  # a view of the template, not a copy


@settings(deadline=None, max_examples=50)
@given(
    records=batches(),
    compression=st.sampled_from(["none", "zstd"]),
    base_offset=st.integers(min_value=0, max_value=MAX_OFFSET - 64),
    base_timestamp_ms=st.integers(min_value=0, max_value=MAX_TIMESTAMP_MS),
)
def test_a_packed_header_is_the_rendered_one_with_its_crc_passed_over_or_tabled(
    records: list[TemplateRecord], compression: str, base_offset: int, base_timestamp_ms: int
) -> None:
    template = build_template(records, compression, compressor(compression))
    rendered, _ = template.render_parts(base_offset, base_timestamp_ms)
    assert template.header(base_offset, base_timestamp_ms) == rendered
    template.table_crc()
    assert template.header(base_offset, base_timestamp_ms) == rendered
