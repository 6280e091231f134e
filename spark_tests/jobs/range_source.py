"""`range`: the JVM's own no-network twin of Spark's Kafka connector, for the protocol-overhead
ratio of `format("kafka")` (memrows, a Python data source, is the twin of pykafka). The rows
have the Kafka source's schema and the contents of a nullbroker source topic, and are built
by Spark's own functions from `spark.range` (batch) or the `rate-micro-batch` source
(streaming): no Python, no client, no socket, no broker. Writes go to Spark's `noop` sink.

Unlike a Kafka topic, `rate-micro-batch` never runs dry: a streaming query over it stops
only when stopped (see streaming_read).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from nullbroker.sources.synthetic import ALPHABET, RecordShape

from .settings import TopicShape

ID = "id"


def read(spark: SparkSession, topic: TopicShape) -> DataFrame:
    """Every record of `topic`, partition by partition, as a batch read of it gives them."""
    ids = spark.range(0, topic.partitions * topic.records, 1, numPartitions=topic.partitions)
    return kafka_rows(ids, topic, F.current_timestamp())


def read_stream(spark: SparkSession, topic: TopicShape, max_offsets: int) -> DataFrame:
    """Micro-batches of exactly `max_offsets` rows, numbered on from 0 without end."""
    rates = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", str(max_offsets))
        .option("numPartitions", str(topic.partitions))
        .load()
    )
    return kafka_rows(rates.withColumnRenamed("value", ID), topic, F.col("timestamp"))


def write(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def kafka_rows(ids: DataFrame, topic: TopicShape, timestamp: Column) -> DataFrame:
    """Row `id` is offset id % records of partition id / records, with the key and value
    nullbroker's source topics give the record at that offset (nullbroker.sources.synthetic: the
    record's index in its batch, zero-padded, and letters from A + that index)."""
    offset = F.col(ID) % F.lit(topic.records)
    batch_records = RecordShape(size=topic.size, key_size=topic.key_size).batch_records
    index = offset % F.lit(batch_records)
    digits = F.lpad(index.cast("string"), topic.key_size, "0")
    key = F.substring(digits, -topic.key_size, topic.key_size) if topic.key_size else F.lit(None)
    letters = F.lit(ALPHABET.decode() * (topic.size // len(ALPHABET) + 2))
    value = F.substring(letters, (index % F.lit(len(ALPHABET)) + 1).cast("int"), topic.size)
    return ids.select(
        key.cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.lit(topic.name).alias("topic"),
        (F.col(ID) / F.lit(topic.records)).cast("int").alias("partition"),
        offset.alias("offset"),
        timestamp.alias("timestamp"),
        F.lit(0).alias("timestampType"),
    )
