"""JSON values generated from a JSON Schema, for source topics declared with
`format=json,schema=PATH`: values a pipeline's `from_json` parses, made once at start.

The broker generates POOL_VALUES values, value `k` from a random generator seeded with `k`
(so the same schema always gives the same values), and serves them as a payload file's
records: the record at offset `o` has value `pool[o % POOL_VALUES]` (nullbroker.sources.synthetic).

The subset understood, which covers what event schemas use:

- `type`: object, array, string, integer, number, boolean, null, or a list of them (one is
  picked per value); `enum` and `const` on any schema;
- object: `properties` (generated in their order), `required` (always present; the others
  are present about half the time);
- array: `items`, `minItems` (default 0), `maxItems` (default minItems + 4);
- string: `minLength` (default 1), `maxLength` (default minLength + 15), letters; or a
  `format`: date-time, date, time, email, uuid, uri, hostname, ipv4;
- integer and number: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`
  (defaults 0 and 1,000,000); numbers have at most 4 decimals.

Anything else that constrains values (`$ref`, `oneOf`, `pattern`, `multipleOf`, ...) stops
the broker at start with the JSON path of the keyword, rather than serving values that do
not match the schema. Annotations (`title`, `description`, `$schema`, `$id`, `examples`,
`default`, `additionalProperties`) are ignored.

The broker makes its pool in a child interpreter (pool_from_file, nullbroker.sources.value_pool), so
that neither this module nor what generating leaves behind stays in its RSS.
"""

from __future__ import annotations

import datetime
import json
import random
import string
import sys
import uuid
from pathlib import Path
from typing import Any

from .value_pool import POOL_VALUES, SchemaError, from_child, to_parent

TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
FORMATS = ("date-time", "date", "time", "email", "uuid", "uri", "hostname", "ipv4")
KNOWN = {
    "type", "enum", "const", "properties", "required", "items", "minItems", "maxItems",
    "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum",
}  # fmt: skip
IGNORED = {
    "title", "description", "$schema", "$id", "$comment", "examples", "default",
    "additionalProperties", "readOnly", "writeOnly", "deprecated",
}  # fmt: skip
DEFAULT_MAX = 1_000_000
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
YEAR_S = 365 * 24 * 3600
LETTERS = string.ascii_lowercase


def load_schema(path: str) -> dict[str, Any]:
    """The schema in `path`, checked to be within the subset."""
    try:
        schema = json.loads(Path(path).read_text())
    except OSError as error:
        raise SchemaError(f"{error.strerror}") from None
    except ValueError as error:
        raise SchemaError(f"not JSON: {error}") from None
    check(schema, "$")
    return schema  # type: ignore[no-any-return]


def check(schema: Any, where: str) -> None:
    """Raise SchemaError at the first keyword outside the subset."""
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema must be a JSON object")
    for keyword in schema:
        if keyword not in KNOWN and keyword not in IGNORED:
            raise SchemaError(f"{where}: {keyword!r} is not supported")
    types = _types(schema, where)
    if "format" in schema and schema["format"] not in FORMATS:
        known = ", ".join(FORMATS)
        raise SchemaError(f"{where}: format {schema['format']!r} is not one of {known}")
    if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
        raise SchemaError(f"{where}: enum must be a non-empty list")
    if "object" in types:
        for name, child in schema.get("properties", {}).items():
            check(child, f"{where}.properties.{name}")
    if "array" in types and "items" in schema:
        check(schema["items"], f"{where}.items")
    low, high = _bounds(schema)
    if ({"integer", "number"} & set(types)) and low > high:
        raise SchemaError(f"{where}: no number lies between its minimum and maximum")
    for least, most in (("minLength", "maxLength"), ("minItems", "maxItems")):
        if schema.get(least, 0) > schema.get(most, schema.get(least, 0)):
            raise SchemaError(f"{where}: {least} is above {most}")


def pool_from_file(path: str) -> tuple[bytes, ...]:
    """`pool(load_schema(path))`, made by a child interpreter (nullbroker.sources.value_pool), so
    that the caller keeps neither the generator nor what generating leaves behind;
    SchemaError with load_schema's reason for a schema it refuses."""
    return from_child(__name__, path)


def pool(schema: dict[str, Any], count: int = POOL_VALUES) -> tuple[bytes, ...]:
    """`count` values, value `k` generated from seed `k`, as compact JSON."""
    return tuple(generate(schema, index) for index in range(count))


def generate(schema: dict[str, Any], index: int) -> bytes:
    rng = random.Random(index)
    return json.dumps(_value(schema, rng), separators=(",", ":")).encode()


def _types(schema: dict[str, Any], where: str) -> list[str]:
    declared = schema.get("type")
    if declared is None:
        if "enum" in schema or "const" in schema:
            return []
        if "properties" in schema:
            return ["object"]
        raise SchemaError(f"{where}: give a type (or enum or const)")
    types = declared if isinstance(declared, list) else [declared]
    for name in types:
        if name not in TYPES:
            raise SchemaError(f"{where}: type {name!r} is not one of {', '.join(TYPES)}")
    return types


def _bounds(schema: dict[str, Any]) -> tuple[float, float]:
    low = schema.get("minimum", 0)
    high = schema.get("maximum", max(DEFAULT_MAX, low))
    if "exclusiveMinimum" in schema:
        low = max(low, schema["exclusiveMinimum"] + 1)
    if "exclusiveMaximum" in schema:
        high = min(high, schema["exclusiveMaximum"] - 1)
    return low, high


def _value(schema: dict[str, Any], rng: random.Random) -> Any:
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = rng.choice(_types(schema, "$"))
    if kind == "object":
        required = set(schema.get("required", ()))
        return {
            name: _value(child, rng)
            for name, child in schema.get("properties", {}).items()
            if name in required or rng.random() < 0.5
        }
    if kind == "array":
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 4)
        items = schema.get("items", {"type": "integer"})
        return [_value(items, rng) for _ in range(rng.randint(low, high))]
    if kind == "string":
        return _string(schema, rng)
    if kind == "integer":
        low, high = _bounds(schema)
        return rng.randint(int(low), int(high))
    if kind == "number":
        low, high = _bounds(schema)
        return round(rng.uniform(low, high), 4)
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    form = schema.get("format")
    if form in ("date-time", "date", "time"):
        moment = EPOCH + datetime.timedelta(seconds=rng.randrange(YEAR_S))
        if form == "date":
            return moment.date().isoformat()
        if form == "time":
            return moment.time().isoformat() + "Z"
        return moment.isoformat().replace("+00:00", "Z")
    if form == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    if form in ("email", "hostname", "uri"):
        host = f"{_letters(rng, 3, 10)}.example"
        if form == "email":
            return f"{_letters(rng, 3, 10)}@{host}"
        return host if form == "hostname" else f"https://{host}/{_letters(rng, 1, 12)}"
    if form == "ipv4":
        return ".".join(str(rng.randrange(256)) for _ in range(4))
    low = schema.get("minLength", 1)
    return _letters(rng, low, schema.get("maxLength", low + 15))


def _letters(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choices(LETTERS, k=rng.randint(low, high)))


if __name__ == "__main__":  # the child of pool_from_file: PATH in
    raise SystemExit(to_parent(lambda: pool(load_schema(sys.argv[1]))))
