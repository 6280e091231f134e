"""The trio server: Kafka listener, metrics endpoint, console reporter, orderly shutdown."""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, cast

import trio

from ..broker import Broker
from ..dispatch import Dispatch
from ..net.connection import RESET, Drain, serve_connection
from ..net.hosted_connection import serve_hosted
from ..net.listeners import Listener, advertised_specs, listener_specs, server_context
from ..net.shared import Shared
from ..ops.report import write_summary
from ..sessions import Endpoint, Session
from ..settings import Config
from .listening import StartupError, endpoint_of, open_listeners
from .operator_services import (
    Accounts,
    HttpListeners,
    check_summary_path,
    open_http_listeners,
    report_periodically,
    schema_registry_for,
    serve_http,
)

if TYPE_CHECKING:
    from .channel import ControlChannel
    from .cluster_changes import ReplicatingBroker, ReplicatingDispatch, WorkerRole

log = logging.getLogger("nullbroker")

# How long connections may take to answer what they have read once shutdown begins.
DRAIN_SECONDS = 10.0
PER_IP = "max_connections_per_ip"
TLS_FAILED = "TlsHandshakeFailed"
TRANSACTION_CHECK_SECONDS = 1.0
"""How often open transactions are checked against their timeout."""
HANDSHAKE_SECONDS = 10.0
"""How long a client on an SSL listener has to finish its TLS handshake."""


def _reset(stream: trio.SocketStream) -> None:
    """Make the connection end in a reset: its reader sees the end of the stream at once
    (the connection is then closed as usual) and the close sends RST, not FIN."""
    try:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
        stream.socket.shutdown(socket.SHUT_RD)
    except OSError:
        pass  # already gone


_LINGER_ZERO = struct.pack("ii", 1, 0)


_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY_SECONDS = 0.1


async def _accept_connections(
    listener: trio.abc.Listener[trio.SocketStream],
    connections: trio.Nursery,
    serve: Callable[[trio.SocketStream], Awaitable[object]],
) -> None:
    """Accept connections and serve each in a task of `connections`, as
    `trio.serve_listeners` does, except that a stream is not closed when its task ends: a
    connection the host loop serves goes on without one, and is closed by whatever ends it."""
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as error:
                if error.errno not in _ACCEPT_CAPACITY_ERRNOS:
                    raise
                # Out of descriptors or memory: say so, and try again shortly.
                log.error(
                    "accept failed: %s; retrying in %s s",
                    os.strerror(error.errno),
                    ACCEPT_RETRY_SECONDS,
                )
                await trio.sleep(ACCEPT_RETRY_SECONDS)
            else:
                connections.start_soon(serve, stream)


class Admission:
    """What admitting a connection took (a connection slot, a count for its client's
    address, a place among its node's streams), given back once, by calling it, when the
    connection closes: at the end of its task, or later for a connection the host loop
    serves without one. Slotted fields, not a list of callbacks: every idle connection
    holds one."""

    __slots__ = ("_host", "_per_ip", "_slots", "_stream", "_streams")

    def __init__(self, slots: trio.Semaphore | None) -> None:
        self._slots = slots
        """--max-connections: a slot its listener's accept() took."""
        self._per_ip: Counter[str] | None = None
        self._host = ""
        self._streams: set[trio.SocketStream] | None = None
        self._stream: trio.SocketStream | None = None

    def count(self, per_ip: Counter[str], host: str) -> None:
        per_ip[host] += 1
        self._per_ip, self._host = per_ip, host

    def list_in(self, streams: set[trio.SocketStream], stream: trio.SocketStream) -> None:
        streams.add(stream)
        self._streams, self._stream = streams, stream

    def __call__(self) -> None:
        if self._streams is not None:
            self._streams.discard(self._stream)  # type: ignore[arg-type]
            self._streams = self._stream = None
        if self._per_ip is not None:
            self._per_ip[self._host] -= 1
            if not self._per_ip[self._host]:
                del self._per_ip[self._host]
            self._per_ip = None
        if self._slots is not None:
            self._slots.release()
            self._slots = None


