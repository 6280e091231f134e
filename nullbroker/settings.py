"""nullbroker's settings: defaults, then a TOML file, then NULLBROKER_* variables, then flags."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codec import DEFAULT_MAX_FRAME_BYTES, native

from .cluster.nodes import INTERNAL_TOPIC_PARTITIONS, MAX_BROKERS
from .net.listeners import (
    CLIENT_AUTH,
    MECHANISMS,
    OAUTHBEARER,
    PLAINTEXT,
    Listener,
    ListenerError,
    parse_listeners,
)
from .net.read_budget import DEFAULT_MAX_BUFFERED_BYTES, SMALL_REQUEST_BYTES
from .sources.synthetic import SourceSpec, SourceSpecError
from .state.fetch_sessions import DEFAULT_SLOTS
from .toml_files import read_document
from .workers.node_map import NodeMap, NodeMapError

if TYPE_CHECKING:
    from .net.sasl import Users

ENV_PREFIX = "NULLBROKER_"
CONFIG_FILE_VARIABLE = "NULLBROKER_CONFIG"
STRICT_VARIABLE = "NULLBROKER_STRICT"
"""Set by `make test STRICT=1`: a strict build and test run (setup.py, tests/skip_gate.py),
which the broker's processes inherit and must not take for a setting of theirs."""
NOT_SETTINGS = frozenset({CONFIG_FILE_VARIABLE, native.VARIABLE, STRICT_VARIABLE})
"""NULLBROKER_ variables that are not settings: the config file's path, the C switch, the
strict run's."""
CONNECTION_LOOPS = ("epoll", "trio")


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
    """Every setting of `nullbroker serve`. Field names are the setting names."""

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
    """A TOML file of SASL users (nullbroker.net.sasl)."""
    sasl_mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    sasl_session_lifetime_ms: int = 0
    oauthbearer_principal_claim: str = "sub"
    """The claim of an OAUTHBEARER token that names its principal (Kafka's
    unsecuredValidatorPrincipalClaimName)."""
    """How long a SASL session lasts before the client must re-authenticate (0: for ever)."""
    brokers: int = 1
    """Nodes of the cluster, on consecutive ports (nullbroker.cluster.nodes)."""
    node_map: str | None = None
    """A TOML file of each node's address and the supervisor's (nullbroker.workers.node_map): the
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
    sources: tuple[SourceSpec, ...] = ()
    faults: tuple[str, ...] = ()
    """Fault SPECs applied at start (nullbroker.cluster.faults)."""
    cluster_id: str = "bnVsbGJyb2tlci1jbHN0cg"
    """The cluster's id (Metadata, DescribeCluster): a KRaft cluster id as `kafka-storage
    format -t` takes one, 16 bytes in URL-safe base64, 22 characters (these decode to
    "nullbroker-clstr")."""
    group_initial_rebalance_delay_ms: int = 3000
    fetch_session_cache_slots: int = DEFAULT_SLOTS
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

    def __post_init__(self) -> None:
        named = self.named
        parse_host_port(self.listen, named("listen"))
        if self.advertise is not None:
            parse_host_port(self.advertise, named("advertise"))
        if self.metrics is not None:
            parse_host_port(self.metrics, named("metrics"))
        if self.schema_registry is not None:
            parse_host_port(self.schema_registry, named("schema_registry"))
        if not 1 <= self.brokers <= MAX_BROKERS:
            raise ConfigError(
                f"{named('brokers')}: must be from 1 to {MAX_BROKERS}, got {self.brokers}"
            )
        self._check_listeners()
        for listener in self.listener_specs:
            if self.brokers > 1 and listener.port + self.brokers - 1 > 65535:
                setting = "listeners" if self.listeners else "listen"
                raise ConfigError(
                    f"{named(setting)}: {self.brokers} brokers need {self.brokers} consecutive "
                    f"ports from {listener.port}"
                )
        if self.node_map is not None:
            self._take_size_from_node_map()
        if self.processes != "auto" and not (
            self.processes.isdigit() and 1 <= int(self.processes) <= self.brokers
        ):
            raise ConfigError(
                f"{named('processes')}: must be 'auto' or a number from 1 to the brokers' "
                f"{self.brokers} (each process serves at least one node; see "
                f"{named('brokers')}), got {self.processes!r}"
            )
        if self.partitions < 1:
            raise ConfigError(f"{named('partitions')}: must be at least 1, got {self.partitions}")
        if self.max_frame_bytes < 1024:
            raise ConfigError(
                f"{named('max_frame_bytes')}: must be at least 1024, got {self.max_frame_bytes}"
            )
        for setting in ("idle_timeout_ms", "max_connections", "max_connections_per_ip"):
            if getattr(self, setting) < 0:
                raise ConfigError(
                    f"{named(setting)}: must not be negative (0: no limit), "
                    f"got {getattr(self, setting)}"
                )
        if self.max_buffered_bytes < SMALL_REQUEST_BYTES:
            raise ConfigError(
                f"{named('max_buffered_bytes')}: must be at least {SMALL_REQUEST_BYTES} (a "
                f"request that size is read without reserving), got {self.max_buffered_bytes}"
            )
        names = [source.name for source in self.sources]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(
                f"{named('sources')}: topic {duplicates[0]!r} is declared more than once"
            )
        _check_schema_ids(self.sources, named("sources"))
        if self.faults:  # nullbroker.cluster.fault_specs is imported for faults only
            _check_faults(self.faults, self.brokers, named("faults"))
        if self.produced_record_size < 0:
            raise ConfigError(
                f"{named('produced_record_size')}: must not be negative, "
                f"got {self.produced_record_size}"
            )
        if self.retain < 0:
            raise ConfigError(f"{named('retain')}: must not be negative, got {self.retain}")
        for setting in ("offsets_topic_partitions", "transaction_state_partitions"):
            if getattr(self, setting) < 1:
                raise ConfigError(
                    f"{named(setting)}: must be at least 1, got {getattr(self, setting)}"
                )
        if not is_cluster_id(self.cluster_id):
            raise ConfigError(
                f"{named('cluster_id')}: must be a KRaft cluster id, 16 bytes in URL-safe "
                f"base64 (22 characters, as `kafka-storage random-uuid` prints one), got "
                f"{self.cluster_id!r}"
            )
        if self.fetch_session_cache_slots < 0:
            raise ConfigError(
                f"{named('fetch_session_cache_slots')}: must not be negative (0: no fetch "
                f"sessions), got {self.fetch_session_cache_slots}"
            )
        if self.group_initial_rebalance_delay_ms < 0:
            raise ConfigError(
                f"{named('group_initial_rebalance_delay_ms')}: must not be negative, "
                f"got {self.group_initial_rebalance_delay_ms}"
            )
        if (
            not 0
            < self.group_consumer_heartbeat_interval_ms
            < (self.group_consumer_session_timeout_ms)
        ):
            raise ConfigError(
                f"{named('group_consumer_heartbeat_interval_ms')}: must be above 0 and below "
                f"{named('group_consumer_session_timeout_ms')} "
                f"({self.group_consumer_session_timeout_ms}), "
                f"got {self.group_consumer_heartbeat_interval_ms}"
            )
        if self.connection_loop not in CONNECTION_LOOPS:
            raise ConfigError(
                f"{named('connection_loop')}: must be one of {', '.join(CONNECTION_LOOPS)}, "
                f"got {self.connection_loop!r}"
            )
        if self.report_interval <= 0:
            raise ConfigError(
                f"{named('report_interval')}: must be positive, got {self.report_interval}"
            )

    def _check_listeners(self) -> None:
        named = self.named
        origins = dict(self.origins)
        if self.listeners is not None and "listen" in origins:
            raise ConfigError(
                f"{named('listeners')} and {named('listen')}: give one of them "
                "(--listen is one PLAINTEXT listener)"
            )
        if self.advertised_listeners is not None and self.advertise is not None:
            raise ConfigError(
                f"{named('advertised_listeners')} and {named('advertise')}: give one of them"
            )
        for setting in ("listeners", "advertised_listeners"):
            text = getattr(self, setting)
            if text is not None:
                try:
                    parse_listeners(text)
                except ListenerError as error:
                    raise ConfigError(f"{named(setting)}: {error}") from None
        names = [listener.name for listener in self.listener_specs]
        if self.advertised_listeners is not None:
            advertised = [listener.name for listener in parse_listeners(self.advertised_listeners)]
            if sorted(advertised) != sorted(names):
                raise ConfigError(
                    f"{named('advertised_listeners')}: must name the listeners' protocols "
                    f"({', '.join(names)}), got {', '.join(advertised)}"
                )
        if self.tls_client_auth not in CLIENT_AUTH:
            raise ConfigError(
                f"{named('tls_client_auth')}: must be one of {', '.join(CLIENT_AUTH)}, "
                f"got {self.tls_client_auth!r}"
            )
        if any(listener.sasl for listener in self.listener_specs):
            # OAUTHBEARER's principals come from their tokens; the other mechanisms check
            # passwords.
            if not self.users and set(self.sasl_mechanism_list) - {OAUTHBEARER}:
                raise ConfigError(
                    f"{named('listeners')}: a SASL listener needs {named('users')}, "
                    'a TOML file with [users] name = "password" (or offer only OAUTHBEARER)'
                )
            if self.users:
                self.read_users()
        unknown = [m for m in self.sasl_mechanism_list if m not in MECHANISMS]
        if unknown or not self.sasl_mechanism_list:
            raise ConfigError(
                f"{named('sasl_mechanisms')}: choose from {', '.join(MECHANISMS)}, "
                f"got {self.sasl_mechanisms!r}"
            )
        if not self.oauthbearer_principal_claim.strip():
            raise ConfigError(f"{named('oauthbearer_principal_claim')}: must not be blank")
        if self.sasl_session_lifetime_ms < 0:
            raise ConfigError(
                f"{named('sasl_session_lifetime_ms')}: must not be negative, "
                f"got {self.sasl_session_lifetime_ms}"
            )
        if any(listener.tls for listener in self.listener_specs) and not (
            self.tls_cert and self.tls_key
        ):
            raise ConfigError(
                f"{named('listeners')}: an SSL or SASL_SSL listener needs "
                f"{named('tls_cert')} and {named('tls_key')}"
            )
        if self.tls_client_auth != "none" and not self.tls_ca:
            raise ConfigError(
                f"{named('tls_client_auth')} {self.tls_client_auth}: needs {named('tls_ca')}, "
                "the CA that signs client certificates"
            )
        if names != [PLAINTEXT] and (self.node_map is not None or self.processes != "1"):
            raise ConfigError(
                f"{named('listeners')}: with {named('processes')} or {named('node_map')} "
                "only one PLAINTEXT listener is served yet"
            )

    @property
    def sasl_mechanism_list(self) -> tuple[str, ...]:
        return tuple(m.strip().upper() for m in self.sasl_mechanisms.split(",") if m.strip())

    def read_users(self) -> Users:
        """The --users file, read and checked; ConfigError names the setting."""
        from .net.sasl import Users, UsersError  # SASL listeners only

        assert self.users is not None
        try:
            return Users.read(self.users)
        except UsersError as error:
            raise ConfigError(f"{self.named('users')} {error}") from None

    @property
    def listener_specs(self) -> tuple[Listener, ...]:
        """Every listener: --listeners, else --listen as one PLAINTEXT listener."""
        if self.listeners is not None:
            return parse_listeners(self.listeners)
        return (Listener(PLAINTEXT, *self.listen_address),)

    @property
    def advertised_specs(self) -> dict[str, tuple[str, int]]:
        """The address each listener is advertised at, by protocol name (none: the address
        each client reached)."""
        if self.advertised_listeners is not None:
            advertised = parse_listeners(self.advertised_listeners)
            return {listener.name: (listener.host, listener.port) for listener in advertised}
        if self.advertise is not None:
            return {PLAINTEXT: self.advertised_address}  # type: ignore[dict-item]
        return {}

    def _take_size_from_node_map(self) -> None:
        named = self.named
        size = len(self.read_node_map().nodes)
        if self.brokers not in (1, size):
            raise ConfigError(
                f"{named('brokers')}: {self.brokers}, but {named('node_map')} "
                f"{self.node_map} has {size} nodes (leave {named('brokers')} out)"
            )
        if self.processes != "1":
            raise ConfigError(
                f"{named('processes')}: with {named('node_map')} each host runs one process "
                "for its nodes"
            )
        # The map is the cluster: its size is every host's --brokers.
        object.__setattr__(self, "brokers", size)

    def read_node_map(self) -> NodeMap:
        """The --node-map file, read and checked; ConfigError names the setting."""
        assert self.node_map is not None
        try:
            return NodeMap.read(self.node_map)
        except NodeMapError as error:
            raise ConfigError(f"{self.named('node_map')} {error}") from None

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
    def metrics_address(self) -> tuple[str, int] | None:
        return parse_host_port(self.metrics, self.named("metrics")) if self.metrics else None


def _check_faults(specs: tuple[str, ...], brokers: int, setting: str) -> None:
    """Each fault SPEC must parse and apply to a cluster of `brokers` nodes."""
    from .cluster.fault_specs import FaultSpecError
    from .cluster.faults import Faults
    from .cluster.nodes import Cluster

    faults = Faults(Cluster(brokers))
    for spec in specs:
        try:
            faults.add(spec)
        except FaultSpecError as error:
            raise ConfigError(f"{setting}: {error}") from None


def _check_schema_ids(sources: tuple[SourceSpec, ...], setting: str) -> None:
    """One schema id, one schema: Avro sources whose values carry a Confluent schema id
    (wire=confluent) must not give two schemas the same id."""
    claimed: dict[int, SourceSpec] = {}
    for source in sources:
        if source.format != "avro" or source.wire != "confluent":
            continue
        first = claimed.setdefault(source.schema_id, source)
        if first is source:
            continue
        # Read only when two sources share an id: the registry's module and json stay out
        # of a broker that never needs them.
        from .ops.schema_registry import source_schema_text

        if source_schema_text(str(first.schema)) != source_schema_text(str(source.schema)):
            raise ConfigError(
                f"{setting}: sources {first.name!r} and {source.name!r} give schema-id "
                f"{source.schema_id} to two different schemas; give each its own schema-id"
            )


def is_cluster_id(text: str) -> bool:
    """A KRaft cluster id: 16 bytes in URL-safe base64, unpadded (22 characters), as
    Kafka's Uuid.toString writes it."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text):
        return False
    raw = base64.urlsafe_b64decode(text + "==")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=") == text


# The flags whose names are not their setting's name with dashes.
_FLAG_NAMES = {"auto_create": "--no-auto-create", "sources": "--source", "faults": "--fault"}


def flag_name(setting: str) -> str:
    """The command-line flag of a setting: `summary_json` is `--summary-json`."""
    return _FLAG_NAMES.get(setting) or "--" + setting.replace("_", "-")


_FIELDS = {field.name: field for field in fields(Config) if field.name != "origins"}
# `--no-auto-create` reads better on a command line; accept it in files and variables too.
_ALIASES: dict[str, tuple[str, Any]] = {
    "no_auto_create": ("auto_create", lambda value: not value),
    # `--source` and `[[source]]` name one source topic each.
    "source": ("sources", lambda value: value),
    "fault": ("faults", lambda value: value),
}


def _normalise_key(key: str) -> str:
    return key.strip().lower().replace("-", "_")


def _sources(value: Any, origin: str) -> tuple[SourceSpec, ...]:
    """Source topics from `NAME:opt=v,...` strings (`;` separates several in one string)
    or from TOML tables (`[[source]]` with a `name` key)."""
    items = value if isinstance(value, list | tuple) else [value]
    specs = []
    try:
        for item in items:
            if isinstance(item, SourceSpec):
                specs.append(item)
            elif isinstance(item, dict):
                if "name" not in item:
                    raise SourceSpecError("a [[source]] table needs a name")
                specs.append(SourceSpec.from_mapping(str(item["name"]), item))
            else:
                specs.extend(SourceSpec.parse(text) for text in str(item).split(";") if text)
    except SourceSpecError as error:
        raise ConfigError(f"{origin}: {error}") from None
    return tuple(specs)


def _fault_specs(value: Any) -> tuple[str, ...]:
    """Fault SPECs from strings (`;` separates several in one) or `[[fault]]` tables
    (`spec = "..."`, or `kind` and the SPEC's options as keys)."""
    items = value if isinstance(value, list | tuple) else [value]
    specs: list[str] = []
    for item in items:
        if isinstance(item, dict):
            if "spec" in item:
                specs.append(str(item["spec"]))
            else:
                options = ",".join(f"{key}={item[key]}" for key in item if key != "kind")
                specs.append(f"{item.get('kind', '')}:{options}")
        else:
            specs.extend(text for text in str(item).split(";") if text.strip())
    return tuple(specs)


_KIND_NAMES = {"bool": "boolean", "int": "integer", "float": "number"}


def _coerce(name: str, value: Any, origin: str) -> Any:
    kind = str(_FIELDS[name].type)
    if name == "sources":
        return _sources(value, origin)
    if name == "faults":
        return _fault_specs(value)
    try:
        if "bool" in kind:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if "int" in kind:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if "float" in kind:
            return float(value)
        return None if value is None else str(value)
    except ValueError:
        expected = next((text for word, text in _KIND_NAMES.items() if word in kind), "string")
        raise ConfigError(f"{origin}: {value!r} is not a valid {expected}") from None


Settings = dict[str, Any]
Origins = dict[str, str]


def _apply(
    values: Mapping[str, Any], origin_of: Callable[[str], str], known_as: Callable[[str], str]
) -> tuple[Settings, Origins]:
    """Settings from `values`, and for each the name the user gave it (`origin_of(key)`).
    An unknown key is an error listing the known ones as `known_as` names them."""
    settings: Settings = {}
    origins: Origins = {}
    for raw_key, value in values.items():
        key = _normalise_key(raw_key)
        origin = origin_of(raw_key)
        if key in _ALIASES:
            target, convert = _ALIASES[key]
            settings[target] = convert(_coerce(target, value, origin))
            origins[target] = origin
        elif key in _FIELDS:
            settings[key] = _coerce(key, value, origin)
            origins[key] = origin
        else:
            names = sorted(
                known_as(name)
                for name in [*_FIELDS, *_ALIASES]
                if name not in ("sources", "faults")
            )
            raise ConfigError(f"{origin}: unknown setting (known: {', '.join(names)})")
    return settings, origins


def from_toml(path: str | Path) -> tuple[Settings, Origins]:
    """Settings from a TOML file's top-level keys."""
    document = read_document(path, ConfigError, f"config file {path}")
    return _apply(
        document,
        lambda key: f"{key} in config file {path}",
        lambda name: name.replace("_", "-"),
    )


def from_environment(environ: Mapping[str, str] = os.environ) -> tuple[Settings, Origins]:
    """Settings from NULLBROKER_<SETTING> variables, e.g. NULLBROKER_PARTITIONS=4."""
    return _apply(
        {
            key[len(ENV_PREFIX) :]: value
            for key, value in environ.items()
            if key.startswith(ENV_PREFIX) and key not in NOT_SETTINGS
        },
        lambda key: ENV_PREFIX + key,
        lambda name: ENV_PREFIX + name.upper(),
    )


def load(
    flags: Mapping[str, Any],
    config_file: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Config:
    """The effective settings: defaults < config file < environment < command-line flags."""
    settings: Settings = {}
    origins: Origins = {}
    layers = [from_toml(config_file)] if config_file else []
    layers.append(from_environment(environ))
    layers.append(
        _apply(
            {key: value for key, value in flags.items() if value is not None},
            lambda key: flag_name(_normalise_key(key)),
            flag_name,
        )
    )
    for layer_settings, layer_origins in layers:
        settings.update(layer_settings)
        origins.update(layer_origins)
    try:
        return replace(Config(), **settings, origins=tuple(sorted(origins.items())))
    except TypeError as error:
        raise ConfigError(str(error)) from None
