"""How the suite is spread over processes (tests/support/parallel.py): the tests of a shared
session fixture are in its group, and a group's scope is one unit of work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.parallel import GROUPS, SHARED, scope_of

ROOT = Path(__file__).resolve().parents[2]


def test_every_user_of_a_shared_fixture_is_in_its_group() -> None:
    # Collecting in one process runs the check (a test file using the SparkSession or the
    # standalone cluster that GROUPS does not name is refused, by name). Only spark_tests/
    # can use them: their fixtures are spark_tests/conftest.py's.
    collect = ("--collect-only", "-q", "-p", "no:cacheprovider", "spark_tests")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *collect],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "tests collected" in done.stdout


def test_a_group_is_one_unit_of_work_and_any_other_test_is_its_file() -> None:
    assert set(GROUPS.values()) == set(SHARED.values())
    for path, group in GROUPS.items():
        assert (ROOT / path).exists(), path
        assert scope_of(f"{path}::test_x[a-b]") == group
    assert scope_of("tests/codec/test_api_keys.py::test_x[1]") == "tests/codec/test_api_keys.py"
