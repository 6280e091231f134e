"""Where a read's time goes: the task timeline from Spark's status store
(spark_tests/jobs/timeline.py) and the Kafka clients' own request log
(spark_tests/jobs/client_log.py), read back as read_timeline reports them."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from spark_tests.jobs import client_log
from spark_tests.jobs.timeline import Timeline, job_group

CONSUMER = "consumer-x-executor-1"


def logged(time: str, pid: int, what: str, api: str, correlation: int, client: str) -> str:
    """A NetworkClient DEBUG line as client_log's log4j pattern writes it (bodies cut)."""
    header = (
        f"RequestHeader(apiKey={api}, apiVersion=9, clientId={client}, "
        f"correlationId={correlation}, headerVersion=2)"
    )
    if what == "Sending":
        return f"{time} {pid} [{client}] Sending {api} request with header {header} to node 0"
    return f"{time} {pid} [{client}] Received {api} response from node 0 for request with {header}"


# Two executors' JVMs (pids 11 and 22) whose consumers have the same client id, as Spark
# numbers them per JVM, and the same correlation ids; an admin client's request is left out.
LOG = "\n".join(
    logged(*line)
    for line in [
        ("10:00:00.000", 11, "Sending", "FETCH", 6, CONSUMER),
        ("10:00:00.001", 22, "Sending", "FETCH", 6, CONSUMER),
        ("10:00:00.002", 11, "Sending", "LIST_OFFSETS", 7, CONSUMER),
        ("10:00:00.010", 22, "Received", "FETCH", 6, CONSUMER),
        ("10:00:00.501", 11, "Received", "FETCH", 6, CONSUMER),
        ("10:00:00.502", 11, "Received", "LIST_OFFSETS", 7, CONSUMER),
        ("10:00:00.503", 11, "Sending", "METADATA", 1, "adminclient-1"),
    ]
)


def test_the_client_log_finds_the_held_fetch_and_the_list_offsets_waiting_behind_it(
    tmp_path: Path,
) -> None:
    client_log.session_conf(tmp_path)
    (tmp_path / client_log.LOG).write_text(LOG)

    answered = client_log.requests(tmp_path)
    counts = client_log.summary(answered, fetch_max_wait_ms=500)

    assert [(r.client, r.api, r.ms) for r in answered] == [
        (f"11/{CONSUMER}", "FETCH", 501.0),
        (f"22/{CONSUMER}", "FETCH", 9.0),
        (f"11/{CONSUMER}", "LIST_OFFSETS", 500.0),
    ]
    assert counts["consumers"] == 2
    assert (counts["fetches"], counts["fetches_held"], counts["fetches_held_s"]) == (2, 1, 0.501)
    assert counts["list_offsets_behind_a_fetch"] == 1
    assert counts["list_offsets_behind_a_fetch_s"] == 0.5
    # Only what is logged after a point is read from it.
    assert client_log.requests(tmp_path, since=client_log.log_size(tmp_path)) == []


def test_the_timeline_has_every_task_of_the_job_group(spark: SparkSession) -> None:
    with job_group(spark) as group:
        spark.range(0, 1000, 1, numPartitions=3).write.format("noop").mode("overwrite").save()

    timeline = Timeline.of(spark, group, slots=2)

    assert sorted(task.partition for task in timeline.tasks) == [0, 1, 2]
    assert timeline.span_ms >= max(task.ms for task in timeline.tasks)
    assert all(task.cpu_ms > 0 and task.run_ms >= 0 for task in timeline.tasks)
    assert 0 < timeline.busy() <= 1
