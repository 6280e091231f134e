"""The RecordBatch v2 header view, on the batches real producers sent and on broken ones."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

import codec
from codec import apis
from codec.crc import crc32c_before
from codec.record_batch import ATTRIBUTES_OFFSET, COMPRESSION_NAMES, CRC_OFFSET, HEADER_BYTES
from tests.support.vectors import Entry, by_file, entry_id, frame_bytes, requests, responses

PRODUCE_REQUESTS = [entry for entry in requests() if "produce" in entry]
FETCH_RESPONSES = [entry for entry in responses() if entry["api_key"] == 1]


def produced_records(entry: Entry) -> list[bytes]:
    """The records field of every partition of a recorded Produce request."""
    body = codec.decode_request(frame_bytes(entry), codec.KAFKA_4_RANGES).body
    return [
        partition.records
        for topic in body.topic_data
        for partition in topic.partition_data
        if partition.records is not None
    ]


def recorded_batch(file: str) -> bytes:
    """The first batch of a recorded Produce request."""
    records = produced_records(by_file()[file])[0]
    return bytes(records[: codec.read_batch_header(records).length])


# An idempotent, zstd-compressed batch from Java's producer-perf-test.
JAVA_ZSTD = "java-4.0/015-Produce-v10-request.bin"


def patched(batch: bytes, offset: int, value: bytes) -> bytes:
    return batch[:offset] + value + batch[offset + len(value) :]


def with_crc(batch: bytes) -> bytes:
    """The batch with its CRC recomputed, as a producer would have written it."""
    return patched(batch, CRC_OFFSET, struct.pack(">I", crc32c(batch[ATTRIBUTES_OFFSET:])))


def with_attributes(batch: bytes, attributes: int) -> bytes:
    return with_crc(patched(batch, ATTRIBUTES_OFFSET, struct.pack(">h", attributes)))


@pytest.mark.parametrize("entry", PRODUCE_REQUESTS, ids=entry_id)
def test_recorded_produce_batches_match_what_the_producer_sent(entry: Entry) -> None:
    produce = entry["produce"]
    partitions = produced_records(entry)
    batches = [
        (records, header) for records in partitions for header in codec.iter_batches(records)
    ]
    headers = [header for _, header in batches]
    assert len(partitions) == produce["partitions"]
    assert len(headers) == produce["record_batches"]
    assert sum(header.record_count for header in headers) == produce["records"]
    assert sorted({header.compression for header in headers}) == sorted(produce["compression"])
    for records, header in batches:
        assert codec.crc_matches(records, header)
        assert header.base_offset == 0
        assert header.is_transactional is produce["transactional_batches"]
        assert not header.is_control
        if produce["idempotent"]:
            assert header.producer_id >= 0
            assert header.producer_epoch >= 0
            assert header.base_sequence >= 0
        else:
            assert (header.producer_id, header.producer_epoch) == (-1, -1)
    for records in partitions:
        assert sum(header.length for header in codec.iter_batches(records)) == len(records)


def test_recorded_produce_requests_cover_every_compression_codec() -> None:
    recorded = {name for entry in PRODUCE_REQUESTS for name in entry["produce"]["compression"]}
    assert recorded == set(COMPRESSION_NAMES)


def test_java_idempotent_batch_carries_producer_id_epoch_and_sequence() -> None:
    header = codec.read_batch_header(recorded_batch(JAVA_ZSTD))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (451858000, 0, 120)
    assert header.record_count == 15
    assert header.last_offset_delta == 14
    assert header.last_sequence == 134
    assert header.compression == "zstd"


@pytest.mark.parametrize("entry", FETCH_RESPONSES, ids=entry_id)
def test_batches_in_recorded_fetch_responses_have_matching_crcs(entry: Entry) -> None:
    frame = frame_bytes(entry)
    header_size = 4 if entry["response_header_version"] == 0 else 5
    schema = apis.response_schema(entry["api_key"], entry["api_version"])
    body, _ = entity_reader(schema)(frame, header_size)
    for topic in body.responses:
        for partition in topic.partitions:
            for header in codec.iter_batches(partition.records or b""):
                assert codec.crc_matches(partition.records, header)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), flip=st.integers(1, 255))
def test_flipping_any_byte_from_the_attributes_on_breaks_the_crc(
    data: st.DataObject, flip: int
) -> None:
    batch = recorded_batch(JAVA_ZSTD)
    position = data.draw(st.integers(ATTRIBUTES_OFFSET, len(batch) - 1), label="position")
    broken = patched(batch, position, bytes([batch[position] ^ flip]))
    header = codec.read_batch_header(broken)
    assert not codec.crc_matches(broken, header)


@pytest.mark.parametrize("position", [CRC_OFFSET, CRC_OFFSET + 3])
def test_changed_crc_field_no_longer_matches(position: int) -> None:
    batch = recorded_batch(JAVA_ZSTD)
    broken = patched(batch, position, bytes([batch[position] ^ 0x01]))
    assert not codec.crc_matches(broken, codec.read_batch_header(broken))


@settings(max_examples=50, deadline=None)
@given(base_offset=st.integers(0, 2**63 - 1), epoch=st.integers(-1, 2**31 - 1))
def test_rebasing_offset_and_leader_epoch_keeps_the_crc_valid(base_offset: int, epoch: int) -> None:
    # The CRC covers the attributes onwards: one template batch can serve any offset.
    batch = recorded_batch(JAVA_ZSTD)
    rebased = patched(
        patched(batch, 0, struct.pack(">q", base_offset)), 12, struct.pack(">i", epoch)
    )
    header = codec.read_batch_header(rebased)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, epoch)
    assert codec.crc_matches(rebased, header)


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_magic_other_than_2_raises_invalid_record_batch(magic: int) -> None:
    batch = patched(recorded_batch(JAVA_ZSTD), 16, bytes([magic]))
    with pytest.raises(codec.InvalidRecordBatch, match=f"magic {magic}"):
        codec.read_batch_header(batch)


@pytest.mark.parametrize("size", [0, 1, HEADER_BYTES - 1])
def test_fewer_bytes_than_a_header_raise_invalid_record_batch(size: int) -> None:
    with pytest.raises(codec.InvalidRecordBatch, match="shorter than the 61-byte header"):
        codec.read_batch_header(recorded_batch(JAVA_ZSTD)[:size])


def test_batch_cut_short_of_its_length_field_raises_invalid_record_batch() -> None:
    batch = recorded_batch(JAVA_ZSTD)
    codec.read_batch_header(batch)
    with pytest.raises(codec.InvalidRecordBatch, match="length field"):
        codec.read_batch_header(batch[:-1])


@pytest.mark.parametrize("batch_length", [2**31 - 1, -1, -(2**31), HEADER_BYTES - 12 - 1])
def test_length_field_past_the_data_or_inside_the_header_raises_invalid_record_batch(
    batch_length: int,
) -> None:
    batch = patched(recorded_batch(JAVA_ZSTD), 8, struct.pack(">i", batch_length))
    with pytest.raises(codec.InvalidRecordBatch, match="length field"):
        codec.read_batch_header(batch)


def test_length_field_one_past_the_data_raises_invalid_record_batch() -> None:
    batch = recorded_batch(JAVA_ZSTD)
    (batch_length,) = struct.unpack_from(">i", batch, 8)
    oversized = patched(batch, 8, struct.pack(">i", batch_length + 1))
    with pytest.raises(codec.InvalidRecordBatch, match="length field"):
        codec.read_batch_header(oversized)


def test_invalid_record_batch_is_a_protocol_error() -> None:
    assert issubclass(codec.InvalidRecordBatch, codec.ProtocolError)


def test_header_only_batch_of_exactly_61_bytes_is_read() -> None:
    batch = with_crc(patched(recorded_batch(JAVA_ZSTD)[:HEADER_BYTES], 8, struct.pack(">i", 49)))
    header = codec.read_batch_header(batch)
    assert header.length == HEADER_BYTES
    assert codec.crc_matches(batch, header)


def test_batches_are_read_one_after_another_at_any_offset() -> None:
    first = recorded_batch(JAVA_ZSTD)
    second = recorded_batch("kcat-1.7/008-Produce-v7-request.bin")
    records = first + second
    headers = codec.iter_batches(records)
    assert [header.length for header in headers] == [len(first), len(second)]
    assert [header.compression for header in headers] == ["zstd", "none"]
    assert codec.read_batch_header(records, len(first)) == headers[1]
    assert codec.crc_matches(records, headers[1], len(first))
    assert not codec.crc_matches(records, headers[0], len(first))
    assert codec.iter_batches(b"") == []


def test_trailing_partial_batch_raises_invalid_record_batch() -> None:
    batch = recorded_batch(JAVA_ZSTD)
    with pytest.raises(codec.InvalidRecordBatch):
        codec.iter_batches(batch + batch[:HEADER_BYTES])


def test_transactional_producer_batches_have_the_transactional_bit() -> None:
    header = codec.read_batch_header(recorded_batch("java-4.0/042-Produce-v10-request.bin"))
    assert header.attributes == 0x10
    assert header.is_transactional
    assert not header.is_control


@pytest.mark.parametrize(
    ("attributes", "compression", "transactional", "control"),
    [
        (0x00, "none", False, False),
        (0x01, "gzip", False, False),
        (0x02, "snappy", False, False),
        (0x03, "lz4", False, False),
        (0x0C, "zstd", False, False),  # bit 3 is the timestamp type, not compression
        (0x05, "unknown(5)", False, False),
        (0x07, "unknown(7)", False, False),
        (0x10, "none", True, False),
        (0x30, "none", True, True),
        (0x24, "zstd", False, True),
    ],
)
def test_attributes_give_compression_and_transactional_and_control_bits(
    attributes: int, compression: str, transactional: bool, control: bool
) -> None:
    batch = with_attributes(recorded_batch(JAVA_ZSTD), attributes)
    header = codec.read_batch_header(batch)
    assert header.attributes == attributes
    assert header.compression == compression
    assert header.is_transactional is transactional
    assert header.is_control is control
    assert codec.crc_matches(batch, header)


def test_last_sequence_wraps_past_int32_max_like_kafka() -> None:
    batch = recorded_batch(JAVA_ZSTD)
    wrapped = patched(batch, 53, struct.pack(">i", 2**31 - 1))
    header = codec.read_batch_header(wrapped)
    assert header.last_offset_delta == 14
    assert header.last_sequence == 13


@settings(max_examples=200, deadline=None)
@given(
    head=st.binary(max_size=80),
    data=st.binary(max_size=3000) | st.binary(min_size=16_000, max_size=17_000),
)
def test_crc32c_before_gives_the_crc_of_a_head_and_the_data_from_the_heads_alone(
    head: bytes, data: bytes
) -> None:
    assert crc32c_before(data)(crc32c(head)) == crc32c(head + data)
