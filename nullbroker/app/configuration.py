"""The settings of `nullbroker serve` read and checked: defaults, then a TOML file, then
NULLBROKER_* variables, then flags, into nullbroker.settings.Config.

Each setting is checked by the parser of the room it belongs to (listeners and the read
budget in net/, the node map, the cluster's size and faults in cluster/, source topics in
sources/, a source's schema in ops/, SASL users and mechanisms in sessions/), which is why
this is the app's: the schema itself imports none of them. The rooms that parse a setting
again when they serve it (the listeners, the node map, the users) do it with the same
parsers."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from codec import native

from ..cluster.node_map import read_node_map
from ..cluster.nodes import MAX_BROKERS, Cluster
from ..net.listeners import CLIENT_AUTH, PLAINTEXT, ListenerError, listener_specs, parse_listeners
from ..net.read_budget import SMALL_REQUEST_BYTES
from ..sessions.mechanisms import MECHANISMS, OAUTHBEARER
from ..settings import CONNECTION_LOOPS, Config, ConfigError, flag_name, parse_host_port
from ..sources.synthetic import SourceSpec, SourceSpecError
from ..state.client_metrics import SubscriptionError, check_interval, parse_match
from ..toml_files import read_document

ENV_PREFIX = "NULLBROKER_"
CONFIG_FILE_VARIABLE = "NULLBROKER_CONFIG"
STRICT_VARIABLE = "NULLBROKER_STRICT"
"""Set by `make test STRICT=1`: a strict build and test run (setup.py, tests/support/skip_gate.py),
which the broker's processes inherit and must not take for a setting of theirs."""
NOT_SETTINGS = frozenset({CONFIG_FILE_VARIABLE, native.VARIABLE, STRICT_VARIABLE})
"""NULLBROKER_ variables that are not settings: the config file's path, the C switch, the
strict run's."""

MAX_ASSIGNMENT_INTERVAL_MS = 15000
"""Kafka 4.4's group.consumer.max.assignment.interval.ms: the longest assignment interval."""


def _check_client_metrics(config: Config) -> None:
    named = config.named
    if not config.client_telemetry:
        return
    if not any(m.strip() for m in config.client_metrics.split(",")):
        raise ConfigError(
            f"{named('client_metrics')}: metric name prefixes, comma separated ('*': every "
            "metric), or 'off'; got none"
        )
    for setting, check in (
        ("client_metrics_interval_ms", check_interval),
        ("client_metrics_match", parse_match),
    ):
        try:
            check(getattr(config, setting))
        except SubscriptionError as error:
            raise ConfigError(f"{named(setting)}: {error}") from None
    for setting in ("client_metrics_max_clients", "client_metrics_max_series"):
        if getattr(config, setting) < 1:
            raise ConfigError(
                f"{named(setting)}: must be at least 1, got {getattr(config, setting)}"
            )
    if config.telemetry_max_bytes < 1:
        raise ConfigError(
            f"{named('telemetry_max_bytes')}: must be at least 1, got {config.telemetry_max_bytes}"
        )


