"""Every Kafka API is added whole, or the suite says which step is missing: the steps of
docs/architecture.md, "Adding a Kafka API". An API's key is Kafka's (codec.ApiKey), served at a
version range (codec.KAFKA_4_RANGES) or listed as not served with why (codec.NOT_SERVED); a
served one has a module that declares its KEY, in the handler table, advertised by
ApiVersions, compared with Kafka by a differential sweep, and placed in one of the cluster's
sets (nullbroker.workers.cluster_changes).

`missing_steps` reads the tables it is given, so the cases below show it failing on APIs
half-added on purpose, as well as passing on the real ones."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from types import ModuleType

import pytest

from codec import KAFKA_4_RANGES, NOT_SERVED, ApiKey
from nullbroker import handlers
from nullbroker.handlers import (
    IMPORTED_ON_FIRST_USE,
    LOADED_AT_START,
    api_module,
    handler_table,
    served_ranges,
)
from nullbroker.workers import cluster_changes
from tests.oracle.test_differential_apis import SWEEP
from tests.oracle.test_differential_share import SHARE_SWEEP
from tests.oracle.test_differential_streams import STREAMS_SWEEP
from tests.oracle.test_differential_table import COMPARED_ELSEWHERE

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ROOT / "nullbroker" / "handlers"


def declared_keys() -> dict[int, str]:
    """The module that declares each key (`KEY = ApiKey.X` at its top level), read from the
    sources, so that no family imported on first use is imported to be checked."""
    declared: dict[int, str] = {}
    for path in sorted(HANDLERS.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and [getattr(target, "id", None) for target in node.targets] == ["KEY"]
                and isinstance(node.value, ast.Attribute)
            ):
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                key = int(ApiKey[node.value.attr])
                assert key not in declared, f"{module} and {declared[key]} both declare {key}"
                declared[key] = module
    return declared


def declared_in_family(family: str) -> list[int]:
    """The keys the API modules of `family`'s package declare."""
    return [
        key
        for key, module in declared_keys().items()
        if module.startswith(f"nullbroker.handlers.{family}.")
    ]


@dataclasses.dataclass(frozen=True)
class Tables:
    """Where an API is added, each as the set of keys (or key → module) it holds."""

    names: Mapping[int, str]
    """Every key Kafka lists, with its name in snake case (codec.ApiKey)."""
    ranges: Collection[int]
    not_served: Collection[int]
    declared: Mapping[int, str]
    """The module that declares each key (`KEY = ApiKey.X`)."""
    table: Mapping[int, str]
    """The module the handler table takes each key's handler from."""
    advertised: Collection[int]
    swept: Collection[int]
    cluster_sets: Mapping[str, Collection[int]]


def real_tables() -> Tables:
    table = {int(module.KEY): module.__name__ for module in LOADED_AT_START}
    for family, keys in IMPORTED_ON_FIRST_USE.items():
        table.update({int(key): api_module(family, key) for key in keys})
    return Tables(
        names={int(key): key.name.lower() for key in ApiKey},
        ranges=set(KAFKA_4_RANGES),
        not_served=set(NOT_SERVED),
        declared=declared_keys(),
        table=table,
        advertised=set(served_ranges(handler_table())),
        swept=set(SWEEP) | set(SHARE_SWEEP) | set(STREAMS_SWEEP) | set(COMPARED_ELSEWHERE),
        cluster_sets={
            name: getattr(cluster_changes, name)
            for name in ("CHANGING_KEYS", "ANSWERED_WHERE_ASKED", "SINGLE_PROCESS_KEYS")
        },
    )


def missing_steps(tables: Tables) -> list[str]:
    """What each API lacks to be added whole (or has where it should not), one line each."""
    missing = []
    for key in sorted({*tables.names, *tables.ranges, *tables.declared, *tables.table}):
        name = tables.names.get(key)
        label = f"{name} ({key})" if name else f"key {key}"
        said: list[str] = []
        if key not in tables.names:
            said.append("not a member of codec.ApiKey")
        served = key in tables.ranges
        if served == (key in tables.not_served):
            said.append(
                "both in KAFKA_4_RANGES and NOT_SERVED"
                if served
                else "in neither KAFKA_4_RANGES nor NOT_SERVED (codec/apis.py)"
            )
        module = tables.declared.get(key)
        if served and module is None:
            said.append("no module declares its KEY")
        if module is not None and name and module.rpartition(".")[2] != name:
            said.append(f"declared by {module}, not a module named {name}")
        if (key in tables.table) != (module is not None):
            said.append(
                f"{module} declares it, but the handler table (handlers/__init__.py) lacks it"
                if module is not None
                else "in the handler table, but no module declares it"
            )
        elif module is not None and tables.table[key] != module:
            said.append(f"the handler table looks for it in {tables.table[key]}, not {module}")
        if served and key not in tables.advertised:
            said.append("served, but not advertised by ApiVersions")
        if key in tables.advertised and key not in tables.table:
            said.append("advertised by ApiVersions without a handler")
        if key in tables.table and key not in tables.swept:
            said.append("no differential sweep asks it (tests/oracle/test_differential_apis.py)")
        placed = [set_name for set_name, keys in tables.cluster_sets.items() if key in keys]
        if key in tables.table and len(placed) != 1:
            said.append(f"in {' and '.join(placed)}" if placed else "in none of the cluster's sets")
        if placed and key not in tables.table:
            said.append(f"in {placed[0]}, but not served")
        missing.extend(f"{label}: {what}" for what in said)
    return missing


