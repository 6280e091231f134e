"""The recorded client frames in tests/vectors/frames: their index entries and their bytes.

An entry is one object of `index.json`, as recorded (see that directory's README.md): every
entry has `file`, `direction`, `client`, `api_key`, `api_version`, `correlation_id`, `size`
and `kafka_schema_check`; requests add `request_header_version` (and `produce` for Produce),
responses add `response_header_version`. A frame is the file's bytes, without the 4-byte
size prefix.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

FRAMES_DIR = Path(__file__).parent.parent / "vectors" / "frames"

Entry = dict[str, Any]


@cache
def load_index() -> tuple[Entry, ...]:
    """Every entry of index.json, in recording order."""
    with (FRAMES_DIR / "index.json").open(encoding="utf-8") as index:
        entries: list[Entry] = json.load(index)
    return tuple(entries)


def frame_bytes(entry: Entry | str) -> bytes:
    """The bytes of a recorded frame (no size prefix), given its entry or its `file`."""
    return _read_frame(entry if isinstance(entry, str) else entry["file"])


@cache
def _read_frame(file: str) -> bytes:
    return (FRAMES_DIR / file).read_bytes()


def requests() -> list[Entry]:
    """The entries of every recorded request frame."""
    return [entry for entry in load_index() if entry["direction"] == "request"]


def responses() -> list[Entry]:
    """The entries of every recorded response frame."""
    return [entry for entry in load_index() if entry["direction"] == "response"]


def by_file() -> dict[str, Entry]:
    """Entries keyed by their `file`, e.g. `java-4.0/007-Produce-v10-request.bin`."""
    return {entry["file"]: entry for entry in load_index()}


def entry_id(entry: Entry) -> str:
    """A test id for an entry: its file name."""
    return str(entry["file"])
