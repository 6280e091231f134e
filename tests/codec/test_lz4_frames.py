"""lz4 batches as Kafka's Java client reads them: LZ4 frames of independent blocks.

Kafka's KafkaLZ4BlockInputStream refuses a frame whose FLG byte does not set block
independence ("Dependent block stream is unsupported"), checks the version and reserved
bits, and takes block sizes of 64 KiB to 4 MiB. `read_as_kafka_does` applies the same
checks and then inflates every block on its own, which a linked block (one that refers
back into the block before it) cannot survive.
"""

from __future__ import annotations

import struct

import cramjam
import pytest

from codec.record_batch import HEADER_BYTES, read_batch_header
from nullbroker.sources.synthetic import RecordShape, compressor, lz4_frame

MAGIC = 0x184D2204
START_MS = 1_767_225_600_000


class Lz4FrameRefused(ValueError):
    pass


def read_as_kafka_does(frame: bytes) -> bytes:
    """The content of an LZ4 frame, read under the rules of Kafka's Java client."""
    (magic,) = struct.unpack_from("<I", frame, 0)
    if magic != MAGIC:
        raise Lz4FrameRefused(f"not an LZ4 frame: magic {magic:#x}")
    flg, bd = frame[4], frame[5]
    if flg & 0b11:
        raise Lz4FrameRefused("Reserved bits must be 0")
    if not flg & 0x20:
        raise Lz4FrameRefused("Dependent block stream is unsupported")
    if flg >> 6 != 1:
        raise Lz4FrameRefused(f"Version {flg >> 6} is unsupported")
    if bd & 0x8F:
        raise Lz4FrameRefused("BD reserved bits must be 0")
    size_code = (bd >> 4) & 7
    if not 4 <= size_code <= 7:
        raise Lz4FrameRefused("Block size value must be between 4 and 7")
    max_block = 1 << (2 * size_code + 8)
    position = 6 + (8 if flg & 0x08 else 0) + 1  # content size, then the header checksum
    block_checksums = bool(flg & 0x10)
    content = bytearray()
    while True:
        (word,) = struct.unpack_from("<I", frame, position)
        position += 4
        if word == 0:
            break
        size, stored = word & 0x7FFFFFFF, bool(word & 0x80000000)
        block = frame[position : position + size]
        position += size + (4 if block_checksums else 0)
        if stored:
            content += block
        else:
            # On its own: a block linked to the one before it does not inflate.
            inflated = bytearray(max_block)
            written = cramjam.lz4.decompress_block_into(bytes(block), inflated)
            content += inflated[:written]
    return bytes(content)


def linked_frame(data: bytes) -> bytes:
    return bytes(cramjam.lz4.compress(data))


def test_the_reader_refuses_a_frame_of_linked_blocks_as_kafka_does() -> None:
    data = bytes(range(256)) * 1024
    with pytest.raises(Lz4FrameRefused, match="Dependent block stream is unsupported"):
        read_as_kafka_does(linked_frame(data))


@pytest.mark.parametrize("size", [0, 1, 1000, 64 * 1024, 64 * 1024 + 1, 300_000])
def test_lz4_frames_have_independent_blocks_and_read_back_as_kafka_does(size: int) -> None:
    data = (b"ABCDEFGHIJKLMNOPQRSTUVWXYZ" * (size // 26 + 1))[:size]
    frame = lz4_frame(data)
    assert frame[4] == 0x70  # FLG as Kafka's producer writes it: independent blocks
    assert read_as_kafka_does(frame) == data


def test_lz4_source_batches_are_read_back_as_kafka_does() -> None:
    plain = RecordShape(size=1024, key_size=8, headers=2)
    packed = RecordShape(
        size=1024, key_size=8, headers=2, compression="lz4", compress=compressor("lz4")
    )
    base = 5 * plain.batch_records
    expected = b"".join(plain.batch(base, base + plain.batch_records, START_MS))
    rendered = b"".join(packed.batch(base, base + plain.batch_records, START_MS))
    assert read_batch_header(rendered).compression == "lz4"
    assert read_as_kafka_does(bytes(rendered[HEADER_BYTES:])) == expected[HEADER_BYTES:]
