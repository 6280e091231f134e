"""What may differ between Kafka's answers and nullbroker's (tests/support/differential.py).

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
    """When set, the difference is allowed only where each broker's value is this identity:
    its own (Pair.identities: its node id, its port), or one of the kinds below (an id it
    made up, a time of its clock), so that a wrong node id, a missing id or no time at all is
    still caught."""
    sometimes: bool = False
    """A known difference that depends on timing: not required to be seen."""
    kafka: tuple[object, ...] | None = None
    """When set, the entry matches only where Kafka's value is one of these (so that a
    difference of another kind at the same path is not taken for this one)."""
    nullbroker: tuple[object, ...] | None = None
    """Likewise for nullbroker's value ("<absent>": an entry it does not send)."""


ASSIGNED = "assigned"
"""The identity of what a broker makes up (a member id, a producer id): any non-empty string,
any id from 0 up, on both sides; a missing one (-1, null, "") is still a difference."""

SESSION = "session"
"""The identity of a fetch session's id (KIP-227): random in both brokers, and non-zero on
both, so that a session one broker opens and the other does not is still a difference."""

TOPIC_ID = "topic id"
"""The identity of a topic id: a non-zero UUID on both sides, the same topic's on each side
for the whole sequence. The first difference pairs Kafka's id with nullbroker's; neither may
be paired with another id after (a topic whose id changed, or two topics with one id)."""

CLUSTER_ID = "cluster id"
"""The identity of a cluster id: a KRaft cluster id on both sides (16 bytes in URL-safe
base64, 22 characters), the same pair for the whole sequence."""

CLOCK = "clock"
"""The identity of a time a broker takes from its clock (a transaction's start, a marker's
timestamp): on both sides within the sequence, from its start to the comparison (so -1, or
a time from another day, is still a difference)."""

NODE = "each broker's own node id (Kafka's fixture is node 1, nullbroker's only node is 0)"

_DEFAULT_SYNONYM = ("synonyms[].value", "synonyms[].source")
FIXTURE_CONFIGS: dict[str, tuple[str, ...]] = {
    # Kafka's default is no value, so nullbroker lists no synonym where Kafka lists its own
    "controller.listener.names": ("value", "config_source", "synonyms[]"),
    "inter.broker.listener.name": ("value", "config_source", "synonyms[]"),
    # Kafka's default is a value: nullbroker lists it, Kafka the fixture's and then it
    **dict.fromkeys(
        (
            "controller.quorum.bootstrap.servers",
            "listener.security.protocol.map",
            "log.retention.check.interval.ms",
            "sasl.enabled.mechanisms",
            "connections.max.reauth.ms",
            "metric.reporters",
        ),
        ("value", "config_source", "synonyms[]", *_DEFAULT_SYNONYM),
    ),
}
"""The broker configs Kafka's fixture sets and nullbroker has no counterpart of, with the
fields of each that differ."""

MEMBER = "a classic group's member ids are the broker's (client id and a random UUID)"

