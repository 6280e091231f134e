"""CRC-32C (Castagnoli), from the crc32c package's extension module.

The package's `__init__` imports importlib.metadata, argparse and the email parser, and
scans the installed distributions, to set `__version__`: 2 MiB and 20 ms that a broker
with a 32 MiB budget never uses. So the extension module is loaded here on its own, by
path, as `crc32c._crc32c` (a later `import crc32c` finds and reuses it). Where that does
not work (another layout of the package), the package is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

_EXTENSION = "crc32c._crc32c"


def _load_extension() -> Any:
    loaded = sys.modules.get(_EXTENSION)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("crc32c")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("crc32c is not installed")
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_crc32c{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader(_EXTENSION, str(path))
                extension_spec = importlib.util.spec_from_loader(_EXTENSION, loader)
                assert extension_spec is not None
                module = importlib.util.module_from_spec(extension_spec)
                loader.exec_module(module)
                sys.modules[_EXTENSION] = module
                return module
    raise ImportError("crc32c's extension module was not found")


try:
    _extension = _load_extension()
except ImportError:
    import crc32c as _extension

crc32c = cast(Callable[..., int], _extension.crc32c)
"""crc32c(data, value=0): the CRC-32C of `data`, continuing from the CRC `value`."""