def checked(config: Config) -> Config:
    """`config` if every setting can be used, each checked by the parser of the room it
    belongs to; with a node map, the map's size as its brokers (the map is the cluster).
    ConfigError names the first setting that cannot be used, as the user named it."""
    named = config.named
    parse_host_port(config.listen, named("listen"))
    if config.advertise is not None:
        parse_host_port(config.advertise, named("advertise"))
    if config.metrics is not None:
        parse_host_port(config.metrics, named("metrics"))
    if config.schema_registry is not None:
        parse_host_port(config.schema_registry, named("schema_registry"))
    if not 1 <= config.brokers <= MAX_BROKERS:
        raise ConfigError(
            f"{named('brokers')}: must be from 1 to {MAX_BROKERS}, got {config.brokers}"
        )
    _check_listeners(config)
    for listener in listener_specs(config):
        if config.brokers > 1 and listener.port + config.brokers - 1 > 65535:
            setting = "listeners" if config.listeners else "listen"
            raise ConfigError(
                f"{named(setting)}: {config.brokers} brokers need {config.brokers} consecutive "
                f"ports from {listener.port}"
            )
    if config.node_map is not None:
        config = _sized_by_node_map(config)
    if config.processes != "auto" and not (
        config.processes.isdigit() and 1 <= int(config.processes) <= config.brokers
    ):
        raise ConfigError(
            f"{named('processes')}: must be 'auto' or a number from 1 to the brokers' "
            f"{config.brokers} (each process serves at least one node; see "
            f"{named('brokers')}), got {config.processes!r}"
        )
    if config.partitions < 1:
        raise ConfigError(f"{named('partitions')}: must be at least 1, got {config.partitions}")
    if config.max_frame_bytes < 1024:
        raise ConfigError(
            f"{named('max_frame_bytes')}: must be at least 1024, got {config.max_frame_bytes}"
        )
    for setting in ("idle_timeout_ms", "max_connections", "max_connections_per_ip"):
        if getattr(config, setting) < 0:
            raise ConfigError(
                f"{named(setting)}: must not be negative (0: no limit), "
                f"got {getattr(config, setting)}"
            )
    if config.max_buffered_bytes < SMALL_REQUEST_BYTES:
        raise ConfigError(
            f"{named('max_buffered_bytes')}: must be at least {SMALL_REQUEST_BYTES} (a "
            f"request that size is read without reserving), got {config.max_buffered_bytes}"
        )
    names = [source.name for source in config.sources]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"{named('sources')}: topic {duplicates[0]!r} is declared more than once")
    _check_schema_ids(config.sources, named("sources"))
    if config.faults:  # nullbroker.cluster.fault_specs is imported for faults only
        _check_faults(config.faults, config.brokers, named("faults"))
    if config.produced_record_size < 0:
        raise ConfigError(
            f"{named('produced_record_size')}: must not be negative, "
            f"got {config.produced_record_size}"
        )
    if config.retain < 0:
        raise ConfigError(f"{named('retain')}: must not be negative, got {config.retain}")
    for setting in ("offsets_topic_partitions", "transaction_state_partitions"):
        if getattr(config, setting) < 1:
            raise ConfigError(
                f"{named(setting)}: must be at least 1, got {getattr(config, setting)}"
            )
    if not is_cluster_id(config.cluster_id):
        raise ConfigError(
            f"{named('cluster_id')}: must be a KRaft cluster id, 16 bytes in URL-safe "
            f"base64 (22 characters, as `kafka-storage random-uuid` prints one), got "
            f"{config.cluster_id!r}"
        )
    if config.fetch_session_cache_slots < 0:
        raise ConfigError(
            f"{named('fetch_session_cache_slots')}: must not be negative (0: no fetch "
            f"sessions), got {config.fetch_session_cache_slots}"
        )
    if config.group_initial_rebalance_delay_ms < 0:
        raise ConfigError(
            f"{named('group_initial_rebalance_delay_ms')}: must not be negative, "
            f"got {config.group_initial_rebalance_delay_ms}"
        )
    if (
        not 0
        < config.group_consumer_heartbeat_interval_ms
        < (config.group_consumer_session_timeout_ms)
    ):
        raise ConfigError(
            f"{named('group_consumer_heartbeat_interval_ms')}: must be above 0 and below "
            f"{named('group_consumer_session_timeout_ms')} "
            f"({config.group_consumer_session_timeout_ms}), "
            f"got {config.group_consumer_heartbeat_interval_ms}"
        )
    if not 0 <= config.group_consumer_assignment_interval_ms <= MAX_ASSIGNMENT_INTERVAL_MS:
        raise ConfigError(
            f"{named('group_consumer_assignment_interval_ms')}: must be from 0 to "
            f"{MAX_ASSIGNMENT_INTERVAL_MS} (Kafka's group.consumer.max.assignment.interval.ms), "
            f"got {config.group_consumer_assignment_interval_ms}"
        )
    if not 0 < config.group_share_heartbeat_interval_ms < config.group_share_session_timeout_ms:
        raise ConfigError(
            f"{named('group_share_heartbeat_interval_ms')}: must be above 0 and below "
            f"{named('group_share_session_timeout_ms')} "
            f"({config.group_share_session_timeout_ms}), "
            f"got {config.group_share_heartbeat_interval_ms}"
        )
    if not (
        1000
        <= config.group_share_min_record_lock_duration_ms
        <= config.group_share_record_lock_duration_ms
    ):
        raise ConfigError(
            f"{named('group_share_record_lock_duration_ms')}: must be at least "
            f"{named('group_share_min_record_lock_duration_ms')} "
            f"({config.group_share_min_record_lock_duration_ms}), itself at least 1000, "
            f"got {config.group_share_record_lock_duration_ms}"
        )
    if config.group_share_delivery_count_limit < 2:
        raise ConfigError(
            f"{named('group_share_delivery_count_limit')}: must be at least 2, "
            f"got {config.group_share_delivery_count_limit}"
        )
    if config.group_share_partition_max_record_locks < 100:
        raise ConfigError(
            f"{named('group_share_partition_max_record_locks')}: must be at least 100, "
            f"got {config.group_share_partition_max_record_locks}"
        )
    _check_client_metrics(config)
    if config.connection_loop not in CONNECTION_LOOPS:
        raise ConfigError(
            f"{named('connection_loop')}: must be one of {', '.join(CONNECTION_LOOPS)}, "
            f"got {config.connection_loop!r}"
        )
    if config.report_interval <= 0:
        raise ConfigError(
            f"{named('report_interval')}: must be positive, got {config.report_interval}"
        )
    return config


