"""Apache Kafka itself (4.4.0, or `version="4.1.1"` where an older node is wanted), started
from the jars scripts/ensure-kafka-tools provisions: one KRaft node (combined broker and
controller) in a fresh log folder, on ports the OS picks, or a cluster of such nodes (KafkaCluster).

The test suite asks it what the right answer is (the differential harness, the ApiVersions
comparison); perf.compare measures it as a peer, and spark_tests.jobs.overhead --against
kafka runs Spark jobs against it. Nothing here knows nullbroker.

    with KafkaBroker(workdir) as kafka:
        kafka.bootstrap      # "127.0.0.1:PORT", a PLAINTEXT listener
    with KafkaBroker(workdir, sasl=SaslListener({"alice": "alice-secret"})) as kafka:
        kafka.sasl_bootstrap  # a SASL_PLAINTEXT listener beside it, in the same JVM
    with KafkaCluster(workdir, nodes=3) as cluster:
        cluster.bootstrap    # node 1's PLAINTEXT listener; cluster.nodes, each a KafkaBroker
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from perf.java_perf import CACHE
from perf.java_perf import missing as tools_missing

KAFKA_VERSION = "4.4.0"
"""The reference the differential harness asks, and perf.compare's peer. It serves share
groups (KIP-932, from 4.2 on) by default: share.version=2 finalized (ShareFetch and
ShareAcknowledge v2), as are streams.version=1 and transaction.version=2."""
OLDER_KAFKA_VERSION = "4.1.1"
"""The release before share and streams groups, ApiVersions v5 and topic ids in offset
commits, provisioned beside it for the tests whose client must be older (negotiation)."""


def lib(version: str = KAFKA_VERSION) -> Path:
    """The folder of `version`'s jars (scripts/ensure-kafka-tools)."""
    return CACHE / version / "lib"


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
{quorum}
listeners={listeners},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners={listeners}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,{protocols}
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


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096
"""Kafka's default for credentials made at format time (and nullbroker's)."""
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


@dataclass(frozen=True, slots=True)
class SaslListener:
    """A SASL_PLAINTEXT listener beside the PLAINTEXT one, in the same JVM: PLAIN checks
    `users` from its JAAS configuration, SCRAM their credentials, added when the log folder
    is formatted (`kafka-storage format --add-scram`, 4096 iterations), OAUTHBEARER takes
    unsecured tokens (Kafka's default validator, OAuthBearerUnsecuredValidatorCallbackHandler).
    `session_lifetime_ms` is connections.max.reauth.ms (KIP-368; 0: sessions do not end)."""

    users: Mapping[str, str]
    mechanisms: tuple[str, ...] = SASL_MECHANISMS
    session_lifetime_ms: int = 0

    def __post_init__(self) -> None:
        for name, password in self.users.items():
            if not name.isidentifier() or '"' in password or "\\" in password:
                raise ValueError(f"a JAAS option cannot carry user {name!r} or its password")
        unknown = set(self.mechanisms) - set(LOGIN_MODULES)
        if unknown:
            raise ValueError(f"unknown SASL mechanisms: {sorted(unknown)}")

    def properties(self) -> dict[str, str]:
        """The listener's server properties: its mechanisms, each one's JAAS login module."""
        prefix = "listener.name.sasl_plaintext"
        found = {
            "sasl.enabled.mechanisms": ",".join(self.mechanisms),
            "connections.max.reauth.ms": str(self.session_lifetime_ms),
        }
        for mechanism in self.mechanisms:
            options = ""
            if mechanism == "PLAIN":
                options = "".join(
                    f' user_{name}="{password}"' for name, password in self.users.items()
                )
            elif mechanism == "OAUTHBEARER":
                options = ' unsecuredLoginStringClaim_sub="broker"'  # the broker's own login
            found[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
                f"{LOGIN_MODULES[mechanism]} required{options};"
            )
        return found

    def format_arguments(self) -> list[str]:
        """StorageTool's --add-scram for every user and SCRAM mechanism offered."""
        return [
            argument
            for mechanism in self.mechanisms
            if mechanism in SCRAM_MECHANISMS
            for name, password in self.users.items()
            for argument in (
                "--add-scram",
                f"{mechanism}=[name={name},password={password},iterations={SCRAM_ITERATIONS}]",
            )
        ]


