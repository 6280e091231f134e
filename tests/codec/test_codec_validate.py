"""codec.validate: the compiled structure checks accept exactly what the interpreted walk
they replaced accepts, and keep kio's native reader safe.

The reference is that walk (one closure per field, as codec/validate.py was before it was
compiled), kept here as the oracle: every served request version's kio-written payloads,
cut, padded and with bytes replaced, must get the same answer from the full check, the
same end offset when accepted and an UndecodableRequest when refused. Where the check
accepts, kio's reader may run, and reads exactly to the same end or refuses.

The safety check decode_request runs stops after the last array count: it accepts all the
full check accepts, refuses every hostile count, and what it accepts beyond that, kio
refuses (or reads) without dying, which a child process under a memory limit shows.
"""

from __future__ import annotations

import io
import os
import random
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

import codec
from codec import UndecodableRequest, apis
from codec.framing import Buffer
from codec.validate import entity_check, needs_check, safety_check
from tests.codec.test_codec_roundtrip import EVERY_SERVED_VERSION, entities
from tests.support.kafka_wire import unsigned_varint

Step = Callable[[Buffer, int, int], int]

PER_VERSION = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- the reference: the interpreted walk ----------------------------------------------------

_FIXED_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4,
    "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
    "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}  # fmt: skip


def _fail(what: str, offset: int) -> UndecodableRequest:
    return UndecodableRequest(f"{what} at byte {offset}")


