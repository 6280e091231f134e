"""The Schema Registry subset (`--schema-registry`): Confluent's REST paths and error codes,
the Avro source topics' schemas under `<topic>-value`, and confluent-kafka's own Avro
serializer and deserializer against it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from nullbroker.app.configuration import load
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.ops.http_endpoint import HttpRequest
from nullbroker.ops.schema_registry import CONTENT_TYPE, SchemaRegistry
from nullbroker.settings import ConfigError
from tests.clients.test_clients_consume import read_whole_topic
from tests.sources.test_avro_values import LINKED_LIST, ORDER, decode, write_schema

REGISTRY_LINE = re.compile(r"^schema registry on (?P<url>http://\S+)$")
CLICK = {"type": "record", "name": "Click", "fields": [{"name": "user", "type": "string"}]}


def call(registry: SchemaRegistry, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    response = registry.handle(HttpRequest(method.encode(), path, "", data))
    assert response.content_type == CONTENT_TYPE
    return response.status, json.loads(response.body)


def test_registering_and_reading_back_as_confluents_registry_answers() -> None:
    registry = SchemaRegistry()
    click = json.dumps(CLICK, indent=2)
    assert call(registry, "POST", "/subjects/clicks-value/versions", {"schema": click}) == (
        200,
        {"id": 1},
    )
    # The same schema: the same id in another subject, the same version again in its own.
    assert call(registry, "POST", "/subjects/other-value/versions", {"schema": click})[1] == {
        "id": 1
    }
    assert call(registry, "POST", "/subjects/clicks-value/versions", {"schema": click})[1] == {
        "id": 1
    }
    node = json.dumps(LINKED_LIST)
    assert call(registry, "POST", "/subjects/clicks-value/versions", {"schema": node})[1] == {
        "id": 2
    }
    assert call(registry, "GET", "/subjects") == (200, ["clicks-value", "other-value"])
    assert call(registry, "GET", "/subjects/clicks-value/versions") == (200, [1, 2])
    status, latest = call(registry, "GET", "/subjects/clicks-value/versions/latest")
    assert (status, latest["version"], latest["id"]) == (200, 2, 2)
    assert json.loads(latest["schema"]) == LINKED_LIST
    assert "schemaType" not in latest  # Avro, the default, is left out
    assert call(registry, "GET", "/subjects/clicks-value/versions/1/schema") == (200, CLICK)
    assert call(registry, "GET", "/schemas/ids/1")[1] == {
        "schema": json.dumps(CLICK, separators=(",", ":"))
    }
    assert call(registry, "GET", "/schemas/ids/1/versions")[1] == [
        {"subject": "clicks-value", "version": 1},
        {"subject": "other-value", "version": 1},
    ]
    status, found = call(registry, "POST", "/subjects/clicks-value", {"schema": node})
    assert (status, found["version"], found["id"]) == (200, 2, 2)
    json_schema = {"schema": '{"type": "object"}', "schemaType": "JSON"}
    assert call(registry, "POST", "/subjects/j-value/versions", json_schema)[1] == {"id": 3}
    assert call(registry, "GET", "/schemas/ids/3")[1]["schemaType"] == "JSON"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/subjects/none/versions", None, 404, 40401),
        ("GET", "/subjects/clicks-value/versions/9", None, 404, 40402),
        ("GET", "/subjects/clicks-value/versions/x", None, 422, 42202),
        ("GET", "/schemas/ids/99", None, 404, 40403),
        ("POST", "/subjects/clicks-value", {"schema": json.dumps(LINKED_LIST)}, 404, 40403),
        ("POST", "/subjects/none", {"schema": json.dumps(CLICK)}, 404, 40401),
        ("POST", "/subjects/x/versions", {"schema": '{"type": "nope"}'}, 422, 42201),
        ("POST", "/subjects/x/versions", {"no": "schema"}, 422, 42201),
        ("DELETE", "/subjects/clicks-value", None, 404, 404),
    ],
)
def test_errors_carry_confluents_codes(
    method: str, path: str, body: Any, status: int, code: int
) -> None:
    registry = SchemaRegistry()
    registry.register("clicks-value", json.dumps(CLICK))
    answered, error = call(registry, method, path, body)
    assert (answered, error["error_code"]) == (status, code)
    assert error["message"]


def test_two_schemas_may_not_share_a_schema_id(tmp_path: Path) -> None:
    order = write_schema(tmp_path, ORDER)
    node = write_schema(tmp_path, LINKED_LIST, "node.avsc")
    flags = {
        "source": [
            f"a:records=1,format=avro,schema={order},wire=confluent",
            f"b:records=1,format=avro,schema={node},wire=confluent",
        ]
    }
    with pytest.raises(ConfigError, match="give schema-id 1 to two different schemas"):
        load(flags, environ={})
    flags["source"][1] += ",schema-id=2"
    assert len(load(flags, environ={}).sources) == 2


@pytest.mark.clients
def test_confluents_avro_serde_works_against_the_registry_and_the_source_topic(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    path = write_schema(tmp_path, ORDER)
    records = 500
    broker = nullbroker_factory(
        "--schema-registry", "127.0.0.1:0",
        "--source", f"orders:partitions=1,records={records},format=avro,schema={path},"
        "wire=confluent,schema-id=5",
    )  # fmt: skip
    url = REGISTRY_LINE.match(broker.wait_for_line(REGISTRY_LINE, 15))["url"]  # type: ignore[index]
    client = SchemaRegistryClient({"url": url})
    latest = client.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version) == (5, 1)

    deserializer = AvroDeserializer(client)
    context = SerializationContext("orders", MessageField.VALUE)
    consumed = read_whole_topic(broker, "orders", 1, records)
    for message in consumed.messages:
        value = message.value()
        assert deserializer(value, context) == decode(ORDER, value[5:])

    serializer = AvroSerializer(client, json.dumps(CLICK))
    framed = serializer({"user": "ann"}, SerializationContext("clicks", MessageField.VALUE))
    assert framed[:5] == b"\x00\x00\x00\x00\x06"  # registered now, after the source's id
    assert client.get_latest_version("clicks-value").schema_id == 6
    assert deserializer(framed, SerializationContext("clicks", MessageField.VALUE)) == {
        "user": "ann"
    }
