"""OTLP `MetricsData` payloads as clients push them (KIP-714), compressed as Kafka compresses
them, for the telemetry tests: small well-formed ones built with opentelemetry-proto, large
ones (tens of thousands of series, or a million) written as protobuf bytes directly, which
takes a fraction of a second where building a million messages would take many."""

from __future__ import annotations

import struct

import cramjam
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    AGGREGATION_TEMPORALITY_DELTA,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
    Summary,
    SummaryDataPoint,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
XERIAL_HEADER = b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
"""Java's snappy stream header (xerial's SnappyOutputStream: magic, version 1, compatible 1)."""
XERIAL_BLOCK = 32 * 1024
"""The uncompressed size of each block xerial writes."""


def attributes(pairs: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in pairs.items()]


def gauge(name: str, value: float, **point_attributes: str) -> Metric:
    point = NumberDataPoint(as_double=value, attributes=attributes(point_attributes))
    return Metric(name=name, gauge=Gauge(data_points=[point]))


def total(name: str, value: int, *, delta: bool = True, **point_attributes: str) -> Metric:
    """A monotonic sum (a Java `*.total`), delta or cumulative."""
    temporality = AGGREGATION_TEMPORALITY_DELTA if delta else AGGREGATION_TEMPORALITY_CUMULATIVE
    point = NumberDataPoint(as_int=value, attributes=attributes(point_attributes))
    return Metric(
        name=name,
        sum=Sum(data_points=[point], aggregation_temporality=temporality, is_monotonic=True),
    )


def up_down(name: str, value: float) -> Metric:
    point = NumberDataPoint(as_double=value)
    return Metric(
        name=name,
        sum=Sum(
            data_points=[point],
            aggregation_temporality=AGGREGATION_TEMPORALITY_CUMULATIVE,
            is_monotonic=False,
        ),
    )


def histogram(name: str, count: int, total_sum: float) -> Metric:
    point = HistogramDataPoint(count=count, sum=total_sum, bucket_counts=[count])
    return Metric(
        name=name,
        histogram=Histogram(
            data_points=[point], aggregation_temporality=AGGREGATION_TEMPORALITY_DELTA
        ),
    )


def summary(name: str, count: int, total_sum: float) -> Metric:
    return Metric(
        name=name, summary=Summary(data_points=[SummaryDataPoint(count=count, sum=total_sum)])
    )


def metrics_data(metrics: list[Metric], resource: dict[str, str] | None = None) -> bytes:
    """A `MetricsData` of one resource and one scope holding `metrics`, serialized."""
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=Resource(attributes=attributes(resource or {})),
                scope_metrics=[ScopeMetrics(metrics=metrics)],
            )
        ]
    ).SerializeToString()


def compressed(codec: int, data: bytes) -> bytes:
    """`data` as a client sends it with that compression type (ClientTelemetryUtils.compress:
    the record batch codecs): Java's snappy is xerial's framing of raw snappy blocks, which
    Kafka's SnappyInputStream reads; LZ4 a frame of independent blocks without checksums
    (KafkaLZ4BlockOutputStream; Kafka's reader refuses linked blocks)."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        blocks = [
            bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK]))
            for start in range(0, len(data), XERIAL_BLOCK)
        ]
        return XERIAL_HEADER + b"".join(len(b).to_bytes(4, "big") + b for b in blocks)
    if codec == LZ4:
        return kafka_lz4_frame(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"no compression type {codec}")


LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_FLAGS = bytes((0x60, 0x40))
"""Version 1, independent blocks, no checksums; blocks of at most 64 KiB."""
LZ4_BLOCK = 64 << 10


def kafka_lz4_frame(data: bytes) -> bytes:
    frame = LZ4_MAGIC + LZ4_FLAGS + bytes(((xxh32(LZ4_FLAGS) >> 8) & 0xFF,))
    for start in range(0, len(data), LZ4_BLOCK):
        block = bytes(cramjam.lz4.compress_block(data[start : start + LZ4_BLOCK], store_size=False))
        frame += struct.pack("<I", len(block)) + block
    return frame + struct.pack("<I", 0)


_PRIME1, _PRIME2, _PRIME3, _PRIME4, _PRIME5 = (
    2654435761,
    2246822519,
    3266489917,
    668265263,
    374761393,
)
_MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (an LZ4 frame descriptor's checksum)."""
    assert len(data) < 16
    value = (seed + _PRIME5 + len(data)) & _MASK
    position = 0
    while position + 4 <= len(data):
        (word,) = struct.unpack_from("<I", data, position)
        value = _rotl((value + word * _PRIME3) & _MASK, 17) * _PRIME4 & _MASK
        position += 4
    for byte in data[position:]:
        value = _rotl((value + byte * _PRIME5) & _MASK, 11) * _PRIME1 & _MASK
    value ^= value >> 15
    value = value * _PRIME2 & _MASK
    value ^= value >> 13
    value = value * _PRIME3 & _MASK
    return value ^ (value >> 16)


# Protobuf written directly, for payloads of very many series.


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_METRICS_DATA_RESOURCE_METRICS = 1
_RESOURCE_METRICS_SCOPE_METRICS = 2
_SCOPE_METRICS_METRICS = 2
_METRIC_NAME = 1
_METRIC_GAUGE = 5
_GAUGE_DATA_POINTS = 1


def many_gauges(count: int) -> bytes:
    """A `MetricsData` of `count` gauges, each its own metric `g<index>` with one empty
    data point (value 0): about 14 bytes a series, near the fewest a named one takes."""
    metrics = b"".join(
        _field(
            _SCOPE_METRICS_METRICS,
            _field(_METRIC_NAME, b"g%d" % index)
            + _field(_METRIC_GAUGE, _field(_GAUGE_DATA_POINTS, b"")),
        )
        for index in range(count)
    )
    return _field(_METRICS_DATA_RESOURCE_METRICS, _field(_RESOURCE_METRICS_SCOPE_METRICS, metrics))


def many_points(count: int) -> bytes:
    """A `MetricsData` of one gauge with `count` empty data points: two bytes a series,
    so that a megabyte holds half a million."""
    metric = _field(_METRIC_NAME, b"points") + _field(
        _METRIC_GAUGE, _field(_GAUGE_DATA_POINTS, b"") * count
    )
    return _field(
        _METRICS_DATA_RESOURCE_METRICS,
        _field(_RESOURCE_METRICS_SCOPE_METRICS, _field(_SCOPE_METRICS_METRICS, metric)),
    )
