"""What may differ between Kafka's answers and nullbroker's (tests/differential.py).

ALLOWED is data: values that differ between any two brokers (ids, ports, clocks), each with
its reason. KNOWN is behaviour that should not differ and does, each entry a bug to fix with
the values seen; a sequence names the KNOWN entries it meets, and fails once one is gone.
Patterns are shell globs over a path with its indices dropped
(`MetadataResponse.topics[].partitions[].leader_id`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    path: str
    reason: str
    versions: range | None = None
    identity: str | None = None
    sometimes: bool = False
    """A known difference that depends on timing: not required to be seen."""
    kafka: tuple[object, ...] | None = None
    """When set, the entry matches only where Kafka's value is one of these (so that a
    difference of another kind at the same path is not taken for this one)."""
    nullbroker: tuple[object, ...] | None = None
    """Likewise for nullbroker's value ("<absent>": an entry it does not send)."""
    """When set, the difference is allowed only where each broker's value is its own
    identity of this name (Pair.identities: its node id, its port), so that a wrong node id
    is still caught."""


ASSIGNED = "assigned"
"""The identity of what a broker makes up (a member id, a producer id): any non-empty string,
any id from 0 up, on both sides; a missing one (-1, null, "") is still a difference."""

NODE = "each broker's own node id (Kafka's fixture is node 1, nullbroker's only node is 0)"

MEMBER = "a classic group's member ids are the broker's (client id and a random UUID)"

ALLOWED: tuple[Entry, ...] = (
    Entry("throttle", "*.throttle_time", "throttle times depend on the broker's quotas and load"),
    Entry("cluster id", "*.cluster_id", "each cluster's own id (Kafka's is random)"),
    Entry("topic id", "*.topic_id", "topic ids are random in Kafka, derived from the name here"),
    Entry("node", "*.node_id", NODE, identity="node"),
    Entry("leader", "*.leader_id", NODE, identity="node"),
    Entry("controller", "*.controller_id", NODE, identity="node"),
    Entry("replicas", "*.replica_nodes[]", NODE, identity="node"),
    Entry("isr", "*.isr_nodes[]", NODE, identity="node"),
    Entry("port", "*.port", "each broker listens on a port the OS picked", identity="port"),
    Entry("broker", "*.broker_id", NODE, identity="node"),
    Entry("member id", "*.member_id", MEMBER, identity=ASSIGNED),
    Entry(
        "producer id",
        "*.producer_id",
        "producer ids are the broker's counter (Kafka's from 0 over the session's tests, "
        "nullbroker's from 1000)",
        identity=ASSIGNED,
    ),
    Entry(
        "error message",
        "*.error_message",
        "free text for people (clients print it, none parses it): the wording may differ, "
        "not whether there is one",
        identity=ASSIGNED,
    ),
    *(
        Entry(
            "marker clock",
            path,
            "a transaction marker's timestamp is the broker's clock when it wrote it (and "
            "its CRC covers that timestamp)",
        )
        for path in (
            "*.control.base_timestamp",
            "*.control.max_timestamp",
            "*.control.records[].timestamp",
        )
    ),
    *(
        Entry(
            "batch crc",
            path,
            "a batch's CRC-32C covers its producer id and, for a marker, the broker's "
            "timestamp: every field it covers is compared one by one beside it",
        )
        for path in ("*.records[]*crc",)
    ),
    Entry(
        "batch crc",
        "*.batches[]*crc",
        "a batch's CRC-32C covers its producer id and, for a marker, the broker's timestamp: "
        "every field it covers is compared one by one beside it",
    ),
    Entry(
        "transaction start",
        "DescribeTransactionsResponse.transaction_states[*].transaction_start_time",
        "the broker's clock when the transaction began",
    ),
    Entry("group leader", "*.leader", MEMBER, identity=ASSIGNED),
)

MISSING_TOPIC_CONFIGS = (
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
)