ALLOWED: tuple[Entry, ...] = (
    Entry(
        "cluster id",
        "*.cluster_id",
        "each cluster's own id (Kafka's is random at format)",
        identity=CLUSTER_ID,
    ),
    Entry(
        "topic id",
        "*.topic_id",
        "topic ids are random in Kafka, derived from the name (and its generation) here",
        identity=TOPIC_ID,
    ),
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
    *(
        Entry(
            "share group epoch",
            path,
            "a share group's epoch also moves when Kafka's share coordinator has initialized "
            "the share partitions of a topic (asynchronously, in __share_group_state), a "
            "moment after a join; nullbroker initializes them with the join, so the same "
            "membership changes may leave the two at different epochs",
            identity=ASSIGNED,
        )
        for path in (
            "ShareGroupHeartbeatResponse.member_epoch",
            "ShareGroupDescribeResponse.groups[].group_epoch",
            "ShareGroupDescribeResponse.groups[].assignment_epoch",
            "ShareGroupDescribeResponse.groups[].members[].member_epoch",
        )
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
            identity=CLOCK,
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
        "marker clock",
        "ListOffsetsResponse.topics[*].partitions[].timestamp",
        "ListOffsets by timestamp or max timestamp finding a transaction marker (the record "
        "of the latest timestamp once a transaction ended): its timestamp is the broker's "
        "clock when it wrote the marker (the records the tests write carry fixed times, "
        "before any sequence)",
        identity=CLOCK,
    ),
    Entry(
        "transaction start",
        "DescribeTransactionsResponse.transaction_states[*].transaction_start_time",
        "the broker's clock when the transaction began",
        identity=CLOCK,
    ),
    Entry("group leader", "*.leader", MEMBER, identity=ASSIGNED),
    Entry(
        "fetch session",
        "FetchResponse.session_id",
        "a fetch session's id is random in both brokers (Kafka's FetchSessionCache picks it)",
        identity=SESSION,
    ),
    Entry(
        "broker resource",
        "DescribeConfigsResponse.results[].resource_name",
        "a broker's config resource is named by its node id, each broker's own",
        identity="node name",
    ),
    Entry(
        "broker resource",
        "IncrementalAlterConfigsResponse.responses[].resource_name",
        "a broker's config resource is named by its node id, each broker's own",
        identity="node name",
    ),
    Entry(
        "broker resource",
        "AlterConfigsResponse.responses[].resource_name",
        "a broker's config resource is named by its node id, each broker's own",
        identity="node name",
    ),
    *(
        Entry(
            "node id config",
            f"DescribeConfigsResponse.results[].configs[{name}].{field}",
            NODE,
            identity="node name",
        )
        for name in ("node.id", "broker.id")
        for field in ("value", "synonyms[].value")
    ),
    *(
        Entry(
            "listeners",
            f"DescribeConfigsResponse.results[].configs[{name}].{field}",
            "each broker listens where it was told: Kafka's fixture on the ports it picked, "
            "with a CONTROLLER listener; nullbroker where the launcher told it (port 0: the "
            "OS picks one)",
        )
        for name, field in (
            ("listeners", "value"),
            ("listeners", "synonyms[].value"),
            ("advertised.listeners", "value"),
        )
    ),
    *(
        Entry(
            "advertised listeners",
            f"DescribeConfigsResponse.results[].configs[advertised.listeners].{field}",
            "Kafka's fixture is told what to advertise; nullbroker, not told, advertises where "
            "clients reached it, as a Kafka node not told does (no value, Kafka's default)",
        )
        for field in ("config_source", "synonyms[]")
    ),
    *(
        Entry(
            "log dirs",
            f"DescribeConfigsResponse.results[].configs[log.dirs].{field}",
            "Kafka's fixture keeps its log in a folder of the session's; nullbroker's is /dev/null",
            nullbroker=("/dev/null",),
        )
        for field in ("value", "synonyms[].value")
    ),
    *(
        Entry(
            "fixture config",
            f"DescribeConfigsResponse.results[].configs[{name}].{field}",
            "set in Kafka's fixture (perf/kafka_broker.py) for what nullbroker does not have: "
            "its KRaft controller (a CONTROLLER listener, a quorum to reach, a listener for "
            "brokers to talk to each other), the SASL_PLAINTEXT listener the SASL sequences "
            "use (its mechanisms, its session lifetime), its client-telemetry plugin (metric "
            "reporters: TelemetrySink beside JmxReporter, tests/conftest.py), and retention "
            "checked once a day, not every five minutes (so the tests' records, timestamped "
            "2026-01-01, are not deleted mid-test); the pair's nullbroker, one PLAINTEXT "
            "listener, reports Kafka's defaults, as a node not told them would",
        )
        for name, fields in FIXTURE_CONFIGS.items()
        for field in fields
    ),
    Entry(
        "fixture config",
        "DescribeConfigsResponse.results[].configs[listener.name.sasl_plaintext.*.sasl.jaas.config]",
        "the JAAS configuration of each mechanism of the SASL_PLAINTEXT listener Kafka's fixture "
        "has for the SASL sequences (sensitive: no value); the pair's nullbroker has no SASL "
        "listener, and a Kafka node without one lists none",
        nullbroker=("<absent>",),
    ),
    Entry(
        "fixture config",
        "DescribeConfigsResponse.results[].configs[log.initial.task.delay.ms]",
        "an internal config Kafka lists only where it is set, as its fixture sets it (first "
        "retention check after a day); nullbroker, like a Kafka not told it, does not list it",
        nullbroker=("<absent>",),
    ),
    Entry(
        "marker clock",
        "DescribeProducersResponse.topics[*].partitions[].active_producers[].last_timestamp",
        "a producer whose last write was a transaction marker: the broker's clock when it "
        "wrote it (the records the tests write carry fixed times, before any sequence)",
        identity=CLOCK,
    ),
)

