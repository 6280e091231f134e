"""Start `nullbroker serve` in a process of its own, know where it listens, read what it
counts, stop it: the one launcher the tests, perf, spark_tests and the public Python API share.

    with start("--partitions", "4") as broker:
        run_the_pipeline(broker.bootstrap)          # "127.0.0.1:PORT"
        counted = broker.stop()                     # the summary: what it was sent

`start` is its one face (`nullbroker.start`, docs/python-api.md; the pytest plugin's fixtures
call it too): it runs `nullbroker serve ARGS` with this interpreter (the `nullbroker` script
beside it, else `python -m nullbroker`), listening on 127.0.0.1 on a port the OS picks unless
the arguments say where, and returns once the broker has printed where it listens: node 0's
address (the bootstrap server), every node's with `--brokers N`, and the /metrics URL. A
broker that exits first, or says nothing within the start timeout, is reported with its exit
code and the tail of its stderr, and is never left running.

Settings are keywords (`start(partitions=4, brokers=3, processes=2)`) or flags. The metrics
listener is on unless `metrics=False`, so that the running broker's accounts (`accounts()`,
typed: nullbroker.app.accounts), `reset()` of its counts, its faults (`faults.inject`,
`faults.clear`), the assertions on its counts (`assert_produced`, `assert_fetched`) and its
/metrics, parsed (`scrape`, `scrape_until`), are at hand. `RunningBroker` is what it returns.

`ServerProcess` is the part that knows nothing of nullbroker: a server in a subprocess whose
stdout says when it is ready (perf/ starts librdkafka's mock and franz-go's kfake with it).
Its stdout is read on a thread, so a chatty server never blocks on a full pipe and its lines
can be waited for while it serves; its stderr goes to a file. Standard library only, but for
prometheus_client's parser, which `scrape` imports when it is first used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeAlias

from .accounts import Accounts, Mismatch, expect_counts
from .operator_http import call

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

START_TIMEOUT_S = 30.0
"""How long a broker may take to say where it listens (a loaded machine is slow)."""
STOP_TIMEOUT_S = 20.0
"""How long a server may take to exit after SIGTERM or SIGINT before it is killed."""
STDERR_TAIL_CHARACTERS = 4000
"""How much of a server's stderr an error message quotes: its last lines say why."""

LISTENING = re.compile(r"^nullbroker listening on (?P<address>\S+:\d+)$")
NODES = re.compile(r"^nodes: (?P<nodes>\d+ on \S+:\d+(?:, \d+ on \S+:\d+)*)$")
METRICS = re.compile(r"^metrics on (?P<url>http://\S+/metrics)$")
LOOPBACK_ANY_PORT = "127.0.0.1:0"
# Settings that say where the broker listens: the launcher's own --listen would clash with them.
_WHERE_SETTINGS = ("listen", "listeners", "node_map")
SETTINGS_PREFIX = "NULLBROKER_"
"""Settings given as keywords reach the broker as these variables (read by
nullbroker.app.configuration)."""
EXPECT_TIMEOUT_S = 5.0
"""How long `assert_produced` and `assert_fetched` wait for the counts by default: a client
that has its acks is counted already, but what acks=0 producers and consumers do arrives
later."""
EXPECT_POLL_S = 0.05
SCRAPE_TIMEOUT_S = 5.0
"""How long one GET /metrics may take."""
SCRAPE_UNTIL_TIMEOUT_S = 10.0
"""How long `scrape_until` scrapes for the state it waits for by default."""

SettingValue: TypeAlias = "str | int | float | bool | os.PathLike[str] | Sequence[str] | None"
"""A setting's value: as in a TOML file, a list for the repeatable ones (sources, faults)."""


class ServerError(RuntimeError):
    """A server process did not start, or did not stop, as asked. The message names its exit
    code and ends with the tail of its stderr."""


def nullbroker_program() -> list[str]:
    """The command that runs nullbroker with this interpreter: the installed `nullbroker`
    script beside it (the venv's, as a user runs it), else `python -m nullbroker`."""
    script = Path(sys.executable).with_name("nullbroker")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "nullbroker"]


