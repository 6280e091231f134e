"""The brokers perf.compare measures, each in a process of its own on 127.0.0.1.

- nullbroker: `nullbroker serve --listen 127.0.0.1:0`, started by nullbroker.app.launcher, ready
  when it prints `nullbroker listening on HOST:PORT`; stopped with SIGTERM, after which its
  summary JSON holds what it counted.
- librdkafka's mock cluster: `python -m perf.mock_cluster`, ready when it prints
  `mock cluster listening on HOST:PORT`.
- franz-go's kfake: perf/kfake_host, built by scripts/ensure-kfake, ready when it prints
  `kfake listening on HOST:PORT (kfake VERSION, ...)`. kfake keeps what it is sent in
  memory; it is started keeping about the last 5 MiB of each partition, as the mock does,
  so that gigabytes sent do not stay (topics created with retention.bytes -1 keep all).
- the floor: perf/floor/floor.c, built by scripts/ensure-floor, ready when it prints
  `floor listening on HOST:PORT (topic T, N partitions; ...)`. It answers ApiVersions,
  Metadata and InitProducerId with answers recorded from librdkafka's mock and every
  Produce with a pre-encoded answer, nothing else: what the kernel and the wire cost a
  broker, the least a broker can spend. Its one topic is T, that of its recorded Metadata
  answer; it keeps no count of records (the producers' acknowledgements are the count) and
  serves no ListOffsets, so it takes part in the producing steps only. At exit it prints
  the requests and bytes it served.

Topics are created the same way on all of them, by the first client that names them, with
the same partition count: the mock's CreateTopics cannot be reached (its Metadata names a
controller, id 0, that is not one of its brokers), and it gives auto-created topics 4
partitions, so nullbroker and kfake are started with 4 too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from nullbroker.app.launcher import RunningBroker, ServerProcess
from perf.machine import REPO_ROOT

MOCK_PARTITIONS = 4
"""librdkafka's mock gives every auto-created topic this many partitions."""
RETAINED_BYTES = 5 * 1024 * 1024
"""About what librdkafka's mock keeps of each partition."""
KFAKE_RETAINED_BYTES = 2 * RETAINED_BYTES
"""What kfake is told to keep of each partition: twice the mock's, so that a filled topic it
holds whole when the consumers start is not trimmed while they read it (with 5 MiB, a
partition the producer had filled a little fuller than the others once lost its first
records mid-read, and the consumer waited for records that were gone)."""
START_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_S = 10.0
MOCK_READY = re.compile(r"^mock cluster listening on (?P<servers>\S+:\d+) ")
KFAKE_READY = re.compile(r"^kfake listening on (?P<servers>\S+:\d+) \(kfake (?P<version>\S+),")
FLOOR_READY = re.compile(
    r"^floor listening on (?P<servers>\S+:\d+) \(topic (?P<topic>\S+), (?P<partitions>\d+) "
)
FLOOR_SERVED = re.compile(
    r"^floor served (?P<requests>\d+) requests \((?P<produce>\d+) Produce\) on "
    r"(?P<connections>\d+) connections: (?P<bytes_read>\d+) bytes read, "
    r"(?P<bytes_sent>\d+) bytes sent$"
)
FRAMES_DIR = REPO_ROOT / "tests" / "vectors" / "frames"
"""The recorded frames the floor answers with (see its README)."""
NULLBROKER = "nullbroker"
MOCK = "mock"
KFAKE = "kfake"
FLOOR = "floor"
ALL_BROKERS = (NULLBROKER, MOCK, KFAKE, FLOOR)
"""Every broker perf.compare knows, in the order its tables and plots show them."""
JAVA_BROKERS = (NULLBROKER, KFAKE, FLOOR)
"""The brokers Apache Kafka's Java 4 client works with. Against the mock,
kafka-producer-perf-test 4.1 fails every record with "Topic ... not present in metadata" and
then hangs."""
INGEST_ONLY = (FLOOR,)
"""The brokers that only take records: no ListOffsets to count them by (the producers'
acknowledgements are the count), nothing to read back, one topic of their own."""


class ReadyServer(ServerProcess):
    """A peer broker (librdkafka's mock, kfake), started and waited for until it prints where
    it listens: the `servers` group of its `ready` pattern."""

    def __init__(self, name: str, command: list[str], ready: re.Pattern[str], log: Path) -> None:
        super().__init__(name, command, log, cwd=REPO_ROOT)
        try:
            self.ready_line = self.wait_for_line(ready, START_TIMEOUT_S)
        except BaseException:
            self.kill()
            raise
        match = ready.search(self.ready_line)
        assert match is not None
        self.ready_match = match
        self.bootstrap = match["servers"]


