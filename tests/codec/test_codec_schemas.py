"""codec.schemas: the message versions kio lacks, read and written by kio's own machinery and
the codec's, as Kafka 4.4.0 lays them out: field for field as the 4.4.0 jar's schemas list
them, and byte for byte as Kafka's own serializer writes them."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import io
import json
import struct
import subprocess
import tempfile
import typing
import uuid
from collections.abc import Callable, Iterator
from dataclasses import fields
from datetime import timedelta
from functools import cache
from types import UnionType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from codec import ApiKey, RequestHeader, decode_request, encode_response
from codec.apis import KAFKA_4_RANGES, ApiRange, kafka_name, request_schema, response_schema
from codec.entities import make
from codec.messages import encode_request, encode_request_header, encode_response_body
from codec.schemas import REQUESTS, RESPONSES
from perf.machine import REPO_ROOT
from tests.codec.test_codec_roundtrip import entities
from tests.support.kafka_tools import requires_kafka_tools
from tests.support.module_command import run_checked

SCHEMAS_SCRIPT = REPO_ROOT / "scripts" / "kafka-message-schemas"


def test_each_version_is_looked_up_before_kios() -> None:
    for (key, version), schema in REQUESTS.items():
        assert request_schema(key, version) is schema
        assert schema.__version__ == version and schema.__api_key__ == key
    for (key, version), schema in RESPONSES.items():
        assert response_schema(key, version) is schema


def test_each_version_is_served() -> None:
    unserved = [
        f"{kafka_name(ApiKey(key))} v{version}"
        for key, version in REQUESTS
        if key not in KAFKA_4_RANGES or version not in KAFKA_4_RANGES[key]
    ]
    assert not unserved, f"codec.schemas has versions KAFKA_4_RANGES does not serve: {unserved}"


def test_an_api_versions_v5_request_decodes_with_its_cluster_and_node() -> None:
    schema = request_schema(ApiKey.API_VERSIONS, 5)
    body = schema(
        client_software_name="tests", client_software_version="1", cluster_id="c", node_id=i32(3)
    )
    frame = encode_request(body, 7, "tests")
    # As the Java 4.4 client writes it: v4's fields, then the cluster id and node id.
    assert frame.endswith(b"\x06tests\x021" + b"\x02c" + struct.pack(">i", 3) + b"\x00")
    request = decode_request(frame, KAFKA_4_RANGES)
    assert (request.body.cluster_id, request.body.node_id) == ("c", 3)


def test_an_api_versions_v5_response_is_v4s_bytes() -> None:
    frames = []
    for version in (4, 5):
        types = response_schema(ApiKey.API_VERSIONS, version)
        body = make(types, error_code=ErrorCode.none, api_keys=(), throttle_time=timedelta(0))
        frames.append(encode_response(RequestHeader(ApiKey.API_VERSIONS, version, 1, None), body))
    assert frames[0] == frames[1]


@dataclasses.dataclass(frozen=True)
class KafkaType:
    """A type as the jar's schemas print it: a primitive ("INT32", "COMPACT_NULLABLE_STRING"),
    an array of `element`, or a struct of `fields` (its tagged-field section left out)."""

    name: str
    element: KafkaType | None = None
    fields: tuple[tuple[str, KafkaType], ...] = ()

    @property
    def is_struct(self) -> bool:
        return self.name == "STRUCT"

    @property
    def nullable(self) -> bool:
        return "NULLABLE" in self.name


ARRAYS = ("ARRAY", "COMPACT_ARRAY", "NULLABLE_ARRAY", "COMPACT_NULLABLE_ARRAY")


def parse_schema(printed: str) -> KafkaType:
    """The struct a printed schema "{a:INT32,b:COMPACT_ARRAY({...}),c:{...}}" describes."""
    parsed, end = _parse_type(printed, 0)
    assert end == len(printed), printed[end:]
    return parsed


def _parse_type(text: str, at: int) -> tuple[KafkaType, int]:
    if text[at] == "{":
        found: list[tuple[str, KafkaType]] = []
        at += 1
        while text[at] != "}":
            name, _, _ = text[at:].partition(":")
            at += len(name) + 1
            kind, at = _parse_type(text, at)
            if name != "_tagged_fields":
                found.append((name, kind))
            if text[at] == ",":
                at += 1
        return KafkaType("STRUCT", fields=tuple(found)), at + 1
    end = at
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    name = text[at:end]
    if end < len(text) and text[end] == "(":
        if name in ARRAYS:
            element, after = _parse_type(text, end + 1)
            assert text[after] == ")", text[after:]
            return KafkaType(name, element=element), after + 1
        depth, end = 1, end + 1  # the tagged fields' section: skipped
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
    return KafkaType(name), end


@cache
def kafka_schema(data_class: str, version: int) -> KafkaType:
    """What the 4.4.0 jar's `<data_class>.SCHEMAS[version]` says (scripts/kafka-message-schemas)."""
    printed = run_checked([str(SCHEMAS_SCRIPT), data_class], timeout=120)
    line = next(line for line in printed.splitlines() if line.startswith(f"v{version}: "))
    return parse_schema(line.removeprefix(f"v{version}: "))


