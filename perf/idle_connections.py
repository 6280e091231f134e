"""What idle connections cost a broker: start `nullbroker serve`, open N connections that
each send one ApiVersions request and read its answer, then sit idle; report the broker's
RSS before and with them, and the cost per connection.

    python -m perf.idle_connections --connections 1000

The broker listens on 127.0.0.1 on a port the OS picks; every connection is closed and the
broker stopped at the end. Raise the open-files limit first for thousands (`ulimit -n`).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from nullbroker.app.launcher import start
from perf.proc_sampler import rss_kib

SETTLE_S = 1.0
# ApiVersions v0: key 18, version 0, correlation id 1, client id "idle".
_REQUEST = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"
_FRAME = struct.pack(">i", len(_REQUEST)) + _REQUEST


def measure(connections: int, broker_flags: Sequence[str] = ()) -> dict[str, float]:
    """RSS of a fresh broker before and with `connections` idle connections, in KiB."""
    opened: list[socket.socket] = []
    root = Path(__file__).resolve().parent.parent
    # No --summary-json: it imports json at start, which the RSS before would count.
    with start(*broker_flags, summary=False, cwd=root, metrics=False) as broker:
        try:
            port = int(broker.bootstrap.rsplit(":", 1)[1])
            time.sleep(SETTLE_S)
            before = rss_kib(broker.pid)
            for _ in range(connections):
                client = socket.create_connection(("127.0.0.1", port))
                opened.append(client)
                client.sendall(_FRAME)
            for client in opened:
                client.recv(65536)
            time.sleep(SETTLE_S)
            during = rss_kib(broker.pid)
        finally:
            for client in opened:
                client.close()
    return {
        "connections": connections,
        "rss_before_kib": before,
        "rss_with_connections_kib": during,
        "kib_per_connection": round((during - before) / max(connections, 1), 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perf.idle_connections",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--connections", type=int, default=1000, help="idle connections (default 1,000)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = measure(args.connections)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['connections']:,} idle connections: broker RSS "
            f"{result['rss_before_kib'] / 1024:.1f} -> "
            f"{result['rss_with_connections_kib'] / 1024:.1f} MiB, "
            f"{result['kib_per_connection']} KiB a connection"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
