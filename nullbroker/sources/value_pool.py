"""What the schema-driven value generators share (nullbroker.sources.json_values, avro_values): the
size of a source's pool of values, the error a schema it cannot honour raises, and the
child interpreter that makes a broker's pool.

A broker makes its pool in a child (`python -m nullbroker.sources.json_values PATH`, or
`nullbroker.sources.avro_values`), which sends the values back on a pipe: the generator's modules
(fastavro for Avro, json and the JSON generator), and what generating leaves behind, would
otherwise stay in the broker's RSS for as long as it runs (perf/README.md, Memory).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

POOL_VALUES = 1024
"""Values generated for a source: value `k` from a random generator seeded with `k`."""

_SCHEMA_ERROR_EXIT = 3


class SchemaError(ValueError):
    """A schema this generator cannot honour; the message names where and why."""


def from_child(module: str, *arguments: str) -> tuple[bytes, ...]:
    """The values `python -m module *arguments` makes (see `to_parent`); SchemaError with
    the child's reason for a schema it refuses, or with its last line if it fails."""
    # The child imports this copy of the package, whatever the caller's installed one is.
    here = str(Path(__file__).resolve().parent.parent)
    search = os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))
    child = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": search},
        check=False,
    )
    reason = child.stderr.decode(errors="replace").strip()
    if child.returncode == _SCHEMA_ERROR_EXIT:
        raise SchemaError(reason)
    if child.returncode:
        last = reason.splitlines()[-1] if reason else f"exit status {child.returncode}"
        raise SchemaError(f"generating the values failed: {last}")
    values, data, at = [], child.stdout, 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        values.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return tuple(values)


def to_parent(make: Callable[[], Sequence[bytes]]) -> int:
    """The child's side of `from_child`: each value `make` returns, on stdout after its
    length (4 bytes, big-endian); the exit status."""
    try:
        values = make()
    except SchemaError as error:
        print(error, file=sys.stderr)
        return _SCHEMA_ERROR_EXIT
    sys.stdout.buffer.write(b"".join(len(value).to_bytes(4, "big") + value for value in values))
    return 0
