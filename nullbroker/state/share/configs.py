"""Group configs: the GROUP config resource (type 32) that IncrementalAlterConfigs sets and
DescribeConfigs reports, as Kafka 4.4.0's GroupConfig defines it, and what a share group
reads from them (its record lock, delivery limit, window, offset reset, session timeout).

Kafka keeps a group's configs whether or not the group exists (a queue is configured
before its consumers start: `share.auto.offset.reset=earliest`), so they are kept here by
group id, apart from the groups. A value is checked against the config's own range and
against the broker's bounds (`group.share.min.record.lock.duration.ms`, ...), as Kafka's
GroupConfig.validate does.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ...settings import Config
from ..kafka_configs import ConfigEntry, ConfigSource, ConfigType
from .partition import Limits

LATEST = "latest"
EARLIEST = "earliest"
BY_DURATION = "by_duration:"
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config as Kafka defines it: its type (Kafka's ConfigDef type name), its
    default and its least value (ints) or allowed values (strings)."""

    type: str
    default: str | None
    least: int | None = None
    allowed: tuple[str, ...] = ()


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.assignment.interval.ms": GroupConfigDef("int", "1000", 0),
    "consumer.heartbeat.interval.ms": GroupConfigDef("int", "5000", 1),
    "consumer.session.timeout.ms": GroupConfigDef("int", "45000", 1),
    "errors.deadletterqueue.copy.record.enable": GroupConfigDef("boolean", "false"),
    "errors.deadletterqueue.topic.name": GroupConfigDef("string", ""),
    "share.assignment.interval.ms": GroupConfigDef("int", "1000", 0),
    "share.auto.offset.reset": GroupConfigDef("string", LATEST),
    "share.delivery.count.limit": GroupConfigDef("int", "5", 2),
    "share.heartbeat.interval.ms": GroupConfigDef("int", "5000", 1),
    "share.isolation.level": GroupConfigDef(
        "string", READ_UNCOMMITTED, allowed=(READ_COMMITTED, READ_UNCOMMITTED)
    ),
    "share.partition.max.record.locks": GroupConfigDef("int", "2000", 100),
    "share.record.lock.duration.ms": GroupConfigDef("int", "30000", 1000),
    "share.renew.acknowledge.enable": GroupConfigDef("boolean", "true"),
    "share.session.timeout.ms": GroupConfigDef("int", "45000", 1),
    "streams.assignment.interval.ms": GroupConfigDef("int", "1000", 0),
    "streams.assignor.name": GroupConfigDef("string", None),
    "streams.heartbeat.interval.ms": GroupConfigDef("int", "5000", 1),
    "streams.initial.rebalance.delay.ms": GroupConfigDef("int", "3000", 0),
    "streams.num.standby.replicas": GroupConfigDef("int", "0", 0),
    "streams.rack.aware.assignment.tags": GroupConfigDef("list", ""),
    "streams.session.timeout.ms": GroupConfigDef("int", "45000", 1),
}
"""Kafka 4.4.0's public group configs (`java org.apache.kafka.coordinator.group.GroupConfig`
prints them; its internal ones are left out, as DescribeConfigs leaves them out), with their
defaults and bounds."""

_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


class InvalidGroupConfig(ValueError):
    """A group config value Kafka refuses (INVALID_CONFIG), in words like Kafka's."""


def by_duration_ms(value: str) -> int:
    """The milliseconds of `by_duration:<ISO-8601 duration>` (Java's Duration.parse form
    PnDTnHnMn.nS); InvalidGroupConfig if it is not one or is negative."""
    text = value[len(BY_DURATION) :].strip()
    match = _DURATION.fullmatch(text)
    if not text or match is None or not any(match.groupdict().values()):
        raise InvalidGroupConfig(f"Invalid duration {text!r} for share.auto.offset.reset")
    parts = {name: float(part) for name, part in match.groupdict().items() if part}
    return int(datetime.timedelta(**parts).total_seconds() * 1000)


CACHED_GROUPS = 10_000
"""The most groups whose configs are kept read; beyond it they are read again."""


