"""The fixed schema of what pykafka reads (Spark's Kafka source schema) and the columns it
writes (Spark's KafkaWriter rules)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .errors import PyKafkaColumnError, option_error

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_FIELDS = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
)


def read_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType (+ headers)."""
    fields = [*_FIELDS, StructField("headers", HEADERS_TYPE)] if include_headers else _FIELDS
    return StructType(list(fields))


@cache
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects the reader's batches in, derived as Spark derives it
    (it checks batches against it, types and field names alike)."""
    return to_arrow_schema(read_schema(include_headers), timezone="UTC")


@dataclass(frozen=True)
class WriteColumns:
    """Positions of the columns a write uses in its input; None where a column is absent.
    Other columns are ignored, as Spark ignores them."""

    topic: int | None
    key: int | None
    value: int
    partition: int | None
    headers: int | None


def write_columns(schema: StructType, topic_option: str | None) -> WriteColumns:
    """Check the input of a write as Spark's KafkaWriter does: `value` (string or binary) is
    required; `key` string or binary; `topic` string unless the `topic` option is given (the
    option wins); `partition` int; `headers` array<struct<key string, value binary>>."""
    names = schema.fieldNames()
    types = {field.name: field.dataType for field in schema.fields}

    def position(name: str, allowed: tuple[type[DataType], ...], described: str) -> int | None:
        if name not in types:
            return None
        if not isinstance(types[name], allowed):
            raise PyKafkaColumnError(
                f"pykafka: column '{name}' must be {described}, not {types[name].simpleString()}"
            )
        return names.index(name)

    value = position("value", (StringType, BinaryType), "string or binary")
    if value is None:
        raise PyKafkaColumnError("pykafka: column 'value' is required (string or binary)")
    topic = position("topic", (StringType,), "string")
    if topic_option is None and topic is None:
        raise option_error("topic", "is required when the data has no 'topic' column (string)")
    headers = position("headers", (ArrayType,), "array<struct<key: string, value: binary>>")
    if headers is not None and not _is_headers_type(types["headers"]):
        raise PyKafkaColumnError(
            "pykafka: column 'headers' must be array<struct<key: string, value: binary>>, "
            f"not {types['headers'].simpleString()}"
        )
    return WriteColumns(
        topic=None if topic_option is not None else topic,
        key=position("key", (StringType, BinaryType), "string or binary"),
        value=value,
        partition=position("partition", (IntegerType,), "int"),
        headers=headers,
    )


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = [(field.name, type(field.dataType)) for field in data_type.elementType.fields]
    return fields == [("key", StringType), ("value", BinaryType)]
