"""A push's metrics read: decompressed (none, gzip, snappy, lz4, zstd, as Kafka compresses
record batches), never past `telemetry.max.bytes` inflated, and decoded as OpenTelemetry's
`MetricsData` (OTLP, protobuf) with the opentelemetry-proto package.

Kafka 4.4.0 inflates every push with metrics before its plugins see it, and answers
INVALID_RECORD to one it cannot inflate or that inflates past the limit; a plugin that
cannot read it makes the same answer. `PayloadRefused` carries why, for the log."""

from __future__ import annotations

import functools
import sys
from typing import Any

from ...state.pushed_metrics import MAX_TEXT, Point
from ...stats import GAUGE, SUM, UP_DOWN_SUM

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_XERIAL = b"\x82SNAPPY\x00"
_LZ4_INDEPENDENT_BLOCKS = 0x20
"""The block independence bit of an LZ4 frame's FLG byte (its fifth)."""
"""Java's snappy stream (xerial framing) begins so: blocks follow a 16-byte header."""
MAX_POINT_ATTRIBUTES = 16
DELTA = 1
"""OTLP's AGGREGATION_TEMPORALITY_DELTA."""


class PayloadRefused(ValueError):
    """A push's metrics that cannot be read: the message says why."""


_buffers: dict[int, bytearray] = {}
"""The output buffer of each limit, made once: a push is inflated into it, so that a bomb
costs no more than the limit, and a push costs no fresh megabyte (one process inflates one
push at a time)."""


def inflated(compression: int, data: bytes, max_bytes: int) -> bytes:
    """`data` decompressed, refused when it does not decompress or would be larger than
    `max_bytes` (the output buffer is that size plus one, so a bomb costs no more)."""
    if compression == NONE:
        return data
    import cramjam

    if compression == LZ4 and len(data) > 4 and not data[4] & _LZ4_INDEPENDENT_BLOCKS:
        # Kafka's LZ4 stream reads each block on its own (checked live: 4.4.0 answers
        # INVALID_RECORD to a frame of linked blocks, cramjam's and lz4's default).
        raise PayloadRefused("an lz4 frame of linked blocks: Kafka reads independent blocks only")
    output = _buffers.get(max_bytes)
    if output is None:
        output = _buffers[max_bytes] = bytearray(max_bytes + 1)
    try:
        if compression == SNAPPY:
            size = _snappy_into(cramjam, data, output)
        else:
            size = getattr(cramjam, CODEC_NAMES[compression]).decompress_into(data, output)
    except (cramjam.DecompressionError, ValueError, IndexError) as error:
        raise PayloadRefused(_unreadable(compression, max_bytes, str(error))) from None
    if size > max_bytes:
        raise PayloadRefused(f"inflates past telemetry.max.bytes ({max_bytes})")
    return bytes(output[:size])


def _unreadable(compression: int, max_bytes: int, error: str) -> str:
    if "whole buffer" in error:  # cramjam's word for an output buffer filled
        return f"inflates past telemetry.max.bytes ({max_bytes})"
    return f"not {CODEC_NAMES[compression]} data: {error}"


def _snappy_into(cramjam: Any, data: bytes, output: bytearray) -> int:
    """Java's snappy (xerial blocks), or raw snappy, as Kafka's SnappyInputStream reads both."""
    if not data.startswith(_XERIAL):
        if cramjam.snappy.decompress_raw_len(data) > len(output) - 1:
            raise ValueError("failed to write whole buffer")
        return int(cramjam.snappy.decompress_raw_into(data, output))
    view = memoryview(output)
    position, written = 16, 0
    while position < len(data):
        if position + 4 > len(data):
            raise ValueError("a snappy block's size is cut short")
        size = int.from_bytes(data[position : position + 4], "big")
        block = data[position + 4 : position + 4 + size]
        if len(block) != size:
            raise ValueError("a snappy block is cut short")
        if written + cramjam.snappy.decompress_raw_len(block) > len(output) - 1:
            raise ValueError("failed to write whole buffer")
        written += int(cramjam.snappy.decompress_raw_into(block, view[written:]))
        position += 4 + size
    return written