def data_class(key: int, kind: str) -> str:
    return f"{kafka_name(ApiKey(key))}{kind}Data"


EVERY_SCHEMA = [
    pytest.param(kind, key, version, id=f"{kafka_name(ApiKey(key))}{kind}-v{version}")
    for kind, indexed in (("Request", REQUESTS), ("Response", RESPONSES))
    for key, version in indexed
]


def codec_schema(kind: str, key: int, version: int) -> type:
    return (REQUESTS if kind == "Request" else RESPONSES)[key, version]


# The kio field types (`kafka_type`) that may stand for a type the jar prints (flexible
# versions only here). kio reads a zero UUID as None: a UUID field may be optional.
KIO_TYPES = {
    "COMPACT_STRING": {"string"},
    "COMPACT_NULLABLE_STRING": {"string"},
    "COMPACT_BYTES": {"bytes"},
    "COMPACT_NULLABLE_BYTES": {"bytes"},
    "COMPACT_RECORDS": {"records"},
    "BOOLEAN": {"bool"},
    "INT8": {"int8"},
    "INT16": {"int16", "error_code"},
    "INT32": {"int32", "timedelta_i32"},
    "INT64": {"int64", "timedelta_i64", "datetime_i64"},
    "UINT16": {"uint16"},
    "UINT32": {"uint32"},
    "FLOAT64": {"float64"},
    "UUID": {"uuid"},
}

KIO_NAMES = {"generation_id_or_member_epoch": "generation_id"}
"""kio's names of fields Kafka names otherwise, beyond a time in milliseconds (a timedelta
whose name drops the `_ms`): TxnOffsetCommit's generation (or member epoch) is
`generation_id` in kio's v3-5."""


def _kio_name(kafka_name: str, kio_type: str | None) -> str:
    if kafka_name in KIO_NAMES:
        return KIO_NAMES[kafka_name]
    if kio_type in ("timedelta_i32", "timedelta_i64"):
        return kafka_name.removesuffix("_ms")
    return kafka_name


