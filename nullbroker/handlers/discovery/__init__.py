"""How a client finds its way: ApiVersions (what this broker serves), Metadata,
DescribeCluster and DescribeTopicPartitions (the cluster's nodes, topics and leaders). One
module per Kafka API, each declaring its KEY beside its `handle` (nullbroker.handlers)."""
