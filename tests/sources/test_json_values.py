"""JSON values generated from a JSON Schema (`format=json,schema=PATH` source topics): each
one valid against its schema as an independent validator (jsonschema) judges, the same
every time, and a schema outside the subset refused with where and why."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.json_values import (
    POOL_VALUES,
    SchemaError,
    check,
    generate,
    load_schema,
    pool,
    pool_from_file,
)
from nullbroker.sources.synthetic import SourceSpec, SourceSpecError
from tests.clients.test_clients_consume import read_whole_topic

ORDER = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "an order event",
    "type": "object",
    "required": ["order_id", "customer", "placed_at", "lines", "total", "status"],
    "properties": {
        "order_id": {"type": "string", "format": "uuid"},
        "customer": {
            "type": "object",
            "required": ["id", "email"],
            "properties": {
                "id": {"type": "integer", "minimum": 1, "maximum": 99999},
                "email": {"type": "string", "format": "email"},
                "name": {"type": "string", "minLength": 2, "maxLength": 30},
                "vip": {"type": "boolean"},
            },
        },
        "placed_at": {"type": "string", "format": "date-time"},
        "ship_on": {"type": "string", "format": "date"},
        "lines": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {
                "type": "object",
                "required": ["sku", "qty", "price"],
                "properties": {
                    "sku": {"type": "string", "minLength": 8, "maxLength": 8},
                    "qty": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
                    "price": {"type": "number", "minimum": 0.5, "maximum": 500},
                },
            },
        },
        "total": {"type": "number", "exclusiveMinimum": 0},
        "status": {"enum": ["new", "paid", "shipped"]},
        "channel": {"const": "web"},
        "coupon": {"type": ["string", "null"], "maxLength": 12},
        "source_ip": {"type": "string", "format": "ipv4"},
        "site": {"type": "string", "format": "uri"},
    },
}
VALIDATOR = Draft202012Validator(ORDER, format_checker=FormatChecker())


@settings(max_examples=300, deadline=None)
@given(index=st.integers(min_value=0, max_value=10**9))
def test_every_generated_value_is_valid_against_its_schema(index: int) -> None:
    value = json.loads(generate(ORDER, index))
    errors = [error.message for error in VALIDATOR.iter_errors(value)]
    assert errors == []


def test_the_pool_is_the_same_every_time_and_varied() -> None:
    first = pool(ORDER)
    assert first == pool(ORDER) and len(first) == POOL_VALUES
    assert len(set(first)) == POOL_VALUES
    parsed = [json.loads(value) for value in first]
    assert {order["status"] for order in parsed} == {"new", "paid", "shipped"}
    # Optional properties come and go; required ones are always there.
    assert 0 < sum("ship_on" in order for order in parsed) < POOL_VALUES
    assert all(order["lines"] for order in parsed)
    # jsonschema checks date-time only with an extra package: parsed here instead.
    for order in parsed:
        placed = datetime.datetime.fromisoformat(order["placed_at"])
        assert placed.tzinfo is not None and order["placed_at"].endswith("Z")
        if "ship_on" in order:
            datetime.date.fromisoformat(order["ship_on"])


@pytest.mark.parametrize(
    ("schema", "complaint"),
    [
        ({"type": "string", "pattern": "^a"}, "$: 'pattern' is not supported"),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/defs/a"}}},
            "$.properties.a: '$ref' is not supported",
        ),
        ({"type": "decimal"}, "$: type 'decimal' is not one of"),
        ({"type": "string", "format": "phone"}, "$: format 'phone' is not one of"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "$: no number lies between"),
        ({"type": "array", "minItems": 3, "maxItems": 1}, "$: minItems is above maxItems"),
        ({"minLength": 3}, "$: give a type (or enum or const)"),
        ([], "$: a schema must be a JSON object"),
    ],
)
def test_a_schema_outside_the_subset_is_refused_with_where_and_why(
    schema: Any, complaint: str
) -> None:
    with pytest.raises(SchemaError) as refused:
        check(schema, "$")
    assert str(refused.value).startswith(complaint)


def write_schema(tmp_path: Path, schema: Any) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    return str(path)


def test_the_pool_made_in_a_child_interpreter_is_the_pool(tmp_path: Path) -> None:
    path = write_schema(tmp_path, ORDER)
    assert pool_from_file(path) == pool(load_schema(path))


def test_a_json_source_needs_its_schema_and_names_both_when_the_schema_is_bad(
    tmp_path: Path,
) -> None:
    with pytest.raises(SourceSpecError, match="format=json and schema=PATH go together"):
        SourceSpec.parse("orders:records=10,format=json")
    bad = write_schema(tmp_path, {"type": "string", "pattern": "x"})
    with pytest.raises(SourceSpecError) as refused:
        SourceSpec.parse(f"orders:records=10,format=json,schema={bad}")
    assert str(refused.value) == f"source 'orders': schema {bad!r}: $: 'pattern' is not supported"
    with pytest.raises(SourceSpecError, match="format must be one of letters, json, avro"):
        SourceSpec.parse("orders:records=10,format=xml")


@pytest.mark.clients
def test_a_consumer_reads_valid_json_of_the_schema_at_every_offset(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    path = write_schema(tmp_path, ORDER)
    records = 3_000
    broker = nullbroker_factory(
        "--source", f"orders:partitions=2,records={records},format=json,schema={path}"
    )  # fmt: skip
    consumed = read_whole_topic(broker, "orders", 2, records)

    values = pool(ORDER)
    for message in consumed.messages:
        assert message.value() == values[message.offset() % POOL_VALUES]
    for value in {message.value() for message in consumed.messages}:
        assert not list(VALIDATOR.iter_errors(json.loads(value)))
