"""Codec microbenchmark: what decoding and encoding each Kafka frame costs, ours against kio's.

Replays the fixed frame set of perf/frames.py. Each frame is first decoded and re-encoded
through our path and through kio alone, and both must give back its exact bytes. Then, per
frame:

- our path: what the broker does with such a frame, through whatever codec offers for it.
  A request is decoded by `codec.decode_request` (from a read-only view, as FrameReader hands
  frames out), with its header checks and whichever payload decoder codec picks for the API.
  A response frame is encoded by `codec.encode_response` from what a handler holds:
  codec.produce's hand-written encoder's bytes for Produce, codec.fetch_response's buffers
  (record batches untouched) for Fetch, a kio entity (written by its compiled writer) for
  the rest. The size prefix is included in our time only.
- kio's generic path on the same frame: kio's `entity_reader` / `entity_writer` for the
  header and the body, called directly.

Each is timed in `--repeats` runs of N calls (interleaved, so both see the same noise, with
the garbage collector off, after a warm-up); the median run gives ns/op. N is `--iterations`,
or by default as many calls as take about 20 ms. The ratio is kio's time over ours (above 1:
ours is faster). The summary gives the geometric mean of the ratios and, for each Produce
request timed with its response, (kio request decode + response encode) over ours.

What "ours" is, is said in one place: `our_operation()` (and `codec_roundtrip()`, which
writes back what it decoded). A new specialised path is added there.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import io
import itertools
import json
import math
import platform
import statistics
import sys
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

import codec
from codec.apis import request_schema, response_schema
from codec.fetch_response import FetchPartition, FetchTopic, fetch_response_parts
from codec.produce import PartitionResult, TopicResults, encode_produce_response_body
from perf.frames import Frame, fixed_set, kio_decode_response
from perf.kafka_tools import wrapped

SERVED = codec.KAFKA_4_RANGES
AUTO_RUN_SECONDS = 0.02
MAX_AUTO_ITERATIONS = 1_000_000
MAX_WARMUP_CALLS = 1_000
PRODUCE_TARGET = 5.0
WHOLE_SET_TARGET = 2.0

Operation = Callable[[], object]


class RoundTripError(AssertionError):
    """A frame did not come back byte for byte from decode and re-encode."""


def readonly(data: bytes) -> memoryview:
    """A frame as codec.FrameReader hands it out (and kio's native readers want it)."""
    return memoryview(data).toreadonly()


# -- our path ---------------------------------------------------------------------------------


def our_operation(frame: Frame) -> Operation:
    """The work timed for our path, as the broker does it: decode a request, or encode a
    response frame (size prefix, header and body) from what a handler holds.

    Requests go through codec.decode_request, whichever decoder it picks for the API.
    Responses go through codec.encode_response, as the broker calls it: Produce's body
    first through codec.produce's hand-written encoder, from the results the produce
    handler builds; Fetch's through codec.fetch_response, from the fetch handler's; other
    bodies as kio entities, through their compiled writers. Untimed preparation (reading
    the response, building the encoder's input) happens here. The size prefix is ours
    alone (kio's path below writes none): a cost the broker pays.
    """
    if frame.direction == "request":
        view = readonly(frame.data)
        return lambda: codec.decode_request(view, SERVED)
    body = kio_decode_response(frame)
    header = codec.RequestHeader(frame.api_key, frame.version, frame.correlation_id, None)
    version = frame.version
    encode_response = codec.encode_response
    if frame.api_key == codec.ApiKey.PRODUCE:
        topics = produce_results(body)
        return lambda: encode_response(header, encode_produce_response_body(version, topics))
    if frame.api_key == codec.ApiKey.FETCH:
        fetched, read_committed = fetch_results(body)
        return lambda: encode_response(
            header, fetch_response_parts(version, fetched, read_committed=read_committed)
        )
    return lambda: encode_response(header, body)


def produce_results(body: Any) -> list[TopicResults]:
    """The produce handler's results behind a ProduceResponse entity: the input of codec's
    hand-written encoder. Raises RoundTripError for what that encoder leaves out (record
    errors, log append times, leader hints, node endpoints), since a broker never sends them."""
    if body.throttle_time or getattr(body, "node_endpoints", ()):
        raise RoundTripError("throttle time or node endpoints: not a shape the broker answers")
    topics: list[TopicResults] = []
    for topic in body.responses:
        results = []
        for partition in topic.partition_responses:
            leader = getattr(partition, "current_leader", None)
            if (
                getattr(partition, "record_errors", ())
                or getattr(partition, "log_append_time", None) is not None
                or (leader is not None and (leader.leader_id, leader.leader_epoch) != (-1, -1))
            ):
                raise RoundTripError(f"partition {partition.index}: fields the broker never sets")
            results.append(
                PartitionResult(
                    partition.index,
                    int(partition.error_code),
                    partition.base_offset,
                    getattr(partition, "log_start_offset", -1),
                    getattr(partition, "error_message", None),
                )
            )
        name = getattr(topic, "name", None)
        topics.append((topic.topic_id if name is None else name, results))
    return topics


def fetch_results(body: Any) -> tuple[list[FetchTopic], bool]:
    """The fetch handler's results behind a FetchResponse entity, the input of codec's
    Fetch response encoder, and whether its aborted transactions are empty (read_committed)
    rather than null. Raises RoundTripError for what that encoder leaves out (aborted
    transactions, a preferred replica, leader hints, node endpoints, throttling)."""
    if body.throttle_time or getattr(body, "session_id", 0) or getattr(body, "node_endpoints", ()):
        raise RoundTripError("throttle time, session or node endpoints: not the broker's")
    topics: list[FetchTopic] = []
    aborted = set()
    for topic in body.responses:
        partitions = []
        for partition in topic.partitions:
            aborted.add(partition.aborted_transactions)
            tags = [field for field in dataclasses.fields(partition) if "tag" in field.metadata]
            if getattr(partition, "preferred_read_replica", -1) != -1 or any(
                getattr(partition, field.name) != field.default for field in tags
            ):
                raise RoundTripError(f"partition {partition.partition_index}: not the broker's")
            partitions.append(
                FetchPartition(
                    partition.partition_index,
                    int(partition.error_code),
                    partition.high_watermark,
                    partition.last_stable_offset,
                    getattr(partition, "log_start_offset", -1),
                    (partition.records,),
                )
            )
        name = getattr(topic, "topic", None)
        topics.append((topic.topic_id if name is None else name, partitions))
    if len(aborted) > 1 or not aborted <= {None, ()}:
        raise RoundTripError("aborted transactions: not the broker's")
    return topics, aborted == {()}


def codec_roundtrip(frame: Frame) -> bytes:
    """The frame's bytes after a trip through our path: a request decoded by codec and written
    back by kio (codec encodes no requests), a response read by kio (codec decodes none) and
    encoded by our path."""
    if frame.direction != "request":
        encoded = our_operation(frame)()
        assert isinstance(encoded, bytes)
        if int.from_bytes(encoded[:4], "big") != len(encoded) - 4:
            raise RoundTripError(f"{frame.file}: the size prefix does not match the frame")
        return encoded[4:]
    request = codec.decode_request(readonly(frame.data), SERVED)
    header = request.header
    # Bytes codec ignored after the body would vanish from the re-encoding anyway;
    # say so rather than report a bare mismatch.
    if request.trailing_bytes:
        raise RoundTripError(f"{frame.file}: {request.trailing_bytes} bytes after the body")
    schema = request_schema(header.api_key, header.api_version)
    return codec.encode_request(
        as_kio_entity(schema, request.body), header.correlation_id, header.client_id
    )


def as_kio_entity(kio_type: type[Any], value: Any) -> Any:
    """`value` as an instance of kio's `kio_type`, to be written by kio's writer.

    A hand-written decoder (codec.produce's) returns a view of the message with kio's
    attribute names, durations as `<name>_ms` integers and byte fields as memoryviews; kio's
    own entities pass through unchanged.
    """
    if isinstance(value, kio_type):
        return value
    hints = typing.get_type_hints(kio_type)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(kio_type):
        if hasattr(value, field.name):
            values[field.name] = _as_kio_value(hints[field.name], getattr(value, field.name))
        elif hasattr(value, f"{field.name}_ms"):
            values[field.name] = datetime.timedelta(milliseconds=getattr(value, f"{field.name}_ms"))
    return kio_type(**values)


def _as_kio_value(hint: Any, value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    nested = _entity_type(hint)
    if nested is None or value is None:
        return value
    if isinstance(value, tuple):
        return tuple(as_kio_entity(nested, item) for item in value)
    return as_kio_entity(nested, value)


def _entity_type(hint: Any) -> type[Any] | None:
    """The kio entity class inside a field's type: X in X, tuple[X, ...] or X | None."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    return next(filter(None, map(_entity_type, typing.get_args(hint))), None)


# -- kio's generic path -----------------------------------------------------------------------


def kio_operation(frame: Frame) -> Operation:
    """The same work through kio's readers and writers, called directly."""
    schema_header = request_schema(frame.api_key, frame.version).__header_schema__
    if frame.direction == "request":
        view = readonly(frame.data)
        read_header = entity_reader(schema_header)
        read_body = entity_reader(request_schema(frame.api_key, frame.version))

        def decode() -> object:
            header, header_size = read_header(view, 0)
            return header, read_body(view, header_size)

        return decode
    body = kio_decode_response(frame)
    header_type = ResponseHeaderV1 if frame.header_version else ResponseHeaderV0
    response_header = header_type(correlation_id=i32(frame.correlation_id))
    write_header = entity_writer(header_type)
    write_body = entity_writer(response_schema(frame.api_key, frame.version))

    def encode() -> bytes:
        buffer = io.BytesIO()
        write_header(buffer, response_header)
        write_body(buffer, body)
        return buffer.getvalue()

    return encode


def kio_roundtrip(frame: Frame) -> bytes:
    """The frame's bytes after a trip through kio alone."""
    if frame.direction == "request":
        schema = request_schema(frame.api_key, frame.version)
        view = readonly(frame.data)
        header, header_size = entity_reader(schema.__header_schema__)(view, 0)
        body, _ = entity_reader(schema)(view, header_size)
        buffer = io.BytesIO()
        entity_writer(schema.__header_schema__)(buffer, header)
        entity_writer(schema)(buffer, body)
        return buffer.getvalue()
    encoded = kio_operation(frame)()
    assert isinstance(encoded, bytes)
    return encoded


def check_roundtrip(frame: Frame) -> None:
    """Raise RoundTripError unless codec and kio each give back the frame's exact bytes."""
    for path, roundtrip in (("codec", codec_roundtrip), ("kio", kio_roundtrip)):
        try:
            encoded = roundtrip(frame)
        except RoundTripError:
            raise
        except Exception as error:
            raise RoundTripError(f"{frame.file}: {path} round trip failed: {error}") from error
        if encoded != frame.data:
            raise RoundTripError(
                f"{frame.file}: {path} round trip gave {len(encoded)} bytes that differ from "
                f"the frame's {len(frame.data)} (first difference at byte "
                f"{_first_difference(encoded, frame.data)})"
            )


def _first_difference(a: bytes, b: bytes) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


# -- timing -----------------------------------------------------------------------------------


def _timed_run(operation: Operation, calls: int) -> int:
    """Nanoseconds for `calls` calls, with the garbage collector off as timeit does."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in itertools.repeat(None, calls):
            operation()
        return time.perf_counter_ns() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def auto_iterations(operation: Operation) -> int:
    """Calls per run so a run lasts about AUTO_RUN_SECONDS (1, 2, 5, 10, 20, ... as timeit)."""
    for calls in (m * int(10**e) for e in range(7) for m in (1, 2, 5)):
        if calls >= MAX_AUTO_ITERATIONS or _timed_run(operation, calls) >= AUTO_RUN_SECONDS * 1e9:
            return min(calls, MAX_AUTO_ITERATIONS)
    return MAX_AUTO_ITERATIONS


@dataclass(frozen=True, slots=True)
class Timing:
    frame: Frame
    ns_per_op: float
    kio_ns_per_op: float
    iterations: int
    kio_iterations: int

    @property
    def ratio(self) -> float:
        return self.kio_ns_per_op / self.ns_per_op

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.frame.file,
            "client": self.frame.client,
            "api": self.frame.api,
            "version": self.frame.version,
            "direction": self.frame.direction,
            "ns_per_op": round(self.ns_per_op, 1),
            "kio_ns_per_op": round(self.kio_ns_per_op, 1),
        }


def measure(frame: Frame, iterations: int | None, repeats: int) -> Timing:
    """Median ns/op of our path and kio's on one frame, their runs interleaved."""
    ours, theirs = our_operation(frame), kio_operation(frame)
    our_calls = iterations or auto_iterations(ours)
    kio_calls = iterations or auto_iterations(theirs)
    for operation, calls in ((ours, our_calls), (theirs, kio_calls)):
        _timed_run(operation, min(calls, MAX_WARMUP_CALLS))
    our_runs: list[float] = []
    kio_runs: list[float] = []
    for _ in range(repeats):
        our_runs.append(_timed_run(ours, our_calls) / our_calls)
        kio_runs.append(_timed_run(theirs, kio_calls) / kio_calls)
    return Timing(
        frame, statistics.median(our_runs), statistics.median(kio_runs), our_calls, kio_calls
    )


# -- reporting --------------------------------------------------------------------------------


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values))


