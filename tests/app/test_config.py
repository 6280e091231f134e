"""Settings: defaults < TOML file < NULLBROKER_* environment < command-line flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from nullbroker.app.configuration import from_environment, from_toml, load
from nullbroker.settings import Config, ConfigError


def test_defaults_listen_on_loopback_9092_with_one_partition_and_auto_create() -> None:
    config = load({}, environ={})
    assert config.listen_address == ("127.0.0.1", 9092)
    assert config.partitions == 1
    assert config.auto_create is True
    assert config.verify_crc is False
    assert config.max_frame_bytes == 100 * 1024 * 1024
    assert config.metrics is None


def test_toml_keys_are_named_like_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "nullbroker.toml"
    path.write_text(
        'listen = "127.0.0.1:0"\npartitions = 4\nno-auto-create = true\nverify_crc = true\n'
        'metrics = "127.0.0.1:9100"\n'
    )
    config = load({}, str(path), environ={})
    assert config.listen_address == ("127.0.0.1", 0)
    assert config.partitions == 4
    assert config.auto_create is False
    assert config.verify_crc is True
    assert config.metrics_address == ("127.0.0.1", 9100)


def test_environment_overrides_the_file_and_flags_override_both(tmp_path: Path) -> None:
    path = tmp_path / "nullbroker.toml"
    path.write_text("partitions = 2\nmax_frame_bytes = 4096\n")
    environ = {"NULLBROKER_PARTITIONS": "3", "NULLBROKER_NO_AUTO_CREATE": "yes"}
    config = load({"partitions": 5}, str(path), environ=environ)
    assert config.partitions == 5
    assert config.max_frame_bytes == 4096
    assert config.auto_create is False


def test_the_config_file_variable_is_not_taken_for_a_setting() -> None:
    settings, origins = from_environment(
        {"NULLBROKER_CONFIG": "x.toml", "NULLBROKER_PARTITIONS": "2"}
    )
    assert settings == {"partitions": 2}
    assert origins == {"partitions": "NULLBROKER_PARTITIONS"}


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"partitions": 0}, "--partitions: "),
        ({"listen": "no-port"}, "--listen: "),
        ({"listen": "127.0.0.1:70000"}, "--listen: "),
        ({"max_frame_bytes": 10}, "--max-frame-bytes: "),
        ({"partitions": "many"}, "--partitions: 'many' is not a valid integer"),
        ({"verify_crc": "maybe"}, "--verify-crc: 'maybe' is not a valid boolean"),
        ({"report_interval": 0}, "--report-interval: "),
        ({"group_initial_rebalance_delay_ms": -1}, "--group-initial-rebalance-delay-ms: "),
        (
            {"group_consumer_heartbeat_interval_ms": 50000},
            "--group-consumer-heartbeat-interval-ms: must be above 0 and below "
            "--group-consumer-session-timeout-ms",
        ),
        ({"colour": "blue"}, "--colour: unknown setting"),
    ],
)
def test_bad_flags_are_refused_with_an_error_naming_the_flag_as_typed(
    settings: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match="^" + named) as refused:
        load(settings, environ={})
    assert "_" not in str(refused.value).split(":")[0]


def test_bad_environment_variables_are_named_as_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^NULLBROKER_MAX_FRAME_BYTES: must be at least"):
        load({}, environ={"NULLBROKER_MAX_FRAME_BYTES": "10"})
    with pytest.raises(ConfigError, match=r"^NULLBROKER_COLOUR: unknown setting"):
        load({}, environ={"NULLBROKER_COLOUR": "blue"})


def test_bad_config_file_keys_are_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nullbroker.toml"
    path.write_text("summary-json = 3\nreport-interval = -1\n")
    with pytest.raises(ConfigError, match=r"^report-interval in config file .*nullbroker\.toml: "):
        load({}, str(path), environ={})


def test_a_flag_overriding_the_environment_is_the_one_named() -> None:
    with pytest.raises(ConfigError, match=r"^--partitions: must be at least 1"):
        load({"partitions": 0}, environ={"NULLBROKER_PARTITIONS": "2"})


def test_a_broken_toml_file_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("partitions = = 3\n")
    with pytest.raises(ConfigError, match=r"broken\.toml"):
        from_toml(path)


def test_a_missing_config_file_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"absent\.toml"):
        from_toml(tmp_path / "absent.toml")


def test_ipv6_hosts_in_brackets_are_understood() -> None:
    assert Config(listen="[::1]:9092").listen_address == ("::1", 9092)
