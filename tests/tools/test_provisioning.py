"""The provisioning scripts (scripts/ensure-*) when they cannot do their part: on a user's
machine they say why and exit 0 (the tests that need the part skip, saying why); in a strict
run (CI=true, or `make test STRICT=1`, which sets NULLBROKER_STRICT=1) they exit 1, so that
`make test` stops at once, naming what it could not provision.

Each runs from a copy of scripts/ in an empty checkout (nothing cached), with Maven and go
replaced by commands that fail as an unreachable registry makes them fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAILING = "#!/bin/sh\necho 'could not reach the registry (a test stands in for it)' >&2\nexit 1\n"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """An empty checkout with the scripts and what they read (kfake's go.mod)."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "scripts", root / "scripts")
    shutil.copytree(ROOT / "perf" / "kfake_host", root / "perf" / "kfake_host")
    return root


@pytest.fixture
def unreachable(tmp_path: Path) -> Path:
    """A folder to put first on PATH: `mvn` and `go` that fail."""
    folder = tmp_path / "unreachable"
    folder.mkdir()
    for command in ("mvn", "go"):
        (folder / command).write_text(FAILING)
        (folder / command).chmod(0o755)
    return folder


def environment(path: str, strict: dict[str, str]) -> dict[str, str]:
    kept = dict(os.environ)
    for name in ("CI", "NULLBROKER_STRICT"):
        kept.pop(name, None)
    return {**kept, "PATH": path, **strict}


STRICT_RUNS = [
    pytest.param({"CI": "true"}, 1, id="CI=true"),
    pytest.param({"NULLBROKER_STRICT": "1"}, 1, id="STRICT=1"),
    pytest.param({}, 0, id="a user's run"),
]

SCRIPTS = [
    pytest.param(["ensure-kafka-tools"], "Kafka's tools not provisioned", id="kafka-tools"),
    pytest.param(
        ["ensure-spark-connector", str(Path(sys.executable).parents[1])],
        "Spark's Kafka connector not provisioned",
        id="spark-connector",
    ),
    pytest.param(["ensure-kfake"], "kfake not built", id="kfake"),
    pytest.param(["ensure-kgo-suite"], "kgo suite is not built", id="kgo-suite"),
]


@pytest.mark.parametrize(("strict", "exit_code"), STRICT_RUNS)
@pytest.mark.parametrize(("command", "says"), SCRIPTS)
def test_a_part_that_cannot_be_provisioned_fails_a_strict_run_only(
    checkout: Path,
    unreachable: Path,
    command: list[str],
    says: str,
    strict: dict[str, str],
    exit_code: int,
) -> None:
    path = f"{unreachable}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        [str(checkout / "scripts" / command[0]), *command[1:]],
        env=environment(path, strict),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == exit_code, done.stderr
    assert says in done.stderr, done.stderr
    assert ("stops here" in done.stderr) == (exit_code == 1), done.stderr


@pytest.mark.parametrize(("strict", "exit_code"), STRICT_RUNS)
def test_tools_missing_for_a_user_who_cannot_install_them_fail_a_strict_run_only(
    checkout: Path, tmp_path: Path, strict: dict[str, str], exit_code: int
) -> None:
    # A PATH of the commands the script needs and none of the tools, as a user without root.
    bare = tmp_path / "bare"
    bare.mkdir()
    for command in ("bash", "dirname", "paste"):
        found = shutil.which(command)
        assert found is not None, command
        (bare / command).symlink_to(found)
    (bare / "id").write_text("#!/bin/sh\necho 1000\n")
    (bare / "sudo").write_text(FAILING)
    for fake in ("id", "sudo"):
        (bare / fake).chmod(0o755)
    done = subprocess.run(
        [str(bare / "bash"), str(checkout / "scripts" / "ensure-test-tools")],
        env={**environment(str(bare), strict), "JAVA_HOME": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == exit_code, done.stderr
    assert "kcat openjdk-17-jdk-headless prometheus chromium-headless-shell missing" in done.stderr
    assert "this user cannot install them" in done.stderr
