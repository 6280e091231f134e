"""Job (b), the read ceiling: every record of a source topic into Spark's `noop` sink, which
consumes the rows and writes nothing. What Spark can pull out of Kafka when neither the
broker nor the sink costs anything.

    nullbroker serve --source 'baseline-source:partitions=4,records=250000,size=1024,key-size=8'
    python -m spark_tests.jobs.source_to_noop --bootstrap 127.0.0.1:9092 \\
        --records 1000000 --record-size 1024 --partitions 4
"""

from __future__ import annotations

import sys
import time

from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F

from . import cli
from .broker import check_source
from .connector import Connector
from .result import JobResult
from .session import register_formats
from .settings import JobSettings

NAME = "source_to_noop"
TOPIC = "baseline-source"


def run(spark: SparkSession, settings: JobSettings, topic: str = TOPIC) -> JobResult:
    """Read `settings.records` rows of `topic` into noop; the rows counted are Spark's own
    (an observed count), not the number asked for."""
    register_formats(spark)
    shape = settings.topic(topic)
    if settings.bootstrap and settings.networked:
        check_source(settings.bootstrap, shape)
    rows = Observation(NAME)
    started = time.perf_counter()
    frame = Connector.for_settings(settings).read(spark, shape)
    frame.observe(rows, F.count(F.lit(1)).alias("rows")).write.format("noop").mode(
        "overwrite"
    ).save()
    seconds = time.perf_counter() - started
    return JobResult.of(NAME, settings, rows.get["rows"], seconds)


COMMAND = cli.JobCommand(NAME, __doc__, run, source_topic=TOPIC)

if __name__ == "__main__":
    sys.exit(cli.main(COMMAND))
