"""Avro values generated from an Avro schema, for source topics declared with
`format=avro,schema=PATH.avsc`: values a pipeline's `from_avro` (or any Avro reader with the
same schema) decodes, made once at start and encoded with fastavro.

As for JSON (nullbroker.sources.json_values), the broker generates POOL_VALUES values, value `k`
from a random generator seeded with `k`, and serves them as a payload file's records: the
record at offset `o` has value `pool[o % POOL_VALUES]`. Each value is the datum's Avro
binary encoding alone (no container file, no schema); with `wire=confluent` it is prefixed,
as Confluent's serializers write it, by a zero magic byte and the 4-byte big-endian schema
id `schema-id` (default 1).

Every type is generated: records (and errors), enums, arrays and maps (0 to 4 entries),
unions (a branch picked per value), fixed, bytes, strings (letters), the numbers, booleans
and null; named types referred to by name; and the logical types decimal, uuid, date,
time-millis/micros, timestamp-millis/micros, local-timestamp-millis/micros. A recursive
schema is cut off after MAX_DEPTH levels, where unions take their null branch and arrays
and maps are empty. A schema fastavro does not parse stops the broker at start with
fastavro's reason.

The broker makes its pool in a child interpreter (pool_from_file, nullbroker.sources.value_pool):
fastavro's modules, the compression libraries it loads and what generating leaves behind
would otherwise stay in the broker's RSS for as long as it runs (about 4 MiB,
perf/README.md).
"""

from __future__ import annotations

import datetime
import io
import random
import string
import sys
import uuid
from typing import Any

from .value_pool import POOL_VALUES, SchemaError, from_child, to_parent

MAX_DEPTH = 8
MAX_ENTRIES = 4
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
YEAR_S = 365 * 24 * 3600
LETTERS = string.ascii_lowercase
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
CONFLUENT_MAGIC = b"\x00"


def load_schema(path: str) -> Any:
    """The Avro schema in `path`, as JSON, checked by fastavro's parser."""
    # Imported here: only the child of pool_from_file loads a schema, so a broker that
    # reads the values back never imports json or fastavro.
    import json

    import fastavro

    try:
        with open(path, encoding="utf-8") as file:
            schema = json.load(file)
    except OSError as error:
        raise SchemaError(error.strerror) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise SchemaError(f"not JSON: {error}") from None
    try:
        fastavro.parse_schema(schema)
    except Exception as error:  # fastavro raises several kinds for a bad schema
        raise SchemaError(f"not an Avro schema fastavro accepts: {error}") from None
    return schema


def pool(schema: Any, prefix: bytes = b"", count: int = POOL_VALUES) -> tuple[bytes, ...]:
    """`count` encoded values, value `k` generated from seed `k`, each after `prefix`."""
    import fastavro

    parsed = fastavro.parse_schema(schema)
    named = named_types(schema)
    values = []
    for index in range(count):
        buffer = io.BytesIO()
        buffer.write(prefix)
        fastavro.schemaless_writer(buffer, parsed, generate(schema, index, named))
        values.append(buffer.getvalue())
    return tuple(values)


def pool_from_file(path: str, prefix: bytes = b"") -> tuple[bytes, ...]:
    """`pool(load_schema(path), prefix)`, made by a child interpreter
    (nullbroker.sources.value_pool), so that the caller never imports fastavro; SchemaError
    with load_schema's reason for a schema it refuses."""
    return from_child(__name__, path, prefix.hex())


def confluent_prefix(schema_id: int) -> bytes:
    """What Confluent's serializers write before the Avro binary: magic byte 0, the id."""
    return CONFLUENT_MAGIC + schema_id.to_bytes(4, "big")


def generate(schema: Any, index: int, named: dict[str, Any] | None = None) -> Any:
    """The datum of value `index`: what fastavro is given to encode."""
    named = named_types(schema) if named is None else named
    return _Generator(random.Random(index), named).value(schema, None, 0)


