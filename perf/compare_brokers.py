"""The brokers perf.compare measures, each in a process of its own on 127.0.0.1.

- nullbroker: `nullbroker serve --listen 127.0.0.1:0`, started by nullbroker.start, ready
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
- Apache Kafka 4.4.0: perf.kafka_broker's node (one KRaft node, broker and controller in one
  JVM, `java -Xmx1g` started directly, so its pid is the whole broker), its log folder in the
  run's temporary folder on local disk, ready when its log says `Kafka Server started`;
  stopped with SIGTERM (a clean shutdown exits 143). It keeps every record (Kafka's default
  retention, 7 days and no size limit) and writes it to the page cache, flushed by the
  kernel (no fsync per message: Kafka's defaults); the kernel's writeback is no process's.

Topics are created the same way on all of them, by the first client that names them, with
the same partition count: the mock's CreateTopics cannot be reached (its Metadata names a
controller, id 0, that is not one of its brokers), and it gives auto-created topics 4
partitions, so nullbroker, kfake and Kafka (num.partitions) are started with 4 too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from nullbroker.app.launcher import RunningBroker, ServerProcess, start
from perf.kafka_broker import HEAP, KAFKA_VERSION, KafkaBroker
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
ADMIN_RETRY_S = 0.2
NULLBROKER = "nullbroker"
MOCK = "mock"
KFAKE = "kfake"
KAFKA = "kafka"
FLOOR = "floor"
ALL_BROKERS = (NULLBROKER, MOCK, KFAKE, KAFKA, FLOOR)
"""Every broker perf.compare knows, in the order its tables and plots show them."""
JAVA_BROKERS = (NULLBROKER, KFAKE, KAFKA, FLOOR)
"""The brokers Apache Kafka's Java 4 client works with. Against the mock,
kafka-producer-perf-test 4.1 fails every record with "Topic ... not present in metadata" and
then hangs."""
INGEST_ONLY = (FLOOR,)
"""The brokers that only take records: no ListOffsets to count them by (the producers'
acknowledgements are the count), nothing to read back, one topic of their own."""
KAFKA_PROPERTIES = {"num.partitions": str(MOCK_PARTITIONS)}
"""What perf.compare sets on Kafka beyond perf.kafka_broker's one-node settings: auto-created
topics get the partitions the others give them. Everything else is Kafka's default."""
NO_LEADER_YET = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)
"""What a topic Kafka has just created answers until its partitions have a leader."""
Result = TypeVar("Result")


class Peer(Protocol):
    """A broker process perf.compare measures: where it listens, its pid (its CPU and RSS
    are read from /proc/PID), how to stop it and what it logged."""

    name: str
    bootstrap: str

    @property
    def pid(self) -> int: ...

    def end(self) -> int | None: ...

    def stderr_tail(self) -> str: ...


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


def start_nullbroker(workdir: Path, produced_record_size: int) -> RunningBroker:
    """nullbroker as a peer: the mock's partitions, no metrics listener (nullbroker.start)."""
    return start(
        "--partitions",
        str(MOCK_PARTITIONS),
        # Fetch serves produced topics with records of this size: the size produced.
        "--produced-record-size",
        str(produced_record_size),
        workdir=workdir,
        cwd=REPO_ROOT,
        metrics=False,
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


class ApacheKafka:
    """Apache Kafka 4.4.0, started by perf.kafka_broker in `workdir`/kafka with
    KAFKA_PROPERTIES, as a Peer."""

    name = KAFKA
    version = KAFKA_VERSION
    heap = HEAP

    def __init__(self, workdir: Path) -> None:
        folder = workdir / KAFKA
        folder.mkdir()
        self.node = KafkaBroker(folder, properties=KAFKA_PROPERTIES).start()
        self.bootstrap = self.node.bootstrap
        self.server_properties = (folder / "server.properties").read_text()

    @property
    def pid(self) -> int:
        return self.node.pid

    def child_processes(self) -> int:
        """How many processes the JVM has started (none: its pid's figures are the whole
        broker's)."""
        children = 0
        for task in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{task}/children") as listed:
                    children += len(listed.read().split())
            except FileNotFoundError:
                continue  # the thread ended while we looked
        return children

    def end(self) -> int | None:
        return self.node.stop()

    def stderr_tail(self, characters: int = 4000) -> str:
        return self.node.log_text()[-characters:]


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
                # Kafka creates a topic a Metadata request names only when it asks for that.
                "allow.auto.create.topics": True,
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
        def named() -> list[int]:
            metadata = self.admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S)
            entry = metadata.topics.get(topic)
            if entry is None or entry.error is not None:
                error = entry.error if entry is not None else None
                if error is not None and _retriable(error):
                    raise KafkaException(error)
                raise RuntimeError(f"no metadata for topic {topic}: {error}")
            return sorted(entry.partitions)

        return _while_retriable(named)

    def offsets(self, topics: list[str], latest: bool) -> dict[str, dict[int, int]]:
        """{topic: {partition: offset}}: the log end (latest) or the log start."""
        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
        wanted = {
            TopicPartition(topic, partition): spec
            for topic in topics
            for partition in self._partitions(topic)
        }

        def listed() -> dict[str, dict[int, int]]:
            found: dict[str, dict[int, int]] = {topic: {} for topic in topics}
            answers = self.admin.list_offsets(wanted, request_timeout=ADMIN_TIMEOUT_S)
            for key, future in answers.items():
                found[key.topic][key.partition] = future.result(ADMIN_TIMEOUT_S).offset
            return found

        return _while_retriable(listed)

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


def _while_retriable(action: Callable[[], Result]) -> Result:
    """`action()`, again while it fails with an error Kafka calls retriable, for up to
    ADMIN_TIMEOUT_S: a topic Kafka has just created has no leader for a moment (its Metadata
    says UNKNOWN_TOPIC_OR_PART, its ListOffsets LEADER_NOT_AVAILABLE or NOT_LEADER)."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while True:
        try:
            return action()
        except KafkaException as error:
            if not _retriable(error.args[0]) or time.monotonic() > deadline:
                raise
        time.sleep(ADMIN_RETRY_S)


def _retriable(error: KafkaError) -> bool:
    # An error librdkafka builds from a code alone (a topic's in Metadata) is not flagged
    # retriable, though Kafka's clients retry it.
    return error.retriable() or error.code() in NO_LEADER_YET
