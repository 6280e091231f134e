"""Baseline PySpark jobs against Kafka (see spark_tests/README.md for the numbers):

- `generate_to_kafka`: spark.range rows → Kafka sink (batch write);
- `source_to_noop`: a source topic → the `noop` sink (the read ceiling);
- `pipeline`: Kafka → parse and aggregate → Kafka;
- `streaming_read`: micro-batches with maxOffsetsPerTrigger → `noop`, with batch latency.

Each runs as `python -m spark_tests.jobs.<name>` and exposes `run(spark, settings, ...)`.
`--format` picks the connector: `pykafka` (nullbroker.spark), `kafka` (Spark's JVM
connector, when on the classpath) or `memory` (memrows: the same rows without a network).
"""
