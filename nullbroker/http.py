"""A minimal HTTP endpoint on trio for `/metrics`, framed by h11."""

from __future__ import annotations

import logging
from collections.abc import Callable

import h11
import trio

from .log_limit import RepeatLimitedLog

log = logging.getLogger("nullbroker")

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
MAX_REQUEST_BYTES = 64 * 1024


async def serve_metrics_connection(
    stream: trio.abc.Stream, render: Callable[[], bytes], warnings: RepeatLimitedLog
) -> None:
    """Answer HTTP requests on one connection: GET /metrics with the exposition, else 404.
    Whatever goes wrong costs this connection only, logged once per kind and client host."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    try:
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(MAX_REQUEST_BYTES)
                connection.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                await _respond(stream, connection, event, render)
                if connection.our_state is h11.MUST_CLOSE:
                    return
                connection.start_next_cycle()
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
    except (h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
        return
    except Exception:
        warnings.log(
            logging.ERROR, "metrics", "MetricsError", "metrics connection failed", exc_info=True
        )
    finally:
        await trio.aclose_forcefully(stream)


async def _respond(
    stream: trio.abc.Stream,
    connection: h11.Connection,
    request: h11.Request,
    render: Callable[[], bytes],
) -> None:
    # Read to the end of the request (scrapers send no body) so the next cycle can start.
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(MAX_REQUEST_BYTES))
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            break
    path = request.target.split(b"?", 1)[0]
    if request.method in (b"GET", b"HEAD") and path in (b"/metrics", b"/"):
        status, body, content_type = 200, render(), CONTENT_TYPE
    else:
        status, body, content_type = 404, b"not found: try /metrics\n", b"text/plain"
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    payload = body if request.method != b"HEAD" else b""
    await stream.send_all(connection.send(h11.Response(status_code=status, headers=headers)))
    await stream.send_all(connection.send(h11.Data(data=payload)) or b"")
    await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
