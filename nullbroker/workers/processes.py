"""A cluster spread over processes (`--brokers N --processes P`): the supervisor and its workers.

The process the user started is the supervisor. It binds every node's listener (so that each
node's port is known before anything is served), the metrics and Schema Registry listeners,
and forks P workers: worker k serves the nodes n with n % P == k (node 0, the bootstrap, is
worker 0's) on the listeners it inherits, and holds the partitions they lead and the groups
they coordinate, with no state shared on a request's path. The supervisor answers no Kafka
request. It puts the workers' changes to the cluster in one order
(nullbroker.workers.cluster_changes), passes faults on to them, serves /metrics, /accounts
and /faults and the Schema Registry, prints the console line and writes the summary from
every worker's accounts summed.

SIGINT or SIGTERM: passed to every worker, each of which drains as a lone broker does, sends
its last accounts and exits; then the supervisor writes the summary. A worker that exits on
its own stops the cluster.

Over several hosts (`--node-map`, nullbroker.cluster.node_map) the same holds: the host with node 0
runs the supervisor and a worker for its own nodes; every other host's broker serves its
nodes as a worker that joins the supervisor over TCP. Changes to the cluster wait until
every node of the map has joined.
"""

from __future__ import annotations

import copy
import errno
import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

import trio

from ..cluster.faults import Faults
from ..cluster.node_map import NodeMap, read_node_map
from ..cluster.nodes import Cluster
from ..log_limit import RepeatLimitedLog
from ..net.listeners import listener_specs
from ..ops.report import write_summary
from ..sessions import Endpoint
from ..settings import Config
from ..stats import BrokerStats
from . import operator_services as services
from .channel import ControlChannel, receive_blocking, send_blocking
from .cluster_changes import WorkerRole
from .listening import StartupError, endpoint_of, open_listeners
from .run import print_addresses, print_listeners, run_server
from .server import DRAIN_SECONDS, open_node_listeners

log = logging.getLogger("nullbroker")

JOIN_TIMEOUT_SECONDS = 60.0
"""How long a host of a node map tries to reach the supervisor before giving up."""
STATS_TIMEOUT_SECONDS = 2.0
"""How long a scrape or a console line waits for a worker's accounts before using its last."""


def serve_processes(config: Config) -> int:
    """Run the cluster until a signal: as its supervisor, with `config.process_count`
    workers for this host's nodes (all the nodes, without a node map); or, on a host of a
    node map without node 0, as a worker of the supervisor it joins. The exit status."""
    services.check_summary_path(config)
    node_map = (
        read_node_map(config.node_map, config.named("node_map"))
        if config.node_map is not None
        else None
    )
    bound = trio.run(_bind, config, node_map)
    if node_map is not None and 0 not in bound.nodes:
        return _join_cluster(config, node_map, bound)
    workers = config.process_count
    local = sorted(bound.nodes)
    owners = {node: index % workers for index, node in enumerate(local)}
    pairs = [socket.socketpair() for _ in range(workers)]
    # Workers serve Kafka only: the supervisor has the metrics, the registry and the summary.
    worker_config = replace(config, metrics=None, schema_registry=None, summary_json=None)
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for worker in range(workers):
        pid = os.fork()
        if pid == 0:  # the worker: it never returns from here
            _run_worker(worker_config, worker, owners, bound, pairs)
        pids.append(pid)
    for _, worker_end in pairs:
        worker_end.close()
    for sock in bound.sockets_of(local):
        sock.close()
    supervisor = Supervisor(config, [end for end, _ in pairs], pids, owners, bound)
    trio.run(supervisor.run)
    status = 0
    for worker, pid in enumerate(pids):
        _, wait_status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(wait_status)
        if code:
            log.error("worker %d (pid %d) exited with status %d", worker, pid, code)
            status = 1
    return status


