"""The `nullbroker` command's entry point: keeps libraries the broker never uses out of it.

Every module a broker imports stays resident for its whole life, and its budget is 32 MiB
(perf/README.md, Memory). kio imports, as side effects, libraries that a broker process
never calls:

- kio registers hypothesis strategies for its types whenever hypothesis can be imported,
  and hypothesis brings pytest-sized baggage with it (15 MiB). A broker never generates
  test data, so the entry point makes that optional import fail before kio is loaded.
- kio 0.6.5's serializers import two libraries for type annotations only: asyncio in
  `kio.serial.writers` for one alias, `Writable = asyncio.StreamWriter | IO[bytes]`
  (1.4 MiB; the broker runs on trio), and typing_extensions in `kio.serial.readers` for
  `Buffer`, named in an annotation that is never evaluated (0.5 MiB). The entry point lets
  kio see stand-ins for them while `kio.serial` is imported, then takes the stand-ins
  away, so that anything importing either later gets the real one.
  tests/processes/test_imports.py checks that these are still kio's only uses of them (kio is
  pinned in pyproject.toml).

Tests that run the broker in-process import `nullbroker.app.cli` directly and keep all three.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence

_TEST_ONLY_MODULES = ("hypothesis",)


class _TypeOnly:
    """What kio's annotations name in a broker: a class no value is ever an instance of."""


KIO_TYPE_ONLY_IMPORTS = {"asyncio": ("StreamWriter",), "typing_extensions": ("Buffer",)}
"""The modules `kio.serial` imports for its annotations alone, and the names it takes."""


def _import_kio_serial_without_type_only_imports() -> None:
    stand_ins = {}
    for name, attributes in KIO_TYPE_ONLY_IMPORTS.items():
        if name in sys.modules:  # already paid for: nothing to save
            continue
        stand_in = types.ModuleType(name, "kio's annotations only; see nullbroker.app.command")
        for attribute in attributes:
            setattr(stand_in, attribute, _TypeOnly)
        stand_ins[name] = sys.modules[name] = stand_in
    try:
        import kio.serial  # noqa: F401
    finally:
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


def main(argv: Sequence[str] | None = None) -> int:
    for name in _TEST_ONLY_MODULES:
        # A None entry makes `import hypothesis` raise ImportError, which kio expects
        # when hypothesis is not installed.
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    _import_kio_serial_without_type_only_imports()
    from .cli import main as serve_main

    return serve_main(argv)