KNOWN: tuple[Entry, ...] = (
    Entry(
        "leader-epoch",
        "*.leader_epoch",
        "Kafka 0 (a new topic's first epoch), nullbroker -1, by design (README: clients then "
        "skip OffsetForLeaderEpoch, which nullbroker does not serve); Metadata, ListOffsets "
        "v4+, DescribeTopicPartitions",
    ),
    *(
        Entry(
            "fetch-error-partition",
            f"FetchResponse.responses[].partitions[].{field}",
            "Fetch of a partition that does not exist (5 of a 1-partition topic): Kafka "
            "high_watermark -1, last_stable_offset -1, log_start_offset -1, "
            "aborted_transactions []; nullbroker 4, 4, 0, null (the error code is the same)",
        )
        for field in (
            "high_watermark",
            "last_stable_offset",
            "log_start_offset",
            "aborted_transactions",
        )
    ),
    *(
        Entry(
            "list-offsets-by-timestamp",
            f"ListOffsetsResponse.topics[*].partitions[].{field}",
            "ListOffsets by timestamp and max timestamp (-3) with --retain: Kafka searches the "
            "produced timestamps (1767225600001 -> offset 1, -3 -> offset 2 at "
            "1767225600002); nullbroker the synthetic records' (offset 0 and 4, timestamps "
            "near now + a year)",
        )
        for field in ("offset", "timestamp")
    ),
    Entry(
        "delete-records-error-low-watermark",
        "DeleteRecordsResponse.topics[*].partitions[].low_watermark",
        "DeleteRecords beyond the high watermark (OFFSET_OUT_OF_RANGE): Kafka low_watermark "
        "-1, nullbroker the partition's log start",
    ),
    Entry(
        "idempotent-epoch-bump",
        "InitProducerIdResponse.producer_epoch",
        "InitProducerId v3+ without a transactional id, giving the producer id and epoch it "
        "had (KIP-360): Kafka a new producer id at epoch 0, nullbroker the same id at the "
        "next epoch",
    ),
    Entry(
        "produce-log-start-in-transaction",
        "ProduceResponse.responses[*].partition_responses[].log_start_offset",
        "Produce v13 of a transactional batch after committed and aborted transactions: "
        "Kafka log_start_offset 2, nullbroker 0, seen in one run of three (a race in Kafka)",
        sometimes=True,
    ),
    Entry(
        "txn-offset-commit-without-add-offsets",
        "TxnOffsetCommitResponse.topics[].partitions[].error_code",
        "TxnOffsetCommit to a group the transaction did not add (no AddOffsetsToTxn): Kafka "
        "NONE, nullbroker INVALID_TXN_STATE (48)",
    ),
    *(
        Entry(
            "describe-producers",
            path,
            "DescribeProducers: last_timestamp Kafka the batch's max timestamp (1767225600001), "
            "nullbroker -1; a partition that does not exist: Kafka error_message 'This server "
            "does not host this topic-partition.', nullbroker null",
        )
        for path in (
            "DescribeProducersResponse.topics[*].partitions[].active_producers[].last_timestamp",
            "DescribeProducersResponse.topics[*].partitions[].error_message",
        )
    ),
)

COMMON = frozenset({"topic-configs-missing", "leader-epoch"})
"""Known differences in the steps most sequences share (CreateTopics, Metadata,
FindCoordinator): a sequence need not name them; the sequences that test those APIs do."""