def produce_pair_ratios(timings: Sequence[Timing]) -> list[float]:
    """(kio request decode + response encode) / ours, for each Produce request timed with
    its response."""
    by_file = {timing.frame.file: timing for timing in timings}
    ratios = []
    for timing in timings:
        frame = timing.frame
        if frame.api_key != 0 or frame.direction != "request":
            continue
        response = by_file.get(frame.file.replace("-request.bin", "-response.bin"))
        if response is None:
            continue
        ours = timing.ns_per_op + response.ns_per_op
        theirs = timing.kio_ns_per_op + response.kio_ns_per_op
        ratios.append(theirs / ours)
    return ratios


def summary(timings: Sequence[Timing]) -> dict[str, Any]:
    pairs = produce_pair_ratios(timings)
    return {
        "frames": len(timings),
        "geomean_ratio": geometric_mean([timing.ratio for timing in timings]),
        "produce_pairs": len(pairs),
        "produce_ratio": geometric_mean(pairs) if pairs else None,
    }


def summary_line(numbers: dict[str, Any]) -> str:
    produce = (
        f"{numbers['produce_ratio']:.2f}x over {numbers['produce_pairs']} pairs"
        if numbers["produce_ratio"] is not None
        else "n/a (no Produce request with its response selected)"
    )
    return (
        f"summary: kio/ours geometric mean {numbers['geomean_ratio']:.2f}x over "
        f"{numbers['frames']} frames (target >= {WHOLE_SET_TARGET:g}x); "
        f"Produce request decode + response encode {produce} (target >= {PRODUCE_TARGET:g}x)"
    )


