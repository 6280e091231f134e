"""A record batch's records uncompressed, whatever codec the producer chose (gzip, snappy in
Java's framing or raw, lz4, zstd): what reading a batch's records needs (ListOffsets' search
by timestamp, log compaction). cramjam is imported only for a compressed batch."""

from __future__ import annotations

_XERIAL = b"\x82SNAPPY\x00"


def inflated(compression: str, payload: memoryview) -> bytes | memoryview:
    """A batch's records uncompressed (cramjam, imported only for a compressed batch)."""
    if compression == "none":
        return payload
    import cramjam

    data = bytes(payload)
    if compression == "gzip":
        return bytes(cramjam.gzip.decompress(data))
    if compression == "lz4":
        return bytes(cramjam.lz4.decompress(data))
    if compression == "zstd":
        return bytes(cramjam.zstd.decompress(data))
    if data.startswith(_XERIAL):  # Java's snappy: framed blocks after a 16-byte header
        blocks, position = [], 16
        while position < len(data):
            size = int.from_bytes(data[position : position + 4], "big")
            blocks.append(
                bytes(cramjam.snappy.decompress_raw(data[position + 4 : position + 4 + size]))
            )
            position += 4 + size
        return b"".join(blocks)
    return bytes(cramjam.snappy.decompress_raw(data))
