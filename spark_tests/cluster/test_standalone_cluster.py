"""Spark as teams run it: the job commands with `--master spark://…` on a standalone cluster
of a master and two one-core workers, each its own JVM (the session's `cluster`
fixture), against nullbroker clusters of three nodes, in one process and over two
(`--processes 2`). Every count is exact; a streaming query loses a worker and then a broker
node partway and still writes every record once.

Each command is an application of its own, whose executors the workers start as JVMs: the
tests are few and small, and each runs as much as one application can."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from nullbroker.app.launcher import RunningBroker, ServerProcess
from nullbroker.app.pytest_plugin import StartBroker
from spark_tests.jobs import nexmark
from spark_tests.jobs.e2e_latency import RETAIN_BYTES
from spark_tests.jobs.settings import TopicShape
from spark_tests.jobs.standalone import StandaloneCluster
from spark_tests.support import nexmark_answers
from tests.support.broker_counts import samples
from tests.support.module_command import REPO, run_module

RECORDS = 20_000
PARTITIONS = 4
SIZES = ("--records", str(RECORDS), "--record-size", "100", "--partitions", str(PARTITIONS))
BROKER_COUNTS = re.compile(r"the broker counted ([\d,]+) records produced, ([\d,]+) fetched")
COMMAND_TIMEOUT_S = 600
NEXMARK_PARTITIONS, NEXMARK_PER_PARTITION, NEXMARK_RATE = 2, 5_000, 500.0
# The queries whose shuffles cross executors (a join, sliding and tumbling windows); the
# map-only ones (q0-q2) read as q3 does, and test_nexmark.py checks all six in local mode.
CLUSTER_QUERIES = ("q3", "q5", "q7")
# The streaming query: three micro-batches of 5,000 records from each partition.
STREAM = TopicShape("cluster-stream", PARTITIONS, 15_000, 100)
SHARE = 5_000
BATCH_DONE = re.compile(r'^\{"batch": (\d+),')
RUNNING_TASK = "Running task"
WAIT_S = 240.0

pytestmark = pytest.mark.usefixtures("connector_provisioned")


def job_command(module: str, *flags: str) -> subprocess.CompletedProcess[str]:
    done = run_module(f"spark_tests.jobs.{module}", *flags, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_the_baseline_jobs_on_two_executors_count_every_row_against_two_broker_processes(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """The four jobs (generate, read, pipeline, streaming) through Spark's connector and
    through range, one round each, in one application on the cluster."""
    output = tmp_path / "overhead.json"
    done = job_command(
        "overhead", "--master", cluster.master_url, "--executors", "2",
        "--start-broker", "--brokers", "3", "--processes", "2", *SIZES,
        "--max-offsets-per-trigger", str(RECORDS // 4),
        "--rounds", "1", "--no-warmup", "--output", str(output),
    )  # fmt: skip

    report = json.loads(output.read_text())
    runs = sorted((run["job"], run["format"], run["rows"]) for run in report["runs"])
    assert runs == sorted(
        (job, format, RECORDS)
        for job in ("generate_to_kafka", "source_to_noop", "pipeline", "streaming_read")
        for format in ("kafka", "range")
    )
    assert report["settings"]["master"] == cluster.master_url
    for run in report["runs"]:
        # The work ran in the executors' JVMs, and the broker's CPU was measured beside it.
        assert run["cpu_seconds"]["executors"] > 0, run
    for job in report["jobs"]:
        assert 0 < job["broker_share"] < 1, job
    pipeline_run = next(run for run in report["runs"] if run["job"] == "pipeline")
    assert pipeline_run["output_rows"] == 26
    # Generated rows and the pipeline's 26 aggregates written; three reads of every record.
    produced, fetched = (int(n.replace(",", "")) for n in BROKER_COUNTS.findall(done.stderr)[-1])
    assert (produced, fetched) == (RECORDS + 26, 3 * RECORDS)


def test_a_cluster_in_a_relative_folder_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m spark_tests.jobs.standalone --workdir out/cluster`: every JVM runs in that
    folder, so the properties file it is given must be named from anywhere."""
    (tmp_path / "cluster").mkdir()
    monkeypatch.chdir(tmp_path)
    with StandaloneCluster(Path("cluster"), workers=0) as master:
        assert master.master_url.startswith("spark://127.0.0.1:")


@pytest.fixture(scope="module")
def nodes(nullbroker_module_factory: StartBroker) -> RunningBroker:
    """Three nodes in one process, keeping what is produced (the latency job reads it back)
    and serving a Nexmark topic."""
    flag = nexmark.source_flag(
        NEXMARK_PARTITIONS * NEXMARK_PER_PARTITION, NEXMARK_PARTITIONS, NEXMARK_RATE
    )
    return nullbroker_module_factory(
        "--brokers", "3", "--retain", str(RETAIN_BYTES), "--source", flag
    )


