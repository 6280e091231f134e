"""Opening a listener at a setting's address, and the error that names the setting when the
machine refuses: shared by a lone broker (workers/server.py), a cluster's supervisor
(workers/processes.py) and the operator's HTTP services (workers/operator_services.py)."""

from __future__ import annotations

import errno
import socket

import trio

from ..sessions import Endpoint


def endpoint_of(sockname: tuple[str, int] | tuple[str, int, int, int]) -> Endpoint:
    return Endpoint(sockname[0], sockname[1])


class StartupError(Exception):
    """A setting the broker cannot start with (a port in use, a host that does not
    resolve, a folder it cannot write to); the message names the setting as the user did."""


async def open_listeners(
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