async def open_node_listeners(
    config: Config, listener: Listener | None = None
) -> tuple[dict[int, list[trio.SocketListener]], list[Endpoint], dict[int, int]]:
    """One socket listener per node for `listener` (the first of the configuration's by
    default), on consecutive ports from its port (or each on a free port for port 0): the
    socket listeners and address of each node, and the port clients are told for each.
    Raises StartupError, having closed what it opened."""
    spec = listener or listener_specs(config)[0]
    setting = config.named("listeners" if config.listeners else "listen")
    advertised = advertised_specs(config).get(spec.name)
    listeners: dict[int, list[trio.SocketListener]] = {}
    addresses: list[Endpoint] = []
    ports: dict[int, int] = {}
    for node in range(config.brokers):
        text = str(spec) if config.brokers == 1 else f"{spec} (node {node})"
        try:
            listeners[node] = await open_listeners(
                (spec.host, spec.port + node if spec.port else 0), setting, text
            )
        except StartupError:
            for opened in listeners.values():
                for socket_listener in opened:
                    await socket_listener.aclose()
            raise
        address = endpoint_of(listeners[node][0].socket.getsockname())
        addresses.append(address)
        ports[node] = advertised[1] + node if advertised else address.port
    return listeners, addresses, ports


class SlotListener(trio.abc.Listener[trio.SocketStream]):
    """A listener that accepts only while a connection slot is free (--max-connections), as
    Kafka's acceptor stops accepting at max.connections: further clients wait in the
    kernel's queue. The slot is released when the connection's handler ends."""

    def __init__(self, inner: trio.SocketListener, slots: trio.Semaphore) -> None:
        self.inner = inner
        self._slots = slots

    async def accept(self) -> trio.SocketStream:
        await self._slots.acquire()
        try:
            return await self.inner.accept()
        except BaseException:
            self._slots.release()
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


