"""pykafka: a PySpark data source with the contract of Spark's Kafka source and sink, built on
confluent-kafka, for any Kafka broker (not only nullbroker, whose code it never imports).

    from nullbroker.spark import register
    register(spark)
    df = (spark.read.format("pykafka")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

See the README's PySpark section for the options.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from .data_source import PyKafkaDataSource
from .errors import DataLossError, PyKafkaColumnError, PyKafkaOptionError
from .producer import DeliveryError

__all__ = [
    "DataLossError",
    "DeliveryError",
    "PyKafkaColumnError",
    "PyKafkaDataSource",
    "PyKafkaOptionError",
    "register",
]


def register(spark: SparkSession) -> None:
    """Make `format("pykafka")` available in `spark` (batch and streaming, read and write)."""
    spark.dataSource.register(PyKafkaDataSource)
