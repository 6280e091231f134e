"""The tests' own Java programs (tests/clients/java), compiled against provisioned jars once per
source text, into .cache (which git ignores): a changed source is compiled again, an unchanged
one never."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

COMPILE_TIMEOUT = 180.0


def compiled(source: Path, lib: Path, cache: Path) -> Path:
    """The folder of `source`'s classes, compiled against the jars in `lib` into a folder of
    `cache` named by the source's digest. Skips the test, saying why, where javac is missing
    (scripts/ensure-test-tools installs a JDK)."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac is not installed (scripts/ensure-test-tools installs a JDK)")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    classes = cache / digest
    if not (classes / f"{source.stem}.class").exists():
        building = classes.with_name(f"{digest}.{os.getpid()}")
        subprocess.run(
            [javac, "-cp", f"{lib}/*", "-d", str(building), str(source)],
            check=True, timeout=COMPILE_TIMEOUT,
        )  # fmt: skip
        # Built aside and moved in whole, as another test process may be building it too.
        if classes.exists():
            shutil.rmtree(building)
        else:
            building.replace(classes)
    return classes