def _optional(hint: Any) -> tuple[Any, bool]:
    """(the type inside, whether None is allowed) of a field's type hint."""
    if typing.get_origin(hint) in (typing.Union, UnionType):
        (inner,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
        return inner, True
    return hint, False


def _untagged(entity_type: type) -> list[dataclasses.Field[Any]]:
    return [field for field in fields(entity_type) if "tag" not in field.metadata]


def assert_fields_match(entity_type: type, kafka: KafkaType, where: str) -> None:
    """The untagged fields of `entity_type`, at every depth, are Kafka's: names, order, types
    and which may be null (a struct's nullability the print does not show)."""
    ours = _untagged(entity_type)
    names, kafkas = [field.name for field in ours], [name for name, _ in kafka.fields]
    assert len(names) == len(kafkas), f"{where}: {names}, Kafka's {kafkas}"
    hints = typing.get_type_hints(entity_type)
    for field, (name, kind) in zip(ours, kafka.fields, strict=True):
        at = f"{where}.{field.name}"
        assert field.name == _kio_name(name, field.metadata.get("kafka_type")), f"{at}: {name}"
        hint, optional = _optional(hints[field.name])
        if kind.element is not None or not (kind.is_struct or kind.name == "UUID"):
            assert optional == kind.nullable, f"{at}: nullable {kind.nullable}, ours {optional}"
        if kind.element is not None:
            assert typing.get_origin(hint) is tuple, at
            (hint, _) = typing.get_args(hint)
        item = kind.element or kind
        if item.is_struct:
            assert dataclasses.is_dataclass(hint), at
            assert_fields_match(typing.cast(type, hint), item, at)
        else:
            assert field.metadata.get("kafka_type") in KIO_TYPES[item.name], f"{at}: {item.name}"


@requires_kafka_tools
@pytest.mark.parametrize(("kind", "key", "version"), EVERY_SCHEMA)
def test_each_schema_has_the_fields_kafka_4_4_0_defines(kind: str, key: int, version: int) -> None:
    schema = codec_schema(kind, key, version)
    assert_fields_match(schema, kafka_schema(data_class(key, kind), version), schema.__name__)


PER_SCHEMA = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def served_only(key: int, version: int) -> dict[int, ApiRange]:
    """A served table of the one (key, version): a schema is checked whether or not the broker
    serves its version."""
    return {key: ApiRange(key, kafka_name(ApiKey(key)), version, version)}


def decoded_request_body(key: int, version: int, payload: bytes, correlation_id: int) -> Any:
    """A request payload behind its header, through decode_request: the codec's safety check
    of the payload, then kio's reader; the whole frame read."""
    frame = encode_request_header(key, version, correlation_id, "tests") + payload
    request = decode_request(frame, served_only(key, version))
    assert request.header == RequestHeader(key, version, correlation_id, "tests")
    assert request.trailing_bytes == 0
    return request.body


def kio_bytes(schema: type, entity: Any) -> bytes:
    """The entity as kio's generic writer writes it."""
    written = io.BytesIO()
    entity_writer(schema)(written, entity)
    return written.getvalue()


@pytest.mark.parametrize(("kind", "key", "version"), EVERY_SCHEMA)
@PER_SCHEMA
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_each_schema_round_trips_through_kio_and_the_codec(
    kind: str, key: int, version: int, data: st.DataObject, correlation_id: int
) -> None:
    schema = codec_schema(kind, key, version)
    entity = data.draw(entities(schema), label="entity")
    payload = kio_bytes(schema, entity)
    assert entity_reader(schema)(payload, 0) == (entity, len(payload))
    if kind == "Request":
        assert decoded_request_body(key, version, payload, correlation_id) == entity
    else:
        assert encode_response_body(key, version, entity) == payload


def _camel(snake: str) -> str:
    """The name Kafka's JsonConverters give a field the jar's schemas print in snake case."""
    first, *rest = snake.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


ZERO_UUID = base64.urlsafe_b64encode(bytes(16)).decode().rstrip("=")


def kafka_json(entity: Any, kafka: KafkaType | None) -> dict[str, Any]:
    """`entity` as the message's JsonConverter reads it: each field under Kafka's name (by
    position, as the jar's schema lists them; a tagged field, which the print leaves out, by
    its own), its value as Kafka's JSON holds it."""
    document: dict[str, Any] = {}
    untagged = iter(kafka.fields if kafka is not None else ())
    for field in fields(entity):
        kafka_type = field.metadata.get("kafka_type")
        if "tag" in field.metadata or kafka is None:
            name = field.name + ("_ms" if kafka_type in ("timedelta_i32", "timedelta_i64") else "")
            kind = None
        else:
            name, kind = next(untagged)
        document[_camel(name)] = _json_value(getattr(entity, field.name), kafka_type, kind)
    return document


def _json_value(value: Any, kafka_type: str | None, kind: KafkaType | None) -> Any:
    if value is None:
        return ZERO_UUID if kafka_type == "uuid" else None
    if isinstance(value, tuple):
        element = kind.element if kind is not None else None
        return [_json_value(item, kafka_type, element) for item in value]
    if dataclasses.is_dataclass(value):
        return kafka_json(value, kind)
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, bool | str | float):
        return value
    return int(value)


Serializer = Callable[[str, int, dict[str, Any]], bytes]


@pytest.fixture(scope="module")
def kafka_serializer() -> Iterator[Serializer]:
    """Kafka 4.4.0's own serializer (scripts/kafka-message-schemas --serialize), one JVM for
    the module: a message's JSON in, its bytes out."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stderr:
        java = subprocess.Popen(
            [str(SCHEMAS_SCRIPT), "--serialize"],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            encoding="utf-8",
        )
        requests, answers = java.stdin, java.stdout
        assert requests is not None and answers is not None

        def serialize(data_class: str, version: int, document: dict[str, Any]) -> bytes:
            requests.write(f"{data_class} {version} {json.dumps(document)}\n")
            requests.flush()
            answer = answers.readline().strip()
            if not answer:
                stderr.seek(0)
                pytest.fail(f"Kafka's serializer answered nothing: {stderr.read()[-3000:]}")
            assert not answer.startswith("error"), f"{answer}\n{json.dumps(document)}"
            return bytes.fromhex(answer)

        try:
            yield serialize
        finally:
            requests.close()
            try:
                java.wait(timeout=60)
            except subprocess.TimeoutExpired:
                java.kill()
                raise


@requires_kafka_tools
@pytest.mark.parametrize(("kind", "key", "version"), EVERY_SCHEMA)
@PER_SCHEMA
@given(data=st.data())
def test_each_schema_writes_and_reads_the_bytes_kafkas_own_serializer_writes(
    kafka_serializer: Serializer, kind: str, key: int, version: int, data: st.DataObject
) -> None:
    schema = codec_schema(kind, key, version)
    entity = data.draw(entities(schema), label="entity")
    name = data_class(key, kind)
    kafkas = kafka_serializer(name, version, kafka_json(entity, kafka_schema(name, version)))
    assert kio_bytes(schema, entity) == kafkas
    assert entity_reader(schema)(kafkas, 0) == (entity, len(kafkas))
    if kind == "Request":
        assert decoded_request_body(key, version, kafkas, 7) == entity
    else:
        assert encode_response_body(key, version, entity) == kafkas
