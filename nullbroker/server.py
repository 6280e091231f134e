"""The trio server: Kafka listener, metrics endpoint, console reporter, orderly shutdown."""

from __future__ import annotations

import errno
import logging
import socket
import time
from functools import partial

import trio

from .broker import Broker, Endpoint, Session
from .config import Config
from .connection import RESET, Drain, serve_connection
from .hosted_connection import serve_hosted
from .http import metrics_handler, serve_http_connection
from .report import ConsoleReporter, check_summary_writable, write_summary
from .schema_registry import SchemaRegistry

log = logging.getLogger("nullbroker")

# How long connections may take to answer what they have read once shutdown begins.
DRAIN_SECONDS = 10.0


def _endpoint(sockname: tuple[str, int] | tuple[str, int, int, int]) -> Endpoint:
    return Endpoint(sockname[0], sockname[1])


class StartupError(Exception):
    """A setting the broker cannot start with (a port in use, a host that does not
    resolve, a folder it cannot write to); the message names the setting as the user did."""


async def _open_listeners(
    address: tuple[str, int], setting: str, text: str
) -> list[trio.SocketListener]:
    host, port = address
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except socket.gaierror as error:
        raise StartupError(
            f"{setting} {text}: cannot resolve host {host!r} ({error.strerror})"
        ) from None
    except OSError as error:
        hint = ""
        if error.errno == errno.EADDRINUSE:
            hint = " (another process listens there; choose another port, or port 0 for a free one)"
        elif error.errno == errno.EADDRNOTAVAIL:
            hint = " (not an address of this machine)"
        raise StartupError(f"{setting} {text}: cannot listen: {error.strerror}{hint}") from None


class BrokerServer:
    """Runs a Broker on TCP until `stop()` is called, then drains and writes the summary."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.broker = Broker(config)
        self.address: Endpoint | None = None
        self.metrics_address: Endpoint | None = None
        self._drain = Drain()
        self._stop = trio.Event()
        self._listeners: list[trio.SocketListener] = []
        self._metrics_listeners: list[trio.SocketListener] = []
        self._registry_listeners: list[trio.SocketListener] = []
        self.schema_registry_address: Endpoint | None = None
        self.schema_registry = (
            SchemaRegistry.for_sources(config.sources) if config.schema_registry else None
        )
        """Confluent's Schema Registry REST paths, in memory, with --schema-registry."""

    def stop(self) -> None:
        """Stop accepting connections; answer what is in flight; then `serve` returns."""
        self._stop.set()

    async def bind(self) -> None:
        """Check every setting that only the machine can judge, before serving: open the
        listeners and make sure the summary can be written. Raises StartupError."""
        config = self.config
        summary_path = config.summary_json
        if summary_path:
            try:
                check_summary_writable(summary_path)
            except OSError as error:
                raise StartupError(
                    f"{config.named('summary_json')} {summary_path}: cannot write there: "
                    f"{error.strerror}"
                ) from None
        self._listeners = await _open_listeners(
            config.listen_address, config.named("listen"), config.listen
        )
        self.address = _endpoint(self._listeners[0].socket.getsockname())
        if config.metrics_address and config.metrics:
            try:
                self._metrics_listeners = await _open_listeners(
                    config.metrics_address, config.named("metrics"), config.metrics
                )
            except StartupError:
                for listener in self._listeners:
                    await listener.aclose()
                raise
            self.metrics_address = _endpoint(self._metrics_listeners[0].socket.getsockname())
        if config.schema_registry_address:
            try:
                self._registry_listeners = await _open_listeners(
                    config.schema_registry_address,
                    config.named("schema_registry"),
                    str(config.schema_registry),
                )
            except StartupError:
                for listener in [*self._listeners, *self._metrics_listeners]:
                    await listener.aclose()
                raise
            self.schema_registry_address = _endpoint(
                self._registry_listeners[0].socket.getsockname()
            )

    async def serve(
        self, *, task_status: trio.TaskStatus[BrokerServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if not self._listeners:
            await self.bind()
        listeners, metrics_listeners = self._listeners, self._metrics_listeners

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
                        partial(
                            serve_http_connection,
                            handle=metrics_handler(render),
                            warnings=self.broker.warnings,
                        ),
                        metrics_listeners,
                    )
                if self._registry_listeners and self.schema_registry is not None:
                    services.start_soon(
                        trio.serve_listeners,
                        partial(
                            serve_http_connection,
                            handle=self.schema_registry.handle,
                            warnings=self.broker.warnings,
                            name="schema registry",
                            kind="SchemaRegistryError",
                        ),
                        self._registry_listeners,
                    )
                services.start_soon(self._report_periodically)
                services.start_soon(self._summarise_repeated_warnings)
                services.start_soon(self.broker.groups.run)
                task_status.started(self)
                await self._stop.wait()
                services.cancel_scope.cancel()
            log.info("stopped accepting connections; answering requests in flight")
            self._drain.start()
            connections.cancel_scope.deadline = trio.current_time() + DRAIN_SECONDS
        self.broker.warnings.flush(everything=True)
        if self.config.summary_json:
            write_summary(self.broker.stats, self.config.summary_json)
            log.info("summary written to %s", self.config.summary_json)

    async def _serve_kafka(self, stream: trio.SocketStream) -> None:
        try:
            local = stream.socket.getsockname()
            peer = stream.socket.getpeername()
        except OSError as error:
            # Reset before we could ask who it was (ENOTCONN): a closed connection, no more.
            self.broker.stats.protocol_errors[RESET] += 1
            self.broker.warnings.info(
                "unknown", RESET, "connection reset by the client on arrival: %s", error.strerror
            )
            await trio.aclose_forcefully(stream)
            return
        advertised = self.config.advertised_address
        session = Session(
            peer=f"{peer[0]}:{peer[1]}",
            # Without --advertise, tell each client the address it reached us at.
            advertised=Endpoint(*advertised) if advertised else _endpoint(local),
        )
        # Under a host loop (the CLI's default) plain TCP connections are served by it.
        await serve_connection(stream, self.broker, session, self._drain, serve=serve_hosted)

    async def _summarise_repeated_warnings(self) -> None:
        warnings = self.broker.warnings
        while True:
            await trio.sleep(warnings.window_seconds / 2)
            warnings.flush()

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
