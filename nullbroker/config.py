"""nullbroker's settings: defaults, then a TOML file, then NULLBROKER_* variables, then flags."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from codec import DEFAULT_MAX_FRAME_BYTES

from .source import SourceSpec, SourceSpecError

ENV_PREFIX = "NULLBROKER_"
CONFIG_FILE_VARIABLE = "NULLBROKER_CONFIG"


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
    partitions: int = 1
    auto_create: bool = True
    verify_crc: bool = False
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    metrics: str | None = None
    summary_json: str | None = None
    report_interval: float = 5.0
    produced_record_size: int = 100
    sources: tuple[SourceSpec, ...] = ()
    cluster_id: str = "nullbroker-cluster-0001"
    group_initial_rebalance_delay_ms: int = 3000

    def __post_init__(self) -> None:
        parse_host_port(self.listen, "listen")
        if self.advertise is not None:
            parse_host_port(self.advertise, "advertise")
        if self.metrics is not None:
            parse_host_port(self.metrics, "metrics")
        if self.partitions < 1:
            raise ConfigError(f"partitions: must be at least 1, got {self.partitions}")
        if self.max_frame_bytes < 1024:
            raise ConfigError(f"max_frame_bytes: must be at least 1024, got {self.max_frame_bytes}")
        names = [source.name for source in self.sources]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(f"source: topic {duplicates[0]!r} is declared more than once")
        if self.produced_record_size < 0:
            raise ConfigError(
                f"produced_record_size: must not be negative, got {self.produced_record_size}"
            )
        if self.group_initial_rebalance_delay_ms < 0:
            raise ConfigError(
                "group_initial_rebalance_delay_ms: must not be negative, "
                f"got {self.group_initial_rebalance_delay_ms}"
            )
        if self.report_interval <= 0:
            raise ConfigError(f"report_interval: must be positive, got {self.report_interval}")

    @property
    def listen_address(self) -> tuple[str, int]:
        return parse_host_port(self.listen, "listen")

    @property
    def advertised_address(self) -> tuple[str, int] | None:
        return parse_host_port(self.advertise, "advertise") if self.advertise else None

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        return parse_host_port(self.metrics, "metrics") if self.metrics else None


_FIELDS = {field.name: field for field in fields(Config)}
# `--no-auto-create` reads better on a command line; accept it in files and variables too.
_ALIASES: dict[str, tuple[str, Any]] = {
    "no_auto_create": ("auto_create", lambda value: not value),
    # `--source` and `[[source]]` name one source topic each.
    "source": ("sources", lambda value: value),
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


def _coerce(name: str, value: Any, origin: str) -> Any:
    kind = _FIELDS[name].type
    if name == "sources":
        return _sources(value, origin)
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
        raise ConfigError(f"{origin}: {value!r} is not a valid {kind} for {name}") from None


def _apply(values: Mapping[str, Any], origin: str) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for raw_key, value in values.items():
        key = _normalise_key(raw_key)
        if key in _ALIASES:
            target, convert = _ALIASES[key]
            settings[target] = convert(_coerce(target, value, f"{origin} {raw_key}"))
        elif key in _FIELDS:
            settings[key] = _coerce(key, value, f"{origin} {raw_key}")
        else:
            known = ", ".join(sorted([*_FIELDS, *_ALIASES]))
            raise ConfigError(f"{origin}: unknown setting {raw_key!r} (known: {known})")
    return settings


def from_toml(path: str | Path) -> dict[str, Any]:
    """Settings from a TOML file's top-level keys."""
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"config file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path}: {error}") from None
    return _apply(document, f"config file {path}")


def from_environment(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Settings from NULLBROKER_<SETTING> variables, e.g. NULLBROKER_PARTITIONS=4."""
    return _apply(
        {
            key[len(ENV_PREFIX) :]: value
            for key, value in environ.items()
            if key.startswith(ENV_PREFIX) and key != CONFIG_FILE_VARIABLE
        },
        "environment",
    )


def load(
    flags: Mapping[str, Any],
    config_file: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Config:
    """The effective settings: defaults < config file < environment < command-line flags."""
    settings: dict[str, Any] = {}
    if config_file:
        settings.update(from_toml(config_file))
    settings.update(from_environment(environ))
    settings.update(
        _apply({key: value for key, value in flags.items() if value is not None}, "flag")
    )
    try:
        return replace(Config(), **settings)
    except TypeError as error:
        raise ConfigError(str(error)) from None
