"""What a handler may know of the connection a request came on: its peer, the address it is
told to reach this node at, its node, and on a SASL listener its authentication.

The connection layer (nullbroker.net, nullbroker.workers.server) makes one per connection
and hands it with every request; dispatch and the handlers read it from below, never the
socket it stands for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cluster.nodes import Cluster
    from .sasl import SaslSession


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(slots=True)
class Session:
    """What a handler may need to know about the connection a request came on."""

    peer: str
    """The client's address, HOST:PORT."""
    advertised: Endpoint
    """The address clients are told to reach this node at (Metadata, FindCoordinator)."""
    node_id: int = 0
    """The node of the cluster the client connected to (nullbroker.cluster.nodes)."""
    ports: dict[int, int] | None = None
    """Each node's port on the listener this client came in on (None: the cluster's)."""
    sasl: SaslSession | None = None
    """On a SASL listener, the connection's authentication; None elsewhere."""
    inter_broker: bool = False
    """A request another worker of this cluster sent, as Kafka's brokers ask each other
    (nullbroker.workers.inter_broker); never a client's."""
    client_software: tuple[str, str] | None = None
    """The name and version of the client's software, as its ApiVersions (v3+) said them
    (KIP-511); None if it did not say."""
    on_close: dict[object, Callable[[], None]] = field(default_factory=dict)
    """What the broker does when this connection closes, by what it concerns: state that
    Kafka ties to a connection registers here (a share session, closed on disconnect)."""

    def node(self, cluster: Cluster, node_id: int) -> Endpoint:
        """Where this client is told to reach `node_id`: the host it reached us at, on the
        listener it came in on."""
        if node_id == self.node_id and not cluster.hosts:
            return self.advertised
        host = cluster.hosts.get(node_id, self.advertised.host)
        ports = self.ports if self.ports is not None else cluster.ports
        return Endpoint(host, ports.get(node_id, self.advertised.port))

    @property
    def host(self) -> str:
        """The client's host, without its port: repeated warnings are summarised by it."""
        return self.peer.rpartition(":")[0] or self.peer