class ServerProcess:
    """A server in a subprocess whose stdout says when it is ready.

    Started at construction; `wait_for_line` waits for what it prints; `end` asks it to exit
    with a signal and kills it past a timeout; as a context manager it always ends it.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        stderr_path: Path,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.stderr_path = stderr_path
        self.killed = False
        """Whether `end` had to kill it: it did not exit in time after the signal."""
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in _release()
        try:
            self.process = subprocess.Popen(
                self.command,
                cwd=cwd,
                env=None if env is None else dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
                bufsize=1,
            )
        except BaseException:
            self._stderr.close()
            raise
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(
            target=self._read_stdout, name=f"{name}-stdout", daemon=True
        )
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def stdout_lines(self) -> list[str]:
        """Every line it printed so far, without line ends."""
        with self._changed:
            return list(self._lines)

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def find_line(self, pattern: re.Pattern[str], timeout: float) -> str | None:
        """The first stdout line matching `pattern`, or None if none came within `timeout`
        seconds (or the server exited without printing one)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self._lines:
                    if pattern.search(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._reader.is_alive():
                    return None
                self._changed.wait(min(remaining, 0.1))

    def wait_for_line(
        self, pattern: re.Pattern[str], timeout: float, what: str | None = None
    ) -> str:
        """The first stdout line matching `pattern`, waiting up to `timeout` seconds; a
        ServerError naming `what` the line says (else the pattern), with the server's exit
        code, last stdout lines and stderr tail, if none came."""
        line = self.find_line(pattern, timeout)
        if line is None:
            exited = self._exit_code_once_stdout_closed()
            why = (
                f"exited with {exited}" if exited is not None else f"printed none in {timeout:g} s"
            )
            raise ServerError(
                f"{self.name} did not say {what or f'a line matching {pattern.pattern!r}'}: "
                f"it {why}; stdout: {self.stdout_lines[-20:]!r}; stderr: {self.stderr_tail()}"
            )
        return line

    def _exit_code_once_stdout_closed(self) -> int | None:
        # A process whose stdout has closed is exiting: give it a moment to be reaped, so
        # that the message says it exited rather than that it printed nothing.
        if not self._reader.is_alive():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(1.0)
        return self.process.poll()

    def stderr_text(self) -> str:
        """Everything it wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def stderr_tail(self, characters: int = STDERR_TAIL_CHARACTERS) -> str:
        return self.stderr_text()[-characters:]

    def end(self, signum: signal.Signals = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> int:
        """Ask it to exit with `signum` (as a service manager or Ctrl-C would) and wait up
        to `timeout` seconds, then kill it (`killed` says so). Its exit code: negative, the
        signal's number, when a signal ended it."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.kill()
        self._release()
        return self.process.returncode

    def kill(self) -> None:
        """Make sure the process is gone, at once (SIGKILL), and its pipes closed."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self._release()

    def _release(self) -> None:
        # The reader ends when the process's stdout closes, which its exit does (unless a
        # child it left behind holds the pipe: hence the bound).
        self._reader.join(STOP_TIMEOUT_S)
        if self.process.stdout is not None and not self._reader.is_alive():
            self.process.stdout.close()
        self._stderr.close()

    def close(self) -> None:
        """Release what it holds beyond its process (nothing here; see RunningBroker)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exception: object) -> None:
        try:
            self.end()
        finally:
            self.close()


