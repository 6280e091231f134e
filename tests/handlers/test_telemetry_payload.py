"""A push's metrics read (KIP-714, nullbroker.handlers.telemetry.payload): every compression
type Kafka's clients use (Java's snappy in xerial's framing, librdkafka's raw snappy too)
decompressed within telemetry.max.bytes, a decompression bomb refused without allocating past
that limit, what is not OTLP refused, and each kind of OTLP point read as the broker keeps it
(a histogram or a summary as its count and its sum)."""

from __future__ import annotations

import resource
import struct
from collections.abc import Callable

import cramjam
import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData, ResourceMetrics, ScopeMetrics
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from nullbroker.handlers.telemetry.payload import PayloadRefused, inflated, read_points
from nullbroker.stats import GAUGE, SUM, UP_DOWN_SUM
from tests.support.otlp_payloads import (
    CODECS,
    GZIP,
    LZ4,
    LZ4_BLOCK,
    NONE,
    SNAPPY,
    XERIAL_HEADER,
    ZSTD,
    attributes,
    compressed,
    gauge,
    histogram,
    kafka_lz4_frame,
    many_gauges,
    metrics_data,
    summary,
    total,
    up_down,
)

LIMIT = 1 << 20
MIB = 1 << 20

PAYLOAD = metrics_data(
    [
        gauge("org.apache.kafka.producer.record.queue.time.avg", 2.5),
        total("org.apache.kafka.producer.record.send.total", 1000),
        gauge("org.apache.kafka.producer.node.request.latency.avg", 1.5, node_id="0"),
    ],
    {"client_rack": "r1"},
)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_each_compression_type_round_trips(codec: int) -> None:
    assert inflated(codec, compressed(codec, PAYLOAD), LIMIT) == PAYLOAD


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_a_payload_of_exactly_the_limit_inflates_and_one_byte_more_is_refused(codec: int) -> None:
    limit = 64 * 1024
    assert inflated(codec, compressed(codec, b"x" * limit), limit) == b"x" * limit
    with pytest.raises(PayloadRefused, match=r"inflates past telemetry\.max\.bytes \(65536\)"):
        inflated(codec, compressed(codec, b"x" * (limit + 1)), limit)


def test_javas_snappy_is_read_block_by_block_and_raw_snappy_too() -> None:
    data = many_gauges(10_000)  # about 140 KB: five of xerial's 32 KiB blocks
    framed = compressed(SNAPPY, data)
    assert framed.startswith(XERIAL_HEADER)
    assert inflated(SNAPPY, framed, LIMIT) == data
    assert inflated(SNAPPY, bytes(cramjam.snappy.compress_raw(data)), LIMIT) == data


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda framed: framed[:-10], "a snappy block is cut short"),
        (lambda framed: framed[:18], "a snappy block's size is cut short"),
    ],
    ids=["block", "size"],
)
def test_a_cut_snappy_stream_is_refused(damage: Callable[[bytes], bytes], why: str) -> None:
    with pytest.raises(PayloadRefused, match=why):
        inflated(SNAPPY, damage(compressed(SNAPPY, PAYLOAD)), LIMIT)


