"""Topic, broker and group configs: DescribeConfigs, IncrementalAlterConfigs and
ListConfigResources (resources.py is what they, and CreateTopics, share). One module per
Kafka API, each declaring its KEY beside its `handle` (nullbroker.handlers)."""
