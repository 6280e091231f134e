"""The PySpark jobs of docs/spark.md run as written, so neither goes stale: each ```python block
of the page is run in the suite's SparkSession against a broker started with the
`make serve ARGS="…"` its first line names, with `127.0.0.1:9092` replaced by that broker's
address, `/tmp/` by a scratch folder, and the source topic's records divided by 100. Every
record the job reads it writes, twice (batch and streaming): the broker counts exactly that.

The session is already running when a block asks SparkSession.builder for one, so the
block's `spark.jars.packages` is not resolved: the suite's session has the same connector from
scripts/ensure-spark-connector.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from nullbroker.app.pytest_plugin import StartBroker
from spark_tests.conftest import produced_records
from spark_tests.jobs.session import jvm_kafka_missing_reason

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/spark.md"
BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```", re.M | re.S)
AGAINST = re.compile(r'^# against: make serve ARGS="(?P<args>[^"]*)"$', re.M)
FORMAT = re.compile(r'\.format\("(?P<format>kafka|pykafka)"\)')
RECORDS = re.compile(r"\brecords=(\d+)")
SCALE = 100
OUTPUTS = ("clicks-upper", "clicks-copy")


def pyspark_blocks() -> list[str]:
    return [block["code"] for block in BLOCK.finditer((ROOT / PAGE).read_text())]


def format_of(code: str) -> str:
    formats = {match["format"] for match in FORMAT.finditer(code)}
    assert len(formats) == 1, formats
    return formats.pop()


def test_the_section_leads_with_the_connector_and_keeps_pykafka() -> None:
    assert [format_of(code) for code in pyspark_blocks()] == ["kafka", "pykafka"]


@pytest.mark.parametrize("code", pyspark_blocks(), ids=format_of)
def test_the_readme_job_reads_and_writes_every_record(
    code: str, spark: SparkSession, nullbroker_module_factory: StartBroker, tmp_path: Path
) -> None:
    if format_of(code) == "kafka" and (reason := jvm_kafka_missing_reason(spark)):
        pytest.skip(reason)
    against = AGAINST.search(code)
    assert against, "the block's first line must say which `make serve ARGS=…` it runs against"
    flags = [RECORDS.sub(lambda m: f"records={int(m[1]) // SCALE}", flag) for flag in
             shlex.split(against["args"])]  # fmt: skip
    source = next(flag for flag in flags if flag.startswith("clicks:"))
    partitions = int(re.search(r"partitions=(\d+)", source)[1])  # type: ignore[index]
    per_partition = int(RECORDS.search(source)[1])  # type: ignore[index]
    broker = nullbroker_module_factory(*flags)
    runnable = code.replace("127.0.0.1:9092", broker.bootstrap).replace("/tmp/", f"{tmp_path}/")
    exec(compile(runnable, f"{PAGE} ({format_of(code)})", "exec"), {})
    for topic in OUTPUTS:
        written = produced_records(broker, topic)
        assert sum(written.values()) == partitions * per_partition, (topic, written)