KNOWN: tuple[Entry, ...] = ()

COMMON: frozenset[str] = frozenset()
"""Known differences in the steps most sequences share (CreateTopics, Metadata,
FindCoordinator): a sequence need not name them; the sequences that test those APIs do."""

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
    "DescribeTransactionsResponse.transaction_states[].topics": "topic",
    "IncrementalAlterConfigsResponse.responses": "resource_name",
    "AlterConfigsResponse.responses": "resource_name",
    # Kafka keeps client quotas in hash maps: of entities, of an entity's components and of
    # its quotas
    "DescribeClientQuotasResponse.entries": "entity",
    "DescribeClientQuotasResponse.entries[].entity": "entity_type",
    "DescribeClientQuotasResponse.entries[].values": "key",
    "AlterClientQuotasResponse.entries[].entity": "entity_type",
    # and SCRAM credentials, by user and mechanism
    "DescribeUserScramCredentialsResponse.results": "user",
    "AlterUserScramCredentialsResponse.results": "user",
    "DescribeUserScramCredentialsResponse.results[].credential_infos": "mechanism",
    "ListGroupsResponse.groups": "group_id",
    "ListTransactionsResponse.transaction_states": "transactional_id",
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


# -- SASL conversations (tests/oracle/test_differential_sasl.py) ---------------------------

TOKEN_LIFETIME = "token lifetime"
"""The identity of an OAUTHBEARER session's lifetime: the pair a sequence checked, each
within what the token had left while that broker was asked."""

SCRAM_MESSAGE = "scram message"
"""The identity of a SCRAM server message: the pair a sequence checked (the server-first
message well formed, the server-final signature verified)."""

SASL: tuple[Entry, ...] = (
    Entry(
        "token lifetime",
        "SaslAuthenticateResponse.session_lifetime",
        "an OAUTHBEARER session lasts until its token's exp, so each broker tells the "
        "milliseconds left when it authenticated the client",
        identity=TOKEN_LIFETIME,
    ),
    Entry(
        "scram randomness",
        "SaslAuthenticateResponse.auth_bytes",
        "SCRAM's server-first message carries the server's random nonce and the user's "
        "random salt, and the server-final message a signature over them",
        identity=SCRAM_MESSAGE,
    ),
)

ALLOWED = (*ALLOWED, *SASL)


# -- a cluster compared with a Kafka cluster, nodes matched by role
# -- (tests/oracle/test_differential_cluster.py) ------------------------------------------

CLUSTER_CONTROLLER = "cluster controller"
"""The identity of the controller a cluster's Metadata or DescribeCluster names: the pair a
sequence checked, each a node of its own cluster."""

CLUSTER: tuple[Entry, ...] = (
    Entry(
        "controller",
        "*.controller_id",
        "Kafka's KRaft brokers name a random live broker as the controller (clients cannot "
        "reach the controllers themselves); nullbroker names node 0",
        identity=CLUSTER_CONTROLLER,
    ),
)

ALLOWED = (*ALLOWED, *CLUSTER)

UNORDERED.update(
    {
        # KIP-951's endpoints: Kafka's come from a hash map of the leaders named (by role).
        "ProduceResponse.node_endpoints": "node_id",
        "FetchResponse.node_endpoints": "node_id",
    }
)
