"""What a broker offers its operator besides Kafka: the summary's path checked before
serving, the HTTP services (/metrics with /accounts and /faults, the Schema Registry) and
the console line every --report-interval. One piece of code for a lone broker
(workers/server.py) and a cluster's supervisor (workers/processes.py), which differ only in
where the accounts come from (`Accounts`).

Nothing here imports the HTTP layer (h11), prometheus_client or the Schema Registry before
they are asked for: a broker without --metrics or --schema-registry never loads them."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ..ops.report import ConsoleReporter, check_summary_writable
from ..settings import Config
from ..stats import BrokerStats
from .listening import StartupError, open_listeners

if TYPE_CHECKING:
    from ..cluster.faults import Faults
    from ..log_limit import RepeatLimitedLog
    from ..ops.history import History
    from ..ops.http_endpoint import Handler, HttpRequest, HttpResponse
    from ..ops.schema_registry import SchemaRegistry


@dataclass(frozen=True, slots=True)
class Accounts:
    """Where the accounts shown come from: `current()` gives them; `reset()` zeroes the
    counts and gives them as they stood (POST /accounts/reset); `refresh`, when set, is
    awaited before each read of /metrics or /accounts and each console line (a supervisor
    asks its workers for theirs)."""

    current: Callable[[], BrokerStats]
    reset: Callable[[], Awaitable[BrokerStats]]
    refresh: Callable[[], Awaitable[None]] | None = None

    @classmethod
    def of(cls, stats: Callable[[], BrokerStats]) -> Accounts:
        """The accounts of one process: `stats()` is the object the broker counts in."""

        async def reset() -> BrokerStats:
            return stats().reset_counts()

        return cls(stats, reset)


def check_summary_path(config: Config) -> None:
    """Make sure --summary-json can be written, before serving. Raises StartupError."""
    summary_path = config.summary_json
    if not summary_path:
        return
    try:
        check_summary_writable(summary_path)
    except OSError as error:
        raise StartupError(
            f"{config.named('summary_json')} {summary_path}: cannot write there: {error.strerror}"
        ) from None


@dataclass(slots=True)
class HttpListeners:
    """The listeners of --metrics (with /faults) and of --schema-registry, where asked for."""

    metrics: list[trio.SocketListener]
    registry: list[trio.SocketListener]


async def open_http_listeners(config: Config) -> HttpListeners:
    """The listeners of the HTTP services the configuration asks for. Raises StartupError,
    having closed what it opened."""
    opened = HttpListeners([], [])
    if config.metrics_address and config.metrics:
        opened.metrics = await open_listeners(
            config.metrics_address, config.named("metrics"), config.metrics
        )
    if config.schema_registry_address and config.schema_registry:
        try:
            opened.registry = await open_listeners(
                config.schema_registry_address,
                config.named("schema_registry"),
                config.schema_registry,
            )
        except StartupError:
            for listener in opened.metrics:
                await listener.aclose()
            raise
    return opened


def schema_registry_for(config: Config) -> SchemaRegistry | None:
    """Confluent's Schema Registry REST paths, in memory, holding the sources' schemas, with
    --schema-registry; None (and the module not imported) without."""
    if not config.schema_registry:
        return None
    from ..ops.schema_registry import SchemaRegistry  # only a broker that serves it

    return SchemaRegistry.for_sources(config.sources)


def serve_http(
    services: trio.Nursery,
    listeners: HttpListeners,
    accounts: Accounts,
    faults: Faults,
    schema_registry: SchemaRegistry | None,
    warnings: RepeatLimitedLog,
) -> None:
    """Serve the status page, /metrics, /accounts, /history and /faults on the metrics
    listeners (sampling the accounts for /history once a second) and the Schema Registry
    on its own, in tasks of `services`; each connection's failure is logged to
    `warnings`."""
    if listeners.metrics:
        # Imported only when asked for: the HTTP endpoint (h11), and prometheus_client,
        # which brings http.server, urllib and email with it: megabytes a broker without
        # --metrics never needs.
        from ..ops.history import History
        from ..ops.http_endpoint import serve_http_connection

        history = History()
        services.start_soon(sample_periodically, accounts, history)
        services.start_soon(
            trio.serve_listeners,
            partial(
                serve_http_connection,
                handle=_operator_paths(accounts, faults, history),
                warnings=warnings,
            ),
            listeners.metrics,
        )
    if listeners.registry and schema_registry is not None:
        from ..ops.http_endpoint import serve_http_connection

        services.start_soon(
            trio.serve_listeners,
            partial(
                serve_http_connection,
                handle=schema_registry.handle,
                warnings=warnings,
                name="schema registry",
                kind="SchemaRegistryError",
            ),
            listeners.registry,
        )


def _operator_paths(accounts: Accounts, faults: Faults, history: History) -> Handler:
    """/accounts, /history, /faults, the status page at / and the exposition of `accounts`
    at /metrics."""
    from ..ops.http_endpoint import (
        ACCOUNTS_PATH,
        METRICS_PATH,
        accounts_handler,
        faults_handler,
        history_handler,
        metrics_handler,
        status_page_handler,
    )
    from ..ops.metrics import exposition, make_registry
    from ..ops.report import summary

    async def reset() -> dict[str, Any]:
        return summary(await accounts.reset())

    registry = make_registry(accounts.current)
    answer = accounts_handler(
        lambda: summary(accounts.current()),
        reset,
        history_handler(
            history,
            faults_handler(
                faults, status_page_handler(metrics_handler(partial(exposition, registry)))
            ),
        ),
    )
    refresh = accounts.refresh
    # Only these read the workers' accounts: the status page is static, the history and the
    # faults are the supervisor's own, and a reset asks every worker itself.
    reads_accounts = (METRICS_PATH, ACCOUNTS_PATH)

    async def refreshed(request: HttpRequest) -> HttpResponse:
        if refresh is not None and request.path.rstrip("/") in reads_accounts:
            await refresh()
        answered = answer(request)
        return await answered if inspect.isawaitable(answered) else answered

    return refreshed


async def sample_periodically(accounts: Accounts, history: History) -> None:
    """Add a sample of `accounts` to `history` every second (its INTERVAL_SECONDS), in a
    task of its own: a cluster's supervisor asks its workers for theirs each time, as a
    read of /accounts does."""
    from ..ops.history import INTERVAL_SECONDS

    next_sample = trio.current_time()
    while True:
        if accounts.refresh is not None:
            await accounts.refresh()
        history.sample(accounts.current())
        # On the second, whatever the refresh took; a late one starts the count afresh.
        next_sample = max(next_sample + INTERVAL_SECONDS, trio.current_time())
        await trio.sleep_until(next_sample)


async def report_periodically(accounts: Accounts, interval: float) -> None:
    """Print the console line for the change in `accounts` every `interval` seconds (no
    line for an interval without requests)."""
    reporter = ConsoleReporter(accounts.current())
    last = time.monotonic()
    while True:
        await trio.sleep(interval)
        if accounts.refresh is not None:
            await accounts.refresh()
        reporter.stats = accounts.current()
        now = time.monotonic()
        line = reporter.line(now - last)
        last = now
        if line:
            print(line, flush=True)
