"""Avro source topics (`format=avro,schema=PATH.avsc[,wire=confluent][,schema-id=N]`): every
value decodes with fastavro against its schema, value k is the same every time, and a
consumer reads at each offset the value the pool holds for it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fastavro.validation import validate

from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sources.avro_values import POOL_VALUES, generate, load_schema, pool, pool_from_file
from nullbroker.sources.synthetic import SourceSpec, SourceSpecError
from tests.clients.test_clients_consume import read_whole_topic

# Every kind of type: named ones defined inside a union and named again later, logical types.
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "placed_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {
            "name": "gift",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "int"},
                        {"name": "price", "type": "double"},
                        {"name": "weight", "type": "float"},
                        {"name": "serial", "type": "long"},
                        {"name": "blob", "type": "bytes"},
                        {"name": "fragile", "type": "boolean"},
                    ],
                },
            ],
        },
        {"name": "items", "type": {"type": "array", "items": "Item"}},
        {"name": "tags", "type": {"type": "map", "values": ["null", "string", "shop.Status"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 8}},
        {"name": "cents", "type": {"type": "fixed", "name": "Cents", "size": 6,
                                   "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "nothing", "type": "null"},
    ],
}  # fmt: skip
LINKED_LIST = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
}


def write_schema(tmp_path: Path, schema: Any, name: str = "order.avsc") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(schema))
    return str(path)


def decode(schema: Any, value: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(value), fastavro.parse_schema(schema))


@pytest.mark.parametrize("schema", [ORDER, LINKED_LIST], ids=["order", "linked-list"])
def test_every_value_decodes_and_validates_against_its_schema(schema: Any) -> None:
    parsed = fastavro.parse_schema(schema)
    values = pool(schema, count=200)
    for value in values:
        reader = io.BytesIO(value)
        datum = fastavro.schemaless_reader(reader, parsed)
        assert reader.tell() == len(value), "nothing follows the datum"
        assert validate(datum, parsed)
    assert len(set(values)) > 150, "values vary"


def test_the_pool_is_the_same_every_time_and_unions_take_every_branch() -> None:
    assert pool(ORDER, count=50) == pool(ORDER, count=50)
    gifts = {type(generate(ORDER, index)["gift"]) for index in range(50)}
    assert gifts == {type(None), dict}
    statuses = {generate(ORDER, index)["status"] for index in range(50)}
    assert statuses == {"NEW", "PAID"}


def test_a_recursive_schema_ends() -> None:
    depths = []
    for index in range(100):
        node, depth = generate(LINKED_LIST, index), 0
        while node is not None:
            node, depth = node["next"], depth + 1
        depths.append(depth)
    assert max(depths) <= 9


def test_confluent_wire_puts_the_magic_byte_and_schema_id_first(tmp_path: Path) -> None:
    path = write_schema(tmp_path, ORDER)
    plain = SourceSpec.parse(f"orders:records=10,format=avro,schema={path}").payloads()
    confluent = SourceSpec.parse(
        f"orders:records=10,format=avro,schema={path},wire=confluent,schema-id=258"
    ).payloads()
    assert len(plain) == len(confluent) == POOL_VALUES
    for bare, framed in zip(plain, confluent, strict=True):
        assert framed == b"\x00\x00\x00\x01\x02" + bare
    assert decode(ORDER, plain[5]) == decode(ORDER, confluent[5][5:])


def test_the_pool_made_in_a_child_interpreter_is_the_pool(tmp_path: Path) -> None:
    path = write_schema(tmp_path, ORDER)
    prefix = b"\x00\x00\x00\x00\x07"
    assert pool_from_file(path, prefix) == pool(load_schema(path), prefix)


def test_bad_avro_sources_stop_the_start_naming_the_source_and_the_problem(
    tmp_path: Path,
) -> None:
    with pytest.raises(SourceSpecError, match=r"format=avro and schema=PATH\.avsc go together"):
        SourceSpec.parse("orders:records=10,format=avro")
    good = write_schema(tmp_path, ORDER)
    with pytest.raises(SourceSpecError, match="wire=confluent is for format=avro"):
        SourceSpec.parse("orders:records=10,wire=confluent")
    with pytest.raises(SourceSpecError, match="wire must be one of plain, confluent"):
        SourceSpec.parse(f"orders:records=10,format=avro,schema={good},wire=protobuf")
    unknown = write_schema(tmp_path, {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "Missing"}]}, "unknown.avsc")  # fmt: skip
    with pytest.raises(SourceSpecError) as refused:
        SourceSpec.parse(f"orders:records=10,format=avro,schema={unknown}")
    message = str(refused.value)
    assert message.startswith(f"source 'orders': schema {unknown!r}: not an Avro schema")
    assert "Missing" in message
    not_json = tmp_path / "broken.avsc"
    not_json.write_text("{type: record")
    with pytest.raises(SourceSpecError, match="not JSON"):
        SourceSpec.parse(f"orders:records=10,format=avro,schema={not_json}")
    with pytest.raises(SourceSpecError, match="No such file"):
        SourceSpec.parse(f"orders:records=10,format=avro,schema={tmp_path / 'absent.avsc'}")


@pytest.mark.clients
def test_a_consumer_reads_the_pools_avro_value_at_every_offset(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    path = write_schema(tmp_path, ORDER)
    records = 3_000
    broker = nullbroker_factory(
        "--source",
        f"orders:partitions=2,records={records},format=avro,schema={path},wire=confluent",
    )
    consumed = read_whole_topic(broker, "orders", 2, records)
    values = pool(ORDER, prefix=b"\x00\x00\x00\x00\x01")
    parsed = fastavro.parse_schema(ORDER)
    for message in consumed.messages:
        value = message.value()
        assert value == values[message.offset() % POOL_VALUES]
        assert value[:5] == b"\x00\x00\x00\x00\x01"
        assert validate(fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed), parsed)
