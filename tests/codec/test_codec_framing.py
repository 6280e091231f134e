"""FrameReader: Kafka's size-prefixed frames out of a byte stream, whatever its read sizes."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import codec
from codec.framing import MIN_REQUEST_FRAME_BYTES


def body(size: int, fill: int = 0x61) -> bytes:
    return bytes([fill]) * size


def prefix(size: int) -> bytes:
    return size.to_bytes(4, "big", signed=True)


def test_size_prefixed_joins_parts_behind_a_big_endian_length() -> None:
    assert codec.size_prefixed(b"ab", bytearray(b"cde"), b"") == b"\x00\x00\x00\x05abcde"
    assert codec.size_prefixed() == b"\x00\x00\x00\x00"


def test_frame_fed_one_byte_at_a_time_appears_only_with_its_last_byte() -> None:
    frame = body(40)
    stream = codec.size_prefixed(frame)
    reader = codec.FrameReader()
    for index, byte in enumerate(stream[:-1]):
        reader.feed(bytes([byte]))
        assert list(reader.frames()) == []
        assert reader.buffered_bytes == index + 1
    reader.feed(stream[-1:])
    assert [bytes(view) for view in reader.frames()] == [frame]
    assert reader.buffered_bytes == 0


def test_several_frames_in_one_feed_come_out_in_order() -> None:
    frames = [body(10, 0x61), body(300, 0x62), body(11, 0x63)]
    reader = codec.FrameReader()
    reader.feed(b"".join(codec.size_prefixed(frame) for frame in frames) + prefix(20)[:2])
    assert [bytes(view) for view in reader.frames()] == frames
    assert reader.buffered_bytes == 2


def test_frames_left_in_the_buffer_come_out_on_the_next_call_after_an_early_break() -> None:
    reader = codec.FrameReader()
    reader.feed(codec.size_prefixed(body(10, 0x61)) + codec.size_prefixed(body(12, 0x62)))
    first = next(iter(reader.frames()))
    assert bytes(first) == body(10, 0x61)
    assert [bytes(view) for view in reader.frames()] == [body(12, 0x62)]


def test_frames_are_read_only_views() -> None:
    reader = codec.FrameReader()
    reader.feed(codec.size_prefixed(body(10)))
    (frame,) = reader.frames()
    assert isinstance(frame, memoryview)
    # kio's native readers refuse writable buffers.
    assert frame.readonly


def test_views_handed_out_stay_valid_after_later_feeds() -> None:
    second = codec.size_prefixed(body(20, 0x62))
    reader = codec.FrameReader()
    reader.feed(codec.size_prefixed(body(10, 0x61)) + second[:7])
    (first,) = reader.frames()
    # A connection keeps the views of a batch of frames while more bytes arrive: the reader
    # must neither resize nor overwrite the memory behind them.
    reader.feed(second[7:])
    later = [codec.size_prefixed(body(4096, fill)) for fill in range(0x63, 0x6B)]
    for frame in later:
        reader.feed(frame)
    rest = list(reader.frames())
    assert bytes(first) == body(10, 0x61)
    assert [bytes(view) for view in rest] == [body(20, 0x62)] + [
        body(4096, fill) for fill in range(0x63, 0x6B)
    ]


def test_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    reader = codec.FrameReader(max_frame_bytes=64)
    reader.feed(codec.size_prefixed(body(64)))
    assert [bytes(view) for view in reader.frames()] == [body(64)]


def test_size_over_the_maximum_raises_frame_too_large_from_the_prefix_alone() -> None:
    reader = codec.FrameReader(max_frame_bytes=64)
    # Only the prefix is fed: a hostile size is refused before any of its body is buffered.
    reader.feed(prefix(65))
    with pytest.raises(codec.FrameTooLarge, match="65 bytes exceeds the maximum of 64"):
        list(reader.frames())
    assert reader.buffered_bytes == 4


def test_default_maximum_is_100_mib() -> None:
    assert codec.FrameReader().max_frame_bytes == codec.DEFAULT_MAX_FRAME_BYTES == 100 * 2**20
    reader = codec.FrameReader()
    reader.feed(prefix(100 * 2**20 + 1))
    with pytest.raises(codec.FrameTooLarge):
        list(reader.frames())


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_size_raises_invalid_frame_size(size: int) -> None:
    reader = codec.FrameReader()
    reader.feed(prefix(size))
    with pytest.raises(codec.InvalidFrameSize, match="negative"):
        list(reader.frames())


@pytest.mark.parametrize("size", [0, 1, MIN_REQUEST_FRAME_BYTES - 1])
def test_size_too_small_for_a_request_header_raises_invalid_frame_size(size: int) -> None:
    reader = codec.FrameReader()
    reader.feed(prefix(size))
    with pytest.raises(codec.InvalidFrameSize, match="too small"):
        list(reader.frames())


def test_smallest_request_header_size_is_accepted() -> None:
    # api key, api version, correlation id and a null client id: 10 bytes.
    assert MIN_REQUEST_FRAME_BYTES == 10
    reader = codec.FrameReader()
    reader.feed(codec.size_prefixed(body(10)))
    assert [bytes(view) for view in reader.frames()] == [body(10)]


def test_frame_errors_are_protocol_errors() -> None:
    assert issubclass(codec.FrameTooLarge, codec.ProtocolError)
    assert issubclass(codec.InvalidFrameSize, codec.ProtocolError)


def test_buffered_bytes_counts_what_is_not_yet_handed_out() -> None:
    reader = codec.FrameReader()
    assert reader.buffered_bytes == 0
    reader.feed(codec.size_prefixed(body(10)) + codec.size_prefixed(body(30))[:9])
    assert reader.buffered_bytes == 14 + 9
    frames = reader.frames()
    next(frames)
    assert reader.buffered_bytes == 9
    assert list(frames) == []
    reader.feed(codec.size_prefixed(body(30))[9:])
    assert reader.buffered_bytes == 34
    assert len(list(reader.frames())) == 1
    assert reader.buffered_bytes == 0


@st.composite
def stream_and_cuts(draw: st.DrawFn) -> tuple[list[bytes], list[int]]:
    frames = draw(st.lists(st.binary(min_size=MIN_REQUEST_FRAME_BYTES, max_size=200), max_size=8))
    total = sum(len(frame) + 4 for frame in frames)
    cuts = draw(st.lists(st.integers(0, total), max_size=20))
    return frames, sorted(cuts)


@settings(max_examples=200, deadline=None)
@given(stream_and_cuts())
def test_any_split_of_a_stream_yields_the_same_frames(
    case: tuple[list[bytes], list[int]],
) -> None:
    frames, cuts = case
    stream = b"".join(codec.size_prefixed(frame) for frame in frames)
    reader = codec.FrameReader(max_frame_bytes=200)
    received: list[memoryview] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        reader.feed(stream[start:end])
        received.extend(reader.frames())
    assert [bytes(view) for view in received] == frames
    assert reader.buffered_bytes == 0


@settings(max_examples=200, deadline=None)
@given(stream_and_cuts())
def test_frames_in_one_reused_receive_buffer_are_those_of_feed(
    case: tuple[list[bytes], list[int]],
) -> None:
    """frames_in, as the host loop uses it: each read lands in the same buffer, and every
    frame of a read is used before the next read overwrites it."""
    frames, cuts = case
    stream = b"".join(codec.size_prefixed(frame) for frame in frames)
    reader = codec.FrameReader(max_frame_bytes=200)
    into = bytearray(len(stream) + 1)
    received: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        into[: end - start] = stream[start:end]
        for view in reader.frames_in(memoryview(into)[: end - start]):
            assert view.readonly
            received.append(bytes(view))
        into[:] = b"\xee" * len(into)  # the next read overwrites what this one held
    assert received == frames
    assert reader.buffered_bytes == 0


def test_frames_in_copies_only_an_unfinished_frame_and_joins_it_with_the_next_read() -> None:
    whole = codec.size_prefixed(body(10))
    split = codec.size_prefixed(body(30, fill=0x62))
    into = bytearray(whole + split[:9])
    reader = codec.FrameReader()
    first = list(reader.frames_in(memoryview(into)))
    assert [bytes(view) for view in first] == [body(10)]
    assert first[0].obj is into  # a view of the read's own buffer: not copied
    assert reader.buffered_bytes == 9
    into[:] = b"\xee" * len(into)
    rest = list(reader.frames_in(memoryview(bytearray(split[9:]))))
    assert [bytes(view) for view in rest] == [body(30, fill=0x62)]
    assert reader.buffered_bytes == 0


def test_a_reader_that_handed_out_every_frame_keeps_no_buffer_once_they_are_dropped() -> None:
    # A connection whose request arrived in two reads must not hold the request's size
    # until its next one: a thousand quiet connections would hold a thousand requests.
    split = codec.size_prefixed(body(16_384))
    reader = codec.FrameReader()
    tracemalloc.start()
    try:
        assert list(reader.frames_in(memoryview(bytearray(split[:100])))) == []
        frames = list(reader.frames_in(memoryview(bytearray(split[100:]))))
        assert [len(frame) for frame in frames] == [16_384]
        del frames
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reader.buffered_bytes == 0 and held < 1024


def test_frames_in_refuses_a_hostile_size_before_buffering_it() -> None:
    reader = codec.FrameReader(max_frame_bytes=1024)
    with pytest.raises(codec.FrameTooLarge):
        list(reader.frames_in(memoryview(bytearray(prefix(2048) + body(10)))))
