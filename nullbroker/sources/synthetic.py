"""Synthetic source topics: records that exist without ever having been stored.

A source topic's partitions hold `records` records each from the broker's start, or grow
by `rate` records/s (capped by `records` when both are given). Every record's key, value,
headers and timestamp follow from its offset, so a consumer can check what it read:

- records are laid out in batches of `batch_records` aligned at multiples of it; the
  record at offset `o` has index `i = o % batch_records` within its batch;
- its value is `size` bytes of `value_pattern(i)`, its key `key_size` bytes of the
  decimal `i` (no key when 0), its headers `h0..h{H-1}` with value `str(i)`;
- its timestamp is `start_ms + floor(batch_base * 1000 / rate) + floor(i * 1000 / rate)`
  (1 ms per record without a rate), so timestamps rise with offsets.

With `payload-file=PATH` the values are instead the file's records (its lines, or what
`payload-delimiter` separates), cycled, as kafka-producer-perf-test's --payload-file takes
them: the record at offset `o` has value `payloads[o % n]` of the file's `n`, batches holding
as many records as fit 16 KiB at the payloads' mean size. The pool of distinct batches that
makes is kept to PAYLOAD_POOL_BATCHES: past it, values follow batch number modulo the pool
(`payloads[((o // batch_records) % pool * batch_records + i) % n]`), so batches repeat.

With `format=json,schema=PATH` the values are JSON documents generated from the schema
(nullbroker.sources.json_values: a pool of POOL_VALUES of them), served as a payload file's records;
with `format=avro,schema=PATH.avsc` Avro binary values (nullbroker.sources.avro_values), with
`wire=confluent` behind Confluent's magic byte and `schema-id`. With `format=nexmark` the
values are the Nexmark benchmark's events, partition p's offset o holding event o*P+p, in
batches of nexmark.BATCH_EVENTS (nullbroker.sources.nexmark says what repeats).

Every batch of one shape and pool slot is the same template re-based: see
codec.batch_template.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from codec.batch_template import COMPRESSION_CODES, BatchTemplate, TemplateRecord, build_template
from codec.framing import Buffer

from ..topic_names import invalid_name_reason

if TYPE_CHECKING:
    from .nexmark import NexmarkLayout

# About kafka-producer-perf-test's default batch.size: large enough to amortise per-batch
# cost, small enough that one partition_max_bytes (1 MiB by default) holds many.
TARGET_BATCH_BYTES = 16 * 1024
MAX_BATCH_RECORDS = 1000
NOMINAL_RATE = 1000.0  # records/s for timestamps of a topic that has no rate
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
VALUE_FORMATS = ("letters", "json", "avro", "nexmark")
SCHEMA_FORMATS = ("json", "avro")
WIRES = ("plain", "confluent")
PAYLOAD_POOL_BATCHES = 256
"""Distinct batches a payload file's topic keeps at most: about 4 MiB of 16 KiB templates."""
RUNS_KEPT = 8
"""Runs of rendered whole batches a shape keeps for the next read at the same offset
(RecordShape.read): a few KiB of headers each."""