def _uvarint(data: Buffer, offset: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= end:
            raise _fail("truncated varint", offset)
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise _fail("varint longer than 5 bytes", offset)


def _length(data: Buffer, offset: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    if flexible:
        value, offset = _uvarint(data, offset, end)
        return value - 1, offset
    size = 4 if wide else 2
    if end - offset < size:
        raise _fail("truncated length", offset)
    (value,) = struct.unpack_from(">i" if wide else ">h", data, offset)
    if value < -1:
        raise _fail(f"negative length {value}", offset)
    return value, offset + size


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Step:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:

        def fixed(data: Buffer, offset: int, end: int) -> int:
            if end - offset < size:
                raise _fail("truncated", offset)
            return offset + size

        return fixed
    wide = kafka_type in ("bytes", "records")

    def sized(data: Buffer, offset: int, end: int) -> int:
        length, offset = _length(data, offset, end, flexible, wide)
        if length == -1:
            if not nullable:
                raise _fail("null", offset)
            return offset
        if length > end - offset:
            raise _fail("too long", offset)
        return offset + length

    return sized


def _array(element: Step, flexible: bool, nullable: bool) -> Step:
    def check(data: Buffer, offset: int, end: int) -> int:
        count, offset = _length(data, offset, end, flexible, wide=True)
        if count == -1:
            if not nullable:
                raise _fail("null array", offset)
            return offset
        if count > end - offset:
            raise _fail("too many elements", offset)
        for _ in range(count):
            offset = element(data, offset, end)
        return offset

    return check


def _field_step(field: Field[Any], flexible: bool, is_tag: bool) -> Step:
    nullable = not is_tag and is_optional(field)
    match classify_field(field):
        case PrimitiveField():
            return _primitive(get_schema_field_type(field), flexible, nullable)
        case PrimitiveTupleField():
            element = _primitive(get_schema_field_type(field), flexible, False)
            return _array(element, flexible, nullable)
        case EntityField(entity_type):
            inner = reference_check(entity_type)
            if not nullable:
                return inner

            def nullable_entity(data: Buffer, offset: int, end: int) -> int:
                if offset >= end:
                    raise _fail("truncated marker", offset)
                return offset + 1 if data[offset] == 0xFF else inner(data, offset + 1, end)

            return nullable_entity
        case EntityTupleField(entity_type):
            return _array(reference_check(entity_type), flexible, nullable)
    raise NotImplementedError(field.name)


def _tagged_section(tagged: dict[int, Step]) -> Step:
    def check(data: Buffer, offset: int, end: int) -> int:
        count, offset = _uvarint(data, offset, end)
        if count > end - offset:
            raise _fail("too many tags", offset)
        for _ in range(count):
            tag, offset = _uvarint(data, offset, end)
            size, offset = _uvarint(data, offset, end)
            if size > end - offset:
                raise _fail("tag too long", offset)
            step = tagged.get(tag)
            if step is not None and step(data, offset, offset + size) != offset + size:
                raise _fail("tag not filled", offset)
            offset += size
        return offset

    return check


@cache
def reference_check(entity_type: type) -> Step:
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        step = _field_step(field, flexible, tag is not None)
        if tag is None:
            steps.append(step)
        else:
            tagged[int(tag)] = step
    if flexible:
        steps.append(_tagged_section(tagged))

    def check(data: Buffer, offset: int, end: int) -> int:
        for step in steps:
            offset = step(data, offset, end)
        return offset

    return check


# --- the properties ---------------------------------------------------------------------------


def outcome(check: Step, data: bytes) -> int | None:
    """Where the check ends on `data`, or None if it refuses it."""
    view = memoryview(data).toreadonly()
    try:
        return check(view, 0, len(view))
    except UndecodableRequest:
        return None


def kio_bytes(entity_type: type, entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


@st.composite
def damaged(draw: st.DrawFn, payload: bytes) -> bytes:
    """A payload cut short, padded, or with a few bytes replaced by the ones that matter
    most in lengths (0, 1, 0x7F, 0x80, 0xFF) or any other."""
    data = bytearray(payload)
    for _ in range(draw(st.integers(0, 3))):
        if data:
            position = draw(st.integers(0, len(data) - 1))
            data[position] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
    cut = draw(st.integers(0, len(data)))
    return bytes(data[:cut]) + draw(st.binary(max_size=3))


@pytest.mark.parametrize(("key", "version"), EVERY_SERVED_VERSION)
@PER_VERSION
@given(data=st.data())
def test_the_compiled_check_accepts_and_refuses_what_the_walk_does(
    key: int, version: int, data: st.DataObject
) -> None:
    schema = apis.request_schema(key, version)
    payload = kio_bytes(schema, data.draw(entities(schema), label="body"))
    check = entity_check(schema)
    view = memoryview(payload).toreadonly()
    # What kio wrote, the check accepts, to where kio's reader stops.
    assert check(view, 0, len(view)) == entity_reader(schema)(view, 0)[1] == len(payload)
    assert safety_check(schema)(view, 0, len(view)) <= len(payload)
    for _ in range(10):
        bad = data.draw(damaged(payload), label="damaged")
        ours = outcome(check, bad)
        assert ours == outcome(reference_check(schema), bad), bad.hex()
        safe_end = outcome(safety_check(schema), bad)
        assert ours is None or (safe_end is not None and safe_end <= ours), bad.hex()
        if ours is not None:
            # Accepted: safe for kio, which reads to the same end or refuses.
            bad_view = memoryview(bad).toreadonly()
            try:
                _, size = entity_reader(schema)(bad_view, 0)
            except Exception:  # kio's own refusals: unknown tags, bad UTF-8, ...
                continue
            assert size == ours


HUGE_COUNT_REQUESTS = [
    pytest.param(3, 12, unsigned_varint(2**34 + 1), id="metadata-v12-compact-2**34"),
    pytest.param(3, 4, struct.pack(">i", 2**31 - 1), id="metadata-v4-legacy-2**31-1"),
    pytest.param(1, 4, struct.pack(">iiiiBi", -1, 0, 1, 1, 0, 2**31 - 1), id="fetch-v4-topics"),
]


@pytest.mark.parametrize("compiled", [entity_check, safety_check])
@pytest.mark.parametrize(("key", "version", "payload"), HUGE_COUNT_REQUESTS)
def test_a_count_larger_than_the_bytes_left_is_refused(
    compiled: Callable[[type], Step], key: int, version: int, payload: bytes
) -> None:
    check = compiled(apis.request_schema(key, version))
    with pytest.raises(UndecodableRequest, match="elements with"):
        check(memoryview(payload), 0, len(payload))


def test_a_check_reads_nothing_past_its_end() -> None:
    # Metadata v4: one topic named "ab", then allow_auto_topic_creation; cut before it.
    payload = struct.pack(">ih", 1, 2) + b"ab" + b"\x01"
    check = entity_check(apis.request_schema(3, 4))
    assert check(memoryview(payload), 0, len(payload)) == len(payload)
    with pytest.raises(UndecodableRequest):
        check(memoryview(payload + b"more"), 0, len(payload) - 1)


ARRAY_FREE = {
    "AddOffsetsToTxn": range(0, 5),
    "ApiVersions": range(0, 6),
    "DescribeAcls": range(1, 4),
    "DescribeCluster": range(0, 3),
    "EndTxn": range(0, 6),
    "FindCoordinator": range(0, 4),
    "GetTelemetrySubscriptions": range(0, 1),
    "Heartbeat": range(0, 5),
    "InitProducerId": range(0, 6),
    "LeaveGroup": range(0, 3),
    "ListConfigResources": range(0, 1),
    "ListGroups": range(0, 4),
    # Its metrics are bytes, sliced from the frame: no length is trusted to allocate.
    "PushTelemetry": range(0, 1),
    "SaslAuthenticate": range(0, 3),
    "SaslHandshake": range(0, 2),
}


def test_only_schemas_without_an_array_go_to_kio_unchecked() -> None:
    unchecked: dict[str, list[int]] = {}
    for key, served in codec.KAFKA_4_RANGES.items():
        for version in range(served.min_version, served.max_version + 1):
            if not needs_check(apis.request_schema(key, version)):
                unchecked.setdefault(served.name, []).append(version)
    assert unchecked == {name: list(versions) for name, versions in ARRAY_FREE.items()}


# Runs in a child process under a 2 GiB address-space limit: the failure it looks for is
# an allocation by an unchecked length, which aborts the process.
_KIO_ON_RANDOM_BYTES = """
import random, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
import codec
from codec import apis
from codec.validate import needs_check
from kio.serial import entity_reader
rng = random.Random(7)
schemas = [
    apis.request_schema(key, version)
    for key, served in codec.KAFKA_4_RANGES.items()
    for version in range(served.min_version, served.max_version + 1)
    if not needs_check(apis.request_schema(key, version))
]
interesting = [0, 1, 0x7F, 0x80, 0xFF]
for _ in range(20000):
    schema = rng.choice(schemas)
    data = bytes(
        rng.choice(interesting) if rng.random() < 0.5 else rng.randrange(256)
        for _ in range(rng.randrange(40))
    )
    try:
        entity_reader(schema)(memoryview(data).toreadonly(), 0)
    except Exception:
        pass
print("survived")
"""


def assert_survives_in_a_child(script: str, stdin: str = "") -> None:
    """Run `script` in a child Python: it must end normally and print "survived"."""
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin.encode(),
        capture_output=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "RUST_BACKTRACE": "0"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-500:]
    assert result.stdout.strip() == b"survived"


def test_kio_reads_any_bytes_of_an_array_free_schema_without_dying() -> None:
    assert_survives_in_a_child(_KIO_ON_RANDOM_BYTES)


# Runs in a child process under a 2 GiB address-space limit, on payloads only the safety
# check accepts: kio must refuse (or read) each without an allocation that aborts it.
_KIO_ON_PAYLOADS = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
from codec import apis
from kio.serial import entity_reader
for line in sys.stdin:
    key, version, payload = line.split()
    try:
        entity_reader(apis.request_schema(int(key), int(version)))(
            memoryview(bytes.fromhex(payload)).toreadonly(), 0
        )
    except Exception:
        pass
print("survived")
"""


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_what_only_the_safety_check_accepts_kio_reads_or_refuses_without_dying(
    data: st.DataObject, seed: int
) -> None:
    rng = random.Random(seed)
    beyond: list[str] = []
    for key, served in codec.KAFKA_4_RANGES.items():
        for version in range(served.min_version, served.max_version + 1):
            schema = apis.request_schema(key, version)
            if not needs_check(schema):
                continue
            payload = kio_bytes(schema, data.draw(entities(schema)))
            for _ in range(40):
                bad = bytearray(payload)
                for _ in range(rng.randrange(1, 4)):
                    if bad:
                        bad[rng.randrange(len(bad))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF])
                bad = bad[: rng.randrange(len(bad) + 1)] + bytes(rng.randrange(3))
                if outcome(safety_check(schema), bad) is None:
                    continue
                if outcome(entity_check(schema), bad) is None:
                    beyond.append(f"{key} {version} {bytes(bad).hex()}")
    assert beyond, "the damage should reach what only the safety check accepts"
    assert_survives_in_a_child(_KIO_ON_PAYLOADS, "\n".join(beyond))
