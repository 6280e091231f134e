"""The fuzz target (tests/support/fuzz_requests.py, atheris) run for a bounded time, and every input
that once broke it (tests/vectors/fuzz/) replayed. `make fuzz` runs it for longer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fuzz_target import FRAMES, answer_stream

pytestmark = pytest.mark.slow

CRASHES = Path(__file__).resolve().parents[1] / "vectors" / "fuzz"
FUZZ_SECONDS = 20  # per pass of make test; `make fuzz` runs 600 s


def replayed() -> list[tuple[str, bytes]]:
    """The fuzzer's seeds (every recorded request frame, size-prefixed as a connection reads
    it) and every input that once broke the broker, by name."""
    seeds = [
        (f"seed-{frame.parent.name}-{frame.name}", len(data).to_bytes(4, "big") + data)
        for frame in sorted(FRAMES.glob("*/*-request.bin"))
        for data in [frame.read_bytes()]
    ]
    assert seeds, f"no recorded request frames in {FRAMES}"
    return seeds + [(path.name, path.read_bytes()) for path in sorted(CRASHES.glob("crash-*"))]


@pytest.mark.parametrize(("name", "data"), replayed(), ids=[name for name, _ in replayed()])
def test_a_seed_or_an_input_that_once_broke_the_broker_is_refused_or_answered(
    name: str, data: bytes
) -> None:
    answer_stream(data)


def test_the_fuzzer_finds_nothing_in_its_time(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.fuzz_requests", f"-max_total_time={FUZZ_SECONDS}",
         f"-artifact_prefix={tmp_path}/", "-rss_limit_mb=4096"],
        cwd=root, capture_output=True, text=True, timeout=FUZZ_SECONDS + 900, check=False,
    )  # fmt: skip
    found = sorted(tmp_path.glob("crash-*"))
    assert done.returncode == 0 and not found, (
        f"the fuzzer found an input that breaks the broker: {found} "
        f"(copy it to tests/vectors/fuzz/); its output ends: {done.stderr[-3000:]}"
    )
    assert "Done" in done.stderr  # libFuzzer's summary line: it ran to its time