class RunningBroker(ServerProcess):
    """`nullbroker serve ARGS`, started, once it has said where it listens.

    It listens on 127.0.0.1 on a port the OS picks unless ARGS give --listen, --listeners
    or --node-map; `metrics` adds `--metrics 127.0.0.1:0`. `settings` are more of its
    settings, by name (`partitions=4`, `sources=["clicks:records=1000"]`), given to it as
    NULLBROKER_<SETTING> variables, so the broker's own table of settings reads and checks
    them (and a mistake is reported under that name); ARGS win over them, as flags win
    over variables. `program` replaces the command that runs nullbroker (e.g. `python -X
    importtime -m nullbroker`); `cwd` and `env` are the process's. A ServerError if it
    exits, or says nothing within `start_timeout` seconds; it is not left running then.

    Its files are in `workdir` (a temporary folder of its own when none is given, removed by
    `close` or on leaving the `with` block): `nullbroker.stderr`, and `summary.json`, what
    it counted, written when it stops (unless ARGS name another --summary-json, or
    `summary=False` asks for none: --summary-json imports json at start, which measurements
    of the broker's own memory or imports leave out).

    With the metrics listener on, what it counts can be read while it runs: `accounts()`,
    `reset()`, `faults`, `assert_produced`, `assert_fetched`, `scrape` and `scrape_until`.
    """

    def __init__(
        self,
        *args: str,
        settings: Mapping[str, SettingValue] | None = None,
        workdir: Path | None = None,
        metrics: bool = False,
        summary: bool = True,
        program: Sequence[str] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._args = args
        self._settings = {
            setting_name(name): value
            for name, value in (settings or {}).items()
            if value is not None
        }
        self._own_workdir: Path | None = None
        if workdir is None:
            workdir = self._own_workdir = Path(tempfile.mkdtemp(prefix="nullbroker-"))
        self.workdir = workdir
        self._final: dict[str, Any] | None = None
        named_summary = self._given("summary_json")
        self.summary_path: Path | None = None
        """Where it writes what it counted as it exits (`stop` reads it), if it does."""
        if named_summary is not None:
            self.summary_path = Path(named_summary)
        elif summary:
            self.summary_path = self.workdir / "summary.json"
        command = [
            *(program if program is not None else nullbroker_program()),
            "serve",
            *(() if self._says_where() else ("--listen", LOOPBACK_ANY_PORT)),
            *(
                ("--summary-json", str(self.summary_path))
                if named_summary is None and summary
                else ()
            ),
            *(
                ("--metrics", LOOPBACK_ANY_PORT)
                if metrics and self._given("metrics") is None
                else ()
            ),
            *args,
        ]
        if self._settings:
            env = {**(os.environ if env is None else env), **_variables(self._settings)}
        try:
            super().__init__(
                "nullbroker", command, self.workdir / "nullbroker.stderr", cwd=cwd, env=env
            )
        except BaseException:
            self.close()
            raise
        self.bootstrap = ""
        """Node 0's address, HOST:PORT: the bootstrap server clients are given."""
        self.nodes: tuple[str, ...] = ()
        """Every node's address, HOST:PORT, by node id (one with no --brokers)."""
        self.metrics_url: str | None = None
        """The /metrics URL, when it serves one (--metrics)."""
        self.faults = BrokerFaults(self)
        """Its faults, over HTTP: `faults.inject(SPEC)`, `faults.active()`, `faults.clear()`."""
        try:
            self._read_addresses(start_timeout)
        except BaseException:
            self.kill()
            self.close()
            raise

    def _given(self, setting: str) -> str | None:
        """The value ARGS (else the settings) give `setting` (a name like summary_json), as
        text; None if neither gives it."""
        flag = "--" + setting.replace("_", "-")
        value = _flag_value(self._args, flag)
        if value is None and self._settings.get(setting) is not None:
            value = _setting_text(self._settings[setting])
        return value

    def _says_where(self) -> bool:
        return any(self._given(setting) is not None for setting in _WHERE_SETTINGS)

    def _read_addresses(self, timeout: float) -> None:
        # The address lines are printed together, in this order, once the broker serves.
        deadline = time.monotonic() + timeout
        listening = LISTENING.match(self.wait_for_line(LISTENING, timeout, "where it listens"))
        assert listening is not None
        self.bootstrap = listening["address"]
        self.nodes = (self.bootstrap,)
        brokers = self._given("brokers")
        if brokers is not None and int(brokers) > 1:
            line = self.wait_for_line(
                NODES, max(deadline - time.monotonic(), 0.0), "where its nodes listen"
            )
            self.nodes = tuple(
                entry.split(" on ", 1)[1] for entry in line.removeprefix("nodes: ").split(", ")
            )
        if _flag_value(self.command, "--metrics") is not None or self._given("metrics"):
            found = METRICS.match(
                self.wait_for_line(
                    METRICS, max(deadline - time.monotonic(), 0.0), "where it serves /metrics"
                )
            )
            assert found is not None
            self.metrics_url = found["url"]

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.process.returncode}"
        return f"<RunningBroker {self.bootstrap} pid {self.pid}, {state}>"

    @property
    def http_address(self) -> str:
        """HOST:PORT of its metrics listener, which serves /metrics, /accounts and /faults.
        A ServerError if it was started without one."""
        if self.metrics_url is None:
            raise ServerError(
                "nullbroker was started without --metrics: its accounts and faults are served "
                "on the metrics listener (nullbroker.start turns it on unless given metrics=False)"
            )
        return self.metrics_url.removeprefix("http://").removesuffix("/metrics")

    def accounts(self) -> Accounts:
        """What it counted since it started or was last reset: while it runs, as it answers
        GET /accounts now; once it has stopped, its summary (the same document)."""
        if not self.running and self.summary_path is not None:
            return Accounts.from_json(self.summary())
        return Accounts.from_json(call(self.http_address, "GET", "/accounts"))

    def reset(self) -> Accounts:
        """Zero its counts (POST /accounts/reset) and return them as they stood.

        Counts start again from zero: records, bytes and batches produced and fetched,
        requests, latencies, errors, connections accepted, faults applied, rebalances.
        What the broker holds stays: topics and their offsets, groups and their committed
        offsets, producers, faults in force, open connections. Reset between tests, when
        no client is sending: a request answered during the reset is counted on one side
        of it or the other, never both.
        """
        return Accounts.from_json(call(self.http_address, "POST", "/accounts/reset"))

    def assert_produced(
        self,
        topic: str,
        partition: int | None = None,
        *,
        records: int | Mapping[int, int] | None = None,
        bytes: int | Mapping[int, int] | None = None,
        batches: int | Mapping[int, int] | None = None,
        timeout: float = EXPECT_TIMEOUT_S,
    ) -> Accounts:
        """Fail, saying where, unless the broker counts exactly these for `topic` (or its
        `partition`), within `timeout` seconds: `records=1000`, or per partition
        `records={0: 500, 1: 500}` (every other partition then must count none). Fails at
        once when a count is already above (counts never go down). The accounts counted."""
        expected = {"records": records, "bytes": bytes, "batches": batches}
        return self._expect("produced", topic, partition, expected, timeout)

    def assert_fetched(
        self,
        topic: str,
        partition: int | None = None,
        *,
        records: int | Mapping[int, int] | None = None,
        bytes: int | Mapping[int, int] | None = None,
        timeout: float = EXPECT_TIMEOUT_S,
    ) -> Accounts:
        """As `assert_produced`, for what Fetch served (records and bytes; Fetch's batches
        are not counted)."""
        return self._expect(
            "fetched", topic, partition, {"records": records, "bytes": bytes}, timeout
        )

    def _expect(
        self,
        what: str,
        topic: str,
        partition: int | None,
        expected: Mapping[str, int | Mapping[int, int] | None],
        timeout: float,
    ) -> Accounts:
        deadline = time.monotonic() + timeout
        while True:
            accounts = self.accounts()
            traffic = accounts.produced if what == "produced" else accounts.fetched
            mismatches = expect_counts(traffic, what, topic, partition, **expected)
            if not mismatches:
                return accounts
            hopeless = any(mismatch.exceeds for mismatch in mismatches)
            if hopeless or time.monotonic() >= deadline or not self.running:
                raise AssertionError(_described(mismatches, timeout))
            time.sleep(EXPECT_POLL_S)

    def assert_clients_agree(
        self, client_id: str | None = None, *, timeout: float = EXPECT_TIMEOUT_S
    ) -> Accounts:
        """Fail, saying where, unless within `timeout` seconds every producer that pushed
        its count of records sent (KIP-714: the Java client's record.send.total), or the
        one of `client_id`, has closed and pushed exactly the records the broker appended
        for its client id. Fails too when none pushed one. The accounts counted."""
        deadline = time.monotonic() + timeout
        while True:
            accounts = self.accounts()
            rows = [
                row
                for row in accounts.clients.agreement
                if client_id is None or row.client_id == client_id
            ]
            if rows and all(row.final and row.agrees for row in rows):
                return accounts
            if time.monotonic() >= deadline or not self.running:
                found = "\n".join(map(str, rows)) or (
                    "no producer"
                    + ("" if client_id is None else f" of client id {client_id!r}")
                    + " pushed its count of records sent"
                )
                raise AssertionError(
                    f"the clients' view and the broker's, after {timeout} s:\n{found}\n"
                    + _pushes_described(accounts, client_id)
                )
            time.sleep(EXPECT_POLL_S)

    def scrape(self, timeout: float = SCRAPE_TIMEOUT_S) -> list[Metric]:
        """GET /metrics, parsed as Prometheus text (prometheus_client's metric families):
        what a Prometheus scraping it would read. A ServerError if it was started without
        its metrics listener."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"http://{self.http_address}/metrics"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            if response.status != 200:
                raise ServerError(f"GET {url} answered {response.status}")
            text = response.read().decode()
        return list(text_string_to_metric_families(text))

    def scrape_until(
        self, ready: Callable[[list[Metric]], bool], timeout: float = SCRAPE_UNTIL_TIMEOUT_S
    ) -> list[Metric]:
        """Scrape until `ready(families)` holds, for what the broker does after a client
        considers it done (acks=0 records still in the socket, connections closing); an
        AssertionError if it does not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            families = self.scrape()
            if ready(families):
                return families
            if time.monotonic() >= deadline:
                raise AssertionError(f"/metrics did not reach the expected state in {timeout} s")
            time.sleep(EXPECT_POLL_S)

    def accounts_until(
        self,
        ready: Callable[[Accounts], bool],
        timeout: float = SCRAPE_UNTIL_TIMEOUT_S,
        *,
        what: str = "the expected state",
    ) -> Accounts:
        """The accounts once `ready(accounts)` holds (a client's pushed metrics arrive an
        interval after it did the work); an AssertionError saying `what`, with the clients
        as they stood, if they do not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            accounts = self.accounts()
            if ready(accounts):
                return accounts
            if time.monotonic() >= deadline or not self.running:
                raise AssertionError(
                    f"the accounts did not reach {what} in {timeout} s; clients: {accounts.clients}"
                )
            time.sleep(EXPECT_POLL_S)

    def stop(
        self, signum: signal.Signals = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S
    ) -> dict[str, Any]:
        """Stop it as a service manager (SIGTERM) or Ctrl-C (SIGINT) would and return what
        it counted: the summary it writes as it exits (empty when started with
        `summary=False`). A ServerError, with its stderr tail, if it does not exit 0 within
        `timeout` seconds (it is killed then)."""
        code = self.end(signum, timeout)
        if self.killed:
            raise ServerError(
                f"nullbroker did not exit within {timeout:g} s of {signum.name} and was "
                f"killed; stderr: {self.stderr_tail()}"
            )
        if code != 0:
            raise ServerError(f"nullbroker exited with {code}; stderr: {self.stderr_tail()}")
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """What it counted, as it wrote it on exiting (so: after `stop` or `end`); empty
        when it was started without a summary (`summary=False`)."""
        if self._final is not None:
            return self._final
        if self.summary_path is None:
            return {}
        counted: dict[str, Any] = json.loads(self.summary_path.read_text())
        return counted

    def close(self) -> None:
        """Remove the temporary folder it was given, if it made its own (after it ended),
        keeping the summary it wrote there for `summary` and `accounts`."""
        if self._own_workdir is not None:
            if self.summary_path is not None and self.summary_path.exists():
                with contextlib.suppress(OSError, ValueError):
                    self._final = self.summary()
            shutil.rmtree(self._own_workdir, ignore_errors=True)
            self._own_workdir = None


def start(
    *args: str,
    workdir: Path | None = None,
    start_timeout: float = START_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    summary: bool = True,
    program: Sequence[str] | None = None,
    **settings: SettingValue,
) -> RunningBroker:
    """Run a broker in a process of its own and return it once it listens (on 127.0.0.1,
    ports the OS picks, unless told where), its metrics listener on.

    Settings as `nullbroker serve` takes them: keywords named as in the TOML file
    (`partitions=4`, `brokers=3, processes=2`, `sources=["clicks:partitions=4,records=1000"]`,
    `auto_create=False`, `group_initial_rebalance_delay_ms=0`), or flags as ARGS
    (`start("--partitions", "4")`). `metrics=False` starts it without its metrics listener
    (a broker measured for its own memory or imports, or one a test wants bare); `metrics=
    "HOST:PORT"` says where it listens. `workdir` keeps its files (stderr, the summary);
    `start_timeout` bounds the wait for it to listen; `env` replaces the environment it
    inherits and `cwd` is its folder; `summary=False` asks for no summary file, and
    `program` replaces the command that runs nullbroker (RunningBroker). Use it in a `with`
    block, or call `stop()`: either stops it with SIGTERM.

        with nullbroker.start(partitions=4) as broker:
            produce_1000_records(broker.bootstrap)
            broker.assert_produced("orders", records=1000)
    """
    # `metrics` is also the setting of where the listener is: a bool only says whether.
    listener = settings.pop("metrics", None)
    if not isinstance(listener, bool):
        settings["metrics"] = listener
    metrics = listener is not False
    return RunningBroker(
        *args,
        settings=settings,
        workdir=workdir,
        metrics=metrics,
        summary=summary,
        program=program,
        start_timeout=start_timeout,
        cwd=cwd,
        env=env,
    )


@dataclass(frozen=True, slots=True)
class ActiveFault:
    """A fault in force on a running broker (nullbroker.cluster.faults, docs/faults.md)."""

    id: int
    spec: str
    kind: str
    seconds_left: float | None
    """Until it ends by itself (`down` with `for=`); None: until cleared."""

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> ActiveFault:
        left = entry["seconds_left"]
        return cls(
            int(entry["id"]), entry["spec"], entry["kind"], None if left is None else float(left)
        )


class BrokerFaults:
    """A running broker's faults, through the /faults paths of its metrics listener: what
    `nullbroker fault add|list|clear` does, from Python."""

    def __init__(self, broker: RunningBroker) -> None:
        self._broker = broker

    def inject(self, spec: str) -> ActiveFault:
        """Apply a fault SPEC now (`latency:api=Produce,ms=20`, `down:node=1,for=5s`,
        `error:api=Fetch,code=NOT_LEADER_OR_FOLLOWER,rate=0.1`; docs/faults.md). An
        OperatorHttpError with the broker's reason for one it cannot apply."""
        return ActiveFault.from_json(
            call(self._broker.http_address, "POST", "/faults", spec.encode())
        )

    def active(self) -> list[ActiveFault]:
        """The faults in force."""
        return [
            ActiveFault.from_json(entry)
            for entry in call(self._broker.http_address, "GET", "/faults")
        ]

    def clear(self) -> int:
        """End every fault (nodes come back, moved partitions return); how many there were."""
        return int(call(self._broker.http_address, "DELETE", "/faults")["cleared"])


