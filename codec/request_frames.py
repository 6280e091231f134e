"""Request frames that kio's native reader builds whole: header and payload in one call.

kio reads any dataclass that carries its field metadata, and builds the instance natively
(without calling `__init__`). So the request header is such a dataclass, and each
(key, version) gets a frame class holding the header, the v2 header's tagged-field section
and the payload entity: one native call then reads what took a Python header parser, a
second kio call and two Python-built objects (about half of a small request's decoding).

No `from __future__ import annotations` here: kio reads the field types themselves.
"""

from dataclasses import dataclass, field, make_dataclass
from functools import cache
from typing import Any, ClassVar

from .apis import api_name


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The fields of a request header that the broker uses (kio reads it from the wire: a
    legacy client id string, in every header version, as in Kafka)."""

    __flexible__: ClassVar[bool] = False

    api_key: int = field(metadata={"kafka_type": "int16"})
    api_version: int = field(metadata={"kafka_type": "int16"})
    correlation_id: int = field(metadata={"kafka_type": "int32"})
    client_id: str | None = field(metadata={"kafka_type": "string"})

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)


_new_object = object.__new__
_set = object.__setattr__


def new_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> RequestHeader:
    """A RequestHeader without the frozen dataclass's `__init__`, which costs twice as much
    (it goes through object.__setattr__ too, after a layer of Python)."""
    header: RequestHeader = _new_object(RequestHeader)
    _set(header, "api_key", api_key)
    _set(header, "api_version", api_version)
    _set(header, "correlation_id", correlation_id)
    _set(header, "client_id", client_id)
    return header


@dataclass(frozen=True, slots=True)
class _HeaderTaggedFields:
    """The tagged-field section that ends a v2 request header. No tag is defined: kio
    refuses any, as its own RequestHeader v2 does."""

    __flexible__: ClassVar[bool] = True


class Request:
    """A decoded request: its header, its payload (a kio entity, or the view a fast decoder
    returns), its size on the wire and the bytes after the payload that the schema does not
    account for (ignored, as Kafka ignores them).

    Instances are of a class per (key, version) (see `frame_type`), built by kio's reader.
    """

    __slots__ = ("size", "trailing_bytes")

    header: RequestHeader
    body: Any
    size: int
    trailing_bytes: int


class _DecodedBody(Request):
    """A request whose payload a hand-written decoder reads: kio reads the header only."""

    __slots__ = ("body",)


@cache
def frame_type(header_version: int, body_type: type | None) -> type[Request]:
    """The Request class kio reads a whole frame into: header v1 or v2, then `body_type`'s
    payload (None: the header only, the payload set afterwards as `body`)."""
    fields: list[tuple[str, type, Any]] = [("header", RequestHeader, field())]
    if header_version >= 2:
        fields.append(("header_tagged_fields", _HeaderTaggedFields, field()))
    if body_type is not None:
        fields.append(("body", body_type, field()))
    name = f"{body_type.__name__ if body_type else 'Header'}Frame"
    base = Request if body_type is not None else _DecodedBody
    frame: type[Request] = make_dataclass(name, fields, bases=(base,), slots=True)
    # The frame itself has no tagged fields: the payload's are its own (it is a struct).
    frame.__flexible__ = False  # type: ignore[attr-defined]
    return frame