TABLE_HEADER = (
    f"{'api':<16} {'dir':<4} {'v':>2} {'client':<16} {'bytes':>7} "
    f"{'ours ns/op':>12} {'kio ns/op':>12} {'kio/ours':>8}  file"
)


def table_row(timing: Timing) -> str:
    frame = timing.frame
    direction = "req" if frame.direction == "request" else "resp"
    return (
        f"{frame.api:<16} {direction:<4} {frame.version:>2} {frame.client:<16} "
        f"{len(frame.data):>7} {timing.ns_per_op:>12,.0f} {timing.kio_ns_per_op:>12,.0f} "
        f"{timing.ratio:>7.2f}x  {frame.file}"
    )


# -- command line -----------------------------------------------------------------------------


def select(frames: Sequence[Frame], apis: Sequence[str]) -> list[Frame]:
    """The frames of the named APIs (case-insensitive), or all of them."""
    if not apis:
        return list(frames)
    known = {frame.api.lower(): frame.api for frame in frames}
    wanted = {name.strip().lower() for group in apis for name in group.split(",") if name.strip()}
    unknown = sorted(wanted - set(known))
    if unknown:
        have = ", ".join(sorted(known.values()))
        raise ValueError(f"unknown API {', '.join(unknown)}; the frame set has {have}")
    return [frame for frame in frames if frame.api.lower() in wanted]


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m perf.codec_bench",
        description=wrapped(
            "Decode and re-encode a fixed set of recorded Kafka frames through codec/ and "
            "through kio, assert both give back the exact bytes, and time each frame: ns/op "
            "of our path (request decode, response encode, as the broker does) and of kio's "
            "generic path, and their ratio."
        ),
        epilog=(
            "examples:\n"
            "  .venv/bin/python -m perf.codec_bench                # the whole set, ~1 min\n"
            "  .venv/bin/python -m perf.codec_bench --api Produce,Fetch --json out/codec.json\n"
            "  .venv/bin/python -m perf.codec_bench --list         # what is in the set, and why\n"
            "Numbers from a noisy machine: compare ratios from one run, not times across runs."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--iterations",
        type=positive_int,
        metavar="N",
        help="calls per timed run (default: enough for about 20 ms per run, per path)",
    )
    command.add_argument(
        "--repeats",
        type=positive_int,
        default=5,
        metavar="R",
        help="timed runs per path and frame; the median is reported (default 5)",
    )
    command.add_argument(
        "--api",
        action="append",
        default=[],
        metavar="NAME",
        help="only frames of this API (e.g. Produce; repeatable or comma-separated)",
    )
    command.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH"
    )
    command.add_argument(
        "--list", action="store_true", help="list the frame set (and why each is in it) and exit"
    )
    return command


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(argv)
    try:
        frames = select(fixed_set(), args.api)
    except ValueError as error:
        command.error(str(error))
    if args.list:
        for frame in frames:
            print(f"{frame.file:<52} {len(frame.data):>7} bytes  {frame.note}")
        return 0

    for frame in frames:
        check_roundtrip(frame)
    print(f"round trip: {len(frames)} frames byte-identical through codec and through kio")
    iterations = f"{args.iterations}" if args.iterations else "auto (~20 ms per run)"
    print(
        f"iterations {iterations}, median of {args.repeats} runs, Python "
        f"{platform.python_version()}, {platform.machine()}"
    )
    print(TABLE_HEADER)
    timings = []
    for frame in frames:
        timing = measure(frame, args.iterations, args.repeats)
        timings.append(timing)
        print(table_row(timing), flush=True)
    numbers = summary(timings)
    print(summary_line(numbers))

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "frames": [timing.as_json() for timing in timings],
            "summary": numbers,
            "settings": {
                "iterations": args.iterations,
                "repeats": args.repeats,
                "python": platform.python_version(),
                "machine": platform.machine(),
            },
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
