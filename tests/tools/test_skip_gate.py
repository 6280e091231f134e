"""The skip gate (tests/support/skip_gate.py): every skip printed with its reason at the end of the
run; in a strict run a skip the allowed table does not name fails the run, and one it names
does not."""

from __future__ import annotations

import pytest

from tests.support import allowed_skips
from tests.support.allowed_skips import AllowedSkip

pytest_plugins = ["pytester"]

SKIPPING = """
import pytest

def test_runs():
    pass

def test_needs_a_tool():
    pytest.skip("the tool is not provisioned")

@pytest.mark.skipif(True, reason="a condition of the machine")
def test_needs_the_machine():
    pass

@pytest.mark.xfail(reason="expected to fail, not a skip")
def test_expected_to_fail():
    raise AssertionError
"""


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NULLBROKER_STRICT", raising=False)
    monkeypatch.setenv("CI", "true")


@pytest.fixture
def not_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NULLBROKER_STRICT", raising=False)
    monkeypatch.delenv("CI", raising=False)


def allow(monkeypatch: pytest.MonkeyPatch, *entries: AllowedSkip) -> None:
    monkeypatch.setattr(allowed_skips, "ALLOWED_SKIPS", entries)


def run(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makepyfile(test_parts=SKIPPING)
    return pytester.runpytest_inprocess("-p", "tests.support.skip_gate")


@pytest.mark.usefixtures("strict")
def test_a_strict_run_fails_on_a_skip_the_table_does_not_name(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow(monkeypatch)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*= skips: 2 (a strict run: a skip outside tests/support/allowed_skips.py fails it) =*",
            "[[]NOT ALLOWED] 1 skipped: a condition of the machine",
            "    test_parts.py::test_needs_the_machine",
            "[[]NOT ALLOWED] 1 skipped: the tool is not provisioned",
            "    test_parts.py::test_needs_a_tool",
            "2 skipped for reasons the allowed table (tests/support/allowed_skips.py) "
            "does not name: the run FAILS",
        ]
    )


@pytest.mark.usefixtures("strict")
def test_a_strict_run_passes_with_skips_the_table_names(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow(
        monkeypatch,
        AllowedSkip("tools", "test_parts.py::test_needs_a_tool", "not provisioned", "a test"),
        AllowedSkip("machine", "test_parts.py::*", r"condition of the machine", "a test"),
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "[[]allowed: machine] 1 skipped: a condition of the machine",
            "[[]allowed: tools] 1 skipped: the tool is not provisioned",
        ]
    )
    result.stdout.no_fnmatch_line("*NOT ALLOWED*")


@pytest.mark.usefixtures("strict")
def test_an_entry_allows_only_the_tests_and_the_reason_it_names(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow(
        monkeypatch,
        AllowedSkip("elsewhere", "other_file.py::*", "not provisioned", "a test"),
        AllowedSkip("another reason", "test_parts.py::*", "no such reason", "a test"),
        AllowedSkip("not now", "test_parts.py::*", ".", "a test", only_when=lambda: False),
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["2 skipped for reasons the allowed table *: the run FAILS"])


@pytest.mark.usefixtures("not_strict")
def test_a_user_s_run_lists_the_skips_and_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    allow(monkeypatch)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*= skips: 2 (not a strict run: CI=true or `make test STRICT=1` makes one) =*",
            "2 skipped for reasons the allowed table * does not name: a strict run would fail",
        ]
    )


def test_every_allowed_skip_says_why_and_matches_a_test_folder() -> None:
    for entry in allowed_skips.ALLOWED_SKIPS:
        assert entry.why.strip() and entry.reason, entry.name
        assert entry.tests.startswith(("tests/", "spark_tests/")), entry.name
