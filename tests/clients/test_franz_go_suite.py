"""franz-go's own kgo test suite (github.com/twmb/franz-go/pkg/kgo at the version
scripts/ensure-kgo-suite pins, unchanged) against nullbroker, as franz-go's CI runs it
against kfake: KGO_SEEDS, KGO_TEST_RF=1, and a SASL_PLAINTEXT listener for its SCRAM and
OAUTHBEARER tests. Once against three nodes, once against one, each a fresh broker that
retains what it is sent (its ETL tests read back what they wrote).

Every test of the binary runs, its unit tests too (they take seconds, and a list of the
tests that need a broker would be a second list to keep per version), except those named
in tests/clients/franz_go_skips.toml, each with its reason. A test that fails, or a panic or
timeout of the binary, fails this test with the failing tests' output.

KGO_TEST_RECORDS (the records each ETL test produces and chains through its groups; franz-go
defaults to 500,000) is RECORDS here: both runs together take about three minutes on two
cores. `make test` builds the binary (scripts/ensure-kgo-suite, with go); without it these
tests skip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nullbroker.app.pytest_plugin import StartBroker
from tests.net.test_sasl import LISTENED

REPO = Path(__file__).resolve().parents[2]
SKIPS = Path(__file__).with_name("franz_go_skips.toml")
RECORDS = 20_000
TIMEOUT_S = 300
"""The binary's own -test.timeout: past it, it panics naming the tests still running."""
SCRAM_USER, SCRAM_PASSWORD = "kgo", "kgo-secret"
BROKER_FLAGS = (
    "--retain", "268435456",
    "--group-initial-rebalance-delay-ms", "0",
    "--group-consumer-heartbeat-interval-ms", "1000",
)  # fmt: skip
MUST_RUN = (
    "TestGroupETL", "TestGroupETL/range/848", "TestTxnEtl", "TestGroupSimple/classic",
    # Reads allow848 without asking the broker itself (alone it skips); in a whole run
    # other tests have asked first.
    "TestGroupSimple/848",
    "TestSCRAMAuth", "TestSCRAMAuthBadCredentials", "TestOAuthAuth",
    # Share groups (KIP-932): they skip themselves without ShareFetch v2.
    "TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose",
    "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal",
)  # fmt: skip
"""Tests that must pass, not skip: the broker's and SASL's settings reached them."""


def pinned_version() -> str:
    found = re.search(
        r'^version="(v[^"]+)"$', (REPO / "scripts/ensure-kgo-suite").read_text(), re.M
    )
    assert found is not None, "scripts/ensure-kgo-suite pins no version"
    return found[1]


SUITE = REPO / ".cache" / "kgo-suite" / pinned_version()
BINARY, TEST2JSON = SUITE / "kgo.test", SUITE / "test2json"
PACKAGE_DIR = SUITE / "src" / "pkg" / "kgo"
"""The tests' working directory, as `go test` runs them: some read the package's sources."""

pytestmark = [
    pytest.mark.clients,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (BINARY.exists() and TEST2JSON.exists()),
        reason="franz-go's kgo suite is not built; scripts/ensure-kgo-suite (make test) "
        "builds it with go",
    ),
]


def skip_list() -> dict[str, str]:
    """Test names (slash-separated subtest paths) and why each is skipped."""
    skips = tomllib.loads(SKIPS.read_text())["skip"]
    assert all(isinstance(reason, str) and reason for reason in skips.values()), SKIPS
    return dict(skips)


def skip_pattern(names: list[str]) -> str:
    """One -test.skip pattern for `names`: Go splits each top-level alternative at its
    slashes and matches each part against one level of the test's name."""
    return "|".join(
        "/".join(f"^{re.escape(level)}$" for level in name.split("/")) for name in names
    )


