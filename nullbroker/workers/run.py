"""One broker process run until it is told to stop: the loop it runs in (the epoll host
loop or trio's own), its signals, and the lines that tell the user where it listens."""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

import trio

from codec import native

from ..handlers import produce_lane
from ..net import lane_reader
from ..net.host_loop import HostLoop
from ..net.listeners import listener_specs
from ..settings import Config
from .server import BrokerServer

if TYPE_CHECKING:
    from ..sessions import Endpoint
    from .cluster_changes import WorkerRole

log = logging.getLogger("nullbroker")


def run_server(config: Config, role: WorkerRole | None = None) -> None:
    """Serve until SIGINT or SIGTERM (or, in a worker, until its supervisor goes away)."""
    if config.connection_loop == "epoll":
        HostLoop().run(_serve_until_signalled, config, role)
    else:
        trio.run(_serve_until_signalled, config, role)


async def _serve_until_signalled(config: Config, role: WorkerRole | None) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        server = BrokerServer(config, role)
        # Outside any nursery, so that a start-up mistake arrives as itself, not wrapped
        # in an exception group.
        await server.bind()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signal, signals, server)
            async with trio.open_nursery() as serving:
                await serving.start(server.serve)
                if role is None:
                    _print_addresses(server)
            nursery.cancel_scope.cancel()


async def _stop_on_signal(signals: AsyncIterator[int], server: BrokerServer) -> None:
    async for signum in signals:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        server.stop()
        return


def _print_addresses(server: BrokerServer) -> None:
    assert server.address is not None
    print_addresses(server.node_addresses, server.metrics_address, server.schema_registry_address)
    print_listeners(server.config, server.listener_ports)


def print_listeners(config: Config, ports: dict[str, dict[int, int]]) -> None:
    """Node 0's address on each listener, where there is more than one PLAINTEXT listener."""
    specs = listener_specs(config)
    if len(specs) > 1 or specs[0].name != "PLAINTEXT":
        listed = ", ".join(f"{spec.name} on {spec.host}:{ports[spec.name][0]}" for spec in specs)
        print(f"listeners: {listed}", flush=True)


def print_addresses(
    nodes: Sequence[Endpoint], metrics: Endpoint | None, registry: Endpoint | None
) -> None:
    """The lines that tell the user (and scripts) where the broker listens."""
    print(f"nullbroker listening on {nodes[0].host}:{nodes[0].port}", flush=True)
    if len(nodes) > 1:
        listed = ", ".join(
            f"{node} on {address.host}:{address.port}" for node, address in enumerate(nodes)
        )
        print(f"nodes: {listed}", flush=True)
    log.info("Produce is served by %s", hot_path())
    if metrics is not None:
        print(f"metrics on http://{metrics.host}:{metrics.port}/metrics", flush=True)
    if registry is not None:
        print(f"schema registry on http://{registry.host}:{registry.port}", flush=True)


def hot_path() -> str:
    """Which code serves Produce, for the start line: C whole (the decoders, the Produce lane
    and the connection's reader), or pure Python and why. Each C module builds or fails
    alone, so each is named where it is missing."""
    if not native.switched_on():
        return f"pure Python ({native.VARIABLE}=off)"
    missing = [
        name
        for name, built in (
            ("codec/_native.c", native.load() is not None),
            ("nullbroker/handlers/_produce_lane.c", produce_lane.built()),
            ("nullbroker/net/_lane_reader.c", lane_reader.built()),
        )
        if not built
    ]
    if not missing:
        return "C (the decoders, the Produce lane and the connection's reader)"
    return f"Python where C was not built ({', '.join(missing)})"