class BrokerServer:
    """Runs a Broker on TCP until `stop()` is called, then drains and writes the summary."""

    def __init__(self, config: Config, role: WorkerRole | None = None) -> None:
        self.config = config
        self.role = role
        """Set in a worker process of a cluster (--processes): the nodes it serves, and its
        channel to the supervisor, which serves metrics, faults and the summary."""
        self.dispatch: Dispatch
        if role is None:
            self.broker = Broker(config)
            self.dispatch = Dispatch(self.broker)
        else:
            from .cluster_changes import ReplicatingBroker, ReplicatingDispatch

            worker = ReplicatingBroker(config, worker=role.worker, owners=role.owners)
            self.broker, self.dispatch = worker, ReplicatingDispatch(worker)
        self.shared = Shared(self.dispatch)
        """What the connections share: the dispatch, the idle sweep, the read budget."""
        self.address: Endpoint | None = None
        """Node 0's listening address: the bootstrap server."""
        self.node_addresses: list[Endpoint] = []
        """Each node's listening address, by node id."""
        self.metrics_address: Endpoint | None = None
        self._drain = Drain()
        self._stop = trio.Event()
        self._listeners: dict[tuple[int, Listener], list[trio.SocketListener]] = {}
        """The socket listeners of each node served here and each of its listeners."""
        self.listener_ports: dict[str, dict[int, int]] = {}
        """Each node's port, as clients are told it, by listener (security protocol)."""
        self._tls: ssl.SSLContext | None = None
        """The TLS context of SSL listeners, made when they open."""
        self._advertised = advertised_specs(config)
        """Each listener's advertised address, parsed once, not per connection."""
        self._slots = trio.Semaphore(config.max_connections) if config.max_connections else None
        """--max-connections: one per connection served, taken before it is accepted."""
        self._per_ip: Counter[str] = Counter()
        self._endpoints: dict[tuple[str, int, str, int], Endpoint] = {}
        """Open connections by client address, for --max-connections-per-ip."""
        self._streams: dict[int, set[trio.SocketStream]] = {}
        """Each node's open connections, so that a `down` fault can reset them."""
        self.broker.faults.reset_node = self._reset_node
        self._http_listeners = HttpListeners([], [])
        """--metrics' (with /faults) and --schema-registry's."""
        self.schema_registry_address: Endpoint | None = None
        self.schema_registry = schema_registry_for(config)

    def stop(self) -> None:
        """Stop accepting connections; answer what is in flight; then `serve` returns."""
        self._stop.set()

    async def bind(self) -> None:
        """Check every setting that only the machine can judge, before serving: open the
        listeners and make sure the summary can be written. Raises StartupError."""
        check_summary_path(self.config)
        await self._open_node_listeners()
        try:
            self._http_listeners = await open_http_listeners(self.config)
        except StartupError:
            for listener in self._kafka_listeners:
                await listener.aclose()
            raise
        if self._http_listeners.metrics:
            self.metrics_address = endpoint_of(self._http_listeners.metrics[0].socket.getsockname())
        if self._http_listeners.registry:
            self.schema_registry_address = endpoint_of(
                self._http_listeners.registry[0].socket.getsockname()
            )

    @property
    def _kafka_listeners(self) -> list[trio.SocketListener]:
        return [listener for listeners in self._listeners.values() for listener in listeners]

    async def _open_node_listeners(self) -> None:
        """Every node's listeners; a worker takes the ones its supervisor bound for it."""
        config = self.config
        specs = listener_specs(config)
        if any(spec.tls for spec in specs):
            self._tls = self._tls_context()
        role = self.role
        if role is not None:
            self.broker.cluster.ports.update(role.ports)
            self.broker.cluster.hosts.update(role.hosts)
            self.listener_ports.update(role.listener_ports)
            bound = {specs[0].name: role.listeners, **role.further}
            for spec in specs:
                for node, sockets in bound[spec.name].items():
                    self._listeners[node, spec] = [
                        trio.SocketListener(trio.socket.from_stdlib_socket(sock))
                        for sock in sockets
                    ]
            return
        for index, spec in enumerate(specs):
            try:
                listeners, addresses, ports = await open_node_listeners(config, spec)
            except StartupError:
                for opened in self._listeners.values():
                    for socket_listener in opened:
                        await socket_listener.aclose()
                raise
            for node, opened in listeners.items():
                self._listeners[node, spec] = opened
            self.listener_ports[spec.name] = ports
            if index == 0:  # the first listener's addresses are the bootstrap's
                self.node_addresses = addresses
                self.broker.cluster.ports.update(ports)
        self.address = self.node_addresses[0]

    def _tls_context(self) -> ssl.SSLContext:
        config = self.config
        assert config.tls_cert is not None and config.tls_key is not None
        try:
            return server_context(
                config.tls_cert, config.tls_key, config.tls_ca, config.tls_client_auth
            )
        except (OSError, ssl.SSLError) as error:
            raise StartupError(
                f"{config.named('tls_cert')} {config.tls_cert}, {config.named('tls_key')} "
                f"{config.tls_key}"
                + (f", {config.named('tls_ca')} {config.tls_ca}" if config.tls_ca else "")
                + f": cannot use them: {getattr(error, 'strerror', None) or error}"
            ) from None

    async def serve(
        self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if not self._listeners:
            await self.bind()
        listeners = self._listeners

        async with trio.open_nursery() as connections:
            self._drain.connections = connections
            async with trio.open_nursery() as services:
                for (node, listener), node_listeners in listeners.items():
                    for socket_listener in node_listeners:
                        services.start_soon(
                            _accept_connections,
                            socket_listener
                            if self._slots is None
                            else SlotListener(socket_listener, self._slots),
                            connections,
                            partial(self._serve_kafka, node, listener),
                        )
                accounts = Accounts.of(self.broker.current_accounts)
                serve_http(
                    services,
                    self._http_listeners,
                    accounts,
                    self.broker.faults,
                    self.schema_registry,
                    self.shared.warnings,
                )
                if self.role is None:
                    services.start_soon(report_periodically, accounts, self.config.report_interval)
                else:
                    channel = self._open_control_channel()
                    dispatch = cast("ReplicatingDispatch", self.dispatch)  # made with the role
                    dispatch.channel = channel  # before any connection is served
                    dispatch.broker.inter_broker.channel = channel
                    services.start_soon(dispatch.follow_supervisor, channel, self.stop)
                services.start_soon(self._summarise_repeated_warnings)
                services.start_soon(self.shared.idle_connections.run)
                self.broker.serve_groups_in(services)
                services.start_soon(self._abort_expired_transactions)
                task_status.started(self)
                await self._stop.wait()
                services.cancel_scope.cancel()
            self.broker.serve_groups_in(None)
            log.info("stopped accepting connections; answering requests in flight")
            self._drain.start()
            connections.cancel_scope.deadline = trio.current_time() + DRAIN_SECONDS
        self.shared.warnings.flush(everything=True)
        if self.config.summary_json:
            write_summary(self.broker.current_accounts(), self.config.summary_json)
            log.info("summary written to %s", self.config.summary_json)
        if self.role is not None:
            # The supervisor writes the cluster's summary from every worker's last accounts.
            with trio.move_on_after(DRAIN_SECONDS):
                worker = cast("ReplicatingBroker", self.broker)  # made with the role
                await channel.send("final", *worker.accounts())

    def _open_control_channel(self) -> ControlChannel:
        from .channel import ControlChannel

        assert self.role is not None
        return ControlChannel(trio.SocketStream(trio.socket.from_stdlib_socket(self.role.channel)))

    async def _serve_kafka(self, node: int, listener: Listener, stream: trio.SocketStream) -> None:
        admission = Admission(self._slots)
        goes_on = False
        try:
            goes_on = await self._serve_kafka_in_limits(node, listener, stream, admission)
        finally:
            if not goes_on:  # else closed and given back when the host loop's connection ends
                admission()
                await trio.aclose_forcefully(stream)

    async def _serve_kafka_in_limits(
        self, node: int, listener: Listener, stream: trio.SocketStream, admission: Admission
    ) -> bool:
        try:
            local = stream.socket.getsockname()
            peer = stream.socket.getpeername()
        except OSError as error:
            # Reset before we could ask who it was (ENOTCONN): a closed connection, no more.
            self.broker.stats.protocol_errors[RESET] += 1
            self.shared.warnings.info(
                "unknown", RESET, "connection reset by the client on arrival: %s", error.strerror
            )
            await trio.aclose_forcefully(stream)
            return False
        if self.broker.cluster.is_down(node):
            # A `down` fault: the client finds the node gone, as a crashed broker's.
            self.broker.stats.faults["connections_refused"] += 1
            _reset(stream)
            await trio.aclose_forcefully(stream)
            return False
        session = Session(
            peer=f"{peer[0]}:{peer[1]}",
            advertised=self._advertised_endpoint(listener, node, local),
            node_id=node,
            ports=self.listener_ports.get(listener.name),
        )
        if listener.sasl:
            # imported by a SASL listener's first connection
            from ..sessions.sasl import SaslSession

            broker = self.broker
            session.sasl = SaslSession(
                # Without --users, none but those AlterUserScramCredentials makes (OAUTHBEARER
                # takes its principals from tokens).
                broker.sasl_users,
                self.config.sasl_mechanism_list,
                self.config.sasl_session_lifetime_ms,
                broker.stats.authentications,
                oauth_principal_claim=self.config.oauthbearer_principal_claim,
            )
        host = peer[0]
        per_ip = self.config.max_connections_per_ip
        if per_ip and self._per_ip[host] >= per_ip:
            # As Kafka's max.connections.per.ip: the new connection is closed at once.
            self.broker.stats.connections_refused[PER_IP] += 1
            self.shared.warnings.info(
                host,
                PER_IP,
                "closing connection from %s: %d connections from %s already "
                "(--max-connections-per-ip)",
                session.peer,
                per_ip,
                host,
            )
            await trio.aclose_forcefully(stream)
            return False
        admission.count(self._per_ip, host)
        admission.list_in(self._streams.setdefault(node, set()), stream)
        if listener.tls:
            assert self._tls is not None
            tls_stream = await self._handshake(stream, session)
            if tls_stream is None:
                return False
            return await serve_connection(
                tls_stream, self.shared, session, self._drain, release=admission
            )
        # Under a host loop (the CLI's default) plain TCP connections are served by it.
        return await serve_connection(
            stream,
            self.shared,
            session,
            self._drain,
            serve=serve_hosted,
            release=admission,
        )

    def _advertised_endpoint(
        self, listener: Listener, node: int, local: tuple[str, int]
    ) -> Endpoint:
        """The address a client of `node` on `listener` is told: --advertised-listeners',
        else the address it reached us at. One object for all the clients that share it."""
        key = (listener.name, node, local[0], local[1])
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            advertised = self._advertised.get(listener.name)
            endpoint = self._endpoints[key] = (
                Endpoint(advertised[0], advertised[1] + node) if advertised else endpoint_of(local)
            )
        return endpoint

    async def _handshake(
        self, stream: trio.SocketStream, session: Session
    ) -> trio.SSLStream[trio.SocketStream] | None:
        """The TLS stream over `stream` once its handshake is done; None (logged once per
        client host, counted, closed) when it fails: an unknown CA, no client certificate
        where one is required, plaintext on the SSL port."""
        assert self._tls is not None
        tls_stream = trio.SSLStream(stream, self._tls, server_side=True)
        try:
            with trio.fail_after(HANDSHAKE_SECONDS):
                await tls_stream.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError) as error:
            reason = error.__cause__ or error
            self.broker.stats.protocol_errors[TLS_FAILED] += 1
            self.shared.warnings.info(
                session.host,
                TLS_FAILED,
                "closing connection from %s: TLS handshake failed: %s",
                session.peer,
                getattr(reason, "reason", None) or reason or "timed out",
            )
            await trio.aclose_forcefully(stream)
            return None
        return tls_stream

    def _reset_node(self, node: int) -> int:
        """Reset every connection of `node` (a `down` fault); how many there were."""
        streams = self._streams.get(node, set())
        for stream in streams:
            _reset(stream)
        return len(streams)

    async def _abort_expired_transactions(self) -> None:
        """Abort transactions left open past their timeout (transaction.timeout.ms), as
        Kafka's coordinator does: checked every TRANSACTION_CHECK_SECONDS once the broker
        has a transaction coordinator. Before (and in a worker of several processes, which
        serves no transactions) the task sleeps: a wake-up a second costs a host loop's
        process a round of its trio thread's handoffs for nothing."""
        await self.broker.transactions_made.wait()
        while True:
            await trio.sleep(TRANSACTION_CHECK_SECONDS)
            expired = self.broker.expire_transactions()
            if expired:
                log.info("aborted %d transaction(s) open past their timeout", expired)

    async def _summarise_repeated_warnings(self) -> None:
        """Summarise repeated warnings every half window while any window is open; asleep
        while none is, so that a broker nothing goes wrong with never wakes for them."""
        warnings = self.shared.warnings
        while True:
            if not warnings.gathering:
                logged = trio.Event()
                warnings.noted = logged.set
                await logged.wait()
            await trio.sleep(warnings.window_seconds / 2)
            warnings.flush()
