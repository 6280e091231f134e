"""Topic administration: CreateTopics, DeleteTopics and CreatePartitions, changes every
worker of a cluster over processes makes in one order (nullbroker.workers.cluster_changes).
One module per Kafka API, each declaring its KEY beside its `handle` (nullbroker.handlers)."""