@dataclass
class SuiteRun:
    """What test2json reported: each test's result, and its output."""

    results: dict[str, str] = field(default_factory=dict)
    output: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    package_result: str | None = None
    package_output: list[str] = field(default_factory=list)

    def named(self, result: str) -> list[str]:
        return sorted(name for name, got in self.results.items() if got == result)

    def report(self, names: list[str]) -> str:
        parts = [f"--- {name}\n{shortened(self.output[name])}" for name in names]
        if not names:  # a panic outside any test: the package's own output
            parts.append(shortened(self.package_output))
        return "\n".join(parts)


def shortened(lines: list[str], head: int = 100, tail: int = 200) -> str:
    """A test's output, its middle left out when long: an ETL test logs thousands of lines,
    and a panic's message comes first, its goroutines after."""
    if len(lines) <= head + tail:
        return "".join(lines)
    left_out = f"[... {len(lines) - head - tail} lines ...]\n"
    return "".join([*lines[:head], left_out, *lines[-tail:]])


def run_suite(env: dict[str, str]) -> SuiteRun:
    command = [
        str(TEST2JSON), "-t", "-p", "kgo", str(BINARY),
        "-test.v=test2json", "-test.timeout", f"{TIMEOUT_S}s",
        "-test.skip", skip_pattern(list(skip_list())),
    ]  # fmt: skip
    finished = subprocess.run(
        command,
        cwd=PACKAGE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S + 60,
        check=False,
    )
    run = SuiteRun()
    for line in finished.stdout.splitlines():
        event = json.loads(line)
        name, action = event.get("Test"), event["Action"]
        if name is None:
            if action == "output":
                run.package_output.append(event["Output"])
            elif action in ("pass", "fail", "skip"):
                run.package_result = action
        elif action == "output":
            run.output[name].append(event["Output"])
        elif action in ("pass", "fail", "skip"):
            run.results[name] = action
    if finished.returncode != 0 and run.package_result != "fail":
        run.package_result = "fail"
        run.package_output.append(finished.stderr)
    return run


@pytest.mark.parametrize(
    ("nodes", "processes"),
    [(3, 1), (1, 1), (3, 2), (3, 3)],
    ids=["three-nodes", "one-node", "three-nodes-two-processes", "three-nodes-three-processes"],
)
def test_franz_gos_kgo_suite_passes(
    nullbroker_factory: StartBroker, tmp_path: Path, nodes: int, processes: int
) -> None:
    users = tmp_path / "users.toml"
    users.write_text(f'[users]\n{SCRAM_USER} = "{SCRAM_PASSWORD}"\n')
    listeners = (
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--users", str(users), "--sasl-mechanisms", "SCRAM-SHA-256,OAUTHBEARER",
    )  # fmt: skip
    broker = nullbroker_factory(
        *listeners,
        "--brokers", str(nodes), "--processes", str(processes), *BROKER_FLAGS,
    )  # fmt: skip
    sasl = re.search(r"SASL_PLAINTEXT on (\S+:\d+)", broker.wait_for_line(LISTENED, 10))
    assert sasl is not None
    sasl_env = {
        "KGO_TEST_SCRAM_SEEDS": sasl[1], "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}",
        "KGO_TEST_OAUTH_SEEDS": sasl[1],
    }  # fmt: skip
    run = run_suite({
        "KGO_SEEDS": broker.bootstrap, "KGO_TEST_RF": "1", "KGO_TEST_RECORDS": str(RECORDS),
        "KGO_LOG_LEVEL": "info", **sasl_env,
    })  # fmt: skip
    failed = run.named("fail")
    assert not failed and run.package_result == "pass", (
        f"franz-go's kgo tests failed against {nodes} node(s): {failed or 'the binary'}\n"
        + run.report(failed)
    )
    # The broker tests ran (not skipped for a missing setting), the SASL ones included, on
    # every cluster shape.
    passed = set(run.named("pass"))
    assert set(MUST_RUN) <= passed, {name: run.results.get(name) for name in MUST_RUN}
