"""perf/floor/floor.c, the floor perf.compare measures nullbroker against: it builds
(scripts/ensure-floor), serves real producers (librdkafka's, Kafka's Java perf test) with
every record acknowledged, answers only with the recorded answers and pre-encoded Produce
answers it is meant to, closes a connection that asks anything else, and says what it
served when it stops, or stops when its parent is gone."""

from __future__ import annotations

import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from kio.schema.errors import ErrorCode

from codec.apis import KAFKA_4_RANGES
from codec.messages import decode_request
from perf import java_perf
from perf.compare_brokers import FLOOR_SERVED, FRAMES_DIR, Floor, build_floor
from tests.support.kafka_tools import requires_kafka_tools
from tests.support.kafka_wire import decode_response, frame_header, recorded_frame, size_prefix
from tests.support.orphans import assert_exits_once_orphaned
from tests.support.vectors import frame_bytes

RECORDS = 2_000
RECORD_SIZE = 1024
TIMEOUT_S = 30.0
# The answers the floor replays, and the answer whose partitions it copies (see floor.c).
METADATA_ANSWER = "librdkafka-2.16/003-Metadata-v13-response.bin"
PRODUCE_ANSWER = "java-4.0/016-Produce-v10-response.bin"
TELEMETRY_KEYS = {71, 72}


@pytest.fixture(scope="module")
def binary() -> Path:
    built = build_floor()
    assert built is not None, "scripts/ensure-floor could not build perf/floor/floor.c"
    return built


@pytest.fixture
def floor(binary: Path, tmp_path: Path) -> Iterator[Floor]:
    server = Floor(tmp_path, binary)
    try:
        yield server
    finally:
        server.end()


def port_of(floor: Floor) -> int:
    return int(floor.bootstrap.rsplit(":", 1)[1])


def exchange(floor: Floor, *requests: bytes) -> list[bytes]:
    """Send the request frames on one connection; the answer frames read until it closes
    or goes quiet."""
    answers = []
    with socket.create_connection(("127.0.0.1", port_of(floor)), timeout=TIMEOUT_S) as conn:
        conn.sendall(b"".join(size_prefix(request) for request in requests))
        conn.shutdown(socket.SHUT_WR)  # the floor answers what it has, then reads the end
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    while received:
        (size,) = struct.unpack_from(">i", received)
        answers.append(received[4 : 4 + size])
        received = received[4 + size :]
    return answers


def served(floor: Floor) -> dict[str, int]:
    """What it says it served when stopped; it must have closed no connection for a request
    it has no answer for."""
    assert floor.end() == 0
    assert "no answer for" not in floor.stderr_text()
    counts = floor.served()
    assert counts is not None, floor.stdout_lines
    return counts


