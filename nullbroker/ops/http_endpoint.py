"""A minimal HTTP endpoint on trio, framed by h11: the status page at `/`, `/metrics`,
`/accounts`, `/history`, `/faults` and the Schema Registry's REST paths
(nullbroker.ops.schema_registry).
Imported with the first HTTP listener: a broker without one never loads h11 or json."""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import h11
import trio

from ..cluster.fault_specs import FaultSpecError
from ..log_limit import RepeatLimitedLog

if TYPE_CHECKING:
    from ..cluster.faults import Faults
    from .history import History

log = logging.getLogger("nullbroker")

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
MAX_REQUEST_BYTES = 64 * 1024
MAX_BODY_BYTES = 4 * 1024 * 1024
"""A request body larger than this (a schema of megabytes) is answered 413."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: bytes
    path: str
    query: str
    body: bytes


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: bytes = b"text/plain"


Handler = Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]
"""Answers a request, at once or (an async function) after awaiting what it needs."""


METRICS_PATH = "/metrics"


def metrics_handler(render: Callable[[], bytes]) -> Handler:
    """GET /metrics with the exposition; 404 for anything else."""

    def handle(request: HttpRequest) -> HttpResponse:
        if request.method in (b"GET", b"HEAD") and request.path == METRICS_PATH:
            return HttpResponse(200, render(), CONTENT_TYPE)
        return HttpResponse(404, b"not found: try / (the status page) or /metrics\n")

    return handle


STATUS_PAGE = Path(__file__).with_name("status_page.html")
"""The status page: plain HTML whose inline script polls /accounts and /faults (no build
step, nothing loaded from elsewhere)."""


def status_page_handler(otherwise: Handler) -> Handler:
    """GET / with the status page (read once, here), `otherwise` for every other path."""
    page = STATUS_PAGE.read_bytes()

    def handle(request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if request.path not in ("/", "/index.html"):
            return otherwise(request)
        if request.method in (b"GET", b"HEAD"):
            return HttpResponse(200, page, b"text/html; charset=utf-8")
        return HttpResponse(405, b"GET /\n")

    return handle


def json_response(status: int, value: object) -> HttpResponse:
    """`value` as JSON, which has no NaN or infinity: a non-finite number is null (a Java
    client pushes NaN for an average of nothing yet, and a browser's JSON.parse refuses
    the whole document over one)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), allow_nan=False)
    return HttpResponse(status, text.encode() + b"\n", b"application/json")


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


ACCOUNTS_PATH = "/accounts"
RESET_PATH = "/accounts/reset"


def accounts_handler(
    document: Callable[[], object],
    reset: Callable[[], Awaitable[object]],
    otherwise: Handler,
) -> Handler:
    """The accounts as JSON, `otherwise` for every other path:

    - `GET /accounts`: `document()`, what the broker counted (the summary's document);
    - `POST /accounts/reset`: the counts zeroed (topics, groups and faults stay), answered
      with the document as it stood just before, so that nothing counted falls between
      a read and the reset.
    """

    async def handle(request: HttpRequest) -> HttpResponse:
        path = request.path.rstrip("/")
        if path == ACCOUNTS_PATH:
            if request.method in (b"GET", b"HEAD"):
                return json_response(200, document())
            return HttpResponse(405, f"GET {ACCOUNTS_PATH}\n".encode())
        if path == RESET_PATH:
            if request.method == b"POST":
                return json_response(200, await reset())
            return HttpResponse(405, f"POST {RESET_PATH}\n".encode())
        answered = otherwise(request)
        return await answered if inspect.isawaitable(answered) else answered

    return handle


HISTORY_PATH = "/history"


def history_handler(history: History, otherwise: Handler) -> Handler:
    """`GET /history`: the samples of the last minutes (nullbroker.ops.history), those
    after the uptime `?after=SECONDS` only when given (what a page that has the rest asks
    for); `otherwise` for every other path. Read from the ring: nothing is counted anew."""

    def handle(request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if request.path.rstrip("/") != HISTORY_PATH:
            return otherwise(request)
        if request.method not in (b"GET", b"HEAD"):
            return HttpResponse(405, f"GET {HISTORY_PATH}\n".encode())
        after = None
        for key, _, value in (part.partition("=") for part in request.query.split("&")):
            if key == "after":
                try:
                    after = float(value)
                except ValueError:
                    return HttpResponse(400, b"after: seconds of uptime, e.g. ?after=12.5\n")
        return json_response(200, history.as_json(after))

    return handle


def faults_handler(faults: Faults, otherwise: Handler) -> Handler:
    """`/faults` on the metrics listener, `otherwise` for every other path:

    - `GET /faults`: the faults in force, as JSON;
    - `POST /faults` with a SPEC as the body: apply it (201 with the fault as JSON; 400 with
      the reason for a SPEC that cannot be applied, which changes nothing);
    - `DELETE /faults`: end them all (nodes come back, moved partitions return).
    """

    def handle(request: HttpRequest) -> HttpResponse:
        if request.path.rstrip("/") != "/faults":
            return otherwise(request)
        if request.method == b"GET":
            faults.expire()
            return json_response(200, [active.as_json() for active in faults.active])
        if request.method == b"POST":
            try:
                active = faults.add(request.body.decode("utf-8", "replace"))
            except FaultSpecError as error:
                return HttpResponse(400, f"{error}\n".encode())
            return json_response(201, active.as_json())
        if request.method == b"DELETE":
            return json_response(200, {"cleared": faults.clear()})
        return HttpResponse(405, b"GET, POST or DELETE /faults\n")

    return handle


async def serve_http_connection(
    stream: trio.abc.Stream,
    handle: Handler,
    warnings: RepeatLimitedLog,
    name: str = "metrics",
    kind: str = "MetricsError",
) -> None:
    """Answer HTTP requests on one connection with `handle`. Whatever goes wrong costs this
    connection only, logged once per kind and client host."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    try:
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(MAX_REQUEST_BYTES)
                connection.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                await _respond(stream, connection, event, handle)
                if connection.our_state is h11.MUST_CLOSE:
                    return
                connection.start_next_cycle()
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
    except (h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
        return
    except Exception:
        warnings.log(logging.ERROR, name, kind, "%s connection failed", name, exc_info=True)
    finally:
        await trio.aclose_forcefully(stream)


async def _respond(
    stream: trio.abc.Stream, connection: h11.Connection, request: h11.Request, handle: Handler
) -> None:
    # Read to the end of the request, keeping a body up to MAX_BODY_BYTES, so that the next
    # cycle can start.
    body = bytearray()
    too_large = False
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(MAX_REQUEST_BYTES))
        elif isinstance(event, h11.Data):
            body += event.data
            too_large = too_large or len(body) > MAX_BODY_BYTES
            if too_large:
                body.clear()
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            break
    path, _, query = request.target.decode("latin-1").partition("?")
    if too_large:
        response = HttpResponse(413, b"request body too large\n")
    else:
        answered = handle(HttpRequest(request.method, path, query, bytes(body)))
        response = await answered if inspect.isawaitable(answered) else answered
    headers = [
        ("Content-Type", response.content_type),
        ("Content-Length", str(len(response.body))),
    ]
    payload = response.body if request.method != b"HEAD" else b""
    await stream.send_all(
        connection.send(h11.Response(status_code=response.status, headers=headers))
    )
    await stream.send_all(connection.send(h11.Data(data=payload)) or b"")
    await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