def test_every_kafka_api_is_added_whole_or_not_at_all() -> None:
    assert missing_steps(real_tables()) == []


FAKE = 1000
"""A key no Kafka has: the API half-added in the cases below."""


def with_fake(tables: Tables, **steps: bool) -> Tables:
    """`tables` with the fake API added in the steps named True."""
    module = "nullbroker.handlers.fakes.fake_api"

    def plus(keys: Collection[int], step: str) -> Collection[int]:
        return {*keys, FAKE} if steps.get(step) else keys

    def mapped(keys: Mapping[int, str], step: str) -> Mapping[int, str]:
        return {**keys, FAKE: module} if steps.get(step) else keys

    return dataclasses.replace(
        tables,
        names={**tables.names, FAKE: "fake_api"} if steps.get("names") else tables.names,
        ranges=plus(tables.ranges, "ranges"),
        not_served=plus(tables.not_served, "not_served"),
        declared=mapped(tables.declared, "declared"),
        table=mapped(tables.table, "table"),
        advertised=plus(tables.advertised, "advertised"),
        swept=plus(tables.swept, "swept"),
        cluster_sets={
            **tables.cluster_sets,
            "ANSWERED_WHERE_ASKED": plus(
                tables.cluster_sets["ANSWERED_WHERE_ASKED"], "answered_where_asked"
            ),
            "CHANGING_KEYS": plus(tables.cluster_sets["CHANGING_KEYS"], "changing"),
        },
    )


WHOLE = dict.fromkeys(
    ("names", "ranges", "declared", "table", "advertised", "swept", "answered_where_asked"), True
)

HALF_ADDED: dict[str, tuple[dict[str, bool], str]] = {
    "a key and a range only": (
        {"names": True, "ranges": True},
        "fake_api (1000): no module declares its KEY",
    ),
    "a key Kafka lists, neither served nor listed as not": (
        {"names": True},
        "fake_api (1000): in neither KAFKA_4_RANGES nor NOT_SERVED",
    ),
    "served and listed as not served": (
        {**WHOLE, "not_served": True},
        "fake_api (1000): both in KAFKA_4_RANGES and NOT_SERVED",
    ),
    "a range without a key": (
        {**WHOLE, "names": False},
        "key 1000: not a member of codec.ApiKey",
    ),
    "a module outside the handler table": (
        {**WHOLE, "table": False, "advertised": False},
        "declares it, but the handler table (handlers/__init__.py) lacks it",
    ),
    "advertised without a handler": (
        {"names": True, "ranges": True, "advertised": True, "answered_where_asked": True},
        "fake_api (1000): advertised by ApiVersions without a handler",
    ),
    "a handler no differential sweep asks": (
        {**WHOLE, "swept": False},
        "fake_api (1000): no differential sweep asks it",
    ),
    "a key in no cluster set": (
        {**WHOLE, "answered_where_asked": False},
        "fake_api (1000): in none of the cluster's sets",
    ),
    "a key in two cluster sets": (
        {**WHOLE, "changing": True},
        "fake_api (1000): in CHANGING_KEYS and ANSWERED_WHERE_ASKED",
    ),
}


def test_the_fake_added_whole_is_not_missing_a_step() -> None:
    assert missing_steps(with_fake(real_tables(), **WHOLE)) == []


@pytest.mark.parametrize("case", HALF_ADDED)
def test_an_api_half_added_is_named_with_the_step_it_misses(case: str) -> None:
    steps, expected = HALF_ADDED[case]
    missing = missing_steps(with_fake(real_tables(), **steps))
    assert any(expected in line for line in missing), missing
    assert all(line.startswith(("fake_api (1000)", "key 1000")) for line in missing), missing


def test_a_module_that_declares_another_key_than_its_name_is_named() -> None:
    tables = real_tables()
    produce = int(ApiKey.PRODUCE)
    renamed = {**tables.declared, produce: "nullbroker.handlers.log.write"}
    missing = missing_steps(dataclasses.replace(tables, declared=renamed))
    assert "produce (0): declared by nullbroker.handlers.log.write, not a module named produce" in (
        missing
    )


def test_every_api_module_declares_its_key_beside_a_handler() -> None:
    for module in LOADED_AT_START:
        assert callable(module.handle), module.__name__
        assert handlers.HANDLERS[module.KEY] is module.handle
    lazily: list[ModuleType] = [
        importlib.import_module(api_module(family, key))
        for family, keys in IMPORTED_ON_FIRST_USE.items()
        for key in keys
    ]
    for module in lazily:
        assert callable(module.handle), module.__name__


STEPS_NAMED = (
    "codec/apis.py",
    "KAFKA_4_RANGES",
    "NOT_SERVED",
    "nullbroker/handlers/",
    "KEY = ApiKey.",
    "LOADED_AT_START",
    "IMPORTED_ON_FIRST_USE",
    "nullbroker/workers/cluster_changes.py",
    "tests/oracle/test_differential_apis.py",
    "docs/compatibility.md",
    "tests/tools/test_adding_an_api.py",
)


def test_the_architecture_page_lists_every_step() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = re.search(r"^## Adding a Kafka API\n(.*?)(?=^## )", page, re.S | re.M)
    assert section, 'docs/architecture.md has no section "Adding a Kafka API"'
    assert [step for step in STEPS_NAMED if step not in section[1]] == []
