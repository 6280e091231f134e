"""Reading the TOML files that settings name (--config, --node-map, --users)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_document(
    path: str | Path, error: type[ValueError], name: str | None = None
) -> dict[str, Any]:
    """The file's document; `error`, with a message that names the file (as `name`, or its
    path) and says what is wrong, otherwise."""
    import tomllib  # here: most brokers read no file

    named = name or str(path)
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as failure:
        raise error(f"{named}: cannot read it: {failure.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as failure:
        raise error(f"{named}: not TOML: {failure}") from None


def read_table(
    path: str, table: str, shape: str, error: type[ValueError]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's document and its non-empty `[table]`; `error`, with a message that names
    the file and says what is wrong (`shape`: what an entry looks like), otherwise."""
    document = read_document(path, error)
    found = document.get(table)
    if not isinstance(found, dict) or not found:
        raise error(f"{path}: needs a [{table}] table, {shape}")
    return document, found
