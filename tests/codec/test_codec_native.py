"""codec/_native.c equals the pure-Python decoders and encoder it speeds up.

Its `try_` functions work in C alone (None for what they leave to Python): for any input,
they give what the Python code gives, or None exactly where the Python code raises (or,
for the encoder, where a partition carries an error message).
The other tests of Produce and of batch headers run through whichever path is on: the C
one by default, the Python one under NULLBROKER_NATIVE=off (make test runs both).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import InvalidRecordBatch, UndecodableRequest, decode_header, native
from codec.produce import (
    PartitionResult,
    TopicResults,
    encode_produce_response_body_python,
    python_produce_request_decoder,
)
from codec.record_batch import HEADER_BYTES, MAGIC_OFFSET, read_batch_header_python
from tests.codec.test_codec_produce import produce_responses
from tests.codec.test_codec_produce_request import MALFORMED, PRODUCE_FRAMES, produce_requests
from tests.support import vectors

_native = native.load()

# Off on purpose (the pure-Python pass), or not built: a skip a strict run refuses
# (tests/support/allowed_skips.py), since setup.py requires the C modules there.
pytestmark = pytest.mark.skipif(_native is None, reason=f"codec/_native.c: {native.status()}")


def c_module() -> Any:
    assert _native is not None
    return _native


def python_decode(version: int, frame: bytes, offset: int) -> Any:
    """The Python decoder's result with records as bytes; or the error it raised."""
    try:
        request, size = python_produce_request_decoder(version)(frame, offset)
    except UndecodableRequest as error:
        return error
    return comparable(request), size


def comparable(request: Any) -> Any:
    return (
        request.transactional_id,
        request.acks,
        request.timeout_ms,
        [
            (
                type(topic).__name__,
                topic.name,
                topic.topic_id,
                [
                    (type(p).__name__, p.index, None if p.records is None else bytes(p.records))
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ],
        type(request).__name__,
    )


def assert_c_equals_python(version: int, frame: bytes, offset: int) -> Any:
    expected = python_decode(version, frame, offset)
    decoded = c_module().try_decode_produce(version, frame, offset)
    if isinstance(expected, UndecodableRequest):
        assert decoded is None, f"C decoded what Python refuses: {expected}"
        with pytest.raises(UndecodableRequest, match="does not decode") as refused:
            c_module().decode_produce(version, frame, offset)
        assert str(refused.value) == str(expected), "the error is the Python decoder's"
        return expected
    assert decoded is not None, "C left a request Python decodes to Python"
    request, size = decoded
    assert (comparable(request), size) == expected
    for topic in request.topic_data:
        for partition in topic.partition_data:
            assert partition.records is None or isinstance(partition.records, memoryview)
    return decoded


@settings(max_examples=400, deadline=None)
@given(request=produce_requests(), before=st.binary(max_size=8), after=st.binary(max_size=8))
def test_c_decodes_every_request_as_python_does(
    request: tuple[int, bytes], before: bytes, after: bytes
) -> None:
    version, payload = request
    decoded = assert_c_equals_python(version, before + payload + after, len(before))
    assert not isinstance(decoded, UndecodableRequest)


@settings(max_examples=1000, deadline=None)
@given(
    request=produce_requests(),
    changes=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10_000) | st.none(),
)
def test_c_refuses_exactly_what_python_refuses_in_altered_requests(
    request: tuple[int, bytes], changes: list[tuple[int, int]], cut: int | None
) -> None:
    version, payload = request
    altered = bytearray(payload)
    for position, value in changes:
        if altered:
            altered[position % len(altered)] = value
    if cut is not None:
        del altered[cut % (len(altered) + 1) :]
    assert_c_equals_python(version, bytes(altered), 0)


@pytest.mark.parametrize(("version", "payload", "message"), MALFORMED)
def test_c_leaves_each_malformed_payload_to_python(
    version: int, payload: bytes, message: str
) -> None:
    assert isinstance(assert_c_equals_python(version, payload, 0), UndecodableRequest)


@pytest.mark.parametrize("entry", PRODUCE_FRAMES, ids=vectors.entry_id)
def test_c_decodes_every_recorded_produce_request(entry: vectors.Entry) -> None:
    frame = vectors.frame_bytes(entry)
    _, offset = decode_header(frame)
    decoded = assert_c_equals_python(entry["api_version"], frame, offset)
    assert not isinstance(decoded, UndecodableRequest)


def python_header(data: bytes, offset: int) -> Any:
    try:
        return read_batch_header_python(data, offset)
    except InvalidRecordBatch as error:
        return error


@settings(max_examples=1000, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=200),
    magic_two=st.booleans(),
    length=st.integers(-(2**31), 2**31 - 1) | st.integers(49, 200),
    offset=st.integers(0, 8),
)
def test_c_reads_batch_headers_as_python_does(
    data: bytes, magic_two: bool, length: int, offset: int
) -> None:
    altered = bytearray(data)
    if len(altered) > offset + MAGIC_OFFSET and magic_two:
        altered[offset + MAGIC_OFFSET] = 2
    if len(altered) >= offset + 12:
        altered[offset + 8 : offset + 12] = struct.pack(">i", length)
    expected = python_header(bytes(altered), offset)
    header = c_module().try_read_batch_header(bytes(altered), offset)
    if isinstance(expected, InvalidRecordBatch):
        assert header is None
        with pytest.raises(InvalidRecordBatch) as refused:
            c_module().read_batch_header(bytes(altered), offset)
        assert str(refused.value) == str(expected)
    else:
        assert header == expected
        assert type(header) is type(expected)
        assert header.last_sequence == expected.last_sequence
        assert len(altered) - offset >= HEADER_BYTES


