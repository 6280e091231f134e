"""codec.schemas: the message versions kio lacks, read and written by kio's own machinery and
the codec's, as Kafka 4.4.0 lays them out."""

from __future__ import annotations

import struct
from dataclasses import fields
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from codec import ApiKey, RequestHeader, decode_request, encode_response
from codec.apis import KAFKA_4_RANGES, kafka_name, request_schema, response_schema
from codec.entities import make
from codec.messages import encode_request
from codec.schemas import REQUESTS, RESPONSES
from perf.machine import REPO_ROOT
from tests.support.kafka_tools import requires_kafka_tools
from tests.support.module_command import run_checked

SCHEMAS_SCRIPT = REPO_ROOT / "scripts" / "kafka-message-schemas"


def test_each_version_is_looked_up_before_kios_and_served() -> None:
    for (key, version), schema in REQUESTS.items():
        assert request_schema(key, version) is schema
        assert schema.__version__ == version and schema.__api_key__ == key
        assert KAFKA_4_RANGES[key].max_version >= version
    for (key, version), schema in RESPONSES.items():
        assert response_schema(key, version) is schema


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


def top_level_fields(schema: str) -> list[tuple[str, str]]:
    """(name, type) of each top-level field of a printed schema "{a:INT32,b:ARRAY({...})}",
    the tagged-field section left out."""
    found, depth, start = [], 0, 1
    for index, char in enumerate(schema):
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
        if (char == "," and depth == 1) or (char == "}" and depth == 0):
            name, _, kind = schema[start:index].partition(":")
            if name != "_tagged_fields":
                found.append((name, kind))
            start = index + 1
    return found


# How kio's field metadata names the types the jar prints (flexible versions only here).
KIO_TYPES = {
    "COMPACT_STRING": "string",
    "COMPACT_NULLABLE_STRING": "string",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
}


@requires_kafka_tools
@pytest.mark.parametrize("kind", ["Request", "Response"])
def test_each_schema_has_the_fields_kafka_4_4_0_defines(kind: str) -> None:
    indexed = REQUESTS if kind == "Request" else RESPONSES
    for (key, version), schema in indexed.items():
        data_class = f"{kafka_name(ApiKey(key))}{kind}Data"
        printed = run_checked([str(SCHEMAS_SCRIPT), data_class], timeout=120)
        line = next(line for line in printed.splitlines() if line.startswith(f"v{version}: "))
        kafka_fields = top_level_fields(line.removeprefix(f"v{version}: "))
        ours = [
            (f.name, f.metadata.get("kafka_type"))
            for f in fields(schema)
            if "tag" not in f.metadata
        ]
        assert [name for name, _ in ours] == [_kio_name(name) for name, _ in kafka_fields]
        for (name, kio_type), (_, kafka_type) in zip(ours, kafka_fields, strict=True):
            if kafka_type in KIO_TYPES and kio_type not in ("error_code", "timedelta_i32"):
                assert kio_type == KIO_TYPES[kafka_type], name


KIO_NAMES = {"throttle_time_ms": "throttle_time", "generation_id_or_member_epoch": "generation_id"}
"""kio's names of fields Kafka names otherwise: a throttle time is a timedelta, and
TxnOffsetCommit's generation (or member epoch) is `generation_id` in kio's v3-5."""


def _kio_name(kafka_name: str) -> str:
    return KIO_NAMES.get(kafka_name, kafka_name)
