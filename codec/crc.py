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
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from .framing import Buffer

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


_POLYNOMIAL = 0x82F63B78  # CRC-32C's, reflected, as the CRC's registers hold it
_ONE = 1 << 31  # the polynomial 1 (x^0), reflected


def _multiply(a: int, b: int) -> int:
    """a(x) * b(x) modulo the polynomial, both reflected (zlib's multmodp)."""
    product = 0
    bit = _ONE
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLYNOMIAL if b & 1 else b >> 1
    return product


def _x_to_the_8n(n: int) -> int:
    """x^(8n) modulo the polynomial: the operator that runs a CRC over n zero bytes."""
    power = _ONE
    square = _multiply(_ONE >> 8, _ONE >> 8)  # x^8 squared: x^16 ... doubled below
    square = _ONE >> 8  # x^8
    while n:
        if n & 1:
            power = _multiply(square, power)
        square = _multiply(square, square)
        n >>= 1
    return power


def crc32c_before(data: Buffer) -> Callable[[int], int]:
    """For bytes known in advance, a function from crc32c(head) to crc32c(head + data) that
    does not read `data` again: four table lookups where crc32c would pass over all of it.

    A CRC is linear: the head's CRC moves through `data`'s length of zero bytes (a fixed
    operator, one 1,024-entry table) and is then combined with `data`'s own CRC
    (zlib's crc32_combine).
    """
    shift = _x_to_the_8n(len(data))
    table = array("I", bytes(4 * 1024))
    for byte in range(4):
        row = 256 * byte
        for bit in range(8):
            # What each bit of this byte of the head's CRC becomes; a byte's value is
            # the XOR of its bits'.
            table[row + (1 << bit)] = _multiply(shift, 1 << (8 * byte + bit))
        for value in range(3, 256):
            low = value & -value
            if value != low:
                table[row + value] = table[row + low] ^ table[row + (value ^ low)]
    data_crc = crc32c(data)

    def crc_of_head_and_data(head_crc: int) -> int:
        return (
            table[head_crc & 0xFF]
            ^ table[256 | (head_crc >> 8 & 0xFF)]
            ^ table[512 | (head_crc >> 16 & 0xFF)]
            ^ table[768 | head_crc >> 24]
            ^ data_crc
        )

    return crc_of_head_and_data