KNOWN += (
    Entry(
        "marker-leader-epoch",
        "*.batches[].control.partition_leader_epoch",
        "a transaction marker's partition_leader_epoch: Kafka 0 (the leader's epoch), "
        "nullbroker -1",
    ),
    Entry(
        "batch-leader-epoch",
        "FetchResponse.responses[].partitions[].records[]*partition_leader_epoch",
        "a produced batch read back: Kafka stamps the leader's epoch (0) on it when it "
        "appends, nullbroker serves the producer's (-1 from the clients that write it)",
    ),
    Entry(
        "fetch-sessions",
        "FetchResponse.session_id",
        "Fetch v7+ asking for a session (epoch 0): Kafka opens one (a random id), "
        "nullbroker answers 0, no session, by design (KIP-227 allows it; README)",
    ),
    *(
        Entry(
            "first-sequence-nonzero",
            f"ProduceResponse.responses[*].partition_responses[].{field}",
            "an idempotent producer's first batch to a partition at sequence 555 (the Java "
            "recording): Kafka takes it (no state for the producer there), nullbroker "
            "OUT_OF_ORDER_SEQUENCE_NUMBER (45)",
            kafka=(0, None, -1),
        )
        for field in ("error_code", "base_offset", "error_message", "log_start_offset")
    ),
    *(
        Entry(
            "fetch-zero-topic-id",
            path,
            "Fetch v13+ naming a topic by the zero id: Kafka UNKNOWN_SERVER_ERROR (-1) at the "
            "top and no topics, nullbroker UNKNOWN_TOPIC_ID (100) on the partition",
        )
        for path in ("FetchResponse.error_code", "FetchResponse.responses[]")
    ),
    Entry(
        "abort-marker-epoch",
        "*.batches[].control.producer_epoch",
        "the abort marker of a transaction that InitProducerId fenced: Kafka writes it at the "
        "new epoch (1), nullbroker at the fenced one (0)",
    ),
)

KNOWN += (
    Entry(
        "commit-previous-epoch",
        "OffsetCommitResponse.topics[].partitions[].error_code",
        "OffsetCommit v9+ of a partition the member still owns at its previous epoch (the "
        "heartbeat moving it on crossed the commit): Kafka 4.1.1 STALE_MEMBER_EPOCH (113), "
        "nullbroker NONE, as KIP-1251 proposes, on purpose: with Kafka's answer Kafka's "
        "verifiable consumer (Java 4.1, --group-protocol consumer) does not retry the commit, "
        "and the next owner reads those records again "
        "(tests/test_consumer_groups.py::test_java_members_joining_and_leaving_read_every_"
        "offset_once failed 2 runs of 6 with it)",
    ),
)

UNORDERED: dict[str, str] = {
    "CreatePartitionsResponse.results": "name",
    "CreateTopicsResponse.topics": "name",
    "DeleteGroupsResponse.results": "group_id",
    "DeleteRecordsResponse.topics": "name",
    "DeleteTopicsResponse.responses": "name",
    "DescribeConfigsResponse.results": "resource_name",
    "DescribeGroupsResponse.groups": "group_id",
    "ConsumerGroupDescribeResponse.groups": "group_id",
    "ListOffsetsResponse.topics": "name",
    "ListOffsetsResponse.topics[].partitions": "partition_index",
    "OffsetFetchResponse.groups": "group_id",
    "OffsetFetchResponse.topics": "name",
    "OffsetFetchResponse.groups[].topics": "name",
    "DescribeProducersResponse.topics": "name",
    "DescribeProducersResponse.topics[].partitions": "partition_index",
    "DescribeTransactionsResponse.transaction_states": "transactional_id",
    "IncrementalAlterConfigsResponse.responses": "resource_name",
    "ProduceResponse.responses": "name",
    "OffsetFetchResponse.topics[].partitions": "partition_index",
    "OffsetFetchResponse.groups[].topics[].partitions": "partition_index",
    "ProduceResponse.responses[].partition_responses": "index",
    "MetadataResponse.topics": "name",
    "MetadataResponse.topics[].partitions": "partition_index",
    "CreateTopicsResponse.topics[].configs": "name",
    "DescribeConfigsResponse.results[].configs": "name",
}
"""Arrays whose order Kafka takes from a hash map (so no client may rely on it), by path
pattern, with the field they are matched by."""
