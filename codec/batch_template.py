"""Pre-encoded RecordBatch v2 templates, re-based to any offset and time by patching bytes.

A batch's CRC-32C covers the attributes onwards, not the base offset: a template built
once can be served at any offset by patching eight bytes. Its timestamps (bytes 27-43)
are covered, so re-timing a template also recomputes the CRC, a single pass at memory
speed in crc32c's hardware path. Serving records therefore costs copies, not encoding.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import native
from .crc import crc32c, crc32c_before
from .framing import Buffer
from .record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_BYTES, LOG_OVERHEAD

COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_TIMESTAMPS = struct.Struct(">qq")
_TIMESTAMPS_OFFSET = 27
_HEADER = struct.Struct(">qiibIhiqqqhii")
# A header in two: up to the CRC, and from the attributes on (what the CRC covers first).
_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
_pack_head = _HEAD.pack
_pack_tail = _TAIL.pack
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1


@dataclass(frozen=True, slots=True)
class TemplateRecord:
    """One record of a template: its timestamp is relative to the batch's base timestamp."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_delta_ms: int = 0


@dataclass(frozen=True, slots=True)
class BatchTemplate:
    """A RecordBatch v2 encoded at base offset 0 and base timestamp 0."""

    data: bytes
    record_count: int
    max_timestamp_delta_ms: int
    records: memoryview = field(init=False, repr=False, compare=False)
    """Everything after the 61-byte header: the same in every rendering."""
    _fixed: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    """The header's fields that no rendering changes, as header() packs them: the length,
    leader epoch and magic; the attributes and last offset delta; the producer's id,
    epoch and base sequence, and the record count."""

    _crc_after: Callable[[int], int] | None = field(
        init=False, default=None, repr=False, compare=False
    )
    """From the CRC of a header's part before the records to the batch's CRC, once
    tabled (table_crc)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", memoryview(self.data)[HEADER_BYTES:])
        fields = _HEADER.unpack_from(self.data)
        object.__setattr__(self, "_fixed", (fields[1:4], fields[5:7], fields[9:]))

    def __len__(self) -> int:
        return len(self.data)

    def render(self, base_offset: int, base_timestamp_ms: int) -> bytearray:
        """A copy of the batch at `base_offset`, its first record at `base_timestamp_ms`."""
        header, records = self.render_parts(base_offset, base_timestamp_ms)
        return header + records

    def header(self, base_offset: int, base_timestamp_ms: int) -> bytes:
        """The header render_parts() makes, as bytes packed at once: what a Fetch serves
        with the template's records behind it (they are neither copied nor patched)."""
        framing, before, after = self._fixed
        last_timestamp_ms = base_timestamp_ms + self.max_timestamp_delta_ms
        tail = _pack_tail(*before, base_timestamp_ms, last_timestamp_ms, *after)
        crc_after = self._crc_after
        crc = crc32c(self.records, crc32c(tail)) if crc_after is None else crc_after(crc32c(tail))
        return _pack_head(base_offset, *framing, crc) + tail

    def table_crc(self) -> None:
        """Have header() take its CRC from a table (4 KiB) rather than a pass over the
        records: for the template of a topic's whole batches, rendered for every Fetch."""
        if self._crc_after is None:
            object.__setattr__(self, "_crc_after", crc32c_before(self.records))

    def render_parts(
        self, base_offset: int, base_timestamp_ms: int, records: Buffer | None = None
    ) -> tuple[bytearray, Buffer]:
        """The batch as render() makes it, in two parts that follow each other on the wire:
        a new header, and the template's records, shared, not copied (or `records`, the
        template's records with numbers written in place by write_decimals: same length).

        Serving a batch then costs 61 bytes of copying and a CRC pass, where copying whole
        batches cost a quarter of a Fetch's CPU (fresh memory for every response).
        """
        if records is None:
            records = self.records
        header = bytearray(self.data[:HEADER_BYTES])
        _BASE_OFFSET.pack_into(header, 0, base_offset)
        _TIMESTAMPS.pack_into(
            header,
            _TIMESTAMPS_OFFSET,
            base_timestamp_ms,
            base_timestamp_ms + self.max_timestamp_delta_ms,
        )
        # The CRC covers the header from the attributes on, then the records.
        crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
        _CRC.pack_into(header, CRC_OFFSET, crc)
        return header, records


