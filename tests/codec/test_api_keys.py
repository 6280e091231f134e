"""API keys come from one place, codec.ApiKey: its members are Kafka's, and the keys the C
sources define by hand are the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kio.index import load_request_schema

from codec import KAFKA_4_RANGES, ApiKey
from codec.apis import kafka_name

ROOT = Path(__file__).resolve().parents[2]
C_SOURCES = sorted(
    path
    for folder in (ROOT / "codec", ROOT / "nullbroker")
    for pattern in ("*.c", "*.h")
    for path in folder.rglob(pattern)
)
C_KEY = re.compile(r"^#define\s+(\w+)_KEY\s+(\d+)\b", re.MULTILINE)


@pytest.mark.parametrize("key", list(ApiKey), ids=lambda key: key.name)
def test_every_api_key_is_kafkas_key_and_name(key: ApiKey) -> None:
    schema = load_request_schema(key, KAFKA_4_RANGES[key].max_version)
    assert (schema.__api_key__, schema.__name__) == (key, f"{kafka_name(key)}Request")


def test_the_table_has_a_range_for_every_api_key() -> None:
    assert list(KAFKA_4_RANGES) == list(ApiKey)


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
