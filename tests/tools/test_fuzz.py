"""The fuzz target (tests/fuzz_requests.py, atheris) run for a bounded time, and every input
that once broke it (tests/vectors/fuzz/) replayed. `make fuzz` runs it for longer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz_target import answer_stream

pytestmark = pytest.mark.slow

CRASHES = Path(__file__).resolve().parents[1] / "vectors" / "fuzz"
FUZZ_SECONDS = 20  # per pass of make test; `make fuzz` runs 600 s


@pytest.mark.parametrize("path", sorted(CRASHES.glob("crash-*")), ids=lambda path: path.name)
def test_an_input_that_once_broke_the_broker_is_refused_or_answered(path: Path) -> None:
    answer_stream(path.read_bytes())


def test_the_fuzzer_finds_nothing_in_its_time(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "tests.fuzz_requests", f"-max_total_time={FUZZ_SECONDS}",
         f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=4096"],
        cwd=root, capture_output=True, text=True, timeout=FUZZ_SECONDS + 120, check=False,
    )  # fmt: skip
    found = sorted(tmp_path.glob("crash-*"))
    assert done.returncode == 0 and not found, (
        f"the fuzzer found an input that breaks the broker: {found} "
        f"(copy it to tests/vectors/fuzz/); its output ends: {done.stderr[-3000:]}"
    )
    assert "Done" in done.stderr  # libFuzzer's summary line: it ran to its time