def first_timestamp_ms(bootstrap: str, topic: str) -> int:
    """The Kafka timestamp of the topic's first record: where its event time starts."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                return int(message.timestamp()[1])
        raise AssertionError(f"no record of {topic} within 30 s")
    finally:
        consumer.close()


def test_the_nexmark_queries_on_the_cluster_give_the_generators_answer_counts(
    cluster: StandaloneCluster, nodes: RunningBroker
) -> None:
    done = job_command(
        "nexmark", "--master", cluster.master_url, "--bootstrap", nodes.bootstrap, "--json",
        *(flag for query in CLUSTER_QUERIES for flag in ("--query", query)),
    )  # fmt: skip

    start_ms = first_timestamp_ms(nodes.bootstrap, nexmark.TOPIC)
    events = nexmark_answers.events(
        NEXMARK_PARTITIONS, NEXMARK_PER_PARTITION, NEXMARK_RATE, start_ms
    )
    counts = {result["job"]: result["result_rows"] for result in json_lines(done.stdout)}
    assert counts == {
        f"nexmark_{query}": len(nexmark_answers.ANSWERS[query](events)) for query in CLUSTER_QUERIES
    }


def test_end_to_end_latency_on_the_cluster_reads_back_every_record_once(
    cluster: StandaloneCluster, nodes: RunningBroker
) -> None:
    done = job_command(
        "e2e_latency", "--master", cluster.master_url, "--executors", "1",
        "--bootstrap", nodes.bootstrap,
        "--records", "300", "--rate", "300", "--partitions", "3", "--json",
    )  # fmt: skip

    # The job fails unless every record sent came back exactly once.
    (result,) = json_lines(done.stdout)
    assert result["records"] == 300
    assert 0 < result["p50_ms"] <= result["max_ms"]  # type: ignore[operator]


def tasks_started(cluster: StandaloneCluster, worker: int) -> int:
    return sum(log.read_text().count(RUNNING_TASK) for log in cluster.executor_logs(worker))


def when_a_task_starts(cluster: StandaloneCluster, worker: int, since: int) -> None:
    """Once an executor of `worker` has started a task after the `since` it had started."""
    deadline = time.monotonic() + WAIT_S
    while tasks_started(cluster, worker) <= since:
        assert time.monotonic() < deadline, f"no task started on worker {worker}"
        time.sleep(0.05)


def take_down(broker: RunningBroker, spec: str) -> None:
    assert broker.metrics_url is not None
    url = broker.metrics_url.rsplit("/", 1)[0] + "/faults"
    request = urllib.request.Request(url, data=spec.encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def test_a_streaming_query_survives_a_lost_worker_and_a_node_taken_down_writing_once(
    cluster: StandaloneCluster,
    nullbroker_module_factory: StartBroker,
    tmp_path: Path,
) -> None:
    """Micro-batch 1 loses worker 1 while its executor runs one of the batch's tasks (each
    task of batches 1 and 2 pauses for a second at its first record, so that a fault lands
    while they run): Spark runs the task again on the other executor. As micro-batch 2's
    first task starts, broker node 1 goes down for longer than the batch takes: the
    consumers of the partitions it led find their new leader. The file sink, with the
    connector's offsets in the checkpoint, still holds every record once."""
    broker = nullbroker_module_factory(
        "--brokers", "3", "--processes", "2", "--source", STREAM.source_flag()
    )
    output = tmp_path / "stream"
    command = [
        sys.executable, "-m", "spark_tests.cluster.cluster_stream", "--master", cluster.master_url,
        "--bootstrap", broker.bootstrap, "--topic", STREAM.name,
        "--partitions", str(PARTITIONS), "--max-offsets", str(SHARE * PARTITIONS),
        "--pause-at", str(SHARE), "--pause-at", str(2 * SHARE), "--output", str(output),
    ]  # fmt: skip
    with ServerProcess("cluster_stream", command, tmp_path / "driver.log", cwd=REPO) as driver:
        driver.wait_for_line(re.compile(r'^\{"batch": 0,'), WAIT_S, "micro-batch 0 done")
        when_a_task_starts(cluster, 1, since=tasks_started(cluster, 1))
        cluster.kill_worker(1)
        driver.wait_for_line(re.compile(r'^\{"batch": 1,'), WAIT_S, "micro-batch 1 done")
        when_a_task_starts(cluster, 0, since=tasks_started(cluster, 0))
        take_down(broker, "down:node=1,for=10s")
        driver.process.wait(WAIT_S)
        assert driver.process.returncode == 0, driver.stderr_tail()
    batches = [line for line in json_lines("\n".join(driver.stdout_lines)) if "batch" in line]
    assert [(b["batch"], b["rows"]) for b in batches] == [(n, SHARE * PARTITIONS) for n in range(3)]
    *_, executors, read_back = json_lines("\n".join(driver.stdout_lines))
    assert executors["failed_tasks"] >= 1, executors  # type: ignore[operator]
    reset = samples(broker.scrape(), "nullbroker_faults_total")
    assert reset[(("kind", "connections_reset"),)] >= 1
    # The driver read its sink's output back as Spark reads it (the sink's log decides).
    assert read_back["written"] == [
        [partition, offset] for partition in range(PARTITIONS) for offset in range(STREAM.records)
    ]
