"""codec.writers: the compiled writers are byte-identical to kio's generic writer.

For every served API version, any response entity kio's writer writes is written to the
same bytes (and one kio's writer refuses is refused too); a whole frame is the size prefix,
the response header and those bytes. The one difference: None for a field the schema does
not make nullable, which kio would write as null, is refused, naming the field.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import linecache
import re
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_writer as kio_entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

import codec
from codec import apis
from codec.entities import make, response_module
from codec.errors import ResponseSchemaError
from codec.writers import encode, entity_writer, response_frame_writer
from tests.codec.test_codec_roundtrip import EVERY_SERVED_VERSION, INT32, entities

# More examples per (key, version) than the round-trip tests draw: bytes are compared here.
PER_VERSION = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ONE_MS = datetime.timedelta(milliseconds=1)


def kio_bytes(entity_type: type, entity: Any) -> bytes:
    buffer = io.BytesIO()
    kio_entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize(("key", "version"), EVERY_SERVED_VERSION)
@PER_VERSION
@given(data=st.data())
def test_compiled_writer_writes_kios_bytes_for_any_response(
    key: int, version: int, data: st.DataObject
) -> None:
    schema = apis.response_schema(key, version)
    body = data.draw(entities(schema), label="body")
    try:
        expected = kio_bytes(schema, body)
    except Exception:  # a value out of range for its wire type: refused by both
        with pytest.raises(Exception):  # noqa: B017 - kio's own exception types vary
            encode(schema, body)
        return
    assert encode(schema, body) == expected


@pytest.mark.parametrize(("key", "version"), EVERY_SERVED_VERSION)
@PER_VERSION
@given(data=st.data(), correlation_id=INT32)
def test_frame_writer_writes_size_header_and_kios_body(
    key: int, version: int, data: st.DataObject, correlation_id: int
) -> None:
    schema = apis.response_schema(key, version)
    body = data.draw(entities(schema), label="body")
    try:
        expected_body = kio_bytes(schema, body)
    except Exception:  # refused by kio: see the test above
        return
    header_version = apis.response_header_version(key, version)
    header_type = ResponseHeaderV1 if header_version else ResponseHeaderV0
    header = kio_bytes(header_type, header_type(correlation_id=correlation_id))
    frame = response_frame_writer(schema, header_version)(correlation_id, body)
    assert frame == codec.size_prefixed(header, expected_body)


# Kafka types whose None kio would write as null (arrays), or as something else than the
# schema says; fixed-size values fail in struct.pack, and a None UUID is the zero UUID.
NULL_REFUSED_TYPES = ("string", "bytes", "records")


def not_nullable_paths(entity: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Paths (field names from the top entity) to every field of `entity` whose schema
    forbids None and whose None a writer could write: arrays, strings, bytes, structs."""
    for field in dataclasses.fields(entity):
        kind = classify_field(field)
        value = getattr(entity, field.name)
        here = (*path, field.name)
        if not is_optional(field) and (
            isinstance(kind, PrimitiveTupleField | EntityTupleField | EntityField)
            or get_schema_field_type(field) in NULL_REFUSED_TYPES
        ):
            yield here
        if isinstance(kind, EntityField) and value is not None:
            yield from not_nullable_paths(value, here)
        elif isinstance(kind, EntityTupleField) and value:
            yield from not_nullable_paths(value[0], (*here, "0"))


def with_none_at(entity: Any, path: tuple[str, ...]) -> tuple[Any, str]:
    """`entity` with None at `path` (an index "0" is an array's first item), and the name
    the writer reports for that field: the class that holds it and the field."""
    name, *rest = path
    if not rest:
        return dataclasses.replace(entity, **{name: None}), f"{type(entity).__name__}.{name}"
    value = getattr(entity, name)
    if rest[0] == "0":
        first, where = with_none_at(value[0], tuple(rest[1:]))
        return dataclasses.replace(entity, **{name: (first, *value[1:])}), where
    inner, where = with_none_at(value, tuple(rest))
    return dataclasses.replace(entity, **{name: inner}), where


