"""Topic and broker configs: DescribeConfigs and IncrementalAlterConfigs (resources.py is
what they, and CreateTopics, share). One module per Kafka API, each declaring its KEY
beside its `handle` (nullbroker.handlers)."""
