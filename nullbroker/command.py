"""The `nullbroker` command's entry point: keeps libraries the broker never uses out of it.

Every module a broker imports stays resident for its whole life, and its budget is 32 MiB
(perf/README.md, Memory). Two of its dependencies import, as a side effect, libraries that
a broker process never calls:

- kio registers hypothesis strategies for its types whenever hypothesis can be imported,
  and hypothesis brings pytest-sized baggage with it (15 MiB). A broker never generates
  test data, so the entry point makes that optional import fail before kio is loaded.
- kio 0.6.5's `kio.serial.writers` imports asyncio for one type alias,
  `Writable = asyncio.StreamWriter | IO[bytes]`, which only a type checker reads; asyncio
  is 1.4 MiB, and the broker runs on trio. The entry point lets that module see a stand-in
  while it is imported, then takes the stand-in away, so that anything importing asyncio
  later gets the real one. tests/test_imports.py checks that the alias is still kio's only
  use of asyncio (kio is pinned in pyproject.toml).

Tests that run the broker in-process import `nullbroker.cli` directly and keep both.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence

_TEST_ONLY_MODULES = ("hypothesis",)


class _StreamWriter:
    """What kio's `Writable` alias names in a broker: a class no value is ever an instance of."""


def _import_kio_serial_without_asyncio() -> None:
    if "asyncio" in sys.modules:  # already paid for: nothing to save
        return
    stand_in = types.ModuleType("asyncio", "kio's type alias only; see nullbroker.command")
    stand_in.StreamWriter = _StreamWriter  # type: ignore[attr-defined]
    sys.modules["asyncio"] = stand_in
    try:
        import kio.serial  # noqa: F401
    finally:
        if sys.modules.get("asyncio") is stand_in:
            del sys.modules["asyncio"]


def main(argv: Sequence[str] | None = None) -> int:
    for name in _TEST_ONLY_MODULES:
        # A None entry makes `import hypothesis` raise ImportError, which kio expects
        # when hypothesis is not installed.
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    _import_kio_serial_without_asyncio()
    from .cli import main as serve_main

    return serve_main(argv)
