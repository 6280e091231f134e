"""Python source built line by line and turned into a function: the schema compilers' tool.

The compiled encoders and structure checks are straight-line functions generated once per
kio entity class: every loop, branch and struct format of the schema is decided while the
source is written, not on each call, which is where kio's generic writer spends its time.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_INDENT = "    "


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

    def function(self) -> Callable[..., Any]:
        """Compile the source into a function.

        The source is registered with linecache under a unique file name, so a traceback
        through generated code shows the generated lines.
        """
        text = self.text
        filename = f"<codec generated {self.name} {id(self):x}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        exec(compile(text, filename, "exec"), self.namespace)
        function: Callable[..., Any] = self.namespace[self.name]
        return function
