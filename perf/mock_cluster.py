"""librdkafka's mock cluster in a process of its own, so it can be measured like a broker.

confluent-kafka starts the mock (`test.mock.num.brokers`) inside whichever client asks for
it; its brokers then live in that client's process. This host creates one idle client with
the mock enabled, learns the mock's address from the one log line librdkafka writes about
it ("Mock cluster enabled: original bootstrap.servers and security.protocol ignored and
replaced with HOST:PORT"), prints

    mock cluster listening on HOST:PORT (host RSS before the mock: N KiB)

and serves until SIGTERM or SIGINT, until the process that started it exits, or until
`--lifetime` seconds have passed, whichever comes first. The RSS printed is the Python
interpreter with confluent-kafka imported, before any client exists: what the host costs,
not the mock.

The mock listens on 127.0.0.1 on ports the OS picks. Its partitions keep about the last
5 MiB of record batches each (librdkafka's fixed per-partition limit), so its memory does
not grow with what it is sent.

    .venv/bin/python -m perf.mock_cluster --brokers 1
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

import confluent_kafka

from perf.proc_sampler import rss_kib

ADDRESS_TIMEOUT_S = 15.0
POLL_S = 0.5
DEFAULT_LIFETIME_S = 6 * 3600.0
MOCK_ENABLED = re.compile(r"Mock cluster enabled: .* replaced with (?P<servers>\S+)")
READY_LINE = "mock cluster listening on {servers} (host RSS before the mock: {rss} KiB)"


class _AddressCatcher(logging.Handler):
    """Keeps the bootstrap servers from librdkafka's "Mock cluster enabled" line."""

    def __init__(self) -> None:
        super().__init__()
        self.servers: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        match = MOCK_ENABLED.search(record.getMessage())
        if match:
            self.servers = match["servers"]


def start_mock(brokers: int) -> tuple[confluent_kafka.Producer, str]:
    """A client hosting a mock cluster of `brokers` brokers, and the mock's address."""
    catcher = _AddressCatcher()
    logger = logging.getLogger("perf.mock_cluster.librdkafka")
    logger.propagate = False
    logger.addHandler(catcher)
    logger.setLevel(logging.INFO)
    client = confluent_kafka.Producer(
        {
            # Replaced by the mock's own address; never contacted.
            "bootstrap.servers": "127.0.0.1:9",
            "test.mock.num.brokers": brokers,
            "logger": logger,
            "client.id": "mock-cluster-host",
        }
    )
    # The logger is served by poll(): bounded by ADDRESS_TIMEOUT_S.
    deadline = time.monotonic() + ADDRESS_TIMEOUT_S
    while catcher.servers is None and time.monotonic() < deadline:
        client.poll(0.05)
    if catcher.servers is None:
        raise RuntimeError("librdkafka did not log the mock cluster's address")
    return client, catcher.servers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perf.mock_cluster",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, default=1, help="mock brokers (default 1)")
    parser.add_argument(
        "--lifetime",
        type=float,
        default=DEFAULT_LIFETIME_S,
        metavar="SECONDS",
        help=f"exit after this long whatever happens (default {DEFAULT_LIFETIME_S:g})",
    )
    args = parser.parse_args(argv)
    if args.brokers < 1 or args.lifetime <= 0:
        parser.error("--brokers and --lifetime must be positive")

    stopping: list[int] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    parent = os.getppid()
    host_rss = rss_kib()
    client, servers = start_mock(args.brokers)
    print(READY_LINE.format(servers=servers, rss=host_rss), flush=True)
    deadline = time.monotonic() + args.lifetime
    # An orphaned mock would hold its memory and ports forever: leave with the parent.
    while not stopping and os.getppid() == parent and time.monotonic() < deadline:
        client.poll(POLL_S)
    client.flush(1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