def bomb(codec: int, inflated_size: int) -> bytes:
    """Zeros of `inflated_size` bytes, compressed a MiB at a time (never held whole); LZ4 as
    Kafka's clients frame it, independent blocks, one block of zeros repeated."""
    if codec == LZ4:
        block = bytes(cramjam.lz4.compress_block(bytes(LZ4_BLOCK), store_size=False))
        blocks = (struct.pack("<I", len(block)) + block) * (inflated_size // LZ4_BLOCK)
        return kafka_lz4_frame(b"")[:-4] + blocks + struct.pack("<I", 0)
    compressor = {GZIP: cramjam.gzip.Compressor, ZSTD: cramjam.zstd.Compressor}[codec]()
    chunk = bytes(MIB)
    for _ in range(inflated_size // MIB):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize(
    ("codec", "size"),
    [(GZIP, 512 * MIB), (LZ4, 200 * MIB), (ZSTD, 512 * MIB)],
    ids=["gzip", "lz4", "zstd"],
)
def test_a_bomb_is_refused_without_allocating_past_the_limit(codec: int, size: int) -> None:
    # As large as each codec can make within the limit as sent (lz4 inflates 255-fold).
    payload = bomb(codec, size)
    assert len(payload) < LIMIT  # it passes the limit as sent
    inflated(codec, compressed(codec, PAYLOAD), LIMIT)  # the limit's buffer made
    before = peak_rss_bytes()
    with pytest.raises(PayloadRefused, match=r"inflates past telemetry\.max\.bytes"):
        inflated(codec, payload, LIMIT)
    # Inflated whole, it would have raised the peak by hundreds of MiB.
    assert peak_rss_bytes() - before <= 4 * LIMIT


def test_a_snappy_block_that_says_it_inflates_past_the_limit_is_refused_unread() -> None:
    block = bytes(cramjam.snappy.compress_raw(bytes(LIMIT + 1)))
    framed = XERIAL_HEADER + len(block).to_bytes(4, "big") + block
    with pytest.raises(PayloadRefused, match=r"inflates past telemetry\.max\.bytes"):
        inflated(SNAPPY, framed, LIMIT)
    with pytest.raises(PayloadRefused, match=r"inflates past telemetry\.max\.bytes"):
        inflated(SNAPPY, block, LIMIT)


@pytest.mark.parametrize(
    ("codec", "data", "why"),
    [
        (GZIP, b"\x1f\x8b not really gzip", "not gzip data"),
        (ZSTD, compressed(GZIP, PAYLOAD), "not zstd data"),
        (LZ4, compressed(ZSTD, PAYLOAD)[:20], "not lz4 data"),
        (SNAPPY, b"\x05\xff\xff\xff", "not snappy data"),
    ],
    ids=["gzip", "zstd", "lz4", "snappy"],
)
def test_data_that_is_not_what_its_compression_type_says_is_refused(
    codec: int, data: bytes, why: str
) -> None:
    with pytest.raises(PayloadRefused, match=why):
        inflated(codec, data, LIMIT)


def test_none_is_taken_as_sent() -> None:
    assert inflated(NONE, PAYLOAD, LIMIT) is PAYLOAD


@pytest.mark.parametrize(
    "data",
    [
        b'{"resourceMetrics": []}',
        PAYLOAD[: len(PAYLOAD) // 2],
        b"\x0a\xff\xff\xff\xff\x0f",
    ],
    ids=["json", "truncated", "length-past-the-end"],
)
def test_what_is_not_otlp_metrics_data_is_refused(data: bytes) -> None:
    with pytest.raises(PayloadRefused, match="not OTLP MetricsData"):
        read_points(data)


def test_protobuf_of_another_message_is_refused_for_holding_no_resource_metrics() -> None:
    # Field 7, a varint: well-formed protobuf, unknown to MetricsData.
    with pytest.raises(PayloadRefused, match="no resource metrics in it"):
        read_points(b"\x38\x01")


def test_an_empty_payload_has_no_points() -> None:
    assert read_points(b"") == ({}, [], 0)


def test_each_kind_of_point_is_read() -> None:
    data = metrics_data(
        [
            gauge("g", 2.5, node_id="1"),
            total("delta.total", 7),
            total("cumulative.total", 9, delta=False),
            up_down("buffer", -3.0),
            histogram("latency", 4, 10.0),
            summary("sizes", 3, 300.0),
        ],
        {"group_id": "readers", "client_rack": "r1"},
    )
    resource_attributes, points, unread = read_points(data)
    assert resource_attributes == {"group_id": "readers", "client_rack": "r1"}
    assert unread == 0
    assert points == [
        ("g", GAUGE, (("node_id", "1"),), 2.5, False),
        ("delta.total", SUM, (), 7.0, True),
        ("cumulative.total", SUM, (), 9.0, False),
        ("buffer", UP_DOWN_SUM, (), -3.0, False),
        ("latency.count", SUM, (), 4.0, True),
        ("latency.sum", SUM, (), 10.0, True),
        ("sizes.count", SUM, (), 3.0, False),
        ("sizes.sum", SUM, (), 300.0, False),
    ]


def test_several_resources_and_scopes_are_read_as_one_in_order() -> None:
    """The Java clients send each metric in a ResourceMetrics of its own (an empty resource);
    another client may send several scopes, or resources with attributes. Every metric is
    read, in the order sent; a resource attribute sent twice has its later value, as one
    mapping updated resource by resource would."""
    data = MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=Resource(attributes=attributes({"rack": "r1", "zone": "a"})),
                scope_metrics=[
                    ScopeMetrics(metrics=[gauge("first", 1.0)]),
                    ScopeMetrics(metrics=[total("second.total", 2), gauge("third", 3.0)]),
                ],
            ),
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[total("fourth.total", 4)])]),
            ResourceMetrics(
                resource=Resource(attributes=attributes({"zone": "b"})),
                scope_metrics=[ScopeMetrics(metrics=[gauge("fifth", 5.0, node_id="2")])],
            ),
        ]
    ).SerializeToString()
    resource_attributes, points, unread = read_points(data)
    assert resource_attributes == {"rack": "r1", "zone": "b"}
    assert (points, unread) == (
        [
            ("first", GAUGE, (), 1.0, False),
            ("second.total", SUM, (), 2.0, True),
            ("third", GAUGE, (), 3.0, False),
            ("fourth.total", SUM, (), 4.0, True),
            ("fifth", GAUGE, (("node_id", "2"),), 5.0, False),
        ],
        0,
    )
    # The package's own MetricsData is untouched by the flattened one read_points parses with.
    assert len(MetricsData.FromString(data).resource_metrics) == 3


def test_points_past_what_can_be_kept_are_counted_not_read() -> None:
    _, points, unread = read_points(many_gauges(10), max_points=4)
    assert [name for name, *_ in points] == ["g0", "g1", "g2", "g3"]
    assert unread == 6
    _, points, unread = read_points(
        metrics_data([histogram("h", 1, 1.0), histogram("i", 1, 1.0)]), max_points=3
    )
    assert [name for name, *_ in points] == ["h.count", "h.sum", "i.count"]
    assert unread == 1
