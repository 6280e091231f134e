"""The package's floor plan holds: no import circle, rooms keep their private modules, and
the top level holds only the shared vocabulary (docs/architecture.md).

Every import counts, those inside functions and under TYPE_CHECKING too: a circle that only
type-checking or a late import keeps alive is still a circle a reader has to untangle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "nullbroker"

TOP_LEVEL = {
    "__init__",
    "__main__",
    "broker",
    "dispatch",
    "settings",
    "stats",
    "clock",
    "log_limit",
    "toml_files",
    "topic_names",
    "java_hashing",
}
"""The shared vocabulary: what every room may name (docs/architecture.md)."""

ROOMS = {"app", "workers", "net", "handlers", "state", "sources", "cluster", "ops", "spark"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
MODULES.update(
    {module_name(path): path for path in PACKAGE.rglob("*.pyi") if module_name(path) not in MODULES}
)


def imported(path: Path) -> Iterator[str]:
    """The package's modules that `path` imports, wherever in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _within(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield from _within(submodule if submodule in MODULES else base)


def _within(name: str) -> Iterator[str]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if name.startswith("nullbroker"):
        yield name


GRAPH = {name: set(imported(path)) - {name} for name, path in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_imports_inside_functions_and_for_type_checking_only() -> None:
    # The walk is what the next test trusts: a late import and a TYPE_CHECKING one count.
    assert "nullbroker.state.groups.classic" in GRAPH["nullbroker.broker"]
    assert "nullbroker.state.transactions" in GRAPH["nullbroker.broker"]


def test_circles_are_found_when_there_are_some() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_module_of_the_package_imports_itself_back_through_others() -> None:
    assert circles(GRAPH) == []


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or module.endswith("__init__") else ""


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_room_reaches_into_another_rooms_private_modules(module: str) -> None:
    reached = [
        target
        for target in GRAPH[module]
        if target.rpartition(".")[2].startswith("_") and room_of(target) != room_of(module)
    ]
    assert reached == []


def test_the_top_level_holds_the_shared_vocabulary_and_the_rooms_only() -> None:
    top = {path.stem for path in PACKAGE.glob("*.py")}
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert top <= TOP_LEVEL, top - TOP_LEVEL
    assert packages == ROOMS


def test_spark_imports_no_broker_code() -> None:
    # The PySpark data source runs in Spark's Python workers: the broker is not there.
    for module, targets in GRAPH.items():
        if module.startswith("nullbroker.spark"):
            assert all(t.startswith("nullbroker.spark") for t in targets), (module, targets)


LAYERS = (
    ("app",),
    ("workers",),
    ("ops",),
    ("net",),
    ("dispatch",),
    ("handlers",),
    ("broker",),
    ("state", "sources", "cluster"),
    ("settings", "stats"),
    ("clock", "log_limit", "toml_files", "topic_names", "java_hashing"),
)
"""docs/architecture.md's order, top first: a module imports its own layer's and those below."""

UPWARD = {
    # Settings are checked where they are read, each by the parser of the room it belongs
    # to (listeners, the read budget's sizes, the node map, sources, faults, the cluster's
    # size, fetch-session slots, a source's schema, SASL users); none of those parsers
    # imports settings back (the circle test above holds it).
    ("nullbroker.settings", "nullbroker.net.listeners"),
    ("nullbroker.settings", "nullbroker.net.read_budget"),
    ("nullbroker.settings", "nullbroker.net.sasl"),
    ("nullbroker.settings", "nullbroker.workers.node_map"),
    ("nullbroker.settings", "nullbroker.sources.synthetic"),
    ("nullbroker.settings", "nullbroker.cluster.nodes"),
    ("nullbroker.settings", "nullbroker.cluster.faults"),
    ("nullbroker.settings", "nullbroker.cluster.fault_specs"),
    ("nullbroker.settings", "nullbroker.state.fetch_sessions"),
    ("nullbroker.settings", "nullbroker.ops.schema_registry"),
    # A session's SASL state, and the mechanisms the handshake names, are the connection's:
    # the broker's Session holds one, and the SASL handlers read them.
    ("nullbroker.broker", "nullbroker.net.sasl"),
    ("nullbroker.handlers.sasl.gate", "nullbroker.net.sasl"),
    ("nullbroker.handlers.sasl.sasl_handshake", "nullbroker.net.sasl"),
    ("nullbroker.handlers.sasl.sasl_authenticate", "nullbroker.net.sasl"),
}
"""The imports that go up the layers, each with its reason. A new one is added here, with
its reason, or not written."""


def layer_of(module: str) -> int | None:
    name = module.split(".")[1] if "." in module else ""
    return next((depth for depth, names in enumerate(LAYERS) if name in names), None)


def test_imports_point_down_the_layers_but_for_those_listed_with_their_reason() -> None:
    upward = {
        (module, target)
        for module, targets in GRAPH.items()
        for target in targets
        if (low := layer_of(module)) is not None
        and (high := layer_of(target)) is not None
        and high < low
    }
    assert upward == UPWARD
