"""Python source built line by line and turned into a function: the schema compilers' tool.

The compiled encoders and structure checks are straight-line functions generated once per
kio entity class: every loop, branch and struct format of the schema is decided while the
source is written, not on each call, which is where kio's generic writer spends its time.
"""

from __future__ import annotations

import itertools
import linecache
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

_INDENT = "    "
_FILE_NUMBERS = itertools.count()


class Source:
    """The body of one generated function, and the constants its lines refer to by name."""

    def __init__(self, name: str, parameters: str) -> None:
        self.name = name
        self.parameters = parameters
        self.namespace: dict[str, Any] = {}
        self._lines: list[str] = []
        self._depth = 1
        self._counter = itertools.count()

    def line(self, text: str) -> None:
        self._lines.append(_INDENT * self._depth + text)

    def fresh(self, hint: str) -> str:
        """A local variable name not used before in this function."""
        return f"{hint}{next(self._counter)}"

    def constant(self, value: Any, hint: str = "_k") -> str:
        """The name under which the generated code sees `value`."""
        name = f"{hint}{next(self._counter)}"
        self.namespace[name] = value
        return name

    def shared(self, name: str, value: Any) -> str:
        """`value` under a fixed name: for helpers and constants used all over the source."""
        assert self.namespace.get(name, value) is value, f"{name} already names another value"
        self.namespace[name] = value
        return name

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """Lines written inside the `with` are the body of `header:` (an if, for or else)."""
        self.line(f"{header}:")
        self._depth += 1
        written = len(self._lines)
        try:
            yield
        finally:
            if len(self._lines) == written:
                self.line("pass")
            self._depth -= 1

    def prepend(self, text: str) -> None:
        """A line before every line written so far, at the function body's indentation."""
        self._lines.insert(0, _INDENT + text)

    @property
    def text(self) -> str:
        return "\n".join([f"def {self.name}({self.parameters}):", *self._lines, ""])

    def function(self, rebuild: Callable[[], Source]) -> Callable[..., Any]:
        """Compile the source into a function. `rebuild` makes the same source again.

        A traceback through generated code shows the generated lines: the file name is
        registered with linecache as a lazy entry, which `rebuild` fills in when something
        (a traceback, a test) first asks for the lines. Holding every function's text for
        the broker's life cost 76 KiB after a producer and a consumer, for lines that are
        only read when something fails; the recipe is a closure over what the broker keeps
        anyway (the entity class).
        """
        text = self.text
        # No <angle brackets>: linecache realises lazy entries only for names without them.
        filename = f"codec generated {self.name} {next(_FILE_NUMBERS)}"
        linecache.cache[filename] = (partial(_rebuilt_text, rebuild, _checksum(text)),)
        exec(compile(text, filename, "exec"), self.namespace)
        function: Callable[..., Any] = self.namespace[self.name]
        return function


def compiled(make: Callable[[], Source]) -> Callable[..., Any]:
    """The function of the source `make` builds; `make` is kept to build it again for a
    traceback (Source.function)."""
    return make().function(make)


def _checksum(text: str) -> int:
    return zlib.crc32(text.encode())


def _rebuilt_text(rebuild: Callable[[], Source], checksum: int) -> str | None:
    """The text of a generated function, made again; None (no lines shown) if it came out
    different, so a traceback never shows lines that are not the ones that ran. Called
    while a traceback is formatted, it must not raise: linecache lets only OSError and
    ImportError from its loaders through as "no source"."""
    try:
        text = rebuild().text
    except Exception:
        return None
    return text if _checksum(text) == checksum else None