def _described(mismatches: list[Mismatch], timeout: float) -> str:
    waited = "" if any(m.exceeds for m in mismatches) else f" (waited {timeout:g} s)"
    return (
        "nullbroker counted otherwise"
        + waited
        + ":\n"
        + "\n".join(f"  {mismatch}" for mismatch in mismatches)
    )


def _pushes_described(accounts: Accounts, client_id: str | None) -> str:
    """What a failed `assert_clients_agree` saw of the pushes: each instance's (of
    `client_id`) pushes and state, and the errors PushTelemetry answered, so that a miss
    says whether a push was refused or never came."""
    lines = [
        f"  instance {client.instance_id} ({client.client_id!r}): {client.pushes} pushes, "
        f"{client.payload_bytes:,} bytes, {client.ended or 'still pushing'}, last "
        f"{client.last_push:%H:%M:%S.%f}"
        for client in accounts.clients.instances
        if client_id is None or client.client_id == client_id
    ]
    errors = {name: count for name, count in accounts.errors.items() if count}
    lines.append(
        f"  PushTelemetry answered {accounts.requests.get('PushTelemetry', 0)}; errors "
        f"answered (every API): {errors or 'none'}; payloads refused "
        f"{accounts.clients.refused_payloads}, series dropped {accounts.clients.dropped_series}"
    )
    return "\n".join(lines)


def setting_name(name: str) -> str:
    """A setting's name as nullbroker.app.configuration normalises it: `group-initial-…` or
    `GROUP_INITIAL_…` is `group_initial_…`."""
    return name.strip().lower().replace("-", "_")


def _setting_text(value: SettingValue) -> str:
    """A setting's value as its NULLBROKER_ variable holds it: booleans as true/false, a list
    (of sources, of faults) joined with `;`, which the broker splits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ";".join(_setting_text(item) for item in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _variables(settings: Mapping[str, SettingValue]) -> dict[str, str]:
    return {
        SETTINGS_PREFIX + name.upper(): _setting_text(value) for name, value in settings.items()
    }


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value given to `flag` in `args` (as `--flag VALUE` or `--flag=VALUE`; the last
    one wins, as argparse has it), or None."""
    value = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(flag + "="):
            value = arg.removeprefix(flag + "=")
    return value