class SourceSpecError(ValueError):
    """A --source or [[source]] definition that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """How a synthetic source topic looks. Field names are the --source option names."""

    name: str
    partitions: int = 1
    records: int | None = None
    size: int = 100
    key_size: int = 0
    rate: float | None = None
    compression: str = "none"
    headers: int = 0
    payload_file: str | None = None
    payload_delimiter: str = "\\n"
    format: str = "letters"
    schema: str | None = None
    wire: str = "plain"
    schema_id: int = 1
    nexmark_rate: float | None = None
    """Events/s of a Nexmark topic's event time; by default its rate x partitions, or
    Beam's 10,000."""
    values: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    """What payloads() returns, read or generated once, when the spec is made."""

    def __post_init__(self) -> None:
        where = f"source {self.name!r}"
        reason = invalid_name_reason(self.name)
        if reason:
            raise SourceSpecError(f"{where}: {reason}")
        if self.partitions < 1:
            raise SourceSpecError(f"{where}: partitions must be at least 1")
        if self.records is None and self.rate is None:
            raise SourceSpecError(f"{where}: give records=N, rate=R, or both")
        if self.records is not None and self.records < 0:
            raise SourceSpecError(f"{where}: records must not be negative")
        if self.rate is not None and self.rate <= 0:
            raise SourceSpecError(f"{where}: rate must be positive")
        if self.size < 0 or self.key_size < 0 or self.headers < 0:
            raise SourceSpecError(f"{where}: size, key-size and headers must not be negative")
        if self.compression not in COMPRESSION_CODES:
            known = ", ".join(COMPRESSION_CODES)
            raise SourceSpecError(f"{where}: compression must be one of {known}")
        if self.format not in VALUE_FORMATS:
            raise SourceSpecError(f"{where}: format must be one of {', '.join(VALUE_FORMATS)}")
        if self.format == "json" and self.schema is None:
            raise SourceSpecError(f"{where}: format=json and schema=PATH go together")
        if self.format == "avro" and self.schema is None:
            raise SourceSpecError(f"{where}: format=avro and schema=PATH.avsc go together")
        if self.format not in SCHEMA_FORMATS and self.schema is not None:
            raise SourceSpecError(f"{where}: schema=PATH goes with format=json or format=avro")
        if self.format in SCHEMA_FORMATS and self.payload_file is not None:
            raise SourceSpecError(f"{where}: give payload-file or format={self.format}, not both")
        if self.wire not in WIRES:
            raise SourceSpecError(f"{where}: wire must be one of {', '.join(WIRES)}")
        if self.wire != "plain" and self.format != "avro":
            raise SourceSpecError(f"{where}: wire=confluent is for format=avro")
        if self.format == "nexmark":
            self._check_nexmark(where)
        elif self.nexmark_rate is not None:
            raise SourceSpecError(f"{where}: nexmark-rate is for format=nexmark")
        if not 0 <= self.schema_id < 2**31:
            raise SourceSpecError(f"{where}: schema-id must be from 0 to 2147483647")
        # A missing, unreadable, empty or unsupported file stops the broker at start.
        object.__setattr__(self, "values", self._read_values())

    def _check_nexmark(self, where: str) -> None:
        if self.schema is not None or self.payload_file is not None:
            raise SourceSpecError(
                f"{where}: format=nexmark makes its own values: no schema or payload-file"
            )
        if self.compression != "none":
            # Each batch's ids and times are rewritten as it is served (nullbroker.sources.nexmark).
            raise SourceSpecError(f"{where}: format=nexmark is served uncompressed")
        if self.nexmark_rate is not None and not 0 < self.nexmark_rate <= 1_000_000:
            raise SourceSpecError(f"{where}: nexmark-rate must be from above 0 to 1000000 events/s")

    def nexmark_events_per_second(self) -> float:
        """The event-time rate of a Nexmark topic: events/s over all its partitions."""
        from .nexmark import DEFAULT_RATE

        if self.nexmark_rate is not None:
            return self.nexmark_rate
        return self.rate * self.partitions if self.rate is not None else DEFAULT_RATE

    def nexmark_layout(self) -> NexmarkLayout | None:
        """Where a Nexmark topic's events are; None for the other formats."""
        if self.format != "nexmark":
            return None
        from .nexmark import NexmarkLayout  # imported by the brokers that serve one

        events = self.records * self.partitions if self.records is not None else None
        return NexmarkLayout(self.partitions, self.nexmark_events_per_second(), events)

    def payloads(self) -> tuple[bytes, ...]:
        """The values other than letters: a payload file's records, or the pool of values
        generated from a JSON Schema; () for letters."""
        return self.values

    def _read_values(self) -> tuple[bytes, ...]:
        try:
            if self.schema is not None:
                return schema_values(self.schema, self.format, self.wire, self.schema_id)
            if self.payload_file is not None:
                return load_payloads(self.payload_file, self.payload_delimiter)
        except SourceSpecError as error:
            raise SourceSpecError(f"source {self.name!r}: {error}") from None
        return ()

    @classmethod
    def parse(cls, text: str) -> SourceSpec:
        """`NAME:partitions=P,records=N,size=S[,key-size=K][,rate=R][,compression=C][,headers=H]
        [,payload-file=PATH][,payload-delimiter=D][,format=json,schema=PATH]
        [,format=avro,schema=PATH.avsc[,wire=confluent[,schema-id=N]]]
        [,format=nexmark[,nexmark-rate=E]]`."""
        name, _, options = text.partition(":")
        if not name:
            raise SourceSpecError(f"source {text!r}: expected NAME:option=value,...")
        values: dict[str, str] = {}
        for option in filter(None, options.split(",")):
            key, sep, value = option.partition("=")
            if not sep:
                raise SourceSpecError(f"source {name!r}: {option!r} is not option=value")
            values[key.strip()] = value.strip()
        return cls.from_mapping(name, values)

    @classmethod
    def from_mapping(cls, name: str, values: dict[str, object]) -> SourceSpec:
        """A spec from option names (dashes or underscores) to values, as TOML gives them."""
        converters: dict[str, Callable[[object], object]] = {
            "partitions": int,
            "records": int,
            "size": int,
            "key_size": int,
            "rate": float,
            "compression": str,
            "headers": int,
            "payload_file": str,
            "payload_delimiter": str,
            "format": str,
            "schema": str,
            "wire": str,
            "schema_id": int,
            "nexmark_rate": float,
        }
        settings: dict[str, object] = {}
        for raw_key, value in values.items():
            key = raw_key.replace("-", "_")
            if key == "name":
                continue
            if key not in converters:
                known = ", ".join(k.replace("_", "-") for k in converters)
                raise SourceSpecError(
                    f"source {name!r}: unknown option {raw_key!r} (known: {known})"
                )
            try:
                settings[key] = converters[key](value)
            except (TypeError, ValueError):
                raise SourceSpecError(
                    f"source {name!r}: {raw_key}={value!r} is not valid"
                ) from None
        return cls(name=name, **settings)  # type: ignore[arg-type]