def test_the_broker_says_which_decoders_it_uses() -> None:
    assert native.status() == "C"


def python_encode(version: int, topics: Any) -> Any:
    try:
        return encode_produce_response_body_python(version, topics)
    except (struct.error, AttributeError, TypeError, UnicodeEncodeError) as error:
        return error


@settings(max_examples=500, deadline=None)
@given(
    case=produce_responses(),
    out_of_range=st.none()
    | st.tuples(st.sampled_from([0, 1, 2, 3, 5]), st.sampled_from([2**63, -(2**63) - 1])),
)
def test_c_writes_each_response_as_python_does(
    case: tuple[int, list[TopicResults]], out_of_range: tuple[int, int] | None
) -> None:
    version, topics = case
    if out_of_range is not None and topics and topics[0][1]:
        field, value = out_of_range
        first = list(topics[0][1][0])
        first[field] = value
        topics[0] = (topics[0][0], [PartitionResult(*first), *topics[0][1][1:]])
    expected = python_encode(version, topics)
    written = c_module().try_encode_produce_response(version, topics)
    with_message = any(
        result.error_message is not None for _, results in topics for result in results
    )
    if isinstance(expected, Exception) or with_message:
        assert written is None, "C wrote what the Python encoder must write, or refuses"
    else:
        assert written == expected
    if not isinstance(expected, Exception):
        assert c_module().encode_produce_response(version, topics) == expected


@st.composite
def numbers_in_places(draw: st.DrawFn) -> tuple[bytearray, bytes, tuple[int, ...]]:
    """A buffer with places in it (some too narrow for their number, some past the end,
    some with a kind that has no move, some bases out of range), their index, and moves
    (some negative, some out of range)."""
    from codec.batch_template import places

    buffer = bytearray(draw(st.binary(max_size=8)))
    spots = []
    for _ in range(draw(st.integers(0, 12))):
        width = draw(st.integers(1, 20))
        base = draw(st.integers(0, 10**6) | st.integers(-5, 2 * 10**18))
        spots.append((len(buffer), width, draw(st.integers(0, 3)), base))
        buffer += draw(st.binary(min_size=width, max_size=width + 3))
    if draw(st.booleans()):
        spots.append((max(0, len(buffer) - 1) + draw(st.integers(0, 4)), 4, 0, 1))
    moves = draw(
        st.lists(
            st.integers(-(10**6), 10**6) | st.integers(-(2**62), 2**62), min_size=2, max_size=3
        )
    )
    return buffer, places(spots), tuple(moves)


@settings(max_examples=1_000, deadline=None)
@given(case=numbers_in_places())
def test_c_writes_numbers_in_place_as_python_does(
    case: tuple[bytearray, bytes, tuple[int, ...]],
) -> None:
    from codec.batch_template import write_decimals_python

    buffer, spots, moves = case
    in_python, in_c = bytearray(buffer), bytearray(buffer)
    try:
        write_decimals_python(in_python, spots, moves)
    except ValueError as error:
        with pytest.raises(ValueError) as refused:
            c_module().write_decimals(in_c, spots, moves)
        assert str(refused.value) == str(error)
    else:
        c_module().write_decimals(in_c, spots, moves)
        assert in_c == in_python


def test_c_refuses_places_that_are_not_whole() -> None:
    with pytest.raises(ValueError, match="whole 14-byte places"):
        c_module().write_decimals(bytearray(20), bytes(13), (0,))
