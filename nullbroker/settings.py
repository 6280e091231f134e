"""Every setting of `nullbroker serve`: a plain schema of names, types and defaults.

It imports none of the package's rooms, so that every room may take its settings from it
(from below) and importing the state-only Broker loads no listener, node map or parser.
Reading the settings (a TOML file, NULLBROKER_* variables, flags) and checking them, each
with the parser of the room it belongs to, is nullbroker.app.configuration's; what is here
derives only plain values from them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from codec import DEFAULT_MAX_FRAME_BYTES

CONNECTION_LOOPS = ("epoll", "trio")
"""What may serve plain TCP connections (`--connection-loop`)."""

DEFAULT_MAX_BUFFERED_BYTES = 100 * 1024 * 1024
"""The read budget's bytes over all connections (nullbroker.net.read_budget)."""
DEFAULT_FETCH_SESSION_SLOTS = 1000
"""Kafka's max.incremental.fetch.session.cache.slots (nullbroker.state.fetch_sessions)."""
INTERNAL_TOPIC_PARTITIONS = 50
"""Partitions of __consumer_offsets and __transaction_state, as Kafka's defaults
(offsets.topic.num.partitions, transaction.state.log.num.partitions)."""


class ConfigError(ValueError):
    """A setting that cannot be used; the message names it."""