def _join_cluster(config: Config, node_map: NodeMap, bound: _Bound) -> int:
    """Serve this host's nodes as a worker of the supervisor on node 0's host."""
    nodes = sorted(bound.nodes)
    host, port = node_map.supervisor
    log.info("nodes %s: joining the supervisor at %s:%d", _listed(nodes), host, port)
    channel = _connect(host, port, JOIN_TIMEOUT_SECONDS)
    send_blocking(channel, "hello", nodes)
    welcome = receive_blocking(channel)
    if welcome is None or welcome[0] != "welcome":
        raise StartupError(
            f"{config.named('node_map')}: the supervisor at {host}:{port} refused nodes "
            f"{_listed(nodes)}: {welcome[1] if welcome else 'it closed the connection'}"
        )
    worker = int(welcome[1])
    log.info("nodes %s: joined as worker %d", _listed(nodes), worker)
    for sock in [*bound.metrics, *bound.registry]:
        sock.close()
    owners = dict.fromkeys(nodes, worker)
    role = WorkerRole(worker, owners, bound.nodes, bound.ports, bound.hosts, channel)
    # This host's metrics, registry and summary are the supervisor's.
    run_server(replace(config, metrics=None, schema_registry=None, summary_json=None), role)
    return 0


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connection to the supervisor, tried until `timeout` (it may start after us)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError as error:
            if time.monotonic() > deadline:
                raise StartupError(
                    f"cannot reach the cluster's supervisor at {host}:{port} "
                    f"within {timeout:g} s: {error.strerror or error}"
                ) from None
            time.sleep(0.2)


def _listed(nodes: list[int]) -> str:
    return ",".join(map(str, nodes))


@dataclass(slots=True)
class _Bound:
    """What the supervisor opened before forking (or a joining host before joining)."""

    nodes: dict[int, list[socket.socket]]
    """The listening sockets of the nodes served here, by node id."""
    addresses: list[Endpoint]
    ports: dict[int, int]
    hosts: dict[int, str]
    """Each node's host as clients are told it, from a node map (else empty)."""
    metrics: list[socket.socket]
    registry: list[socket.socket]
    control: list[socket.socket]
    """The supervisor's listener for workers on other hosts (a node map's)."""
    further: dict[str, dict[int, list[socket.socket]]] = field(default_factory=dict)
    """Each node's listening sockets on each listener after the first (`--listeners`), by
    listener name, then node id (not with a node map: one listener there)."""
    listener_ports: dict[str, dict[int, int]] = field(default_factory=dict)
    """Each node's port on each listener, as clients are told it, by listener name."""

    def sockets_of(self, nodes: Iterable[int]) -> list[socket.socket]:
        """The listening sockets of these nodes, on every listener."""
        wanted = set(nodes)
        return [
            sock
            for by_node in (self.nodes, *self.further.values())
            for node, sockets in by_node.items()
            if node in wanted
            for sock in sockets
        ]


async def _bind(config: Config, node_map: NodeMap | None) -> _Bound:
    further: dict[str, dict[int, list[socket.socket]]] = {}
    listener_ports: dict[str, dict[int, int]] = {}
    if node_map is None:
        first, *others = listener_specs(config)
        listeners, addresses, ports = await open_node_listeners(config, first)
        listener_ports[first.name] = ports
        for spec in others:
            opened, _, listener_ports[spec.name] = await open_node_listeners(config, spec)
            further[spec.name] = {
                node: [_detached(listener) for listener in sockets]
                for node, sockets in opened.items()
            }
        hosts: dict[int, str] = {}
    else:
        listeners = {}
        for node, (host, port) in node_map.nodes.items():
            opened = await _open_if_here(host, port, config, node)
            if opened is not None:
                listeners[node] = opened
        if not listeners:
            raise StartupError(
                f"{config.named('node_map')} {config.node_map}: no node's address is one "
                "of this host's"
            )
        addresses = [Endpoint(host, port) for host, port in node_map.nodes.values()]
        ports = {node: port for node, (_, port) in node_map.nodes.items()}
        hosts = {node: host for node, (host, _) in node_map.nodes.items()}
    nodes = {
        node: [_detached(listener) for listener in opened] for node, opened in listeners.items()
    }
    http = await services.open_http_listeners(config)
    metrics = [_detached(listener) for listener in http.metrics]
    registry = [_detached(listener) for listener in http.registry]
    control: list[socket.socket] = []
    if node_map is not None and 0 in nodes:
        host, port = node_map.supervisor
        opened = await open_listeners(
            (host, port), config.named("node_map"), f"supervisor {host}:{port}"
        )
        control = [_detached(listener) for listener in opened]
    return _Bound(
        nodes, addresses, ports, hosts, metrics, registry, control, further, listener_ports
    )