def _check_listeners(config: Config) -> None:
    named = config.named
    origins = dict(config.origins)
    if config.listeners is not None and "listen" in origins:
        raise ConfigError(
            f"{named('listeners')} and {named('listen')}: give one of them "
            "(--listen is one PLAINTEXT listener)"
        )
    if config.advertised_listeners is not None and config.advertise is not None:
        raise ConfigError(
            f"{named('advertised_listeners')} and {named('advertise')}: give one of them"
        )
    for setting in ("listeners", "advertised_listeners"):
        text = getattr(config, setting)
        if text is not None:
            try:
                parse_listeners(text)
            except ListenerError as error:
                raise ConfigError(f"{named(setting)}: {error}") from None
    names = [listener.name for listener in listener_specs(config)]
    if config.advertised_listeners is not None:
        advertised = [listener.name for listener in parse_listeners(config.advertised_listeners)]
        if sorted(advertised) != sorted(names):
            raise ConfigError(
                f"{named('advertised_listeners')}: must name the listeners' protocols "
                f"({', '.join(names)}), got {', '.join(advertised)}"
            )
    if config.tls_client_auth not in CLIENT_AUTH:
        raise ConfigError(
            f"{named('tls_client_auth')}: must be one of {', '.join(CLIENT_AUTH)}, "
            f"got {config.tls_client_auth!r}"
        )
    if any(listener.sasl for listener in listener_specs(config)):
        # OAUTHBEARER's principals come from their tokens; the other mechanisms check
        # passwords.
        if not config.users and set(config.sasl_mechanism_list) - {OAUTHBEARER}:
            raise ConfigError(
                f"{named('listeners')}: a SASL listener needs {named('users')}, "
                'a TOML file with [users] name = "password" (or offer only OAUTHBEARER)'
            )
        if config.users:
            from ..sessions.sasl import read_users  # SASL listeners only

            read_users(config.users, named("users"))
    unknown = [m for m in config.sasl_mechanism_list if m not in MECHANISMS]
    if unknown or not config.sasl_mechanism_list:
        raise ConfigError(
            f"{named('sasl_mechanisms')}: choose from {', '.join(MECHANISMS)}, "
            f"got {config.sasl_mechanisms!r}"
        )
    if not config.oauthbearer_principal_claim.strip():
        raise ConfigError(f"{named('oauthbearer_principal_claim')}: must not be blank")
    if config.sasl_session_lifetime_ms < 0:
        raise ConfigError(
            f"{named('sasl_session_lifetime_ms')}: must not be negative, "
            f"got {config.sasl_session_lifetime_ms}"
        )
    if any(listener.tls for listener in listener_specs(config)) and not (
        config.tls_cert and config.tls_key
    ):
        raise ConfigError(
            f"{named('listeners')}: an SSL or SASL_SSL listener needs "
            f"{named('tls_cert')} and {named('tls_key')}"
        )
    if config.tls_client_auth != "none" and not config.tls_ca:
        raise ConfigError(
            f"{named('tls_client_auth')} {config.tls_client_auth}: needs {named('tls_ca')}, "
            "the CA that signs client certificates"
        )
    if names != [PLAINTEXT] and config.node_map is not None:
        raise ConfigError(
            f"{named('listeners')}: with {named('node_map')} only one PLAINTEXT listener is "
            "served yet"
        )


def _sized_by_node_map(config: Config) -> Config:
    assert config.node_map is not None
    named = config.named
    size = len(read_node_map(config.node_map, named("node_map")).nodes)
    if config.brokers not in (1, size):
        raise ConfigError(
            f"{named('brokers')}: {config.brokers}, but {named('node_map')} "
            f"{config.node_map} has {size} nodes (leave {named('brokers')} out)"
        )
    if config.processes != "1":
        raise ConfigError(
            f"{named('processes')}: with {named('node_map')} each host runs one process "
            "for its nodes"
        )
    # The map is the cluster: its size is every host's --brokers.
    return replace(config, brokers=size)


def _check_faults(specs: tuple[str, ...], brokers: int, setting: str) -> None:
    """Each fault SPEC must parse and apply to a cluster of `brokers` nodes."""
    from ..cluster.fault_specs import FaultSpecError
    from ..cluster.faults import Faults

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
        from ..ops.schema_registry import source_schema_text

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
    """The effective settings, checked: defaults < config file < environment < command-line
    flags."""
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
        config = Config(**settings, origins=tuple(sorted(origins.items())))
    except TypeError as error:
        raise ConfigError(str(error)) from None
    return checked(config)
