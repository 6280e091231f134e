"""API keys come from one place, codec.ApiKey: its members are Kafka's, and the keys the C
sources define by hand are the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kio.schema.index import api_key_map, schema_name_map

from codec import KAFKA_4_RANGES, NOT_SERVED, TELEMETRY_KEYS, ApiKey
from codec.apis import kafka_name, request_schema
from codec.schemas import REQUESTS
from tests.codec.test_codec_schemas import SCHEMAS_SCRIPT
from tests.support.kafka_tools import requires_kafka_tools
from tests.support.module_command import run_checked

ROOT = Path(__file__).resolve().parents[2]
C_SOURCES = sorted(
    path
    for folder in (ROOT / "codec", ROOT / "nullbroker")
    for pattern in ("*.c", "*.h")
    for path in folder.rglob(pattern)
)
C_KEY = re.compile(r"^#define\s+(\w+)_KEY\s+(\d+)\b", re.MULTILINE)


WITHOUT_SCHEMAS = {ApiKey.UNREGISTER_CONTROLLER}
"""Keys of Kafka 4.4 that neither kio 0.6.5 nor codec.schemas has a schema for, not served:
their names are checked against the 4.4.0 jar only
(test_api_key_lists_every_api_a_kafka_4_4_broker_lists)."""


@pytest.mark.parametrize(
    "key", [key for key in ApiKey if key not in WITHOUT_SCHEMAS], ids=lambda key: key.name
)
def test_every_api_key_is_kafkas_key_and_name(key: ApiKey) -> None:
    served = KAFKA_4_RANGES.get(key)
    kios = schema_name_map[api_key_map[key]] if key in api_key_map else {}
    version = served.max_version if served else max([*kios, *(v for k, v in REQUESTS if k == key)])
    schema = request_schema(key, version)
    assert (schema.__api_key__, schema.__name__) == (key, f"{kafka_name(key)}Request")


@requires_kafka_tools
def test_api_key_lists_every_api_a_kafka_4_4_broker_lists() -> None:
    printed = run_checked([str(SCHEMAS_SCRIPT), "--api-keys"], timeout=120)
    brokers = dict(line.split(" ", 1) for line in printed.splitlines())
    listed = {int(key): name for key, name in brokers.items()}
    assert {int(key): kafka_name(key) for key in ApiKey} == listed
    # A broker's own APIs, which its ApiVersions lists only with a telemetry receiver.
    assert listed.keys() >= TELEMETRY_KEYS


def test_every_api_key_is_served_or_listed_as_not_served_never_both() -> None:
    assert list(KAFKA_4_RANGES) == [key for key in ApiKey if key not in NOT_SERVED]
    assert sorted(NOT_SERVED) == [key for key in ApiKey if key not in KAFKA_4_RANGES]
    assert all(type(key) is ApiKey for key in NOT_SERVED), "NOT_SERVED names its keys"


def c_api_keys() -> list[tuple[str, str, int]]:
    """(file, API name, key) of every `#define <API>_KEY <n>` in the C sources."""
    return [
        (path.relative_to(ROOT).as_posix(), name, int(value))
        for path in C_SOURCES
        for name, value in C_KEY.findall(path.read_text())
    ]


def test_the_c_sources_define_the_keys_of_api_key() -> None:
    defined = c_api_keys()
    assert defined, "no #define <API>_KEY in the C sources: the pattern no longer finds them"
    assert [(path, name, ApiKey[name].value) for path, name, _ in defined] == defined
