"""Every shell example of README.md and perf/README.md runs as written, so none goes stale.

Each fenced ```sh block is taken command by command (continuation lines joined), under
these rules:

- `make …` lines are not run: `make test` is what runs this test, and `make serve` would
  not return. Every other block gets a broker as `make serve ARGS="--partitions 4 --source
  clicks:partitions=4,…"` would start it (the flags the examples name), and
  `127.0.0.1:9092` in its commands becomes that broker's address.
- A `nullbroker serve … &` line starts the block's own broker instead, on a free port that
  replaces 9092 in the block. A `nullbroker serve` line in the foreground is started, must
  print that it listens, and is stopped with SIGTERM (exit 0): its flags are all checked.
- Counts are scaled down by 1000 (`--num-records`, `--records`, `--messages`, `--requests`,
  `--records-per-step`, `records=` in a source spec), which keeps the examples' numbers
  consistent with each other: 4 partitions of 1,000,000 records read as 4,000,000 become
  4 of 1,000 read as 4,000.
- Commands that take minutes however scaled (perf.compare, perf.soak, the Spark baseline
  jobs, the whole codec_bench frame set) are not run: each flag they use must appear in
  their own `--help`, so a renamed or removed flag fails here.
- A block that uses kcat or Kafka's Java tools is skipped, saying why, when they are not
  installed (`make test` installs both).
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess
from tests.kafka_tools import BIN as KAFKA_TOOLS
from tests.kafka_tools import _missing as kafka_tools_missing
from tests.module_command import run_checked

ROOT = Path(__file__).resolve().parent.parent
READMES = ("README.md", "perf/README.md")
DEFAULT_ADDRESS = "127.0.0.1:9092"
SCALE = 1000
EXAMPLE_BROKER_FLAGS = (
    "--partitions",
    "4",
    "--source",
    "clicks:partitions=4,records=1000,size=1024",
)
SLOW = re.compile(r"-m (perf\.compare|perf\.soak|spark_tests\.jobs\.\w+)\b")
COUNT_FLAG = re.compile(r"(--(?:num-records|records|messages|requests|records-per-step)[ =])(\d+)")
COUNT_OPTION = re.compile(r"(records=)(\d+)")
TIMEOUT = 300.0


@dataclass(frozen=True)
class Block:
    readme: str
    index: int
    commands: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.readme}#{self.index}"


def shell_blocks() -> list[Block]:
    blocks = []
    for readme in READMES:
        text = (ROOT / readme).read_text()
        for index, body in enumerate(re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.S)):
            joined = body.replace("\\\n", " ")
            commands = tuple(
                line.strip()
                for line in joined.splitlines()
                if line.strip() and not line.strip().startswith("#")
            )
            blocks.append(Block(readme, index, commands))
    return blocks


def scaled(command: str) -> str:
    def down(match: re.Match[str]) -> str:
        return f"{match[1]}{max(1, int(match[2]) // SCALE)}"

    return COUNT_OPTION.sub(down, COUNT_FLAG.sub(down, command))


def is_slow(command: str) -> bool:
    if SLOW.search(command):
        return True
    return "-m perf.codec_bench" in command and "--api" not in command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def assert_flags_in_help(command: str) -> None:
    """The command's module (and subcommand) takes every flag the command uses."""
    words = shlex.split(command.split(" #", 1)[0])
    module_at = words.index("-m") + 1
    call = [str(ROOT / ".venv" / "bin" / "python"), "-m", words[module_at]]
    rest = words[module_at + 1 :]
    if rest and not rest[0].startswith("-"):
        call.append(rest[0])  # a subcommand
    result = subprocess.run(
        [*call, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, result.stderr
    for flag in {word.split("=")[0] for word in rest if word.startswith("--")}:
        whole_flag = re.escape(flag) + r"(?![\w-])"
        assert re.search(whole_flag, result.stdout), f"{flag} is not a flag of {' '.join(call[2:])}"


def assert_serves_with_flags(command: str, workdir: Path) -> None:
    """A foreground `nullbroker serve …` example starts with its flags and stops cleanly."""
    words = shlex.split(command.split(" #", 1)[0])
    flags = words[words.index("serve") + 1 :]
    with BrokerProcess(workdir, *flags) as broker:
        broker.stop()


def needs(block: Block) -> str | None:
    """Why the block cannot run here, or None."""
    text = " ".join(block.commands)
    if "kcat " in text and shutil.which("kcat") is None:
        return "kcat is not installed (make test installs it)"
    if "scripts/kafka-bin/" in text and kafka_tools_missing() is not None:
        return str(kafka_tools_missing())
    return None


@pytest.mark.clients
@pytest.mark.parametrize("block", shell_blocks(), ids=lambda block: block.id)
def test_shell_example_runs_as_written(block: Block, tmp_path: Path) -> None:
    reason = needs(block)
    if reason is not None:
        pytest.skip(reason)
    script = []
    own_broker = any(re.search(r"nullbroker serve .*&$", command) for command in block.commands)
    for command in block.commands:
        if command.startswith("make "):
            continue
        if is_slow(command):
            assert_flags_in_help(command)
            continue
        if "nullbroker serve" in command and not command.endswith("&"):
            assert_serves_with_flags(scaled(command), tmp_path)
            continue
        script.append(scaled(command))
    if not script:
        return
    if own_broker:
        address = f"127.0.0.1:{free_port()}"
        script = [
            command.replace("nullbroker serve", f"nullbroker serve --listen {address}", 1)
            if "nullbroker serve" in command
            else command
            for command in script
        ]
        run_script(script, address)
        return
    with BrokerProcess(tmp_path, *EXAMPLE_BROKER_FLAGS) as broker:
        run_script(script, broker.bootstrap)
        broker.stop()


def run_script(commands: list[str], address: str) -> None:
    text = "\n".join(
        ["set -euo pipefail", *(c.replace(DEFAULT_ADDRESS, address) for c in commands)]
    )
    run_checked(["bash", "-c", text], timeout=TIMEOUT, what=f"script:\n{text}\n")


def test_every_readme_has_shell_examples_to_check() -> None:
    assert {block.readme for block in shell_blocks()} == set(READMES)
    assert KAFKA_TOOLS.is_dir()
