"""The `pykafka` data source: Spark's Kafka source and sink contract on confluent-kafka."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .errors import PyKafkaOptionError
from .options import ReadOptions, parse_read_options, parse_write_options
from .reader import PyKafkaBatchReader
from .schema import read_schema, write_columns
from .stream_reader import PyKafkaStreamReader
from .writer import PyKafkaBatchWriter, PyKafkaStreamWriter


class PyKafkaDataSource(DataSource):
    """`format("pykafka")`: reads and writes Kafka through a real client, any broker."""

    @classmethod
    def name(cls) -> str:
        return "pykafka"

    def schema(self) -> StructType:
        # Spark asks for the schema when a read is loaded: the read options are checked here
        # so a wrong one fails at load(), before any job runs.
        return read_schema(parse_read_options(self.options).include_headers)

    def reader(self, schema: StructType) -> PyKafkaBatchReader:
        return PyKafkaBatchReader(self._read_options(schema))

    def streamReader(self, schema: StructType) -> PyKafkaStreamReader:
        return PyKafkaStreamReader(self._read_options(schema))

    def writer(self, schema: StructType, overwrite: bool) -> PyKafkaBatchWriter:
        if overwrite:
            raise PyKafkaOptionError(
                "pykafka: save mode 'overwrite' is not supported: records can only be "
                "appended to a Kafka topic; use mode('append')"
            )
        options = parse_write_options(self.options)
        return PyKafkaBatchWriter(options, write_columns(schema, options.topic))

    def streamWriter(self, schema: StructType, overwrite: bool) -> PyKafkaStreamWriter:
        # Every output mode appends to the topic, as with Spark's Kafka sink.
        options = parse_write_options(self.options)
        return PyKafkaStreamWriter(options, write_columns(schema, options.topic))

    def _read_options(self, schema: StructType) -> ReadOptions:
        options = parse_read_options(self.options)
        if schema != read_schema(options.include_headers):
            raise PyKafkaOptionError(
                "pykafka: the Kafka source has a fixed schema; a schema set with .schema() "
                "must not differ from it (use option 'includeHeaders' for the headers column)"
            )
        return options
