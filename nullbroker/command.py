"""The `nullbroker` command's entry point: keeps test-only libraries out of the broker.

kio registers hypothesis strategies for its types whenever hypothesis can be imported, and
hypothesis brings pytest-sized baggage with it: 15 MiB of a broker whose whole budget is
32. A broker process never generates test data, so the entry point makes that optional
import fail before kio is loaded. Tests that run the broker in-process import
`nullbroker.cli` directly and keep hypothesis.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_TEST_ONLY_MODULES = ("hypothesis",)


def main(argv: Sequence[str] | None = None) -> int:
    for name in _TEST_ONLY_MODULES:
        # A None entry makes `import hypothesis` raise ImportError, which kio expects
        # when hypothesis is not installed.
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    from .cli import main as serve_main

    return serve_main(argv)
