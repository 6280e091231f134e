"""Apache Kafka 4.1.1 itself, started from the jars scripts/ensure-kafka-tools provisions: one
KRaft node (combined broker and controller) in a fresh log folder, on ports the OS picks.

The test suite asks it what the right answer is (the differential harness, the ApiVersions
comparison); perf.compare measures it as a peer, and spark_tests.jobs.overhead --against
kafka runs Spark jobs against it. Nothing here knows nullbroker.

    with KafkaBroker(workdir) as kafka:
        kafka.bootstrap      # "127.0.0.1:PORT", a PLAINTEXT listener
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from perf.java_perf import CACHE
from perf.java_perf import missing as tools_missing

KAFKA_VERSION = "4.1.1"
LIB = CACHE / KAFKA_VERSION / "lib"
START_TIMEOUT = 120.0
"""Kafka starts in about ten seconds on a quiet machine; a loaded CI machine is slower."""
STARTED = "Kafka Server started"
HEAP = "-Xmx1g"
CLUSTER_ID_ATTEMPTS = 100

# One node, every internal topic's replication at 1; a group's first rebalance is not
# delayed (Kafka's default 3 s makes every group test wait), as nullbroker's tests run theirs.
# Retention is first checked after a day, not 30 s after the start and every 5 minutes:
# tests produce records with fixed timestamps (2026-01-01), older than retention.ms's 7
# days, and a check in the middle of a test deleted them (nullbroker deletes nothing by
# time). Both are broker settings, so the topics' configs stay Kafka's defaults.
SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id={node_id}
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dir}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions={offsets_partitions}
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions={offsets_partitions}
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.initial.task.delay.ms=86400000
log.retention.check.interval.ms=86400000
"""


def missing() -> str | None:
    """Why Kafka cannot be started here, or None when it can."""
    why = tools_missing()
    if why is None and not (LIB / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        why = f"Kafka {KAFKA_VERSION}'s broker jars are missing (scripts/ensure-kafka-tools)"
    return why


def free_port() -> int:
    """A port the OS says is free now. Kafka binds it a few seconds later; another process
    taking it meanwhile makes the start fail, and KafkaBroker tries again."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kraft_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: a uuid in URL-safe unpadded base64, 22 characters, that does not
    start with '-', which StorageTool's `-t` would take for an option and fail (Kafka's own
    Uuid.randomUuid never makes one): one uuid in 64 does."""
    for _ in range(CLUSTER_ID_ATTEMPTS):
        cluster_id = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
    raise RuntimeError(f"{CLUSTER_ID_ATTEMPTS} random cluster ids all began with '-'")


class KafkaBroker:
    """A running Kafka 4.1.1 node, stopped (and its folder removed, unless `keep`) on exit."""

    def __init__(
        self,
        workdir: Path,
        *,
        node_id: int = 1,
        offsets_partitions: int = 1,
        properties: dict[str, str] | None = None,
        keep: bool = False,
    ) -> None:
        self.workdir = workdir
        self.node_id = node_id
        self.offsets_partitions = offsets_partitions
        """Partitions of __consumer_offsets and __transaction_state (Kafka's default, 50,
        makes the first group request take seconds on one node)."""
        self.properties = properties or {}
        """More server properties, appended (they win over the defaults above)."""
        self.keep = keep
        self.port = 0
        self.controller_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "kafka.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The JVM's: `java` is started directly (no kafka-server-start.sh shell around it),
        so this one process is the whole broker."""
        assert self.process is not None, "not started"
        return self.process.pid

    def __enter__(self) -> Self:
        return self.start()

    def start(self) -> Self:
        """Format the log folder and start the node; returns once Kafka says it started
        (`with` does this). A start that fails leaves no JVM running."""
        why = missing()
        if why is not None:
            raise RuntimeError(why)
        for attempt in range(3):
            try:
                self._start()
                return self
            except PortTaken:
                self.stop()
                if attempt == 2:
                    raise
            except BaseException:
                self.stop()
                raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        if not self.keep and kind is None:
            shutil.rmtree(self.workdir / "logs", ignore_errors=True)

    def _start(self) -> None:
        self.port, self.controller_port = free_port(), free_port()
        log_dir = self.workdir / "logs"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True)
        config = self.workdir / "server.properties"
        text = SERVER_PROPERTIES.format(
            node_id=self.node_id,
            port=self.port,
            controller_port=self.controller_port,
            log_dir=log_dir,
            offsets_partitions=self.offsets_partitions,
        )
        text += "".join(f"{name}={value}\n" for name, value in self.properties.items())
        config.write_text(text)
        cluster_id = kraft_cluster_id()
        classpath = f"{LIB}/*"
        subprocess.run(
            ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "--standalone",
             "-t", cluster_id, "-c", str(config)],
            check=True, capture_output=True, timeout=START_TIMEOUT,
        )  # fmt: skip
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child holds it; closed below
        try:
            self.process = subprocess.Popen(
                ["java", HEAP, "-cp", classpath, "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "KAFKA_HEAP_OPTS": HEAP},
            )
        finally:
            log.close()
        self._wait_started()

    def _wait_started(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        assert self.process is not None
        while time.monotonic() < deadline:
            text = self.log_text()
            if STARTED in text:
                return
            if self.process.poll() is not None:
                if "Address already in use" in text:
                    raise PortTaken(text[-2000:])
                raise RuntimeError(f"Kafka exited with {self.process.returncode}:\n{text[-4000:]}")
            time.sleep(0.2)
        raise RuntimeError(f"Kafka did not start in {START_TIMEOUT} s:\n{self.log_text()[-4000:]}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> int | None:
        """SIGTERM (Kafka shuts down cleanly on it), SIGKILL after 30 s; the JVM's exit code
        (143 after a clean shutdown on SIGTERM), or None if it was not running."""
        if self.process is None:
            return None
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        code = self.process.returncode
        self.process = None
        return code


class PortTaken(RuntimeError):
    """A port picked for Kafka was taken before Kafka bound it."""
