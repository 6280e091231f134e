"""Every shell example of README.md, perf/README.md and the pages of docs/ runs as written, so
none goes stale.

Each fenced ```sh or ```bash block is taken command by command (continuation lines joined,
comment lines dropped) and run by bash, in one shell per block (so `broker=$!` reaches the
lines after it), from a scratch copy of the checkout (the working tree's files; .venv and
.cache linked), under these rules:

- `make …` lines are not run: `make test` is what runs this test, and `make serve` would
  not return. A block runs against a broker started as the `make serve ARGS="…"` the
  block names (on a command line or in a comment) would start it, or as plain `make serve`
  when it names none — so an example that needs a source topic must say so where it is
  shown. `127.0.0.1:9092`, make serve's address, becomes that broker's address (an
  OS-picked port) in every command.
- A `nullbroker serve … &` line starts the block's own broker instead, on a free port
  (`--listen` added; the next few are free too, for `--brokers`) that replaces 9092 in the
  block, and `127.0.0.1:9100` (the examples' `--metrics`) becomes another free port. A
  `nullbroker serve` line in the foreground is started, must print that it listens, and is
  stopped with SIGTERM (exit 0): its flags are all checked.
- Counts are divided by 1000 (`--num-records`, `--messages`, `--records`, `--requests`,
  `--records-per-step`, `--consume-records-per-topic`, `records=` in a source spec), and so
  are durations (`--minutes`), which keeps the numbers consistent with each other: 4
  partitions of 1,000,000 records read as 4,000,000 become 4 of 1,000 read as 4,000.
  Repeats of a measurement (`--rounds`) become one: once shows that the command works.
- Every command exits 0. Where one prints counts they add up: a producer perf test (ours or
  Kafka's) reports exactly the records it was asked to send, and the broker counted exactly
  those for that topic; a consumer perf test reports the records it was asked to read, or
  up to one consume() batch more (both tools count the whole of their last batch, and read
  exactly the count when the topic holds no more). A consumer that times out short exits 0,
  so its line is what fails it.
- Commands that take minutes however few records they are given, having no count to scale
  (the full perf.compare, one with Apache Kafka as a peer, the whole codec_bench frame set,
  source_formats over many kinds, the Spark jobs), are not run:
  each flag they use must appear in their own `--help`, so a renamed or removed flag fails
  here. Their quick forms (perf.compare with --records-per-step, codec_bench --api) run.
- Nothing a command writes may land outside `out/` (git ignores it): files new after the
  block anywhere else in the copy fail it.
- A block that uses kcat or Kafka's Java tools is skipped, saying why, when they are not
  installed (`make test` installs both).

The ```python blocks of README.md and docs/python-api.md whose first line names a file
(`# test_orders.py`) are that file: each is written alone into a fresh folder and run there as
a user who installed the package would, a `test_*.py` file by `python -m pytest` (the plugin's
fixtures come from the installed package), any other by `python`; it must exit 0 and leave
nothing behind. Every ```python block of docs/python-api.md names its file, so none hides.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nullbroker.app.launcher import start
from perf.java_perf import missing as kafka_tools_missing
from tests.support.module_command import run_checked

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
READMES = ("README.md", "perf/README.md")
DOCS = "docs"
# Fences a reader would take for shell but shell_blocks does not run: an example must not
# hide in one.
UNRUN_SHELL_FENCE = re.compile(r"^```(?:shell|console|zsh|sh-session)\s*$", re.M)
DEFAULT_ADDRESS = "127.0.0.1:9092"
METRICS_ADDRESS = "127.0.0.1:9100"
CLUSTER_PORTS = 8
SCALE = 1000
COUNT_FLAG = re.compile(
    r"(--(?:num-records|messages|records|requests|records-per-step|consume-records-per-topic)"
    r"[ =])(\d+)"
)
COUNT_OPTION = re.compile(r"\b(records=)(\d+)")
DURATION_FLAG = re.compile(r"(--minutes[ =])(\d+(?:\.\d+)?)")
ROUNDS_FLAG = re.compile(r"(--rounds[ =])(\d+)")
SERVE_ARGS = re.compile(r"make serve ARGS=(\"[^\"]*\"|'[^']*')")
SLOW = (
    (re.compile(r"-m spark_tests\.jobs\.\w+"), "starts Spark: tens of seconds a job"),
    (re.compile(r"-m perf\.compare\b(?!.*--records-per-step)"), "the full comparison: ~7 min"),
    (re.compile(r"-m perf\.codec_bench\b(?!.*--api)"), "the whole frame set: ~1 min"),
    (
        re.compile(r"-m perf\.compare\b.*--brokers( \w+)* kafka\b"),
        "starts Apache Kafka and its Java tools, whatever the counts: ~40 s "
        "(tests/tools/test_compare.py runs perf.compare against Kafka)",
    ),
    (
        re.compile(r"-m perf\.source_formats\b"),
        "a broker and a read per kind, whatever the counts: ~1 min for perf/README's eleven "
        "(tests/tools/test_perf_tools.py runs the tool)",
    ),
)
PRODUCER = re.compile(r"-m perf\.producer_perf\b|kafka-producer-perf-test\b")
CONSUMER = re.compile(r"-m perf\.consumer_perf\b|kafka-consumer-perf-test\b")
# The final line of kafka-producer-perf-test and its twin (progress lines have no percentiles).
SENT = re.compile(r"^(\d+) records sent, .* 50th", re.M)
# kafka-consumer-perf-test's result line: start.time, end.time, MB, MB.sec, nMsg, ...
CONSUMED = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, [^,]+, [^,]+, [^,]+, (\d+),", re.M)
DONE = "@@ readme example command done"
# max.poll.records' default in both consumer perf tests: the most a last batch can overshoot.
CONSUMER_BATCH = 500
TIMEOUT = 300.0


@dataclass(frozen=True)
class Block:
    readme: str
    index: int
    text: str
    commands: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.readme}#{self.index}"


def pages() -> list[str]:
    """The pages whose examples run: the two READMEs and every page of docs/."""
    return [*READMES, *sorted(str(page.relative_to(ROOT)) for page in (ROOT / DOCS).glob("*.md"))]


def shell_blocks() -> list[Block]:
    blocks = []
    for readme in pages():
        text = (ROOT / readme).read_text()
        for index, body in enumerate(re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.S)):
            joined = body.replace("\\\n", " ")
            commands = tuple(
                line.strip()
                for line in joined.splitlines()
                if line.strip() and not line.strip().startswith("#")
            )
            blocks.append(Block(readme, index, body, commands))
    return blocks


def scaled(command: str) -> str:
    def down(match: re.Match[str]) -> str:
        return f"{match[1]}{max(1, int(match[2]) // SCALE)}"

    def shorter(match: re.Match[str]) -> str:
        return f"{match[1]}{float(match[2]) / SCALE:g}"

    scaled_counts = COUNT_OPTION.sub(down, COUNT_FLAG.sub(down, command))
    return ROUNDS_FLAG.sub(r"\g<1>1", DURATION_FLAG.sub(shorter, scaled_counts))


def broker_flags(block: Block) -> list[str]:
    """The flags of the `make serve ARGS=…` the block names (scaled), none if it names none."""
    declared = {match[1] for match in SERVE_ARGS.finditer(block.text)}
    assert len(declared) <= 1, f"{block.id} names several brokers: {sorted(declared)}"
    return shlex.split(scaled(shlex.split(declared.pop())[0])) if declared else []


def slow_reason(command: str) -> str | None:
    return next((reason for pattern, reason in SLOW if pattern.search(command)), None)


def flag_value(command: str, *flags: str) -> str | None:
    words = shlex.split(command.split(" #", 1)[0])
    for flag in flags:
        if flag in words:
            return words[words.index(flag) + 1]
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports, the first picked by the OS."""
    while True:
        first = free_port()
        try:
            with contextlib.ExitStack() as probes:
                for port in range(first + 1, first + count):
                    probe = probes.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue


