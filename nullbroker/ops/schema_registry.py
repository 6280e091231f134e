"""The subset of Confluent's Schema Registry REST API that serializers and deserializers use,
in memory (`--schema-registry HOST:PORT`).

Held: the `format=avro` source topics' schemas under `<topic>-value` (with `wire=confluent`,
under the source's `schema-id`, the id its values carry), and whatever clients register.
Served, as Confluent's registry answers them (JSON, `application/vnd.schemaregistry.v1+json`):

- `GET /subjects`, `GET /subjects/{s}/versions`, `GET /subjects/{s}/versions/{v|latest}`
  (and `.../schema` for the schema alone), `GET /schemas/ids/{id}`,
  `GET /schemas/ids/{id}/versions`, `GET /config` (BACKWARD, never enforced);
- `POST /subjects/{s}/versions` registers (`{"schema": ..., "schemaType": ...}`; the same
  schema gets the same id in every subject, and the same version again in its subject);
- `POST /subjects/{s}` looks a schema up in a subject.

Errors carry Confluent's codes: 40401 subject not found, 40402 version not found, 40403
schema not found, 42201 invalid schema, 42202 invalid version. An Avro schema is checked
with fastavro when registered; JSON and Protobuf schemas are kept as given. Nothing is
persisted, nothing deleted, compatibility is not checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

if TYPE_CHECKING:
    from .http_endpoint import HttpRequest, HttpResponse

CONTENT_TYPE = b"application/vnd.schemaregistry.v1+json"
AVRO = "AVRO"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class RegistryError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def canonical(text: str) -> str:
    """A JSON schema's text without its whitespace, so that one schema written twice has one
    id; any other text (Protobuf) as it is."""
    try:
        return json.dumps(json.loads(text), separators=(",", ":"))
    except ValueError:
        return text


def source_schema_text(path: str) -> str:
    return canonical(Path(path).read_text(encoding="utf-8"))


class SchemaRegistry:
    def __init__(self) -> None:
        self._by_id: dict[int, tuple[str, str]] = {}
        """id -> (schema text, schema type)"""
        self._ids: dict[tuple[str, str], int] = {}
        self._subjects: dict[str, list[int]] = {}
        """subject -> the ids of its versions, version n at index n - 1"""

    @classmethod
    def for_sources(cls, sources: Iterable[Any]) -> SchemaRegistry:
        """A registry holding each format=avro source's schema under `<topic>-value`."""
        registry = cls()
        avro = [source for source in sources if source.format == "avro"]
        # The ids the sources' values carry first, then the others.
        avro.sort(key=lambda source: source.wire != "confluent")
        for source in avro:
            schema_id = source.schema_id if source.wire == "confluent" else None
            text = source_schema_text(source.schema)
            registry.register(f"{source.name}-value", text, AVRO, schema_id)
        return registry

    def register(
        self, subject: str, text: str, schema_type: str = AVRO, schema_id: int | None = None
    ) -> int:
        """The id of `text` (registered now if new) after adding it to `subject`."""
        text = canonical(text)
        key = (text, schema_type)
        known = self._ids.get(key)
        if known is None:
            if schema_id is None or schema_id in self._by_id:
                schema_id = max(self._by_id, default=0) + 1
            known = self._ids[key] = schema_id
            self._by_id[schema_id] = key
        versions = self._subjects.setdefault(subject, [])
        if known not in versions:
            versions.append(known)
        return known

    def handle(self, request: HttpRequest) -> HttpResponse:
        """Answer one REST request."""
        # Imported with the endpoint: a wire=confluent source reads its schema's text with
        # source_schema_text at start, with or without --schema-registry (h11, 0.45 MiB).
        from .http_endpoint import HttpResponse

        try:
            answer = self._route(request)
        except RegistryError as error:
            status, answer = error.status, {"error_code": error.code, "message": str(error)}
        else:
            status = 200
        return HttpResponse(status, json.dumps(answer).encode(), CONTENT_TYPE)

    def _route(self, request: HttpRequest) -> Any:
        parts = [unquote(part) for part in request.path.split("/") if part]
        method = request.method
        if method == b"GET":
            return self._get(parts)
        if method == b"POST":
            match parts:
                case ["subjects", subject, "versions"]:
                    return {"id": self._register(subject, request.body)}
                case ["subjects", subject]:
                    return self._lookup(subject, request.body)
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    def _get(self, parts: list[str]) -> Any:
        match parts:
            case []:
                return {}
            case ["subjects"]:
                return sorted(self._subjects)
            case ["config"] | ["config", _]:
                return {"compatibilityLevel": "BACKWARD"}
            case ["subjects", subject, "versions"]:
                return list(range(1, len(self._versions(subject)) + 1))
            case ["subjects", subject, "versions", version]:
                return self._version(subject, version)
            case ["subjects", subject, "versions", version, "schema"]:
                return json.loads(self._version(subject, version)["schema"])
            case ["schemas", "ids", schema_id]:
                text, schema_type = self._schema(schema_id)
                return _with_type({"schema": text}, schema_type)
            case ["schemas", "ids", schema_id, "versions"]:
                found = self._schema(schema_id)
                return [
                    {"subject": subject, "version": index + 1}
                    for subject, ids in sorted(self._subjects.items())
                    for index, known in enumerate(ids)
                    if self._by_id[known] == found
                ]
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    def _versions(self, subject: str) -> list[int]:
        versions = self._subjects.get(subject)
        if versions is None:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def _version(self, subject: str, version: str) -> dict[str, Any]:
        versions = self._versions(subject)
        if version in ("latest", "-1"):
            number = len(versions)
        else:
            try:
                number = int(version)
            except ValueError:
                raise RegistryError(
                    422, 42202, "The specified version is not a valid version id."
                ) from None
        if not 1 <= number <= len(versions):
            raise RegistryError(404, 40402, f"Version {version} not found.")
        return self._describe(subject, number, versions[number - 1])

    def _describe(self, subject: str, version: int, schema_id: int) -> dict[str, Any]:
        text, schema_type = self._by_id[schema_id]
        answer = {"subject": subject, "version": version, "id": schema_id, "schema": text}
        return _with_type(answer, schema_type)

    def _schema(self, schema_id: str) -> tuple[str, str]:
        try:
            return self._by_id[int(schema_id)]
        except (ValueError, KeyError):
            raise RegistryError(404, 40403, "Schema not found") from None

    def _register(self, subject: str, body: bytes) -> int:
        text, schema_type = _parse_body(body)
        return self.register(subject, text, schema_type)

    def _lookup(self, subject: str, body: bytes) -> dict[str, Any]:
        text, schema_type = _parse_body(body)
        versions = self._versions(subject)
        known = self._ids.get((canonical(text), schema_type))
        if known is None or known not in versions:
            raise RegistryError(404, 40403, "Schema not found")
        return self._describe(subject, versions.index(known) + 1, known)


def _parse_body(body: bytes) -> tuple[str, str]:
    """The schema text and type of a registration or lookup; RegistryError if invalid."""
    try:
        request = json.loads(body)
        text = request["schema"]
        schema_type = request.get("schemaType") or AVRO
    except (ValueError, KeyError, TypeError, AttributeError):
        raise RegistryError(422, 42201, 'Invalid schema: expected {"schema": "..."}') from None
    if not isinstance(text, str) or schema_type not in SCHEMA_TYPES:
        raise RegistryError(422, 42201, f"Invalid schema of type {schema_type!r}")
    if schema_type == AVRO:
        import fastavro

        try:
            fastavro.parse_schema(json.loads(text))
        except Exception as error:  # fastavro raises several kinds for a bad schema
            raise RegistryError(422, 42201, f"Invalid schema: {error}") from None
    return text, schema_type


def _with_type(answer: dict[str, Any], schema_type: str) -> dict[str, Any]:
    # Confluent's registry leaves schemaType out for Avro, the default.
    if schema_type != AVRO:
        answer["schemaType"] = schema_type
    return answer
