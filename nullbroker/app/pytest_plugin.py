"""The pytest plugin: a broker for a test, or for the session, started and stopped by fixtures.

Installing the package installs the plugin (its `pytest11` entry point, `nullbroker`):

- `nullbroker`: a broker of the test's own (nullbroker.app.launcher.RunningBroker), stopped
  with SIGTERM after it; a broker that does not then exit cleanly fails the test's teardown.
- `nullbroker_session`: one broker for the whole session, its counts reset before each test
  that asks for it (topics, groups and their offsets stay: give each test names of its own).
- `nullbroker_factory`: a function that starts brokers with settings of the test's own,
  `nullbroker_factory(brokers=3, processes=2, sources=["clicks:records=1000"])` (what
  `nullbroker.start` takes: flags, settings, `metrics=False`), all stopped after the test.
- `nullbroker_module_factory`: the same for a whole test module, its brokers stopped at the
  module's end (for brokers a module's tests share, with names of their own).

Every broker they start takes the settings of `--nullbroker-setting NAME=VALUE` (repeatable)
and of the `nullbroker_settings` ini option (lines of NAME=VALUE), which the command line
overrides name by name; those of `nullbroker` and `nullbroker_factory` then take the
`nullbroker_defaults` fixture's, which a conftest.py overrides to give a folder's tests
settings of their own (a parametrized fixture's value among them); a fixture's own settings
override all of these. Brokers write their files (stderr, summary) under the test's tmp_path.

How they are stopped is the `nullbroker_teardown` ini option's: `stop` (the default), SIGTERM
and a teardown that fails unless the broker exits 0 in time; `kill`, SIGKILL, for a suite
whose tests call `stop()` themselves where the clean exit matters, and leave brokers they
took down, or that serve faults, to be killed. docs/python-api.md has examples.

pytest loads this module in every run where the package is installed, the runs of projects
that never use it included: it imports nothing of the broker, nor anything else of weight,
until a fixture is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .launcher import RunningBroker

INI_SETTINGS = "nullbroker_settings"
OPTION_SETTINGS = "--nullbroker-setting"
INI_TEARDOWN = "nullbroker_teardown"
TEARDOWNS = ("stop", "kill")

StartBroker = Callable[..., "RunningBroker"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nullbroker", "nullbroker (the nullbroker fixtures' brokers)")
    group.addoption(
        OPTION_SETTINGS,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        dest="nullbroker_settings",
        help="a setting of every broker the nullbroker fixtures start, named as in "
        "nullbroker's TOML file (partitions=4, brokers=3, processes=2, "
        "source=clicks:records=1000; repeat a name for several sources or faults); "
        f"overrides the {INI_SETTINGS} ini option's setting of that name",
    )
    parser.addini(
        INI_SETTINGS,
        type="linelist",
        default=[],
        help="settings (NAME=VALUE lines) of every broker the nullbroker fixtures start",
    )
    parser.addini(
        INI_TEARDOWN,
        default=TEARDOWNS[0],
        help="how the nullbroker fixtures end their brokers: stop (SIGTERM, and the "
        "teardown fails unless the broker exits 0) or kill (SIGKILL)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # A mistake stops the run at once, as a bad option does.
    given_settings(config)
    teardown(config)


def teardown(config: pytest.Config) -> str:
    """How the fixtures end their brokers (the ini option): `stop` or `kill`."""
    chosen = str(config.getini(INI_TEARDOWN)).strip()
    if chosen not in TEARDOWNS:
        raise pytest.UsageError(f"{INI_TEARDOWN} (ini) {chosen!r}: expected stop or kill")
    return chosen


def given_settings(config: pytest.Config) -> dict[str, str | list[str]]:
    """The settings every fixture's broker takes: the ini option's, then the command line's,
    name by name; a name given more than once in one of them is a list (sources, faults).
    A pytest.UsageError for a line that is not NAME=VALUE."""
    merged: dict[str, str | list[str]] = {}
    for where, lines in (
        (f"{INI_SETTINGS} (ini)", config.getini(INI_SETTINGS)),
        (OPTION_SETTINGS, config.getoption("nullbroker_settings")),
    ):
        given: dict[str, list[str]] = {}
        for line in lines:
            name, equals, value = str(line).partition("=")
            if not equals or not name.strip():
                raise pytest.UsageError(f"{where} {line!r}: expected NAME=VALUE")
            given.setdefault(name.strip(), []).append(value.strip())
        merged.update(
            {name: values[0] if len(values) == 1 else values for name, values in given.items()}
        )
    return merged


@pytest.fixture
def nullbroker_defaults() -> Mapping[str, Any]:
    """Settings every broker of `nullbroker` and `nullbroker_factory` takes over those of the
    command line and ini: none here. A conftest.py overrides this fixture to give its tests
    their own, a parametrized fixture's value among them:

        @pytest.fixture(params=["epoll", "trio"])
        def nullbroker_defaults(request):
            return {"connection_loop": request.param}
    """
    return {}


@pytest.fixture
def nullbroker_factory(
    request: pytest.FixtureRequest, tmp_path: Path, nullbroker_defaults: Mapping[str, Any]
) -> Iterator[StartBroker]:
    """Starts brokers: `nullbroker_factory(*FLAGS, **SETTINGS)`, as `nullbroker.start` takes
    them, over `nullbroker_defaults` and the settings of --nullbroker-setting; each listening
    when it returns, all stopped after the test."""
    with _Brokers(request.config, tmp_path, nullbroker_defaults) as brokers:
        yield brokers.start


@pytest.fixture(scope="module")
def nullbroker_module_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StartBroker]:
    """As `nullbroker_factory` (without `nullbroker_defaults`, which is a test's), for a
    whole test module: its brokers are stopped at the module's end."""
    with _Brokers(request.config, tmp_path_factory.mktemp("nullbroker-module"), {}) as brokers:
        yield brokers.start


@pytest.fixture
def nullbroker(nullbroker_factory: StartBroker) -> RunningBroker:
    """A broker for this test, listening on 127.0.0.1 (`nullbroker.bootstrap`), stopped
    after it."""
    return nullbroker_factory()


@pytest.fixture(scope="session")
def _nullbroker_session_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningBroker]:
    with _Brokers(request.config, tmp_path_factory.mktemp("nullbroker-session"), {}) as brokers:
        yield brokers.start()