def read_points(
    data: bytes, max_points: int = sys.maxsize
) -> tuple[dict[str, str], list[Point], int]:
    """The resource attributes and the data points of an OTLP `MetricsData`, at most
    `max_points` of them (no more can be kept: a megabyte of two-byte data points made
    Points would cost a hundred), and how many more points it holds, left unread.

    Read on the request path, once per client per interval, so read lean: parsed as one
    resource and one scope (`flattened_metrics_data`), each field read once, no call per
    metric, a plain tuple per point (upb wraps every message it hands out, and the Java
    clients put each metric in a ResourceMetrics of its own: perf/README.md, "Client
    telemetry")."""
    from google.protobuf.message import DecodeError

    try:
        metrics_data = flattened_metrics_data().FromString(data)
    except DecodeError as error:
        raise PayloadRefused(f"not OTLP MetricsData (protobuf): {error}") from None
    if data and not metrics_data.HasField("resource_metrics"):
        raise PayloadRefused("not OTLP MetricsData: no resource metrics in it")
    resource_metrics = metrics_data.resource_metrics
    # Every resource's attributes, in the order they came: a later one of a key wins.
    resource = _attributes(resource_metrics.resource.attributes)
    points: list[Point] = []
    append = points.append
    room = max_points
    unread = 0
    for metric in resource_metrics.scope_metrics.metrics:
        shape = metric.WhichOneof("data")
        if shape is None:
            continue
        body = getattr(metric, shape)
        data_points = body.data_points
        name = metric.name  # cut to MAX_TEXT where it is kept
        if shape == "gauge":
            kind, delta, width = GAUGE, False, 1
        elif shape == "sum":
            kind = SUM if body.is_monotonic else UP_DOWN_SUM
            delta = body.aggregation_temporality == DELTA
            width = 1
        else:  # a histogram, an exponential histogram or a summary: its count and sum
            kind, width = SUM, 2
            delta = shape != "summary" and body.aggregation_temporality == DELTA
        if width * len(data_points) > room:
            unread += width * len(data_points) - room
        # Never a slice: upb would wrap every data point of the field at once.
        for p in data_points:
            if not room:
                break
            attributes = p.attributes
            attributes = _point_attributes(attributes) if attributes else ()
            if width == 1:  # a gauge's or a sum's: a number
                # A point holds as_double or as_int: whichever is set, the other is 0.
                append((name, kind, attributes, p.as_double or float(p.as_int), delta))
                room -= 1
                continue
            append((name + ".count", kind, attributes, float(p.count), delta))
            room -= 1
            if room:
                append((name + ".sum", kind, attributes, float(p.sum), delta))
                room -= 1
    return resource, points, unread


@functools.cache
def flattened_metrics_data() -> Any:
    """opentelemetry-proto's `MetricsData` with its two lists of lists made single:
    `resource_metrics` and a ResourceMetrics' `scope_metrics` declared singular, in a pool of
    its own (the package's descriptors, copied, those two fields relabelled). Protobuf parses
    a singular message that occurs several times by merging the occurrences, so this one
    parses any MetricsData as one resource holding every resource's attributes and one scope
    holding every metric, in order: what `read_points` reads (it keeps neither the scopes
    nor which resource a metric came in). The Java clients send each metric in a
    ResourceMetrics of its own, 108 of them a producer's push: walking them as upb hands them
    out wraps five messages a metric, a third of the walk; parsed flat, one."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.metrics.v1 import metrics_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2

    pool = descriptor_pool.DescriptorPool()
    for module in (common_pb2, resource_pb2, metrics_pb2):
        proto = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        for message in proto.message_type:
            for field in message.field:
                if (message.name, field.name) in _MADE_SINGLE:
                    field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(METRICS_DATA))


METRICS_DATA = "opentelemetry.proto.metrics.v1.MetricsData"
_MADE_SINGLE = {("MetricsData", "resource_metrics"), ("ResourceMetrics", "scope_metrics")}


def _point_attributes(key_values: Any) -> tuple[tuple[str, str], ...]:
    if len(key_values) == 1:
        # A Java client's per-topic or per-node metric: one attribute, no dict or sort.
        return (_key_value(key_values[0]),)
    return tuple(sorted(_attributes(key_values).items()))[:MAX_POINT_ATTRIBUTES]


def _attributes(key_values: Any) -> dict[str, str]:
    return dict(map(_key_value, key_values))


def _key_value(key_value: Any) -> tuple[str, str]:
    """An attribute as text, each side cut to MAX_TEXT (any value kind: as Python prints it)."""
    value = key_value.value
    kind = value.WhichOneof("value")
    return key_value.key[:MAX_TEXT], "" if kind is None else str(getattr(value, kind))[:MAX_TEXT]
