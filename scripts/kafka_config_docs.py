"""Writes nullbroker/kafka_reference/config_documentation.py: Apache Kafka's own text for
every topic and broker config, as its DescribeConfigs answers with include_documentation set.

    .venv/bin/python scripts/kafka_config_docs.py 127.0.0.1:39092

asks the Kafka at that bootstrap (one DescribeConfigs v4 for a topic it creates and deletes,
and for the broker it reached) and rewrites the table. Run it again against a newer Kafka to
take up its texts; nullbroker answers a config Kafka has no text for with null.
"""

from __future__ import annotations

import datetime
import io
import json
import socket
import struct
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial import entity_reader, entity_writer

from codec.apis import request_schema, response_schema
from codec.entities import request_module

CREATE_TOPICS, DELETE_TOPICS, METADATA, DESCRIBE_CONFIGS = 19, 20, 3, 32
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
TABLE = Path(__file__).resolve().parents[1] / "nullbroker/kafka_reference/config_documentation.py"


class Client:
    """One connection, one request at a time (flexible versions only: header v2)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.socket = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    def ask(self, api_key: int, version: int, **fields: Any) -> Any:
        self.correlation_id += 1
        buffer = io.BytesIO()
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self.correlation_id,
            client_id="nullbroker-config-docs",
        )
        entity_writer(RequestHeader)(buffer, header)
        entity_writer(request_schema(api_key, version))(
            buffer, request_schema(api_key, version)(**fields)
        )
        frame = buffer.getvalue()
        self.socket.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._read(4))
        response = self._read(size)
        _, offset = entity_reader(ResponseHeader)(response, 0)
        body, _ = entity_reader(response_schema(api_key, version))(response, offset)
        return body

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.socket.recv(size - len(data))
            if not chunk:
                raise ConnectionError("Kafka closed the connection")
            data += chunk
        return data


def documentation(client: Client, resource_type: int, name: str) -> dict[str, str]:
    t = request_module(DESCRIBE_CONFIGS, 4)
    resource = t.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None
    )
    response = client.ask(
        DESCRIBE_CONFIGS, 4, resources=(resource,), include_synonyms=False,
        include_documentation=True,
    )  # fmt: skip
    (result,) = response.results
    if result.error_code.value:
        raise RuntimeError(f"DescribeConfigs {name}: {result.error_code.name}")
    return {entry.name: entry.documentation for entry in result.configs if entry.documentation}


def topic_documentation(client: Client, topic: str) -> dict[str, str]:
    """`documentation` of a topic just created: Kafka knows it a moment after it answers."""
    for _ in range(50):
        try:
            return documentation(client, TOPIC_RESOURCE, topic)
        except RuntimeError:
            time.sleep(0.2)
    return documentation(client, TOPIC_RESOURCE, topic)


def table(texts: dict[str, str]) -> str:
    """A dict literal, an entry a line, in name order (JSON strings are Python strings)."""
    lines = "".join(
        f"    {json.dumps(name)}: {json.dumps(text)},\n" for name, text in sorted(texts.items())
    )
    return "{\n" + lines + "}"


def kafka_documentation(bootstrap: str) -> tuple[dict[str, str], dict[str, str]]:
    """Every topic config's text and every broker config's, from the Kafka at `bootstrap`."""
    client = Client(bootstrap)
    metadata = client.ask(
        METADATA, 12, topics=(), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )  # fmt: skip
    broker_id = str(metadata.brokers[0].node_id)
    topic = f"nullbroker-config-docs-{uuid.uuid4().hex[:8]}"
    create = request_module(CREATE_TOPICS, 7)
    client.ask(
        CREATE_TOPICS, 7, timeout=datetime.timedelta(seconds=30), validate_only=False,
        topics=(create.CreatableTopic(name=topic, num_partitions=1, replication_factor=1,
                                      assignments=(), configs=()),),
    )  # fmt: skip
    try:
        topics = topic_documentation(client, topic)
    finally:
        delete = request_module(DELETE_TOPICS, 6)
        client.ask(
            DELETE_TOPICS, 6, timeout=datetime.timedelta(seconds=30),
            topics=(delete.DeleteTopicState(name=topic, topic_id=uuid.UUID(int=0)),),
        )  # fmt: skip
    return topics, documentation(client, BROKER_RESOURCE, broker_id)


def main(bootstrap: str) -> None:
    topics, brokers = kafka_documentation(bootstrap)
    TABLE.write_text(
        '"""Apache Kafka\'s documentation of each config, as its DescribeConfigs gives it when\n'
        "asked (include_documentation): written by scripts/kafka_config_docs.py from Kafka's\n"
        'answer; run it again to regenerate. Imported only when a client asks."""\n'
        "# @generated by scripts/kafka_config_docs.py: change the script, not this file.\n"
        "# ruff: noqa: E501\n"
        "# fmt: off\n\n"
        f"TOPIC: dict[str, str] = {table(topics)}\n\n"
        f"BROKER: dict[str, str] = {table(brokers)}\n"
    )
    print(f"{TABLE}: {len(topics)} topic and {len(brokers)} broker configs")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} BOOTSTRAP (host:port of an Apache Kafka)")
    main(sys.argv[1])