@pytest.mark.parametrize(("key", "version"), EVERY_SERVED_VERSION)
@PER_VERSION
@given(data=st.data())
def test_none_where_the_schema_forbids_null_is_refused_naming_the_field(
    key: int, version: int, data: st.DataObject
) -> None:
    schema = apis.response_schema(key, version)
    body = data.draw(entities(schema), label="body")
    paths = list(not_nullable_paths(body))
    if not paths:
        return
    path = data.draw(st.sampled_from(paths), label="path")
    broken, where = with_none_at(body, path)
    with pytest.raises(ResponseSchemaError, match=rf"^{re.escape(where)} is not nullable"):
        encode(schema, broken)


def test_a_tagged_field_set_to_none_is_refused_naming_its_entity_and_field() -> None:
    # Not its default (an empty list), so it would be written: as nothing kio can write.
    types = response_module(18, 3)
    body = make(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=(),
        throttle_time=0 * ONE_MS,
        supported_features=None,
    )
    with pytest.raises(
        ResponseSchemaError, match=r"^ApiVersionsResponse\.supported_features is not nullable"
    ):
        encode(types.ApiVersionsResponse, body)


def test_a_none_array_where_the_schema_has_no_null_is_refused_naming_the_field() -> None:
    # kio's array writers would write it as null; the Java client, trusting the schema,
    # would then fail with a NullPointerException instead of an error it can report.
    types = response_module(3, 12)
    body = make(
        types.MetadataResponse,
        throttle_time=0 * ONE_MS,
        brokers=None,
        cluster_id=None,
        controller_id=0,
        topics=(),
    )
    with pytest.raises(ResponseSchemaError, match=r"^MetadataResponse\.brokers is not nullable"):
        encode(types.MetadataResponse, body)


def test_a_none_where_the_schema_allows_null_is_written_as_null_as_kio_writes_it() -> None:
    types = response_module(19, 7)  # CreateTopics v7: a topic's configs are nullable
    body = make(
        types.CreatableTopicResult,
        name="t",
        topic_id=None,
        error_code=ErrorCode.topic_already_exists,
        error_message=None,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )
    assert encode(types.CreatableTopicResult, body) == kio_bytes(types.CreatableTopicResult, body)


def test_a_tagged_field_is_written_only_when_it_differs_from_its_default() -> None:
    types = response_module(18, 3)
    plain = make(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=(types.ApiVersion(api_key=0, min_version=3, max_version=13),),
        throttle_time=0 * ONE_MS,
    )
    tagged = make(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=(),
        throttle_time=0 * ONE_MS,
        finalized_features_epoch=7,
        zk_migration_ready=True,
        supported_features=(types.SupportedFeatureKey(name="f", min_version=1, max_version=2),),
    )
    for body in (plain, tagged):
        assert encode(types.ApiVersionsResponse, body) == kio_bytes(types.ApiVersionsResponse, body)
    assert encode(types.ApiVersionsResponse, plain).endswith(b"\x00")


def test_records_are_handed_on_as_a_part_not_copied() -> None:
    types = response_module(1, 16)
    records = bytearray(b"r" * 1000)
    body = make(
        types.FetchResponse,
        throttle_time=0 * ONE_MS,
        error_code=ErrorCode.none,
        responses=(
            make(
                types.FetchableTopicResponse,
                topic_id=None,
                partitions=(
                    make(
                        types.PartitionData,
                        partition_index=0,
                        error_code=ErrorCode.none,
                        high_watermark=1,
                        aborted_transactions=None,
                        records=records,
                    ),
                ),
            ),
        ),
    )
    parts: list[Any] = []
    entity_writer(types.FetchResponse)(body, parts)
    assert any(part is records for part in parts)


def test_a_fixed_size_frame_is_one_pack_with_its_size() -> None:
    writer = response_frame_writer(apis.response_schema(12, 3), 0)  # Heartbeat v3
    source = "".join(linecache.getlines(writer.__code__.co_filename))
    assert source.count("return") == 1
    assert "parts" not in source


def test_a_traceback_through_a_compiled_writer_shows_the_line_that_failed() -> None:
    writer = response_frame_writer(apis.response_schema(12, 2), 0)  # Heartbeat v2
    filename = writer.__code__.co_filename
    assert len(linecache.cache[filename]) == 1  # lazy: no text held until asked for
    try:
        writer(1, None)
    except AttributeError as error:
        lines = traceback.format_exception(error)
    assert any("entity.throttle_time" in line for line in lines)