def needs(block: Block) -> str | None:
    """Why the block cannot run here, or None."""
    text = " ".join(block.commands)
    if "kcat " in text and shutil.which("kcat") is None:
        return "kcat is not installed (make test installs it)"
    if "scripts/kafka-bin/" in text and kafka_tools_missing() is not None:
        return str(kafka_tools_missing())
    return None


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the working tree (tracked and new files, not ignored ones) with .venv and
    .cache linked, so the examples' relative paths work and what they write can be seen."""
    copy = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    for linked in (".venv", ".cache"):
        if (ROOT / linked).exists():
            (copy / linked).symlink_to(ROOT / linked)
    return copy


def files_outside_out(checkout: Path) -> set[Path]:
    """Every file in the copy except under out/ and __pycache__/ (links not followed)."""
    found = set()
    for folder, subfolders, files in os.walk(checkout):
        here = Path(folder)
        subfolders[:] = [
            name
            for name in subfolders
            if name != "__pycache__" and not (here == checkout and name == "out")
        ]
        found.update(here / name for name in files)
    return found


def assert_flags_in_help(command: str, checkout: Path) -> None:
    """The command's module (and subcommand) takes every flag the command uses."""
    words = shlex.split(command.split(" #", 1)[0])
    module_at = words.index("-m") + 1
    call = [str(ROOT / ".venv" / "bin" / "python"), "-m", words[module_at]]
    rest = words[module_at + 1 :]
    if rest and not rest[0].startswith("-"):
        call.append(rest[0])  # a subcommand
    result = subprocess.run(
        [*call, "--help"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for flag in {word.split("=")[0] for word in rest if word.startswith("--")}:
        whole_flag = re.escape(flag) + r"(?![\w-])"
        assert re.search(whole_flag, result.stdout), f"{flag} is not a flag of {' '.join(call[2:])}"


def assert_serves_with_flags(command: str, workdir: Path) -> None:
    """A foreground `nullbroker serve …` example starts with its flags and stops cleanly."""
    words = shlex.split(command.split(" #", 1)[0])
    flags = words[words.index("serve") + 1 :]
    with start(*flags, workdir=workdir) as broker:
        broker.stop()


def run_script(commands: list[str], address: str, checkout: Path) -> list[str]:
    """Run the commands in one bash from the copy, 9092 replaced by `address`; each
    command's stdout. Fails the test unless every one exits 0. Whatever a command left in
    the background is killed when the script ends, however it ends."""
    lines = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for command in commands:
        lines += [command.replace(DEFAULT_ADDRESS, address), f"printf '\\n{DONE}\\n'"]
    script = "\n".join(lines)
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=checkout,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 0, (
        f"script exited {process.returncode}:\n{script}\n"
        f"stdout: {stdout[-3000:]}\nstderr: {stderr[-4000:]}"
    )
    return stdout.split(f"\n{DONE}\n")[: len(commands)]


def sent_per_topic(commands: list[str], outputs: list[str]) -> Counter[str]:
    """Each producer perf test printed exactly the records it was asked to send; the records
    sent per topic."""
    sent: Counter[str] = Counter()
    for command, output in zip(commands, outputs, strict=True):
        if PRODUCER.search(command):
            asked = int(flag_value(command, "--num-records") or 0)
            printed = [int(count) for count in SENT.findall(output)]
            assert printed == [asked], f"{command}\nprinted: {output[-2000:]}"
            sent[flag_value(command, "--topic") or ""] += asked
    return sent


def consumed_per_topic(commands: list[str], outputs: list[str]) -> Counter[str]:
    """Each consumer perf test read what it was asked to (up to one batch more); the records
    read per topic."""
    consumed: Counter[str] = Counter()
    for command, output in zip(commands, outputs, strict=True):
        if CONSUMER.search(command):
            asked = int(flag_value(command, "--num-records", "--messages") or 0)
            printed = [int(count) for count in CONSUMED.findall(output)]
            assert len(printed) == 1, f"{command}\nprinted: {output[-2000:]}"
            assert asked <= printed[0] < asked + CONSUMER_BATCH, f"{command}: {printed[0]} read"
            consumed[flag_value(command, "--topic") or ""] += printed[0]
    return consumed


def runnable(block: Block, workdir: Path, checkout: Path) -> Iterator[str]:
    """The block's commands to run, scaled; the others are checked on the way."""
    for command in block.commands:
        if command.startswith("make "):
            continue
        if slow_reason(command) is not None:
            assert_flags_in_help(command, checkout)
        elif "nullbroker serve" in command and not command.endswith("&"):
            assert_serves_with_flags(scaled(command), workdir)
        else:
            yield scaled(command)


@pytest.mark.clients
@pytest.mark.parametrize("block", shell_blocks(), ids=lambda block: block.id)
def test_shell_example_runs_as_written(block: Block, tmp_path: Path, checkout: Path) -> None:
    reason = needs(block)
    if reason is not None:
        pytest.skip(reason)
    commands = list(runnable(block, tmp_path, checkout))
    if not commands:
        return
    before = files_outside_out(checkout)
    if any(re.search(r"nullbroker serve .*&$", command) for command in commands):
        # A cluster's nodes take the ports after the bootstrap's: those must be free too.
        address = f"127.0.0.1:{free_ports(CLUSTER_PORTS)}"
        metrics = f"127.0.0.1:{free_port()}"
        commands = [
            command.replace("nullbroker serve", f"nullbroker serve --listen {address}", 1).replace(
                METRICS_ADDRESS, metrics
            )
            for command in commands
        ]
        outputs = run_script(commands, address, checkout)
        sent_per_topic(commands, outputs)
        consumed_per_topic(commands, outputs)
    else:
        with start(*broker_flags(block), workdir=tmp_path) as broker:
            outputs = run_script(commands, broker.bootstrap, checkout)
            summary = broker.stop()
        for topic, records in sent_per_topic(commands, outputs).items():
            assert summary["produced"]["topics"][topic]["records"] == records, topic
        for topics, records in consumed_per_topic(commands, outputs).items():
            # A client reads no record the broker did not serve (it may fetch ahead).
            served = summary["fetched"]["topics"]
            assert sum(served[topic]["records"] for topic in topics.split(",")) >= records
    assert files_outside_out(checkout) == before, "an example wrote outside out/"


def test_scaling_divides_counts_and_durations_only() -> None:
    command = (
        "x --num-records 1000000 --messages=4000 --records-per-step 50000 --minutes 10 "
        "--record-size 1024 --source clicks:partitions=4,records=200000,size=1024 --rounds 5"
    )
    assert scaled(command) == (
        "x --num-records 1000 --messages=4 --records-per-step 50 --minutes 0.01 "
        "--record-size 1024 --source clicks:partitions=4,records=200,size=1024 --rounds 1"
    )


def test_a_block_runs_against_the_broker_it_names() -> None:
    named = Block("README.md", 0, '# against `make serve ARGS="--source a:records=5000"`\n', ())
    assert broker_flags(named) == ["--source", "a:records=5"]
    assert broker_flags(Block("README.md", 1, "make serve\n", ())) == []


def test_every_readme_has_shell_examples_to_check() -> None:
    assert {block.readme for block in shell_blocks()} >= set(READMES)


def test_every_docs_page_is_checked_and_hides_no_shell_example() -> None:
    checked = pages()
    assert [page for page in checked if page.startswith(f"{DOCS}/")], "no page in docs/"
    for page in checked:
        text = (ROOT / page).read_text()
        assert not UNRUN_SHELL_FENCE.search(text), f"{page}: use ```sh, which is run"
        fences = len(re.findall(r"^```(?:sh|bash)\n", text, re.M))
        assert len([block for block in shell_blocks() if block.readme == page]) == fences, page


PYTHON_PAGES = ("README.md", "docs/python-api.md")
PYTHON_FILE = re.compile(r"^```python\n# (?P<name>\w+\.py)\n(?P<code>.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class PythonFile:
    page: str
    name: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}#{self.name}"


def python_files() -> list[PythonFile]:
    return [
        PythonFile(page, match["name"], f"# {match['name']}\n{match['code']}")
        for page in PYTHON_PAGES
        for match in PYTHON_FILE.finditer((ROOT / page).read_text())
    ]


@pytest.mark.clients
@pytest.mark.parametrize("example", python_files(), ids=lambda example: example.id)
def test_python_example_runs_in_a_fresh_folder(example: PythonFile, tmp_path: Path) -> None:
    (tmp_path / example.name).write_text(example.code)
    if example.name.startswith("test_"):
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", example.name]
    else:
        command = [sys.executable, example.name]
    # As a user's shell would: nothing of this checkout on the path, only what is installed.
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run_checked(command, timeout=TIMEOUT, what=example.id, cwd=tmp_path, env=environment)
    left = {path.name for path in tmp_path.iterdir()} - {example.name, "__pycache__"}
    assert not left, f"{example.id} left {sorted(left)}"


def test_the_readme_shows_a_test_and_the_api_page_hides_no_python_example() -> None:
    files = python_files()
    assert [file.name for file in files if file.page == "README.md"] == ["test_orders.py"]
    api_page = (ROOT / "docs" / "python-api.md").read_text()
    in_page = [file for file in files if file.page == "docs/python-api.md"]
    assert len(in_page) == len(re.findall(r"^```python\n", api_page, re.M)) >= 2