def load_payloads(path: str, delimiter: str) -> tuple[bytes, ...]:
    """The records of a payload file: split at `delimiter` (`\\n` and `\\t` written as such
    in a --source flag are a newline and a tab), empty ones dropped, as
    kafka-producer-perf-test reads its --payload-file."""
    separator = delimiter.replace("\\n", "\n").replace("\\t", "\t").encode()
    where = f"payload-file {path!r}"
    if not separator:
        raise SourceSpecError("payload-delimiter must not be empty")
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SourceSpecError(f"{where}: {error.strerror}") from None
    payloads = tuple(part for part in data.split(separator) if part)
    if not payloads:
        raise SourceSpecError(f"{where}: holds no records")
    return payloads


def schema_values(
    path: str, value_format: str = "json", wire: str = "plain", schema_id: int = 1
) -> tuple[bytes, ...]:
    """The pool of values generated from the schema in `path`: JSON documents from a JSON
    Schema, or Avro binary from an Avro schema (with wire=confluent, each behind
    Confluent's magic byte and `schema_id`)."""
    from .value_pool import SchemaError, from_child

    try:
        if value_format == "avro":
            from . import avro_values

            prefix = avro_values.confluent_prefix(schema_id) if wire == "confluent" else b""
            return avro_values.pool_from_file(path, prefix)
        # json_values.pool_from_file's call, made without importing json_values (and json
        # with it) into the broker.
        return from_child("nullbroker.sources.json_values", path)
    except SchemaError as error:
        raise SourceSpecError(f"schema {path!r}: {error}") from None


