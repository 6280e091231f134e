"""A pytest plugin (loaded by the root conftest.py) that counts every skipped test, prints them
in one block at the end of the run, and, in a strict run, fails the run when a test was
skipped for a reason the allowed table (tests/support/allowed_skips.py) does not name.

A strict run is CI's (`CI=true`, which `.ci/run` has) or one the user asks for
(`make test STRICT=1`, which sets NULLBROKER_STRICT=1). Elsewhere a missing tool stays a
friendly skip: a laptop without root still runs the rest of the suite.

Under pytest-xdist the controller sees every worker's reports, so the count and the verdict
are made there once.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

import pytest

from nullbroker.app.configuration import STRICT_VARIABLE
from tests.support.allowed_skips import ALLOWED_SKIPS, AllowedSkip, allowing

_YES = frozenset({"1", "true", "yes", "on"})


def strict_run(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether a test skipped for a missing part fails the run: under CI (CI=true, as CI
    services set it) or when NULLBROKER_STRICT=1 (`make test STRICT=1`)."""
    return any(environ.get(name, "").strip().lower() in _YES for name in ("CI", STRICT_VARIABLE))


@dataclass(frozen=True, slots=True)
class Skip:
    nodeid: str
    reason: str
    allowed_by: AllowedSkip | None


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(longrepr)
    return reason.removeprefix("Skipped: ")


class SkipGate:
    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.skips: list[Skip] = []

    def _add(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = _reason(report)
        self.skips.append(Skip(report.nodeid, reason, allowing(report.nodeid, reason)))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._add(report)

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._add(report)

    @property
    def refused(self) -> list[Skip]:
        return [skip for skip in self.skips if skip.allowed_by is None]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.strict and self.refused and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        mode = (
            "a strict run: a skip outside tests/support/allowed_skips.py fails it"
            if self.strict
            else "not a strict run: CI=true or `make test STRICT=1` makes one"
        )
        terminalreporter.section(f"skips: {len(self.skips)} ({mode})", sep="=")
        by_reason: dict[tuple[str, str], list[str]] = defaultdict(list)
        for skip in self.skips:
            verdict = skip.allowed_by.name if skip.allowed_by else "NOT ALLOWED"
            by_reason[verdict, skip.reason].append(skip.nodeid)
        for (verdict, reason), nodeids in sorted(by_reason.items()):
            label = f"[allowed: {verdict}]" if verdict != "NOT ALLOWED" else "[NOT ALLOWED]"
            write(f"{label} {len(nodeids)} skipped: {reason}", red=verdict == "NOT ALLOWED")
            for nodeid in sorted(nodeids):
                write(f"    {nodeid}")
        if self.refused:
            outcome = "the run FAILS" if self.strict else "a strict run would fail"
            write(
                f"{len(self.refused)} skipped for reasons the allowed table "
                f"(tests/support/allowed_skips.py) does not name: {outcome}",
                red=True,
                bold=True,
            )


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller receives its reports and decides
    config.pluginmanager.register(SkipGate(strict_run()), "nullbroker-skip-gate")


__all__ = ["ALLOWED_SKIPS", "STRICT_VARIABLE", "Skip", "SkipGate", "strict_run"]
