"""The package as users get it: the sdist and the wheel built by the standard frontend (`python
-m build`, the wheel from the sdist, as an index's release would be), the wheel installed into
a fresh virtual environment that cannot see the checkout, and, from a folder outside it,
`nullbroker serve` with its C modules, `nullbroker.start` and the pytest plugin.

Everything else in the suite runs on the editable install of the checkout, which would hide a
C file or a page left out of the package, or a plugin entry point that does not load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "codec", "nullbroker")
"""What the sdist is made of (pyproject.toml names the packages; the rest of the checkout --
tests, perf, docs -- is not shipped)."""
C_MODULES = ("codec/_native", "nullbroker/handlers/_produce_lane", "nullbroker/net/_lane_reader")
BUILD_TIMEOUT_S = 600
"""Building resolves setuptools into an isolated environment and compiles three C files;
installing fetches the dependencies from PyPI (or pip's cache)."""
C_SERVES = "Produce is served by C (the decoders, the Produce lane and the connection's reader)"


def clean_environment() -> dict[str, str]:
    """The caller's environment without what would let the checkout leak in (PYTHONPATH, this
    venv), and with C required of the build, as a strict run requires it (setup.py)."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    environment = {name: value for name, value in os.environ.items() if name not in dropped}
    environment["NULLBROKER_STRICT"] = "1"
    return environment


def run(command: list[str], cwd: Path, timeout: float = BUILD_TIMEOUT_S) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=clean_environment(), capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done.stdout


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    venv: Path
    user: Path
    """An empty folder outside the checkout, where the user's code runs."""

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def copy_package_sources(destination: Path) -> None:
    for name in PACKAGE_SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source,
                destination / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc", "*.egg-info"),
            )
        else:
            shutil.copy2(source, destination / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    copy_package_sources(source)
    dist = base / "dist"
    # Without --sdist or --wheel, build makes the sdist, then the wheel from the unpacked sdist:
    # what the sdist lacks, the wheel's build lacks too.
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)], cwd=base)
    (sdist,) = dist.glob("nullbroker-*.tar.gz")
    (wheel,) = dist.glob("nullbroker-*.whl")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    # pytest and a client for the user's code below; the wheel brings the broker's own needs.
    run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(wheel), "pytest", "confluent-kafka"],
        cwd=base,
    )
    user = base / "user"
    user.mkdir()
    return Installed(sdist, wheel, venv, user)


def test_the_wheel_holds_the_c_modules_the_status_page_the_plugin_and_the_metadata(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = wheel.read(metadata_name).decode()
        (entry_points_name,) = [name for name in names if name.endswith("entry_points.txt")]
        entry_points = wheel.read(entry_points_name).decode()
    for module in C_MODULES:
        assert any(name.startswith(module) and name.endswith(".so") for name in names), module
    assert "nullbroker/ops/status_page.html" in names
    assert not [name for name in names if name.startswith(("tests/", "perf/", "spark_tests/"))]
    assert "nullbroker = nullbroker.app.pytest_plugin" in entry_points
    assert "nullbroker = nullbroker.app.command:main" in entry_points
    expected = (
        "License-Expression: Apache-2.0",
        "License-File: LICENSE",
        "Classifier: Framework :: Pytest",
        "Keywords: ",
        "Requires-Python: >=3.11",
        "Description-Content-Type: text/markdown",
    )
    for field in expected:
        assert field in metadata, field
    assert "A Kafka-compatible broker whose storage engine is `/dev/null`" in metadata


def test_the_installed_broker_serves_with_c_and_counts_through_nullbroker_start(
    installed: Installed,
) -> None:
    script = installed.user / "count_orders.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            from urllib.request import urlopen
            from confluent_kafka import Producer
            import codec, nullbroker

            # The package is the venv's, not a checkout's.
            where = {"nullbroker": nullbroker.__file__, "codec": codec.__file__}
            assert all(path.startswith(sys.prefix) for path in where.values()), where
            with nullbroker.start(partitions=4) as broker:
                producer = Producer({"bootstrap.servers": broker.bootstrap})
                for number in range(1000):
                    producer.produce("orders", f"order {number}".encode())
                producer.flush()
                accounts = broker.assert_produced("orders", records=1000)
                with urlopen(f"http://{broker.http_address}/", timeout=30) as answer:
                    page = answer.read().decode()
                log = broker.stderr_text()
            print(json.dumps({"where": where, "records": accounts.produced.records,
                              "status_page": "<html" in page.lower(), "log": log}))
            """
        )
    )
    report = json.loads(
        run([str(installed.python), str(script)], cwd=installed.user).splitlines()[-1]
    )
    assert report["records"] == 1000
    assert report["status_page"]
    assert C_SERVES in report["log"], report["log"][-2000:]


def test_the_pytest_plugin_of_the_installed_package_runs_the_readme_s_test(
    installed: Installed,
) -> None:
    (installed.user / "test_orders.py").write_text(
        textwrap.dedent(
            """
            from confluent_kafka import Producer


            def test_every_order_is_counted(nullbroker):
                producer = Producer({"bootstrap.servers": nullbroker.bootstrap})
                for number in range(1000):
                    producer.produce("orders", f"order {number}".encode())
                producer.flush()
                nullbroker.assert_produced("orders", records=1000)


            def test_a_miscount_fails_saying_what_was_counted(nullbroker):
                producer = Producer({"bootstrap.servers": nullbroker.bootstrap})
                producer.produce("orders", b"one")
                producer.flush()
                try:
                    nullbroker.assert_produced("orders", records=2, timeout=1)
                except AssertionError as error:
                    assert "expected 2 records produced, counted 1" in str(error)
                else:
                    raise AssertionError("a miscount passed")
            """
        )
    )
    output = run(
        [str(installed.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_orders.py"],
        cwd=installed.user,
    )
    assert "2 passed" in output, output


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "a-user-s-build"])
def test_a_c_module_that_does_not_compile_fails_a_strict_build_only(
    tmp_path: Path, strict: bool
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    copy_package_sources(source)
    lane = source / "nullbroker" / "handlers" / "_produce_lane.c"
    lane.write_text(lane.read_text() + "\nthis is not C;\n")
    environment = clean_environment()
    if not strict:
        environment.pop("NULLBROKER_STRICT")
        environment.pop("CI", None)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(source)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert "_produce_lane.c" in done.stdout + done.stderr
    if strict:
        assert done.returncode != 0, done.stdout[-3000:]
        return
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("nullbroker-*.whl")
    with zipfile.ZipFile(wheel) as built:
        modules = [name for name in built.namelist() if name.endswith(".so")]
    # The others are built; the pure-Python path serves Produce's lane.
    assert any("_native" in name for name in modules)
    assert not any("_produce_lane" in name for name in modules)