def test_a_librdkafka_producer_gets_every_record_acknowledged(floor: Floor) -> None:
    acknowledged: list[Message] = []
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        (failed if error else acknowledged).append(error or message)

    producer = Producer(
        {
            "bootstrap.servers": floor.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 16384,
        }
    )
    for _ in range(RECORDS):
        producer.produce(floor.topic, b"v" * RECORD_SIZE, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert not failed and len(acknowledged) == RECORDS
    # Its partitions, as its recorded Metadata lists them, each answered as asked.
    assert {message.partition() for message in acknowledged} <= set(range(floor.partitions))
    counts = served(floor)
    assert counts["produce"] > 0 and counts["requests"] > counts["produce"]
    assert counts["bytes_read"] > RECORDS * RECORD_SIZE


@requires_kafka_tools
def test_kafka_producer_perf_test_gets_every_record_acknowledged(floor: Floor) -> None:
    command = java_perf.producer_command(
        floor.bootstrap,
        floor.topic,
        RECORDS,
        RECORD_SIZE,
        ("acks=all", "enable.idempotence=true", "batch.size=16384", "linger.ms=5"),
    )
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    # It counts a record in its final line only once the broker acknowledged it.
    assert java_perf.parse_producer(run.stdout, RECORD_SIZE)["records"] == RECORDS
    assert "Exception" not in run.stdout + run.stderr
    assert served(floor)["bytes_read"] > RECORDS * RECORD_SIZE


def test_produce_is_answered_for_the_topic_and_partitions_asked_with_the_correlation_id(
    floor: Floor,
) -> None:
    # Java's snappy batches to four partitions of `perf-snappy`: a topic the floor never
    # named, so the answer's names can only come from the request.
    request = recorded_frame("java-4.0/012-Produce-v10")
    (answer,) = exchange(floor, request)
    correlation_id, response = decode_response(answer, 0, 10)
    assert correlation_id == frame_header(request)[2]
    (topic,) = response.responses
    assert topic.name == "perf-snappy"
    (asked,) = decode_request(request, KAFKA_4_RANGES).body.topic_data
    # The request's partitions, in its order.
    assert [p.index for p in topic.partition_responses] == [p.index for p in asked.partition_data]
    assert len(asked.partition_data) == 4
    _, recorded = decode_response(frame_bytes(PRODUCE_ANSWER), 0, 10)
    tail = recorded.responses[0].partition_responses[0]
    for partition in topic.partition_responses:
        assert partition.error_code == ErrorCode.none
        assert partition.base_offset == tail.base_offset  # the pre-encoded answer
    assert response.throttle_time.total_seconds() == 0 and response.node_endpoints == ()


def test_metadata_is_the_recorded_answer_with_its_own_port_and_the_correlation_id(
    floor: Floor,
) -> None:
    request = recorded_frame("librdkafka-2.16/003-Metadata-v13")
    (answer,) = exchange(floor, request)
    recorded = frame_bytes(METADATA_ANSWER)
    # Both end with the recorded stray byte (a quirk of the mock; the clients ignore it).
    _, ours = decode_response(answer[:-1], 3, 13)
    _, theirs = decode_response(recorded[:-1], 3, 13)
    assert answer[:4] == request[4:8]
    (broker,) = ours.brokers
    assert broker.port == port_of(floor)
    port_at = recorded.index(struct.pack(">i", theirs.brokers[0].port), 4)
    assert answer[4:port_at] == recorded[4:port_at]
    assert answer[port_at + 4 :] == recorded[port_at + 4 :]
    # The topic its ready line names, the one producers must send to.
    (topic,) = theirs.topics
    assert (floor.topic, floor.partitions) == (topic.name, len(topic.partitions))


def test_api_versions_is_the_recorded_answer_without_client_telemetry(floor: Floor) -> None:
    request = recorded_frame("librdkafka-2.16/002-ApiVersions-v0")
    newer = recorded_frame("java-4.0/001-ApiVersions-v4")
    answer, refusal = exchange(floor, request, newer)
    _, listed = decode_response(answer, 18, 0)
    _, recorded = decode_response(
        frame_bytes("librdkafka-2.16/002-ApiVersions-v0-response.bin"), 18, 0
    )
    keys = [api.api_key for api in recorded.api_keys]
    assert set(keys) >= TELEMETRY_KEYS
    assert listed.api_keys == tuple(
        api for api in recorded.api_keys if api.api_key not in TELEMETRY_KEYS
    )
    # A version past the recorded ones: Kafka's refusal (KIP-511), as recorded.
    assert refusal[:4] == newer[4:8]
    assert refusal[4:] == frame_bytes("java-4.0/001-ApiVersions-v4-response.bin")[4:]


def test_produce_with_acks_0_gets_no_answer(floor: Floor) -> None:
    silent = recorded_frame("java-4.0/017-Produce-v10")  # acks=0
    asked = recorded_frame("librdkafka-2.16/002-ApiVersions-v0")
    (answer,) = exchange(floor, silent, asked)
    assert answer[:4] == asked[4:8]
    assert served(floor)["produce"] == 1


def test_a_request_it_has_no_answer_for_closes_the_connection(floor: Floor) -> None:
    list_offsets = next(FRAMES_DIR.glob("librdkafka-2.16/*-ListOffsets-*-request.bin"))
    asked = recorded_frame("librdkafka-2.16/002-ApiVersions-v0")
    answers = exchange(floor, list_offsets.read_bytes(), asked)
    assert answers == []  # closed at the first: nothing after it is answered
    assert "no answer for API 2 " in floor.stderr_text()


def test_its_exit_line_counts_requests_and_bytes(floor: Floor) -> None:
    request = recorded_frame("librdkafka-2.16/002-ApiVersions-v0")
    exchange(floor, request, request)
    counts = served(floor)
    assert counts["requests"] == 2 and counts["produce"] == 0 and counts["connections"] == 1
    assert counts["bytes_read"] == 2 * (4 + len(request))
    assert FLOOR_SERVED.match(floor.stdout_lines[-1])


def test_it_exits_once_the_process_that_started_it_is_gone(binary: Path) -> None:
    assert_exits_once_orphaned([str(binary), str(FRAMES_DIR)], "the floor", parent_lives_s=0.5)