def named_types(
    schema: Any, namespace: str | None = None, found: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Every named type (record, error, enum, fixed) in `schema`, by full name and by short
    name: a field may name a type defined in a union branch no value happens to take."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            named_types(branch, namespace, found)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            full = _full_name(schema, namespace)
            found[full] = schema
            found.setdefault(full.rpartition(".")[2], schema)
            namespace = full.rpartition(".")[0] or None
            for field in schema.get("fields", []):
                named_types(field["type"], namespace, found)
        elif kind == "array":
            named_types(schema["items"], namespace, found)
        elif kind == "map":
            named_types(schema["values"], namespace, found)
        elif isinstance(kind, dict | list):
            named_types(kind, namespace, found)
    return found


class _Generator:
    def __init__(self, rng: random.Random, named: dict[str, Any]) -> None:
        self.rng = rng
        self.named = named

    def value(self, schema: Any, namespace: str | None, depth: int) -> Any:
        if isinstance(schema, list):
            return self._union(schema, namespace, depth)
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return self._primitive(schema)
            return self.value(self._lookup(schema, namespace), namespace, depth)
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None and kind in (*PRIMITIVES, "fixed"):
            made = self._logical(schema, logical)
            if made is not _NOT_LOGICAL:
                return made
        if kind in ("record", "error"):
            inner = _namespace_inside(schema, namespace)
            return {
                field["name"]: self.value(field["type"], inner, depth + 1)
                for field in schema.get("fields", [])
            }
        if kind == "enum":
            return self.rng.choice(schema["symbols"])
        if kind == "fixed":
            return self.rng.randbytes(schema["size"])
        if kind == "array":
            return [
                self.value(schema["items"], namespace, depth + 1)
                for _ in range(self._entries(depth))
            ]
        if kind == "map":
            return {
                self._letters(1, 8): self.value(schema["values"], namespace, depth + 1)
                for _ in range(self._entries(depth))
            }
        return self.value(kind, namespace, depth)  # {"type": "string"} and the like

    def _union(self, branches: list[Any], namespace: str | None, depth: int) -> Any:
        if depth >= MAX_DEPTH and "null" in branches:
            return None
        return self.value(self.rng.choice(branches), namespace, depth)

    def _entries(self, depth: int) -> int:
        return 0 if depth >= MAX_DEPTH else self.rng.randint(0, MAX_ENTRIES)

    def _primitive(self, kind: str) -> Any:
        rng = self.rng
        if kind == "null":
            return None
        if kind == "boolean":
            return rng.random() < 0.5
        if kind in ("int", "long"):
            return rng.randint(0, 1_000_000)
        if kind in ("float", "double"):
            # Four decimals survive a float32 round trip well enough to read back.
            return round(rng.uniform(0, 1_000), 2 if kind == "float" else 4)
        if kind == "bytes":
            return rng.randbytes(rng.randint(1, 16))
        return self._letters(1, 16)

    def _logical(self, schema: dict[str, Any], logical: str) -> Any:
        rng = self.rng
        moment = EPOCH + datetime.timedelta(seconds=rng.randrange(YEAR_S))
        if logical == "decimal":
            import decimal  # only the child generates values (pool_from_file): 0.3 MiB

            precision = int(schema.get("precision", 10))
            scale = int(schema.get("scale", 0))
            unscaled = rng.randrange(10 ** min(precision, 18))
            return decimal.Decimal(unscaled).scaleb(-scale)
        if logical == "uuid" and schema["type"] == "string":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if logical == "date" and schema["type"] == "int":
            return moment.date()
        if logical in ("time-millis", "time-micros"):
            return moment.time().replace(microsecond=rng.randrange(1000) * 1000)
        if logical in ("timestamp-millis", "timestamp-micros"):
            return moment.replace(microsecond=rng.randrange(1000) * 1000)
        if logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return moment.replace(tzinfo=None, microsecond=rng.randrange(1000) * 1000)
        return _NOT_LOGICAL  # an unknown logical type: Avro says to use the underlying type

    def _lookup(self, name: str, namespace: str | None) -> Any:
        for key in (f"{namespace}.{name}" if namespace else name, name):
            if key in self.named:
                return self.named[key]
        raise SchemaError(f"type {name!r} is not defined")

    def _letters(self, low: int, high: int) -> str:
        return "".join(self.rng.choices(LETTERS, k=self.rng.randint(low, high)))


def _full_name(schema: dict[str, Any], namespace: str | None) -> str:
    """A named type's full name: its name, in its own namespace or the enclosing one."""
    name = str(schema["name"])
    own = schema.get("namespace", namespace)
    return name if "." in name or not own else f"{own}.{name}"


def _namespace_inside(schema: dict[str, Any], namespace: str | None) -> str | None:
    """The namespace a named type's fields are in: its full name's."""
    return _full_name(schema, namespace).rpartition(".")[0] or None


_NOT_LOGICAL = object()


if __name__ == "__main__":  # the child of pool_from_file: PATH and PREFIX (hex) in
    raise SystemExit(to_parent(lambda: pool(load_schema(sys.argv[1]), bytes.fromhex(sys.argv[2]))))
