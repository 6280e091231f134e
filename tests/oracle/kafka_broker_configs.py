"""Writes nullbroker/state/kafka_broker_configs.py: every broker config Apache Kafka's
DescribeConfigs lists for a broker, with its type, its default and whether it may be
altered (IncrementalAlterConfigs on a broker resource), as Kafka answers it.

    PYTHONPATH=. .venv/bin/python -m tests.oracle.kafka_broker_configs [HOST:PORT]

asks the Kafka at that bootstrap (one DescribeConfigs v4 of the node it reached, with
synonyms), or without an address starts one (perf.kafka_broker) and asks it, then rewrites
the table. The default of a config the Kafka was started with comes from its DEFAULT_CONFIG
synonym, so the node's own settings never reach the table (nor the internal configs Kafka lists
only where they are set, as perf.kafka_broker sets them). Run it against a newer Kafka to
take up its configs (scripts/kafka_config_docs.py writes their documentation).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from perf.kafka_broker import KafkaBroker
from tests.handlers.test_config_documentation import SET_BY_THE_FIXTURE
from tests.support.differential import request
from tests.support.kafka_wire import FrameStream

TABLE = Path(__file__).resolve().parents[2] / "nullbroker" / "state" / "kafka_broker_configs.py"
METADATA, DESCRIBE_CONFIGS = 3, 32
BROKER_RESOURCE = 4
DEFAULT_CONFIG = 5

HEADER = '''"""Every broker config Apache Kafka {version} lists (DescribeConfigs of a broker
resource): its type (DescribeConfigs v3+ config type), its default (None: no value) and
whether it may be altered while the broker runs (IncrementalAlterConfigs: Kafka's dynamic
configs; the others are read-only). Written by tests/oracle/kafka_broker_configs.py from
Kafka's answer; run it again to regenerate."""
# ruff: noqa: E501
# fmt: off

BROKER_CONFIGS: dict[str, tuple[int, str | None, bool]] = {{
'''


async def describe_broker(bootstrap: str) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
    try:
        metadata = await stream.request(
            request(METADATA, 12, topics=[], include_topic_authorized_operations=False)
        )
        (node,) = [broker.node_id for broker in metadata.brokers if broker.port == int(port)]
        answer = await stream.request(
            request(
                DESCRIBE_CONFIGS,
                4,
                resources=[
                    {
                        "resource_type": BROKER_RESOURCE,
                        "resource_name": str(node),
                        "configuration_keys": None,
                    }
                ],
                include_synonyms=True,
                include_documentation=False,
            )
        )
    finally:
        await stream.aclose()
    (result,) = answer.results
    assert result.error_code == 0, result
    return result.configs


def default_of(entry: Any) -> str | None:
    """The config's default: its value when nothing set it, else its DEFAULT_CONFIG
    synonym's (none: the config has no default)."""
    if entry.config_source == DEFAULT_CONFIG:
        return entry.value  # type: ignore[no-any-return]
    defaults = [synonym.value for synonym in entry.synonyms if synonym.source == DEFAULT_CONFIG]
    return defaults[0] if defaults else None


def quoted(text: str | None) -> str:
    """A Python literal of the text, in double quotes as the repository writes them."""
    return "None" if text is None else json.dumps(text)


def table(configs: Any, version: str) -> str:
    rows = [
        f"    {quoted(entry.name)}: ({int(entry.config_type)}, {quoted(default_of(entry))}, "
        f"{not entry.read_only}),\n"
        for entry in sorted(configs, key=lambda entry: entry.name)
        if entry.name not in SET_BY_THE_FIXTURE
    ]
    return HEADER.format(version=version) + "".join(rows) + "}\n"


def main(arguments: list[str]) -> None:
    if arguments:
        configs = trio.run(describe_broker, arguments[0])
    else:
        with KafkaBroker(Path(tempfile.mkdtemp(prefix="kafka-configs-"))) as kafka:
            configs = trio.run(describe_broker, kafka.bootstrap)
    TABLE.write_text(table(configs, "4.1.1"))
    print(f"broker configs written to {TABLE}")


if __name__ == "__main__":
    main(sys.argv[1:])