@pytest.fixture
def nullbroker_session(_nullbroker_session_broker: RunningBroker) -> RunningBroker:
    """The session's one broker, its counts reset for this test (`RunningBroker.reset`):
    faster than a broker a test, when tests use topic and group names of their own."""
    _nullbroker_session_broker.reset()
    return _nullbroker_session_broker


class _Brokers:
    """The brokers a fixture started, in folders of `tmp_path`; stopped (or killed, as the
    ini option says) on leaving."""

    def __init__(self, config: pytest.Config, tmp_path: Path, defaults: Mapping[str, Any]) -> None:
        self._layers = (given_settings(config), defaults)
        self._kill = teardown(config) == "kill"
        self._tmp_path = tmp_path
        self._started: list[RunningBroker] = []

    def start(self, *args: str, **settings: Any) -> RunningBroker:
        from .launcher import setting_name, start

        workdir = self._tmp_path / f"nullbroker-{len(self._started)}"
        workdir.mkdir()
        # A fixture's setting replaces the default of that name (as the settings' own
        # table normalises names: `group-initial-…` is `group_initial_…`).
        merged: dict[str, Any] = {
            setting_name(name): value
            for layer in (*self._layers, settings)
            for name, value in layer.items()
        }
        broker = start(*args, workdir=workdir, **merged)
        self._started.append(broker)
        return broker

    def __enter__(self) -> _Brokers:
        return self

    def __exit__(self, *exception: object) -> None:
        """Stop every broker still running; then report the first that did not stop
        cleanly (each is stopped, whatever the others did). Or kill each."""
        failures = []
        for broker in self._started:
            if self._kill:
                broker.kill()
            elif broker.running:
                try:
                    broker.stop()
                except Exception as error:
                    failures.append(error)
        if failures:
            raise failures[0]