def value_pattern(index: int, size: int) -> bytes:
    """The value of the record at index `index` of its batch: `size` letters from A+index."""
    start = index % len(ALPHABET)
    repeated = (ALPHABET[start:] + ALPHABET[:start]) * (size // len(ALPHABET) + 1)
    return repeated[:size]


def key_pattern(index: int, key_size: int) -> bytes | None:
    """The key of the record at index `index` of its batch: its decimal index, zero-padded."""
    if key_size == 0:
        return None
    return str(index).zfill(key_size)[-key_size:].encode()


@dataclass(slots=True)
class RecordShape:
    """The look of a topic's synthetic records and the batch templates that carry them."""

    size: int
    key_size: int = 0
    headers: int = 0
    compression: str = "none"
    rate: float | None = None
    compress: Callable[[bytes], bytes] | None = None
    payloads: tuple[bytes, ...] = ()
    """The values of a payload file's topic, cycled by offset; () for value_pattern's."""
    nexmark: NexmarkLayout | None = None
    """A Nexmark topic's events, which it makes batch by batch, in place of values."""
    batch_records: int = field(init=False)
    pool: int = field(init=False)
    """Distinct batch contents: 1 for value_pattern's, up to PAYLOAD_POOL_BATCHES."""
    # Keyed by slot * (batch_records + 1) + count: an int, as this is looked up per batch.
    _templates: dict[int, BatchTemplate] = field(init=False, default_factory=dict)
    # The whole batches read last, by base offset: (start_ms, headers and records).
    _runs: dict[int, tuple[int, tuple[Buffer, ...]]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        value_bytes = self.size
        if self.payloads:
            value_bytes = sum(map(len, self.payloads)) // len(self.payloads)
        record_bytes = value_bytes + self.key_size + 8 * self.headers + 16
        self.batch_records = max(1, min(MAX_BATCH_RECORDS, TARGET_BATCH_BYTES // record_bytes))
        if self.nexmark is not None:
            self.batch_records, self.pool = self.nexmark.batch_events, self.nexmark.slots
            return
        count = len(self.payloads)
        cycle = count // math.gcd(count, self.batch_records) if count else 1
        self.pool = min(cycle, PAYLOAD_POOL_BATCHES)

    def _ms_for(self, records: int) -> int:
        """floor(records * 1000 / rate): dividing last keeps whole-number rates exact, where
        multiplying by a rounded 1000 / rate is a millisecond short at some offsets."""
        return math.floor(records * 1000 / (self.rate or NOMINAL_RATE))

    def timestamp_ms(self, start_ms: int, offset: int) -> int:
        """The timestamp of the record at `offset`, for a topic that started at `start_ms`."""
        base = offset - offset % self.batch_records
        index = offset - base
        return start_ms + self._ms_for(base) + self._ms_for(index)

    def offset_for_timestamp(self, start_ms: int, timestamp_ms: int, low: int, high: int) -> int:
        """The first offset in [low, high) whose timestamp is at least `timestamp_ms`, or
        `high` if there is none. Timestamps never fall as offsets rise: a binary search."""
        while low < high:
            middle = (low + high) // 2
            if self.timestamp_ms(start_ms, middle) < timestamp_ms:
                low = middle + 1
            else:
                high = middle
        return low

    def batch_base(self, offset: int) -> int:
        """The base offset of the batch holding `offset`."""
        return offset - offset % self.batch_records

    def template(self, count: int, slot: int = 0) -> BatchTemplate:
        """The template of a batch of the first `count` records of the layout, in pool
        slot `slot` (the batch number modulo the pool)."""
        whole = self.batch_records
        key = slot * (whole + 1) + count
        template = self._templates.get(key)
        if template is None:
            if count < whole and len(self._templates) >= self.pool + whole:
                # Batches cut by a growing log end come in every length: with a pool of
                # slots, keeping them all would take pool x batch_records templates. Kept:
                # the whole batches of every slot.
                self._templates = {
                    kept_key: kept
                    for kept_key, kept in self._templates.items()
                    if kept_key % (whole + 1) == whole
                }
            values = [self.value(index, slot) for index in range(count)]
            template = self._templates[key] = build_template(
                self.records_around(values), self.compression, self.compress
            )
            if count == whole and self.pool == 1 and self.nexmark is None:
                template.table_crc()  # the template read() renders every whole batch from
        return template

    def value(self, index: int, slot: int = 0) -> bytes:
        """The value of record `index` of a batch in pool slot `slot`."""
        if not self.payloads:
            return value_pattern(index, self.size)
        return self.payloads[(slot * self.batch_records + index) % len(self.payloads)]

    def records_around(self, values: Sequence[bytes]) -> list[TemplateRecord]:
        """A batch's records holding `values`, with the keys, headers and timestamps of
        their indexes."""
        return [
            TemplateRecord(
                key=key_pattern(index, self.key_size),
                value=value,
                headers=tuple((f"h{h}", str(index).encode()) for h in range(self.headers)),
                timestamp_delta_ms=self._ms_for(index),
            )
            for index, value in enumerate(values)
        ]

    def batch_part(self, base: int, stop: int, start_ms: int) -> tuple[bytearray, Buffer]:
        """A batch of the records from `base` to `stop`, within one aligned batch but not
        necessarily from its start (a produced topic's batches cut where transactions
        begin and end): its header and records, as `batch` gives them."""
        whole = self.batch_records
        slot = base // whole % self.pool if self.pool > 1 else 0
        return self.template(stop - base, slot).render_parts(
            base, self.timestamp_ms(start_ms, base)
        )

    def batch(
        self, base: int, end: int, start_ms: int, partition: int = 0
    ) -> tuple[Buffer, Buffer]:
        """The batch starting at aligned offset `base` of `partition`, cut at log end `end`:
        its header and its records, to be sent one after the other (see
        BatchTemplate.render_parts)."""
        whole = self.batch_records
        count = min(whole, end - base)
        if self.nexmark is not None:
            timestamp = self.timestamp_ms(start_ms, base)
            return self.nexmark.render(
                self.records_around, partition, base, count, start_ms, timestamp
            )
        # template()'s key, computed here: this runs for every batch a Fetch serves.
        slot = base // whole % self.pool if self.pool > 1 else 0
        template = self._templates.get(slot * (whole + 1) + count)
        if template is None:
            template = self.template(count, slot)
        return template.header(base, self.timestamp_ms(start_ms, base)), template.records

    def read(
        self, offset: int, end: int, limit: int, first: bool, start_ms: int, partition: int = 0
    ) -> tuple[Sequence[Buffer], int, int]:
        """Whole batches of `partition` from the one holding `offset`, cut at log end `end`,
        within `limit` bytes (each as its header and its template's records, never
        copied); the number of records in them at or after `offset`, and their size.

        As in Kafka (KIP-74), the first batch of a response (`first`) is sent even if it
        exceeds the limit, so a consumer always progresses.
        """
        if offset >= end:
            # No batch holds the log end. The one before it holds only records the consumer
            # has: sending it would answer at once, and an idle consumer would spin the broker.
            return (), 0, 0
        whole = self.batch_records
        base = offset - offset % whole
        parts: Sequence[Buffer] = ()
        size = 0
        if self.pool == 1 and self.nexmark is None:
            # Whole batches of one template are all one size: how many fit is arithmetic.
            template = self._templates.get(whole) or self.template(whole)
            batch_size = len(template)
            fit = max(limit // batch_size, 1 if first else 0)
            whole_batches = (end - base) // whole
            wanted = min(whole_batches, fit)
            if wanted:
                parts = self._whole_batches(template, base, wanted, start_ms)
                size = wanted * batch_size
                base += wanted * whole
            if wanted < whole_batches:  # the next batch is whole too: it does not fit
                return parts, (base - offset if parts else 0), size
        rest: list[Buffer] = []
        while base < end:  # the batch the log end cuts, or those of a pool's templates
            header, records = self.batch(base, end, start_ms, partition)
            batch_size = len(header) + len(records)
            if size + batch_size > limit and (parts or rest or not first):
                break
            rest += (header, records)
            size += batch_size
            base += whole
        if rest:
            parts = (*parts, *rest)
        return parts, (min(base, end) - offset if parts else 0), size

    def _whole_batches(
        self, template: BatchTemplate, base: int, count: int, start_ms: int
    ) -> tuple[Buffer, ...]:
        """`count` whole batches from `base`, as header and records each. A run is kept for
        the next read from `base`: the partitions of a source topic hold the same batches
        at the same offsets, and a consumer reads them side by side."""
        runs = self._runs
        run = runs.get(base)
        if run is not None and run[0] == start_ms and len(run[1]) >= 2 * count:
            return run[1][: 2 * count]
        records = template.records
        render = template.header
        rate = self.rate or NOMINAL_RATE
        parts: list[Buffer] = []
        whole = self.batch_records
        for batch_base in range(base, base + count * whole, whole):
            # start_ms + _ms_for(batch_base): timestamp_ms() of a batch's first record.
            parts += (render(batch_base, start_ms + math.floor(batch_base * 1000 / rate)), records)
        if len(runs) >= RUNS_KEPT:
            del runs[next(iter(runs))]
        kept = runs[base] = (start_ms, tuple(parts))
        return kept[1]


@cache
def compressor(compression: str) -> Callable[[bytes], bytes] | None:
    """The compress function for a codec name, importing cramjam only when one is used."""
    if compression == "none":
        return None
    import cramjam

    functions: dict[str, Callable[[bytes], object]] = {
        "gzip": cramjam.gzip.compress,
        # librdkafka and Java both read raw snappy (no xerial framing) in v2 batches.
        "snappy": cramjam.snappy.compress_raw,
        "lz4": lz4_frame,
        "zstd": cramjam.zstd.compress,
    }
    compress = functions[compression]
    return lambda data: bytes(compress(data))  # type: ignore[arg-type]


def lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame of independent blocks (FLG 0x70), as Kafka's own producer writes one.

    Kafka's Java client reads nothing else: a frame of linked blocks, which
    `cramjam.lz4.compress` writes, fails with "Dependent block stream is unsupported".
    """
    import cramjam

    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(data)
    return bytes(compressor.finish())
