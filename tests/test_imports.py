"""What `nullbroker serve` imports before it listens: every module costs resident memory
for the broker's whole life, so what only some options or requests use is imported when
they are used (perf/README.md, Memory)."""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nullbroker.handlers import IMPORTED_ON_FIRST_USE

TIMEOUT = 30.0


def modules_imported_by_serve(*flags: str) -> set[str]:
    """The modules a broker started with `flags` has imported once it prints that it
    listens, as `python -X importtime` lists them."""
    command = [sys.executable, "-X", "importtime", "-m", "nullbroker", "serve"]
    process = subprocess.Popen(
        [*command, "--listen", "127.0.0.1:0", *flags],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("nullbroker listening on"):
                break
        else:
            pytest.fail("the broker stopped before it listened")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
        process.wait()
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and not line.endswith("| imported package")
    }


def test_default_serve_imports_no_http_json_toml_or_prometheus() -> None:
    imported = modules_imported_by_serve()
    assert "nullbroker.server" in imported  # the listing is the broker's
    unused = {
        # imported by the first request of their family (handlers.IMPORTED_ON_FIRST_USE)
        "nullbroker.groups",
        "nullbroker.consumer_groups",
        "nullbroker.transactions",
        "nullbroker.sasl",
        "nullbroker.fault_specs",  # parsing faults: by the first one given
        *(f"nullbroker.handlers.{family}" for family in IMPORTED_ON_FIRST_USE),
        "h11",  # the HTTP endpoint: --metrics, --schema-registry
        "nullbroker.http",
        "json",  # faults' HTTP answers, the summary at shutdown, JSON sources
        "tomllib",  # --config, --users, --node-map
        "prometheus_client",  # --metrics
        "http.server",
        "urllib.request",
        "email",
    }
    assert imported & unused == set()


def test_serve_never_imports_asyncio() -> None:
    """kio's one use of asyncio is a type alias; the entry point keeps asyncio out."""
    imported = modules_imported_by_serve()
    assert "kio.serial.writers" in imported  # kio was imported through the stand-in
    assert {name for name in imported if name.split(".")[0] == "asyncio"} == set()


def test_kio_uses_asyncio_only_in_the_alias_the_entry_point_stands_in_for() -> None:
    """The stand-in (nullbroker.command) has only a `StreamWriter`: were kio to use asyncio
    for anything else, a broker would fail there, so this fails first."""
    import kio.serial.writers

    source = Path(kio.serial.writers.__file__).read_text()
    uses = [line.strip() for line in source.splitlines() if "asyncio" in line]
    assert uses == ["import asyncio", "Writable: TypeAlias = asyncio.StreamWriter | IO[bytes]"]
    kio_root = Path(kio.serial.writers.__file__).parents[1]
    others = [
        path.relative_to(kio_root)
        for path in kio_root.rglob("*.py")
        if path.name != "writers.py" and "asyncio" in path.read_text()
    ]
    assert others == []  # kio.schema's entity modules included


def test_an_avro_source_is_served_without_importing_fastavro_or_http(tmp_path: Path) -> None:
    schema = tmp_path / "click.avsc"
    schema.write_text(
        '{"type": "record", "name": "Click", "fields": [{"name": "user", "type": "string"}]}'
    )
    source = f"clicks:partitions=1,records=10,format=avro,schema={schema},wire=confluent"
    imported = modules_imported_by_serve("--source", source)
    assert "nullbroker.avro_values" in imported  # the listing is an Avro source's
    assert not {name for name in imported if name.split(".")[0] in ("fastavro", "cramjam")}
    assert "decimal" not in imported  # only the child generating the values needs it
    assert imported & {"h11", "nullbroker.http"} == set()  # the schema's text, read without


@pytest.mark.parametrize("family", IMPORTED_ON_FIRST_USE)
def test_a_family_imported_on_first_use_is_listed_with_every_key_it_serves(family: str) -> None:
    module = importlib.import_module(f"nullbroker.handlers.{family}")
    assert sorted(module.HANDLERS) == sorted(IMPORTED_ON_FIRST_USE[family])
