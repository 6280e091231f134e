"""A cluster over several hosts (`--node-map FILE`): which address each node listens at, and
where the cluster's processes reach its supervisor.

    supervisor = "10.0.0.1:9190"   # the host of node 0 runs the supervisor
    [nodes]
    0 = "10.0.0.1:9092"
    1 = "10.0.0.2:9092"

Every host runs `nullbroker serve --node-map FILE` with the same file and settings. Each
serves the nodes whose address is one of its own; the one with node 0 is the supervisor
(nullbroker.workers.processes), which the others join over TCP at `supervisor`. The supervisor's
port speaks the cluster's own pickled messages, restricted to the broker's own types: keep
it inside the cluster's network.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import ConfigError
from ..toml_files import read_table


class NodeMapError(ValueError):
    """A node map that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class NodeMap:
    nodes: dict[int, tuple[str, int]]
    """Each node's host and port, by node id: 0 to N-1."""
    supervisor: tuple[str, int]

    @classmethod
    def read(cls, path: str) -> NodeMap:
        document, nodes = read_table(path, "nodes", 'node id = "HOST:PORT"', NodeMapError)
        parsed: dict[int, tuple[str, int]] = {}
        for key, value in nodes.items():
            if not key.isdigit():
                raise NodeMapError(f"{path}: node ids are whole numbers, not {key!r}")
            parsed[int(key)] = _address(path, f"node {key}", value)
        if sorted(parsed) != list(range(len(parsed))):
            raise NodeMapError(
                f"{path}: node ids must be 0 to {len(parsed) - 1}, got {sorted(parsed)}"
            )
        if len(set(parsed.values())) != len(parsed):
            raise NodeMapError(f"{path}: two nodes have one address")
        # `controller` was the key's name before the supervisor was called so: still read, so
        # maps written then keep working.
        key = "supervisor" if "supervisor" in document else "controller"
        if key not in document:
            raise NodeMapError(
                f'{path}: needs supervisor = "HOST:PORT", where the hosts reach node 0\'s'
            )
        supervisor = _address(path, key, document[key])
        if supervisor[0] != parsed[0][0]:
            raise NodeMapError(f"{path}: the supervisor runs on node 0's host, {parsed[0][0]}")
        return cls(parsed, supervisor)


def read_node_map(path: str, setting: str) -> NodeMap:
    """The node map at `path`, read and checked; ConfigError names the setting as the user
    gave it (`setting`)."""
    try:
        return NodeMap.read(path)
    except NodeMapError as error:
        raise ConfigError(f"{setting} {error}") from None


def _address(path: str, what: str, value: object) -> tuple[str, int]:
    text = str(value)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise NodeMapError(f"{path}: {what}: expected HOST:PORT with a port, got {text!r}")
    return host.strip("[]"), int(port)
