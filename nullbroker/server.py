"""The trio server: Kafka listener, metrics endpoint, console reporter, orderly shutdown."""

from __future__ import annotations

import logging
import time
from functools import partial

import trio

from .broker import Broker, Endpoint, Session
from .config import Config
from .connection import Drain, serve_connection
from .http import serve_metrics_connection
from .report import ConsoleReporter, write_summary

log = logging.getLogger("nullbroker")

# How long connections may take to answer what they have read once shutdown begins.
DRAIN_SECONDS = 10.0


def _endpoint(sockname: tuple[str, int] | tuple[str, int, int, int]) -> Endpoint:
    return Endpoint(sockname[0], sockname[1])


class BrokerServer:
    """Runs a Broker on TCP until `stop()` is called, then drains and writes the summary."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.broker = Broker(config)
        self.address: Endpoint | None = None
        self.metrics_address: Endpoint | None = None
        self._drain = Drain()
        self._stop = trio.Event()

    def stop(self) -> None:
        """Stop accepting connections; answer what is in flight; then `serve` returns."""
        self._stop.set()

    async def serve(
        self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        host, port = self.config.listen_address
        listeners = await trio.open_tcp_listeners(port, host=host)
        self.address = _endpoint(listeners[0].socket.getsockname())
        metrics_listeners = []
        if self.config.metrics_address:
            metrics_host, metrics_port = self.config.metrics_address
            metrics_listeners = await trio.open_tcp_listeners(metrics_port, host=metrics_host)
            self.metrics_address = _endpoint(metrics_listeners[0].socket.getsockname())

        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as services:
                services.start_soon(
                    partial(trio.serve_listeners, handler_nursery=connections),
                    self._serve_kafka,
                    listeners,
                )
                if metrics_listeners:
                    # Imported only when asked for: prometheus_client brings asyncio, http
                    # and email with it, megabytes a broker without --metrics never needs.
                    from .metrics import exposition, make_registry

                    registry = make_registry(self.broker.stats)
                    render = partial(exposition, registry)
                    services.start_soon(
                        trio.serve_listeners,
                        partial(serve_metrics_connection, render=render),
                        metrics_listeners,
                    )
                services.start_soon(self._report_periodically)
                services.start_soon(self.broker.groups.run)
                task_status.started(self)
                await self._stop.wait()
                services.cancel_scope.cancel()
            log.info("stopped accepting connections; answering requests in flight")
            self._drain.start()
            connections.cancel_scope.deadline = trio.current_time() + DRAIN_SECONDS
        if self.config.summary_json:
            write_summary(self.broker.stats, self.config.summary_json)
            log.info("summary written to %s", self.config.summary_json)

    async def _serve_kafka(self, stream: trio.SocketStream) -> None:
        local = stream.socket.getsockname()
        peer = stream.socket.getpeername()
        advertised = self.config.advertised_address
        session = Session(
            peer=f"{peer[0]}:{peer[1]}",
            # Without --advertise, tell each client the address it reached us at.
            advertised=Endpoint(*advertised) if advertised else _endpoint(local),
        )
        await serve_connection(stream, self.broker, session, self._drain)

    async def _report_periodically(self) -> None:
        reporter = ConsoleReporter(self.broker.stats)
        interval = self.config.report_interval
        last = time.monotonic()
        while True:
            await trio.sleep(interval)
            now = time.monotonic()
            line = reporter.line(now - last)
            last = now
            if line:
                print(line, flush=True)