class GroupConfigs:
    """Every group's configs set, by group id, and what they make of a share group."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.by_group: dict[str, dict[str, str]] = {}
        self._ints: dict[str, dict[str, int]] = {}
        self._limits: dict[str, Limits] = {}
        """Each group's numbers and Limits as last read: every ShareFetch and
        acknowledgement needs them, and reading configs through their defaults each time
        cost more than the rest of an acknowledgement."""
        # The broker's settings of the group configs' synonyms
        # (group.share.record.lock.duration.ms for share.record.lock.duration.ms).
        self._synonyms = {
            "share.record.lock.duration.ms": config.group_share_record_lock_duration_ms,
            "share.delivery.count.limit": config.group_share_delivery_count_limit,
            "share.partition.max.record.locks": config.group_share_partition_max_record_locks,
            "share.heartbeat.interval.ms": config.group_share_heartbeat_interval_ms,
            "share.session.timeout.ms": config.group_share_session_timeout_ms,
            "consumer.heartbeat.interval.ms": config.group_consumer_heartbeat_interval_ms,
            "consumer.session.timeout.ms": config.group_consumer_session_timeout_ms,
            "consumer.assignment.interval.ms": config.group_consumer_assignment_interval_ms,
        }

    def overrides(self, group_id: str) -> dict[str, str]:
        """The configs set for the group, for IncrementalAlterConfigs to alter in place
        (right away, in the same step: the limits are read again after it)."""
        self._ints.pop(group_id, None)
        self._limits.pop(group_id, None)
        return self.by_group.setdefault(group_id, {})

    def value(self, group_id: str, name: str) -> str | None:
        set_here = self.by_group.get(group_id, {}).get(name)
        return set_here if set_here is not None else self.broker_default(name)

    def broker_default(self, name: str) -> str | None:
        """A group config's value where the group sets none: the broker's setting of its
        synonym (group.share.record.lock.duration.ms for share.record.lock.duration.ms),
        else Kafka's default."""
        if name in self._synonyms:
            return str(self._synonyms[name])
        known = GROUP_CONFIGS.get(name)
        return None if known is None else known.default

    def entries(self, group_id: str) -> list[ConfigEntry]:
        """DescribeConfigs' entries of the group: every config, the ones set for it as
        GROUP_CONFIG, the others at their default."""
        set_here = self.by_group.get(group_id, {})
        entries = []
        for name, known in sorted(GROUP_CONFIGS.items()):
            kind = ConfigType[known.type.upper()]
            if name in set_here:
                entries.append(ConfigEntry(name, set_here[name], kind, ConfigSource.GROUP_CONFIG))
            else:
                entries.append(ConfigEntry(name, self.broker_default(name), kind))
        return entries

    def int_value(self, group_id: str, name: str) -> int:
        ints = self._ints.get(group_id)
        if ints is None:
            if len(self._ints) >= CACHED_GROUPS:  # requests may name any group id
                self._ints.clear()
            ints = self._ints[group_id] = {}
        found = ints.get(name)
        if found is None:
            found = ints[name] = int(self.value(group_id, name) or 0)
        return found

    def limits(self, group_id: str) -> Limits:
        found = self._limits.get(group_id)
        if found is None:
            if len(self._limits) >= CACHED_GROUPS:
                self._limits.clear()
            found = self._limits[group_id] = Limits(
                lock_ms=self.int_value(group_id, "share.record.lock.duration.ms"),
                delivery_limit=self.int_value(group_id, "share.delivery.count.limit"),
                max_in_flight=self.int_value(group_id, "share.partition.max.record.locks"),
            )
        return found

    def session_timeout_ms(self, group_id: str) -> int:
        return self.int_value(group_id, "share.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.int_value(group_id, "share.heartbeat.interval.ms")

    def check(self, altered: Mapping[str, str]) -> None:
        """InvalidGroupConfig for a name Kafka does not know or a value it refuses."""
        for name, value in altered.items():
            known = GROUP_CONFIGS.get(name)
            if known is None:
                raise InvalidGroupConfig(f"Unknown group config name: {name}")
            self._check_value(name, value.strip(), known)

    def _check_value(self, name: str, value: str, known: GroupConfigDef) -> None:
        if known.type in ("int", "long"):
            try:
                number = int(value)
            except ValueError:
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: Not a number of type "
                    f"{known.type.upper()}"
                ) from None
            if known.least is not None and number < known.least:
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: Value must be at least "
                    f"{known.least}"
                )
            self._check_bounds(name, number)
        elif known.type == "boolean" and value.lower() not in ("true", "false"):
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {name}: Expected value to be either "
                "true or false"
            )
        elif known.allowed and value not in known.allowed:
            raise InvalidGroupConfig(
                f"Invalid value {value} for configuration {name}: String must be one of: "
                f"{', '.join(known.allowed)}"
            )
        elif name == "share.auto.offset.reset" and value not in (LATEST, EARLIEST):
            if not value.startswith(BY_DURATION):
                raise InvalidGroupConfig(
                    f"Invalid value {value} for configuration {name}: Invalid value "
                    "`{value}` for configuration share.auto.offset.reset. The value must be "
                    "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
                )
            if by_duration_ms(value) < 0:
                raise InvalidGroupConfig("Negative duration is not allowed.")

    def _check_bounds(self, name: str, value: int) -> None:
        """The broker's bounds on a group's share configs (Kafka's GroupConfig.validate)."""
        config = self.config
        bounds = {
            "share.record.lock.duration.ms": (
                config.group_share_min_record_lock_duration_ms,
                "group.share.min.record.lock.duration.ms",
                60000,
                "group.share.max.record.lock.duration.ms",
            ),
            "share.session.timeout.ms": (
                45000,
                "group.share.min.session.timeout.ms",
                60000,
                "group.share.max.session.timeout.ms",
            ),
            "share.heartbeat.interval.ms": (
                5000,
                "group.share.min.heartbeat.interval.ms",
                15000,
                "group.share.max.heartbeat.interval.ms",
            ),
        }
        if name not in bounds:
            return
        least, least_name, most, most_name = bounds[name]
        if value < least:
            raise InvalidGroupConfig(f"{name} must be greater than or equal to {least_name}")
        if value > most:
            raise InvalidGroupConfig(f"{name} must be less than or equal to {most_name}")
