"""Requests to a running broker's operator paths on its metrics listener (`/accounts`,
`/faults`): what `nullbroker fault` and the Python API (nullbroker.app.launcher) send.

Standard library only; urllib is imported by the first request, since `nullbroker serve`
builds the `fault` command's parser too and never sends one (urllib brings email and
http.client: megabytes)."""

from __future__ import annotations

from typing import Any

TIMEOUT_S = 10.0


class OperatorHttpError(RuntimeError):
    """The broker refused the request (`status` is its HTTP status and the message its
    answer, e.g. why a fault SPEC cannot be applied), or could not be reached (`status`
    None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def call(
    address: str, method: str, path: str, body: bytes | None = None, timeout: float = TIMEOUT_S
) -> Any:
    """Send `method path` to the broker whose --metrics listener is at `address`
    (HOST:PORT) and return its JSON answer; OperatorHttpError if it refuses or cannot be
    reached."""
    import json
    import urllib.error
    import urllib.request

    url = f"http://{address}{path}"
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise OperatorHttpError(error.read().decode().strip(), error.code) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise OperatorHttpError(
            f"cannot reach {url} ({reason}); is the broker running with --metrics {address}?"
        ) from None
