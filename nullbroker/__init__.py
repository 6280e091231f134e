"""nullbroker: a Kafka-compatible broker whose storage engine is /dev/null."""

__version__ = "0.1.0"
