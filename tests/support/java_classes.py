"""The tests' own Java programs (tests/clients/java), compiled against provisioned jars once per
source text, into .cache (which git ignores): a changed source is compiled again, an unchanged
one never."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perf import java_perf


def compiled(source: Path, lib: Path, cache: Path) -> Path:
    """The folder of `source`'s classes, compiled against the jars in `lib` into a folder of
    `cache` named by the source's digest (perf.java_perf.compiled). Skips the test, saying
    why, where javac is missing (scripts/ensure-test-tools installs a JDK)."""
    if shutil.which("javac") is None:
        pytest.skip("javac is not installed (scripts/ensure-test-tools installs a JDK)")
    return java_perf.compiled(source, lib, cache)
