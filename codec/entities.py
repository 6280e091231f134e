"""Building kio entities without caring which fields a given version has.

A handler describes a response once, with every field any version might carry; `make()`
keeps the ones the entity class of the negotiated version defines. Kafka's own generated
code does the same: fields absent from a version are simply not written.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from functools import cache
from types import ModuleType
from typing import Any

from kio.serial._introspect import is_optional

from .apis import request_schema, response_schema


@cache
def _field_names(entity_type: type) -> frozenset[str]:
    return frozenset(field.name for field in fields(entity_type))


def make(entity_type: type, /, **values: Any) -> Any:
    """An instance of `entity_type` from the values whose names it has as fields."""
    names = _field_names(entity_type)
    return entity_type(**{name: value for name, value in values.items() if name in names})


@cache
def is_nullable(entity_type: type, name: str) -> bool:
    """Whether the schema lets field `name` of `entity_type` be null (kio types it X | None)."""
    (field,) = (field for field in fields(entity_type) if field.name == name)
    return is_optional(field)


def has_field(entity_type: type, name: str) -> bool:
    """Whether instances of `entity_type` carry a field called `name`."""
    return name in _field_names(entity_type)


@cache
def response_module(key: int, version: int) -> ModuleType:
    """The kio module holding the response entity and its nested types for (key, version)."""
    return sys.modules[response_schema(key, version).__module__]


@cache
def request_module(key: int, version: int) -> ModuleType:
    """The kio module holding the request entity and its nested types for (key, version)."""
    return sys.modules[request_schema(key, version).__module__]
