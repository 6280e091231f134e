"""Client telemetry (KIP-714): GetTelemetrySubscriptions and PushTelemetry, answered as Kafka
4.4.0's ClientMetricsManager answers them (nullbroker.state.client_metrics), and what clients
push kept as nullbroker.state.pushed_metrics keeps it, where Kafka hands it to a plugin.

One module per Kafka API, each declaring its KEY beside its `handle`, imported by its key's
first request (nullbroker.handlers.IMPORTED_ON_FIRST_USE): this package imports none of
them. `payload` reads a push's metrics: decompressed within `telemetry.max.bytes`, decoded
with opentelemetry-proto (protobuf), imported by the first push that carries metrics."""
