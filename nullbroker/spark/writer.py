"""Batch and streaming writes (`df.write` / `df.writeStream` with format "pykafka"): Arrow
batches in, one producer per task."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from .options import WriteOptions
from .producer import produce_batches
from .schema import WriteColumns


@dataclass(frozen=True)
class WriteReport(WriterCommitMessage):
    """What one task delivered."""

    records: int


class PyKafkaBatchWriter(DataSourceArrowWriter):
    """A batch write; there is nothing to commit or undo afterwards (Kafka's sink is not
    transactional, as in Spark)."""

    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        return WriteReport(produce_batches(iterator, self.options, self.columns))


class PyKafkaStreamWriter(DataSourceStreamArrowWriter):
    """A micro-batch write: at least once, as Spark's Kafka sink."""

    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        return WriteReport(produce_batches(iterator, self.options, self.columns))
