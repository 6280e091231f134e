"""Incremental framing of Kafka's size-prefixed frames: bytes in, frames out."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from .errors import FrameTooLarge, InvalidFrameSize

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = 4

# The smallest request header: api key, api version, correlation id, null client id.
MIN_REQUEST_FRAME_BYTES = 2 + 2 + 4 + 2

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024

Buffer = bytes | bytearray | memoryview
"""Bytes a frame or a part of one is held in."""


class FrameReader:
    """Splits a byte stream into frames, whatever the boundaries of the reads.

    `feed()` appends what the socket returned; `frames()` yields every complete frame as a
    memoryview of the internal buffer (no copy). A view stays valid after later feeds, since
    the reader moves to a new buffer instead of resizing one whose frames were handed out.
    A size prefix over `max_frame_bytes` raises before a byte of the body is buffered, so a
    hostile size never costs memory.
    """

    __slots__ = ("_buffer", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes, dropping the frames already handed out."""
        if self._start:
            # Frames handed out may still be referenced: start a new buffer rather than
            # resize one with live exports. Only the unfinished tail is copied.
            self._buffer = self._buffer[self._start :]
            self._start = 0
        self._buffer += data

    def frames(self) -> Iterator[memoryview]:
        """Yield each complete frame buffered so far, without its size prefix."""
        buffer = self._buffer
        # Read-only: kio's native readers refuse writable buffers.
        view = memoryview(buffer).toreadonly()
        end = len(buffer)
        while end - self._start >= SIZE_PREFIX_BYTES:
            (size,) = _SIZE.unpack_from(buffer, self._start)
            self._check_size(size)
            frame_end = self._start + SIZE_PREFIX_BYTES + size
            if frame_end > end:
                return
            frame = view[self._start + SIZE_PREFIX_BYTES : frame_end]
            self._start = frame_end
            yield frame
        if self._start == end:
            # Every byte handed out: the frames' views keep the buffer while they are
            # used, and the reader does not hold a request's size until the next read.
            self._buffer = bytearray()
            self._start = 0

    def frames_in(self, data: memoryview) -> Iterator[memoryview]:
        """`feed(data)` then `frames()`, without copying `data` when nothing is buffered:
        then the frames are views of `data` itself, valid only while its bytes are, and
        only an unfinished last frame is copied in, once the iterator is exhausted.

        For a connection that reads into one buffer it owns and answers every frame of a
        read before the next: a Produce request's records are then never copied by us.
        """
        if len(self._buffer) != self._start:
            self.feed(data)
            yield from self.frames()
            return
        view = data.toreadonly()  # kio's native readers refuse writable buffers
        end = len(view)
        start = 0
        while end - start >= SIZE_PREFIX_BYTES:
            (size,) = _SIZE.unpack_from(view, start)
            self._check_size(size)
            frame_end = start + SIZE_PREFIX_BYTES + size
            if frame_end > end:
                break
            frame = view[start + SIZE_PREFIX_BYTES : frame_end]
            start = frame_end
            yield frame
        # A new buffer, not the old one resized: frames handed out may still be viewed.
        self._buffer = bytearray(view[start:])
        self._start = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet handed out as frames."""
        return len(self._buffer) - self._start

    @property
    def pending_frame_size(self) -> int:
        """The announced size of the frame being received (its size prefix read, its body
        not all yet): 0 when none is, or its size prefix is not complete."""
        if len(self._buffer) - self._start < SIZE_PREFIX_BYTES:
            return 0
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        return int(size)

    def _check_size(self, size: int) -> None:
        if size < 0:
            raise InvalidFrameSize(f"negative frame size {size}")
        if size < MIN_REQUEST_FRAME_BYTES:
            raise InvalidFrameSize(
                f"frame of {size} bytes is too small for a request header "
                f"(at least {MIN_REQUEST_FRAME_BYTES})"
            )
        if size > self.max_frame_bytes:
            raise FrameTooLarge(
                f"frame of {size} bytes exceeds the maximum of {self.max_frame_bytes} bytes"
            )


def size_prefixed(*parts: bytes | bytearray) -> bytes:
    """Join parts into one frame with its size prefix."""
    body = b"".join(parts)
    return _SIZE.pack(len(body)) + body