PLACE = struct.Struct("=IBBq")
"""Where write_decimals puts a number: its position, width, kind and base value."""
_DECIMAL_LIMIT = 10**18  # 18 digits at most, as the C twin's 64-bit sums allow


def places(spots: Sequence[tuple[int, int, int, int]]) -> bytes:
    """(position, width, kind, base) places packed as write_decimals reads them."""
    return b"".join(PLACE.pack(*spot) for spot in spots)


def write_decimals_python(buffer: bytearray, spots: bytes, moves: Sequence[int]) -> None:
    """Write `base + moves[kind]` in decimal into each place of `buffer` that `spots`
    names (see places()), then spaces to the place's width: the records around it, their
    lengths and varints stay as they are.

    For values that hold ids or times which move on while the rest repeats (nullbroker's
    Nexmark topics): the template is encoded once and each batch writes only those."""
    if len(spots) % PLACE.size:
        raise ValueError(f"places must be whole {PLACE.size}-byte places")
    for position, width, kind, base in PLACE.iter_unpack(spots):
        where = f"the place at {position}"
        if kind >= len(moves):
            raise ValueError(f"{where} has a kind without a move")
        if position + width > len(buffer):
            raise ValueError(f"{where} is past the end")
        move = moves[kind]
        if not 0 <= base < _DECIMAL_LIMIT or not -_DECIMAL_LIMIT < move < _DECIMAL_LIMIT:
            raise ValueError(f"{where} has a base or a move out of range")
        number = base + move
        if number < 0:
            raise ValueError(f"{where} would hold a negative number")
        text = b"%d" % number
        if number >= _DECIMAL_LIMIT or len(text) > width:
            raise ValueError(f"{where} is too narrow for its number")
        buffer[position : position + width] = text.ljust(width)


write_decimals = write_decimals_python
"""write_decimals_python, in C when codec/_native.c is built and on."""
_native = native.load()
if _native is not None:
    write_decimals = _native.write_decimals


def _zigzag_varint(value: int) -> bytes:
    """Kafka's signed varint/varlong: zigzag, then 7 bits a byte, low bits first."""
    unsigned = (value << 1) ^ (value >> 63)
    out = bytearray()
    while unsigned >= 0x80:
        out.append(unsigned & 0x7F | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def _nullable_bytes(value: bytes | None) -> bytes:
    return _zigzag_varint(-1) if value is None else _zigzag_varint(len(value)) + value


def _record_bytes(record: TemplateRecord, offset_delta: int) -> bytes:
    """One record of a v2 batch at base offset and base timestamp 0: the bytes kio's
    write_record gives (the tests compare the two), written here so that serving records
    does not import kio.records' writers and with them the crc32c package's __init__."""
    body = b"".join(
        (
            b"\x00",  # attributes
            _zigzag_varint(record.timestamp_delta_ms),
            _zigzag_varint(offset_delta),
            _nullable_bytes(record.key),
            _nullable_bytes(record.value),
            _zigzag_varint(len(record.headers)),
            *(
                _nullable_bytes(name.encode()) + _nullable_bytes(value)
                for name, value in record.headers
            ),
        )
    )
    return _zigzag_varint(len(body)) + body


def build_template(
    records: Sequence[TemplateRecord],
    compression: str = "none",
    compress: Callable[[bytes], bytes] | None = None,
) -> BatchTemplate:
    """Encode `records` as one batch; `compress` implements `compression` when it is not none.

    The codec stays free of compression libraries: the caller passes the function.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    code = COMPRESSION_CODES[compression]
    if code and compress is None:
        raise ValueError(f"compression {compression!r} needs a compress function")
    encoded = bytearray()
    for offset_delta, record in enumerate(records):
        encoded += _record_bytes(record, offset_delta)
    payload = bytes(encoded)
    if code:
        assert compress is not None
        payload = compress(payload)
    max_delta = max(record.timestamp_delta_ms for record in records)
    length = HEADER_BYTES + len(payload)
    header = _HEADER.pack(
        0,  # base offset, patched by render()
        length - LOG_OVERHEAD,
        0,  # partition leader epoch
        2,  # magic
        0,  # crc, computed by render()
        code,
        len(records) - 1,
        0,  # base timestamp, patched by render()
        max_delta,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        len(records),
    )
    return BatchTemplate(header + payload, len(records), max_delta)
