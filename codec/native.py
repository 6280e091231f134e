"""Whether the Produce hot path's C decoders (codec/_native.c) are used.

They are built by the package's own build (`pip install -e .` compiles them with gcc) and
used unless NULLBROKER_NATIVE=off; without a compiler the build leaves them out and the
pure-Python decoders, which they equal, serve alone. Both paths are tested: the decoders'
equality by tests/codec/test_codec_native.py, and `make test` runs the codec and broker tests
again with NULLBROKER_NATIVE=off.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

VARIABLE = "NULLBROKER_NATIVE"
_OFF = frozenset({"off", "0", "no", "false"})


def switched_on() -> bool:
    """Whether C may serve (NULLBROKER_NATIVE is not off): for codec._native and for
    nullbroker.handlers._produce_lane (and the reader that calls it) alike."""
    return os.environ.get(VARIABLE, "on").strip().lower() not in _OFF


def load() -> ModuleType | None:
    """The C module, or None when it is switched off or was not built."""
    return load_module("codec._native")


def load_module(name: str) -> ModuleType | None:
    """The C module of that name (this one, or the broker's Produce lane and reader), or None
    when C is switched off or the module was not built."""
    if not switched_on():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def status() -> str:
    """One phrase for the broker's start-up line: which decoders serve Produce."""
    if not switched_on():
        return f"pure Python ({VARIABLE}=off)"
    return "C" if load() is not None else "pure Python (the C module was not built)"