def parse_host_port(text: str, setting: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 hosts in brackets) into its parts."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(
            f"{setting}: expected HOST:PORT with a port from 0 to 65535, got {text!r}"
        )
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port_text)


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting of `nullbroker serve`. Field names are the setting names.

    Made as given: a Config read from a user's settings is the one
    nullbroker.app.configuration.load returns, checked (`checked`)."""

    listen: str = "127.0.0.1:9092"
    advertise: str | None = None
    listeners: str | None = None
    """`PROTOCOL://HOST:PORT,...` (nullbroker.net.listeners); in place of `listen`."""
    advertised_listeners: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_client_auth: str = "none"
    users: str | None = None
    """A TOML file of SASL users (nullbroker.sessions.sasl)."""
    sasl_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    sasl_session_lifetime_ms: int = 0
    oauthbearer_principal_claim: str = "sub"
    """The claim of an OAUTHBEARER token that names its principal (Kafka's
    unsecuredValidatorPrincipalClaimName)."""
    """How long a SASL session lasts before the client must re-authenticate (0: for ever)."""
    brokers: int = 1
    """Nodes of the cluster, on consecutive ports (nullbroker.cluster.nodes)."""
    node_map: str | None = None
    """A TOML file of each node's address and the supervisor's (nullbroker.cluster.node_map): the
    cluster spans hosts, and its size is the map's."""
    processes: str = "1"
    """Processes the nodes are spread over: a number, or "auto" for the machine's cores
    (at most one per node). More than one: nullbroker.workers.processes."""
    partitions: int = 1
    auto_create: bool = True
    verify_crc: bool = False
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    idle_timeout_ms: int = 600_000
    """Close a connection that read nothing for this long (0: never)."""
    max_connections: int = 0
    """Connections served at once (0: no limit); beyond it, new ones wait their turn."""
    max_connections_per_ip: int = 0
    """Connections at once from one client address (0: no limit); beyond it, closed."""
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    """Bytes that large requests being read may reserve, over all connections
    (nullbroker.net.read_budget)."""
    metrics: str | None = None
    schema_registry: str | None = None
    summary_json: str | None = None
    report_interval: float = 5.0
    produced_record_size: int = 100
    retain: int = 0
    """Bytes of produced batches each partition keeps for Fetch; 0: synthetic records."""
    sources: tuple[Any, ...] = ()
    """Source topics, each a nullbroker.sources.synthetic.SourceSpec (parsed where the
    settings are read: the schema names no room's type)."""
    faults: tuple[str, ...] = ()
    """Fault SPECs applied at start (nullbroker.cluster.faults)."""
    cluster_id: str = "bnVsbGJyb2tlci1jbHN0cg"
    """The cluster's id (Metadata, DescribeCluster): a KRaft cluster id as `kafka-storage
    format -t` takes one, 16 bytes in URL-safe base64, 22 characters (these decode to
    "nullbroker-clstr")."""
    group_initial_rebalance_delay_ms: int = 3000
    fetch_session_cache_slots: int = DEFAULT_FETCH_SESSION_SLOTS
    """Fetch sessions each node keeps (Kafka's max.incremental.fetch.session.cache.slots);
    0: none, every Fetch is a full one."""
    offsets_topic_partitions: int = INTERNAL_TOPIC_PARTITIONS
    """Partitions of __consumer_offsets, whose leaders coordinate the groups it holds."""
    transaction_state_partitions: int = INTERNAL_TOPIC_PARTITIONS
    """Partitions of __transaction_state, likewise for transactional ids."""
    group_consumer_heartbeat_interval_ms: int = 5000
    """How often members of the new protocol's groups (KIP-848) heartbeat."""
    group_consumer_session_timeout_ms: int = 45000
    """How long such a member may go without a heartbeat before it is removed."""
    group_consumer_assignment_interval_ms: int = 1000
    """How often, at most, such a group's target assignment is made again (Kafka 4.4's
    default; 0 makes it at every change, as Kafka 4.1 did)."""
    group_share_heartbeat_interval_ms: int = 5000
    """How often members of share groups (KIP-932) heartbeat (a group's
    share.heartbeat.interval.ms overrides it)."""
    group_share_session_timeout_ms: int = 45000
    """How long such a member may go without a heartbeat before it is removed and the
    records it holds released (a group's share.session.timeout.ms overrides it)."""
    group_share_record_lock_duration_ms: int = 30000
    """How long a share group member holds a record it acquired before it is delivered to
    another (a group's share.record.lock.duration.ms overrides it)."""
    group_share_min_record_lock_duration_ms: int = 15000
    """The least share.record.lock.duration.ms a group may set (Kafka's bound; lower it to
    test lock timeouts quickly)."""
    group_share_delivery_count_limit: int = 5
    """Deliveries of a record before it is archived instead of delivered again."""
    group_share_partition_max_record_locks: int = 2000
    """Records in flight per share partition: the window that bounds its memory."""
    client_metrics: str = "*"
    """Client telemetry (KIP-714): the metric name prefixes every client is asked to push
    (`*`: every metric), comma separated; "off": GetTelemetrySubscriptions and
    PushTelemetry are not advertised, so clients push nothing (nullbroker.state.client_metrics)."""
    client_metrics_interval_ms: int = 5000
    """How often clients push them."""
    client_metrics_match: str = ""
    """Which clients are asked: `key=regex,...` of KIP-714's selectors (client_id,
    client_software_name, client_software_version, client_source_address,
    client_source_port, client_instance_id), each regex the whole value; "": every client."""
    client_metrics_max_clients: int = 64
    """Client instances whose pushed metrics are kept (nullbroker.state.pushed_metrics)."""
    client_metrics_max_series: int = 16384
    """Pushed series kept over every client instance; more are counted as dropped."""
    telemetry_max_bytes: int = 1 << 20
    """The largest push a client may send, compressed, and inflated (Kafka's
    telemetry.max.bytes)."""
    connection_loop: str = "epoll"
    """What serves plain TCP connections: "epoll", a loop hosting trio as its guest, or
    "trio" alone (slower: kept to compare, and as the path every other stream takes)."""
    origins: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """Where each setting that is not a default came from, as the user wrote it
    (`--summary-json`, `NULLBROKER_PARTITIONS`, `partitions in config file x.toml`), so that
    an error names the setting the way the user knows it."""

    def named(self, setting: str) -> str:
        """How the user named `setting` (a field name): where it came from, else its flag."""
        return dict(self.origins).get(setting) or flag_name(setting)

    @property
    def sasl_mechanism_list(self) -> tuple[str, ...]:
        return tuple(m.strip().upper() for m in self.sasl_mechanisms.split(",") if m.strip())

    @property
    def process_count(self) -> int:
        """How many processes serve the cluster ("auto": one per core, one per node at most)."""
        if self.processes == "auto":
            return max(1, min(os.cpu_count() or 1, self.brokers))
        return int(self.processes)

    @property
    def listen_address(self) -> tuple[str, int]:
        return parse_host_port(self.listen, self.named("listen"))

    @property
    def advertised_address(self) -> tuple[str, int] | None:
        return parse_host_port(self.advertise, self.named("advertise")) if self.advertise else None

    @property
    def schema_registry_address(self) -> tuple[str, int] | None:
        if not self.schema_registry:
            return None
        return parse_host_port(self.schema_registry, self.named("schema_registry"))

    @property
    def max_request_bytes(self) -> int:
        """A request announced larger closes its connection: it could never be read."""
        return min(self.max_frame_bytes, self.max_buffered_bytes)

    @property
    def client_telemetry(self) -> bool:
        """Whether ApiVersions lists the client telemetry APIs (KIP-714)."""
        return self.client_metrics.strip().lower() != "off"

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return parse_host_port(self.metrics, self.named("metrics")) if self.metrics else None


# The flags whose names are not their setting's name with dashes.
_FLAG_NAMES = {"auto_create": "--no-auto-create", "sources": "--source", "faults": "--fault"}


def flag_name(setting: str) -> str:
    """The command-line flag of a setting: `summary_json` is `--summary-json`."""
    return _FLAG_NAMES.get(setting) or "--" + setting.replace("_", "-")