class NullBroker(RunningBroker):
    def __init__(self, workdir: Path, produced_record_size: int) -> None:
        super().__init__(
            "--partitions",
            str(MOCK_PARTITIONS),
            # Fetch serves produced topics with records of this size: the size produced.
            "--produced-record-size",
            str(produced_record_size),
            workdir=workdir,
            cwd=REPO_ROOT,
        )


class MockCluster(ReadyServer):
    def __init__(self, workdir: Path) -> None:
        super().__init__(
            MOCK,
            [sys.executable, "-m", "perf.mock_cluster", "--brokers", "1"],
            MOCK_READY,
            workdir / "mock.stderr",
        )
        host = re.search(r"host RSS before the mock: (\d+) KiB", self.ready_line)
        self.host_rss_kib = int(host[1]) if host else 0


class KFake(ReadyServer):
    def __init__(self, workdir: Path, binary: Path) -> None:
        super().__init__(
            KFAKE,
            [
                str(binary),
                "-partitions",
                str(MOCK_PARTITIONS),
                "-retention-bytes",
                str(KFAKE_RETAINED_BYTES),
            ],
            KFAKE_READY,
            workdir / "kfake.stderr",
        )
        self.version = self.ready_match["version"]


class Floor(ReadyServer):
    def __init__(self, workdir: Path, binary: Path) -> None:
        super().__init__(
            FLOOR, [str(binary), str(FRAMES_DIR)], FLOOR_READY, workdir / "floor.stderr"
        )
        self.topic = self.ready_match["topic"]
        self.partitions = int(self.ready_match["partitions"])

    def unanswered(self) -> list[str]:
        """What it said on stderr of requests it had no answer for (each closed its
        connection): none, when the clients asked only what a producer asks."""
        return [line for line in self.stderr_text().splitlines() if "no answer for" in line]

    def served(self) -> dict[str, int] | None:
        """The requests, connections and bytes it served, from the line it prints at exit
        (None before it exited, or if it printed none)."""
        for line in self.stdout_lines:
            if match := FLOOR_SERVED.match(line):
                return {key: int(value) for key, value in match.groupdict().items()}
        return None


def build_floor() -> Path | None:
    """The floor's binary, built by scripts/ensure-floor when it is not yet (a second);
    None when it cannot be built, with the reason on stderr."""
    return _built(REPO_ROOT / "scripts" / "ensure-floor")


def build_kfake() -> Path | None:
    """kfake's host binary, built by scripts/ensure-kfake when it is not yet (about half a
    minute the first time); None when it cannot be built, with the reason on stderr."""
    return _built(REPO_ROOT / "scripts" / "ensure-kfake")


def _built(script: Path) -> Path | None:
    """What `script --print-path` built, or None when it could not (it says why on stderr)."""
    built = subprocess.run(
        [str(script), "--print-path"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    path = built.stdout.strip()
    return Path(path) if built.returncode == 0 and path else None


class Offsets:
    """Log-start and log-end offsets of topics on one broker, through ListOffsets."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "compare-offsets",
                "log.connection.close": False,
                # kfake asks for client telemetry, which librdkafka would log about.
                "enable.metrics.push": False,
            }
        )

    def create_keeping_all(self, topic: str, partitions: int) -> None:
        """Create `topic` with retention.bytes -1: every record it is sent stays readable."""
        (future,) = self.admin.create_topics(
            [NewTopic(topic, partitions, config={"retention.bytes": "-1"})],
            request_timeout=ADMIN_TIMEOUT_S,
        ).values()
        future.result(ADMIN_TIMEOUT_S)

    def _partitions(self, topic: str) -> list[int]:
        metadata = self.admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S)
        entry = metadata.topics.get(topic)
        if entry is None or entry.error is not None:
            raise RuntimeError(f"no metadata for topic {topic}: {entry and entry.error}")
        return sorted(entry.partitions)

    def offsets(self, topics: list[str], latest: bool) -> dict[str, dict[int, int]]:
        """{topic: {partition: offset}}: the log end (latest) or the log start."""
        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
        wanted = {
            TopicPartition(topic, partition): spec
            for topic in topics
            for partition in self._partitions(topic)
        }
        found: dict[str, dict[int, int]] = {topic: {} for topic in topics}
        for key, future in self.admin.list_offsets(wanted, request_timeout=ADMIN_TIMEOUT_S).items():
            found[key.topic][key.partition] = future.result(ADMIN_TIMEOUT_S).offset
        return found

    def log_end(self, topic: str) -> int:
        """The sum of the topic's log-end offsets: every record it was ever given."""
        return sum(self.offsets([topic], latest=True)[topic].values())

    def retained(self, topics: list[str]) -> int:
        """Records a consumer reading from the log start finds: log end - log start."""
        ends = self.offsets(topics, latest=True)
        starts = self.offsets(topics, latest=False)
        return sum(
            ends[topic][partition] - starts[topic][partition]
            for topic in topics
            for partition in ends[topic]
        )