def missing(version: str = KAFKA_VERSION) -> str | None:
    """Why Kafka `version` cannot be started here, or None when it can."""
    why = tools_missing()
    if why is None and not (lib(version) / f"kafka_2.13-{version}.jar").exists():
        why = f"Kafka {version}'s broker jars are missing (scripts/ensure-kafka-tools)"
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
    """A running Kafka node (4.4.0 unless `version` says), stopped (and its folder removed,
    unless `keep`) on exit."""

    def __init__(
        self,
        workdir: Path,
        *,
        node_id: int = 1,
        offsets_partitions: int = 1,
        properties: dict[str, str] | None = None,
        keep: bool = False,
        sasl: SaslListener | None = None,
        heap: str = HEAP,
        version: str = KAFKA_VERSION,
        classpath: tuple[Path, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.version = version
        self.lib = lib(version)
        self.node_id = node_id
        self.offsets_partitions = offsets_partitions
        """Partitions of __consumer_offsets and __transaction_state (Kafka's default, 50,
        makes the first group request take seconds on one node)."""
        self.properties = properties or {}
        """More server properties, appended (they win over the defaults above)."""
        self.keep = keep
        self.sasl = sasl
        """A SASL_PLAINTEXT listener beside the PLAINTEXT one, or none."""
        self.heap = heap
        self.classpath = classpath
        """Folders (or jars) of classes put after Kafka's own: plugins a test names in
        `properties` (a metric reporter, say)."""
        self.port = 0
        self.sasl_port = 0
        self.controller_port = 0
        self.voters: str | None = None
        """A static quorum (`controller.quorum.voters`, KafkaCluster's), else this node is
        its own (a standalone controller)."""
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "kafka.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT listener's address."""
        assert self.sasl is not None, "started without a SASL listener"
        return f"127.0.0.1:{self.sasl_port}"

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
        start_retrying(self._start, self.stop)
        return self

    def _start(self) -> None:
        self.pick_ports()
        self.format(kraft_cluster_id())
        self.launch()
        self.wait_started()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        if not self.keep and kind is None:
            shutil.rmtree(self.workdir / "logs", ignore_errors=True)

    def pick_ports(self) -> None:
        self.port, self.controller_port = free_port(), free_port()
        self.sasl_port = free_port() if self.sasl is not None else 0

    def format(self, cluster_id: str) -> None:
        """Write server.properties and format the log folder (StorageTool)."""
        subprocess.run(
            self.format_command(cluster_id), check=True, capture_output=True, timeout=START_TIMEOUT
        )

    def format_command(self, cluster_id: str) -> list[str]:
        """Write server.properties and a fresh log folder; the StorageTool command that
        formats it."""
        log_dir = self.workdir / "logs"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True)
        config = self.workdir / "server.properties"
        listeners = f"PLAINTEXT://127.0.0.1:{self.port}"
        protocols = "PLAINTEXT:PLAINTEXT"
        extra = dict(self.properties)
        if self.sasl is not None:
            listeners += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            extra = {**self.sasl.properties(), **extra}
        quorum = (
            f"controller.quorum.voters={self.voters}"
            if self.voters is not None
            else f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}"
        )
        text = SERVER_PROPERTIES.format(
            node_id=self.node_id,
            quorum=quorum,
            listeners=listeners,
            protocols=protocols,
            controller_port=self.controller_port,
            log_dir=log_dir,
            offsets_partitions=self.offsets_partitions,
        )
        text += "".join(f"{name}={value}\n" for name, value in extra.items())
        config.write_text(text)
        # A static quorum's nodes are formatted as they are; a lone node is its own voter.
        standalone = ["--standalone"] if self.voters is None else []
        scram = self.sasl.format_arguments() if self.sasl is not None else []
        return [
            "java", "-cp", f"{self.lib}/*", "kafka.tools.StorageTool", "format", *standalone,
            "-t", cluster_id, "-c", str(config), *scram,
        ]  # fmt: skip

    def launch(self) -> None:
        """Start the JVM on the formatted folder (wait_started waits for it)."""
        config = self.workdir / "server.properties"
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child holds it; closed below
        try:
            self.process = subprocess.Popen(
                ["java", self.heap, "-cp", self.launch_classpath(), "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "KAFKA_HEAP_OPTS": self.heap},
            )
        finally:
            log.close()

    def launch_classpath(self) -> str:
        return os.pathsep.join([f"{self.lib}/*", *map(str, self.classpath)])

    def wait_started(self, deadline: float | None = None) -> None:
        """Until Kafka logs that it started (by `deadline`, time.monotonic(), or
        START_TIMEOUT from now); PortTaken or RuntimeError if it exits first."""
        deadline = time.monotonic() + START_TIMEOUT if deadline is None else deadline
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

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (Kafka shuts down cleanly on it), SIGKILL after `timeout` s; the JVM's
        exit code (143 after a clean shutdown on SIGTERM), or None if it was not running."""
        if self.process is None:
            return None
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        code = self.process.returncode
        self.process = None
        return code


class PortTaken(RuntimeError):
    """A port picked for Kafka was taken before Kafka bound it."""


def start_retrying(start_once: Callable[[], None], stop: Callable[[], object]) -> None:
    """`start_once` again while a port it picked was taken before Kafka bound it (three tries
    in all); a start that fails, for that reason the third time or for any other, leaves no
    JVM running (`stop`) and raises."""
    why = missing()
    if why is not None:
        raise RuntimeError(why)
    for attempt in range(3):
        try:
            start_once()
            return
        except PortTaken:
            stop()
            if attempt == 2:
                raise
        except BaseException:
            stop()
            raise


CLUSTER_HEAP = "-Xmx384m"
"""Each node of a KafkaCluster: three JVMs share the machine with the tests."""
CLUSTER_STOP_TIMEOUT = 10.0
"""A node of a cluster whose quorum is going away does not shut down cleanly for long."""


class KafkaCluster:
    """Kafka (4.4.0) as `nodes` KRaft nodes, each a broker and a controller, one static quorum
    of them all (ids 1 to `nodes`), on ports the OS picks; stopped on exit. Internal topics
    have replication factor 1 and `offsets_partitions` partitions, as on one node."""

    def __init__(
        self,
        workdir: Path,
        *,
        nodes: int = 3,
        offsets_partitions: int = 3,
        properties: dict[str, str] | None = None,
        heap: str = CLUSTER_HEAP,
    ) -> None:
        self.workdir = workdir
        self.nodes = [
            KafkaBroker(
                workdir / f"node-{node_id}",
                node_id=node_id,
                offsets_partitions=offsets_partitions,
                properties=properties,
                heap=heap,
            )
            for node_id in range(1, nodes + 1)
        ]

    @property
    def bootstrap(self) -> str:
        return self.nodes[0].bootstrap

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        if kind is None:
            for node in self.nodes:
                shutil.rmtree(node.workdir / "logs", ignore_errors=True)

    def start(self) -> Self:
        """Format every node's folder and start them all; returns once each says it started
        (they wait for one another's votes). A start that fails leaves no JVM running."""
        start_retrying(self._start, self.stop)
        return self

    def _start(self) -> None:
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
            node.pick_ports()
        voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in self.nodes)
        cluster_id = kraft_cluster_id()
        formats = []
        for node in self.nodes:
            node.voters = voters
            formats.append(
                subprocess.Popen(
                    node.format_command(cluster_id),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        for node, formatting in zip(self.nodes, formats, strict=True):
            output, _ = formatting.communicate(timeout=START_TIMEOUT)
            if formatting.returncode:
                raise RuntimeError(f"node {node.node_id} not formatted: {output.decode()[-2000:]}")
        for node in self.nodes:
            node.launch()
        deadline = time.monotonic() + START_TIMEOUT
        for node in self.nodes:
            node.wait_started(deadline)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None:
                node.process.terminate()
        for node in self.nodes:
            node.stop(CLUSTER_STOP_TIMEOUT)
