"""Reading the TOML files that settings name (--node-map, --users): one table each."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_table(
    path: str, table: str, shape: str, error: type[ValueError]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's document and its non-empty `[table]`; `error`, with a message that names
    the file and says what is wrong (`shape`: what an entry looks like), otherwise."""
    import tomllib  # here: most brokers read no file

    try:
        document = tomllib.loads(Path(path).read_text())
    except OSError as failure:
        raise error(f"{path}: cannot read it: {failure.strerror}") from None
    except tomllib.TOMLDecodeError as failure:
        raise error(f"{path}: not TOML: {failure}") from None
    found = document.get(table)
    if not isinstance(found, dict) or not found:
        raise error(f"{path}: needs a [{table}] table, {shape}")
    return document, found
