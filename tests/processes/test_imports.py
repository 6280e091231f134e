"""What `nullbroker serve` imports before it listens: every module costs resident memory
for the broker's whole life, so what only some options or requests use is imported when
they are used (perf/README.md, Memory)."""

from __future__ import annotations

import importlib
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nullbroker.app.launcher import start
from nullbroker.handlers import IMPORTED_ON_FIRST_USE, api_module
from tests.tools.test_adding_an_api import declared_in_family

TIMEOUT = 30.0


def modules_imported_by_serve(*flags: str) -> set[str]:
    """The modules a broker started with `flags` has imported once it prints that it
    listens, as `python -X importtime` lists them. Started without --summary-json, which
    imports json at start."""
    importtime = [sys.executable, "-X", "importtime", "-m", "nullbroker"]
    with start(*flags, summary=False, program=importtime, metrics=False) as broker:
        assert broker.end(signal.SIGINT, TIMEOUT) == 0, broker.stderr_tail()
        stderr = broker.stderr_text()
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and not line.endswith("| imported package")
    }


def test_default_serve_imports_no_http_json_toml_or_prometheus() -> None:
    imported = modules_imported_by_serve()
    assert "nullbroker.workers.server" in imported  # the listing is the broker's
    unused = {
        # imported by the first request of their family (handlers.IMPORTED_ON_FIRST_USE)
        *(
            f"nullbroker.state.groups.{module}"
            for module in (
                "classic",
                "model",
                "replies",
                "timers",
                "commits",
                "listing",
                "consumer",
            )
        ),
        "nullbroker.state.transactions",
        "nullbroker.sessions.sasl",
        "nullbroker.sessions.scram",
        "nullbroker.sessions.oauthbearer",
        "nullbroker.cluster.fault_specs",  # parsing faults: by the first one given
        *(f"nullbroker.handlers.{family}" for family in IMPORTED_ON_FIRST_USE),
        "h11",  # the HTTP endpoint: --metrics, --schema-registry
        "nullbroker.ops.http_endpoint",
        "json",  # faults' HTTP answers, the summary at shutdown, JSON sources
        "tomllib",  # --config, --users, --node-map
        "prometheus_client",  # --metrics
        "http.server",
        "urllib.request",
        "email",
    }
    assert imported & unused == set()


def test_serve_never_imports_asyncio_or_typing_extensions() -> None:
    """kio uses them in annotations only; the entry point keeps them out (stand-ins)."""
    imported = modules_imported_by_serve()
    assert {"kio.serial.readers", "kio.serial.writers"} <= imported  # through the stand-ins
    assert {name.split(".")[0] for name in imported} & {"asyncio", "typing_extensions"} == set()


# Every line of the kio modules `import kio.serial` loads that names a module the entry
# point stands in for (nullbroker.app.command.KIO_TYPE_ONLY_IMPORTS). `Buffer` is named in
# annotations of a module with `from __future__ import annotations`: never evaluated.
KIO_TYPE_ONLY_USES = {
    "kio.serial.writers": [
        "import asyncio",
        "Writable: TypeAlias = asyncio.StreamWriter | IO[bytes]",
    ],
    "kio.serial.readers": [
        "from __future__ import annotations",
        "from typing_extensions import Buffer",
        "buffer: Buffer,",
    ],
}


def test_kio_uses_the_modules_stood_in_for_only_as_the_stand_ins_allow() -> None:
    """Were kio to use them for anything else, a broker would fail there: this fails first.
    Run in a fresh interpreter, as the entry point runs, to see what `kio.serial` loads."""
    program = (
        "import sys, json\n"
        "from nullbroker.app import command\n"
        "command._import_kio_serial_without_type_only_imports()\n"
        "print(json.dumps({name: getattr(module, '__file__', None) for name, module in "
        "sys.modules.items() if name.split('.')[0] in ('kio', 'asyncio', 'typing_extensions')}))"
    )
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert run.returncode == 0, run.stderr
    loaded: dict[str, str | None] = json.loads(run.stdout)
    assert {name.split(".")[0] for name in loaded} == {"kio"}
    words = ("asyncio", "typing_extensions", "__future__", "Buffer")
    uses = {
        name: [
            line.strip()
            for line in Path(path).read_text().splitlines()
            if any(re.search(rf"\b{word}\b", line) for word in words)
        ]
        for name, path in loaded.items()
        if path is not None and path.endswith(".py")
    }
    naming = {name: lines for name, lines in uses.items() if set(lines) - {_FUTURE}}
    assert naming == KIO_TYPE_ONLY_USES


_FUTURE = "from __future__ import annotations"


def test_a_json_source_is_served_without_its_generator_or_json(tmp_path: Path) -> None:
    schema = tmp_path / "click.json"
    schema.write_text('{"type": "object", "properties": {"user": {"type": "string"}}}')
    imported = modules_imported_by_serve(
        "--source", f"clicks:records=10,format=json,schema={schema}"
    )
    assert "nullbroker.sources.value_pool" in imported  # the listing is a JSON source's
    assert imported & {"json", "nullbroker.sources.json_values"} == set()


def test_an_avro_source_is_served_without_importing_fastavro_or_http(tmp_path: Path) -> None:
    schema = tmp_path / "click.avsc"
    schema.write_text(
        '{"type": "record", "name": "Click", "fields": [{"name": "user", "type": "string"}]}'
    )
    source = f"clicks:partitions=1,records=10,format=avro,schema={schema},wire=confluent"
    imported = modules_imported_by_serve("--source", source)
    assert "nullbroker.sources.avro_values" in imported  # the listing is an Avro source's
    assert not {name for name in imported if name.split(".")[0] in ("fastavro", "cramjam")}
    assert "decimal" not in imported  # only the child generating the values needs it
    # Nor JSON: the values come back on a pipe, and one source needs no schema-id check.
    assert (
        imported & {"json", "nullbroker.sources.json_values", "nullbroker.ops.schema_registry"}
        == set()
    )
    assert (
        imported & {"h11", "nullbroker.ops.http_endpoint"} == set()
    )  # the schema's text, read without


@pytest.mark.parametrize("family", IMPORTED_ON_FIRST_USE)
def test_a_family_imported_on_first_use_is_listed_with_every_key_it_serves(family: str) -> None:
    assert sorted(declared_in_family(family)) == sorted(IMPORTED_ON_FIRST_USE[family])
    for key in IMPORTED_ON_FIRST_USE[family]:
        assert key == importlib.import_module(api_module(family, key)).KEY