async def _open_if_here(
    host: str, port: int, config: Config, node: int
) -> list[trio.SocketListener] | None:
    """A node's listeners if its address is this host's; None if it is another host's."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:
            return None
    # Anything else (a port in use): the usual start-up error, naming the node.
    return await open_listeners(
        (host, port), config.named("node_map"), f"node {node} {host}:{port}"
    )


def _detached(listener: trio.SocketListener) -> socket.socket:
    """The listener's socket as a plain one, to outlive this trio run and be inherited."""
    return socket.socket(fileno=listener.socket.detach())


def _listeners(sockets: list[socket.socket]) -> list[trio.SocketListener]:
    return [trio.SocketListener(trio.socket.from_stdlib_socket(sock)) for sock in sockets]


def _run_worker(
    config: Config,
    worker: int,
    owners: dict[int, int],
    bound: _Bound,
    pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    """The forked worker's whole life; exits the process."""
    status = 0
    try:
        for index, (supervisor_end, worker_end) in enumerate(pairs):
            supervisor_end.close()
            if index != worker:
                worker_end.close()
        for sock in [*bound.metrics, *bound.registry, *bound.control]:
            sock.close()
        mine = {node: sockets for node, sockets in bound.nodes.items() if owners[node] == worker}
        for sock in bound.sockets_of(node for node in bound.nodes if node not in mine):
            sock.close()
        further = {
            name: {node: sockets for node, sockets in by_node.items() if node in mine}
            for name, by_node in bound.further.items()
        }
        role = WorkerRole(
            worker, dict(owners), mine, bound.ports, bound.hosts, pairs[worker][1],
            further, bound.listener_ports,
        )  # fmt: skip
        run_server(config, role)
    except BaseException:  # a worker reports whatever ended it, then exits
        log.exception("worker %d failed", worker)
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


class Supervisor:
    """Orders the workers' cluster changes, passes faults on, and reports for them all."""

    def __init__(
        self,
        config: Config,
        channels: list[socket.socket],
        pids: list[int],
        owners: dict[int, int],
        bound: _Bound,
    ) -> None:
        self.config = config
        self.pids = pids
        """The local workers' pids, by worker id (0 to P-1)."""
        self.bound = bound
        self.channels = [
            ControlChannel(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
            for sock in channels
        ]
        self.names = [f"worker {worker} (pid {pid})" for worker, pid in enumerate(pids)]
        self.owners = dict(owners)
        """The worker that serves each node, by node id; complete once every node of a
        node map has joined."""
        self._complete = trio.Event()
        """Set once every node has its worker: changes to the cluster wait for it."""
        if len(self.owners) == config.brokers:
            self._complete.set()
        self._base = BrokerStats()
        """The supervisor's own accounts: its start, and the faults it counted."""
        self.faults = Faults(Cluster(config.brokers), counts=self._base.faults)
        for spec in config.faults:  # the workers applied these themselves at start
            self.faults.add(spec)
        self.faults.changed = self._pass_fault_on
        self._live = set(self.faults.cluster.live)
        self._faults_changed = trio.Event()
        """Set when a fault is added or the faults are cleared: the time to keep changes."""
        self._outbox_send, self._outbox = trio.open_memory_channel[
            tuple[int | None, tuple[Any, ...]]
        ](math.inf)
        self._sequence = count()
        self._unapplied: dict[int, list[int]] = {}
        """Per change in flight: [origin worker, its request id, workers yet to apply it]."""
        self._accounts: dict[int, tuple[BrokerStats, int, int]] = {}
        self._final: set[int] = set()
        self._gone: set[int] = set()
        self._stats_requests = count()
        self._stats_waiting: dict[int, tuple[set[int], trio.Event]] = {}
        self._stopping = False
        self.stop = trio.Event()
        self.warnings = RepeatLimitedLog(log)

    @property
    def stats(self) -> BrokerStats:
        """The cluster's accounts: every worker's last, summed, with the supervisor's."""
        merged = copy.deepcopy(self._base)
        rss = peak = 0
        for worker_stats, worker_rss, worker_peak in self._accounts.values():
            merged.add(worker_stats)
            rss += worker_rss
            peak += worker_peak
        merged.other_processes_rss = rss
        merged.other_processes_peak_rss = peak
        return merged

    async def run(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                for worker in range(len(self.channels)):
                    nursery.start_soon(self._follow, worker)
                nursery.start_soon(self._pass_changes_on)
                nursery.start_soon(self._bring_nodes_back)
                nursery.start_soon(self._stop_on_signal, signals)
                accounts = services.Accounts(lambda: self.stats, self.reset_counts, self.refresh)
                services.serve_http(
                    nursery,
                    services.HttpListeners(
                        _listeners(self.bound.metrics), _listeners(self.bound.registry)
                    ),
                    accounts,
                    self.faults,
                    services.schema_registry_for(self.config) if self.bound.registry else None,
                    self.warnings,
                )
                if self.bound.control:
                    nursery.start_soon(
                        trio.serve_listeners,
                        self._welcome,
                        _listeners(self.bound.control),
                    )
                nursery.start_soon(
                    services.report_periodically, accounts, self.config.report_interval
                )
                print_addresses(
                    self.bound.addresses,
                    _address_of(self.bound.metrics),
                    _address_of(self.bound.registry),
                )
                print_listeners(self.config, self.bound.listener_ports)
                print(f"processes: {self._describe()}", flush=True)
                await self.stop.wait()
                await self._stop_workers()
                nursery.cancel_scope.cancel()
        if self.config.summary_json:
            write_summary(self.stats, self.config.summary_json)
            log.info("summary written to %s", self.config.summary_json)

    def _describe(self) -> str:
        parts = []
        for worker, name in enumerate(self.names):
            nodes = sorted(node for node, owner in self.owners.items() if owner == worker)
            parts.append(f"{name} serving node{'s' if len(nodes) > 1 else ''} {_listed(nodes)}")
        waiting = sorted(set(range(self.config.brokers)) - set(self.owners))
        text = f"{len(self.pids)} workers, " + ", ".join(parts)
        if waiting:
            text += f"; waiting for node{'s' if len(waiting) > 1 else ''} {_listed(waiting)}"
        return text

    async def _welcome(self, stream: trio.SocketStream) -> None:
        """A worker from another host of the node map: give it an id, follow it."""
        channel = ControlChannel(stream)
        hello = await channel.receive()
        nodes = hello[1] if hello is not None and hello[0] == "hello" else None
        if not isinstance(nodes, list) or not nodes:
            await stream.aclose()
            return
        taken = [n for n in nodes if n in self.owners or not 0 <= n < self.config.brokers]
        if taken:
            await channel.send("refused", f"nodes {_listed(taken)} are served already")
            await stream.aclose()
            return
        worker = len(self.channels)
        self.channels.append(channel)
        peer = stream.socket.getpeername()[0]
        self.names.append(f"worker {worker} (at {peer})")
        for node in nodes:
            self.owners[node] = worker
        await channel.send("welcome", worker)
        log.info("%s joined, serving nodes %s", self.names[worker], _listed(nodes))
        if len(self.owners) == self.config.brokers:
            for other, other_channel in enumerate(self.channels):
                if other not in self._gone:
                    await other_channel.send("owners", dict(self.owners))
            self._complete.set()
            print(f"processes: {self._describe()}; the cluster is complete", flush=True)
        # Followed here: the stream closes when this handler returns.
        await self._follow(worker)

    async def _stop_on_signal(self, signals: Any) -> None:
        async for signum in signals:
            log.info("received %s; stopping the workers", signal.Signals(signum).name)
            self.stop.set()
            return

    async def _stop_workers(self) -> None:
        """SIGTERM to every local worker, a stop message to the others; then wait (bounded)
        for their last accounts."""
        self._stopping = True
        for worker, channel in enumerate(self.channels):
            if worker in self._gone:
                continue
            try:
                if worker < len(self.pids):
                    os.kill(self.pids[worker], signal.SIGTERM)
                else:
                    await channel.send("stop")
            except (ProcessLookupError, trio.BrokenResourceError, trio.ClosedResourceError):
                self._gone.add(worker)
        with trio.move_on_after(DRAIN_SECONDS + 5):
            while len(self._gone) < len(self.channels):
                await trio.sleep(0.05)

    async def _follow(self, worker: int) -> None:
        """Read one worker's messages until it has gone."""
        channel = self.channels[worker]
        while (message := await channel.receive()) is not None:
            kind = message[0]
            if kind == "replicate":
                _, request_id, frame, session_fields = message
                sequence = next(self._sequence)
                live = len(self.channels) - len(self._gone)
                self._unapplied[sequence] = [worker, request_id, live]
                self._pass_on("apply", sequence, frame, session_fields, worker, request_id)
            elif kind == "applied":
                await self._applied(message[1])
            elif kind == "stats":
                self._accounts[worker] = message[2], message[3], message[4]
                waiting = self._stats_waiting.get(message[1])
                if waiting is not None:
                    waiting[0].discard(worker)
                    if not waiting[0]:
                        waiting[1].set()
            elif kind == "handoff":
                _, taker, partitions, groups, transactions = message
                self._pass_on("handoff", partitions, groups, transactions, to=taker)
            elif kind == "ask":  # a request to another worker's node (inter_broker)
                _, node, ask_id, frame = message
                owner = self.owners.get(node)
                if owner is None or owner in self._gone:
                    self._pass_on("answered", ask_id, None, to=worker)
                else:
                    self._pass_on("asked", worker, ask_id, node, frame, to=owner)
            elif kind == "answer":
                _, origin, ask_id, frame = message
                self._pass_on("answered", ask_id, frame, to=origin)
            elif kind == "final":
                self._accounts[worker] = message[1], message[2], message[3]
                self._final.add(worker)
        self._gone.add(worker)
        # What it had yet to apply will not be: let the changes' origins answer.
        for sequence in list(self._unapplied):
            await self._applied(sequence)
        if not self._stopping:
            log.error("%s has gone; stopping the cluster", self.names[worker])
            self.stop.set()

    async def _applied(self, sequence: int) -> None:
        unapplied = self._unapplied.get(sequence)
        if unapplied is None:
            return
        unapplied[2] -= 1
        if unapplied[2] <= 0:
            del self._unapplied[sequence]
            origin, request_id, _ = unapplied
            if origin not in self._gone:
                await self.channels[origin].send("replicated", request_id)

    def _pass_on(self, *message: Any, to: int | None = None) -> None:
        """Queue a message for every worker, or for worker `to`."""
        self._outbox_send.send_nowait((to, message))

    async def _pass_changes_on(self) -> None:
        """Send each message in the order queued, to every worker before the next, so that
        all see one order, and a handoff arrives after the change that caused it."""
        await self._complete.wait()
        async for to, message in self._outbox:
            for worker, channel in enumerate(self.channels):
                if worker in self._gone or to not in (None, worker):
                    continue
                try:
                    await channel.send(*message)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._gone.add(worker)

    def _pass_fault_on(self, spec: str | None) -> None:
        if spec is None:
            self._pass_on("clear_faults")
        else:
            self._pass_on("fault", spec)
        self._live = set(self.faults.cluster.live)
        self._faults_changed.set()

    async def _bring_nodes_back(self) -> None:
        """Keep the faults' time for the workers: tell them when a `down` node is back.
        Asleep unless a fault with a time is in force, woken at its end or when the faults
        change: a supervisor with nothing to time never wakes (every wake-up of a process
        costs the machine a context switch or two, which the workers' clients share)."""
        while True:
            end = self.faults.next_end()
            wait = math.inf if end is None else max(end - time.monotonic(), 0.0)
            with trio.move_on_after(wait):
                await self._faults_changed.wait()
            self._faults_changed = trio.Event()
            self.faults.expire()
            live = set(self.faults.cluster.live)
            for node in sorted(live - self._live):
                self._pass_on("node_up", node)
            self._live = live

    async def refresh(self) -> None:
        """Ask every worker for its accounts; wait for them (bounded)."""
        await self._ask_workers("stats")

    async def reset_counts(self) -> BrokerStats:
        """Zero the cluster's counts (each worker's and the supervisor's own) and return
        them as they stood: each worker answers with its accounts and zeroes them at once,
        so that no request is counted in neither."""
        await self._ask_workers("reset")
        counted = self.stats
        self._base.reset_counts()
        for worker_stats, _, _ in self._accounts.values():
            worker_stats.reset_counts()
        return counted

    async def _ask_workers(self, kind: str) -> None:
        """Send `kind` ("stats" or "reset") to every worker and wait (bounded) for the
        accounts each answers with."""
        request = next(self._stats_requests)
        expected = {worker for worker in range(len(self.channels)) if worker not in self._gone}
        answered = trio.Event()
        self._stats_waiting[request] = (expected, answered)
        try:
            for worker in sorted(expected):
                try:
                    await self.channels[worker].send(kind, request)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    expected.discard(worker)
            if expected:
                with trio.move_on_after(STATS_TIMEOUT_SECONDS):
                    await answered.wait()
        finally:
            del self._stats_waiting[request]


def _address_of(sockets: list[socket.socket]) -> Endpoint | None:
    return endpoint_of(sockets[0].getsockname()) if sockets else None
