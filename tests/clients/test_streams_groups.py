"""Kafka Streams 4.4.0's WordCount (tests/clients/java/WordCount.java) in a streams group
(KIP-1071, group.protocol=streams) against nullbroker and against Apache Kafka 4.4.0
(`kafka`), the same test on each, at least once and exactly once (v2): two instances share
its four tasks, as kafka-streams-groups describes them; one leaves, the other takes its tasks
over, restoring their counts from the changelog topic; and after a second batch of lines each
word's latest count in the output topic is the number of times the text says it, as counted
here in Python. Both brokers are held to the same expectations (the counts, the group's shape
as described), so they answer alike.

Every wait is bounded (DEADLINE_S) and ends early when an instance exits; no assertion is
about time."""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from nullbroker.app.pytest_plugin import StartBroker
from perf.java_perf import CACHE
from perf.java_perf import missing as tools_missing
from perf.kafka_broker import KAFKA_VERSION, KafkaBroker
from tests.clients.test_share_consumers import Target
from tests.support.java_classes import compiled
from tests.support.kafka_tools import run_tool

# Not `kafka_tools` (requires_kafka_tools), though kafka-streams-groups is one of them: `-k
# kafka` matches marker names too, and must choose the Kafka variants alone. The fixture
# word_count_classes skips as that marker would.
pytestmark = [pytest.mark.clients, pytest.mark.java, pytest.mark.slow]

STREAMS_LIB = CACHE.parent / "kafka-streams" / KAFKA_VERSION / "lib"
"""Kafka Streams and its dependencies (scripts/ensure-kafka-tools)."""
WORD_COUNT = Path(__file__).parent / "java" / "WordCount.java"
DEADLINE_S = 90.0
"""Each wait stops by itself after this long (a failure, never a wait to pass)."""
LIFETIME_S = 300
"""An instance closes itself after this long, so that none outlives its test."""
PARTITIONS = 2
TASKS = frozenset(f"{subtopology}_{partition}" for subtopology in (0, 1) for partition in (0, 1))
"""WordCount's tasks over two input partitions: 0_P reads and splits the lines, 1_P counts."""
GUARANTEES = ["at_least_once", "exactly_once_v2"]
VOCABULARY = (
    "apple", "river", "stone", "cloud", "ember", "maple", "falcon", "harbor", "island", "jungle",
    "kettle", "lantern", "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saddle",
    "timber", "umber", "velvet", "willow", "yonder", "zephyr", "anchor", "bridge", "candle",
    "dune", "fern",
)  # fmt: skip
FIRST_LINES, SECOND_LINES = 2_000, 1_000


@pytest.fixture(params=["nullbroker", "nullbroker-brokers-3-processes-2", "kafka-4.4.0"])
def target(request: pytest.FixtureRequest, nullbroker_factory: StartBroker) -> Iterator[Target]:
    """A lone nullbroker, a cluster of three nodes over two processes (the group's coordinator
    in one, some of its partitions' leaders in the other), and Kafka 4.4.0."""
    if request.param.startswith("nullbroker"):
        cluster = ("--brokers", "3", "--processes", "2") if "processes" in request.param else ()
        broker = nullbroker_factory("--retain", str(64 << 20), *cluster)
        yield Target(request.param, broker.bootstrap, broker)
    else:
        kafka: KafkaBroker = request.getfixturevalue("kafka")
        yield Target("kafka", kafka.bootstrap)


def lines(seed: int, count: int) -> tuple[list[str], Counter[str]]:
    """`count` lines of 3 to 9 words of VOCABULARY, the first capitalised, separated by a
    space, a comma or a dash, ending with a full stop; and how many times each word is in
    them (what the application must count: lower-cased, punctuation apart)."""
    rng = random.Random(seed)
    text: list[str] = []
    words: Counter[str] = Counter()
    for _ in range(count):
        chosen = [rng.choice(VOCABULARY) for _ in range(rng.randint(3, 9))]
        words.update(chosen)
        line = chosen[0].capitalize()
        for word in chosen[1:]:
            line += rng.choice((" ", ", ", " - ")) + word
        text.append(line + ".")
    return text, words


def produce(bootstrap: str, topic: str, text: list[str]) -> None:
    """The lines, unkeyed, alternately to each partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index, line in enumerate(text):
        producer.produce(topic, value=line.encode(), partition=index % PARTITIONS)
    assert producer.flush(60) == 0


@pytest.fixture(scope="session")
def word_count_classes() -> Path:
    """WordCount.java compiled against Kafka Streams 4.4.0, once per source text."""
    why = tools_missing()
    if why is not None:
        pytest.skip(why)
    if not (STREAMS_LIB / f"kafka-streams-{KAFKA_VERSION}.jar").exists():
        pytest.skip(
            f"Kafka Streams {KAFKA_VERSION}'s jars are not provisioned (scripts/ensure-kafka-tools)"
        )
    return compiled(WORD_COUNT, STREAMS_LIB, CACHE.parent / "java-word-count")


class WordCountApp:
    """One instance of WordCount in its own JVM; what it printed (one JSON object a line) is
    collected as it prints it, its log (stderr) written to `log`."""

    def __init__(
        self,
        classes: Path,
        bootstrap: str,
        app_id: str,
        guarantee: str,
        folder: Path,
        changelog_bytes: int | None = None,
        protocol: str = "streams",
    ) -> None:
        folder.mkdir()
        self.log = folder / "wordcount.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-cp", f"{classes}:{STREAMS_LIB}/*", "WordCount",
                 bootstrap, app_id, f"{app_id}-lines", f"{app_id}-counts", guarantee,
                 protocol, str(folder / "state"), str(LIFETIME_S),
                 *([] if changelog_bytes is None else [str(changelog_bytes)])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            )  # fmt: skip
        self._printed: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):  # its own lines; anything else a library printed
                with self._lock:
                    self._printed.append(json.loads(line))

    def printed(self, field: str) -> list[dict[str, Any]]:
        """What it printed that has `field`, in order."""
        with self._lock:
            return [line for line in self._printed if field in line]

    def running_tasks(self) -> frozenset[str] | None:
        """Its active tasks when its last state was RUNNING, else None."""
        states = self.printed("state")
        if not states or states[-1]["state"] != "RUNNING":
            return None
        return frozenset(states[-1]["active"])

    def restored(self) -> dict[str, int]:
        """Records restored from each changelog partition (the last restoration of each)."""
        return {line["restored"]: line["records"] for line in self.printed("restored")}

    def account(self) -> str:
        """What it printed and its log's tail, for a failure's message."""
        with self._lock:
            printed = "\n".join(json.dumps(line) for line in self._printed)
        return f"printed:\n{printed}\nlog tail:\n{self.log.read_text(errors='replace')[-3000:]}"

    def stop(self) -> int:
        """Ask it to close (leaving the group), wait until it has; its exit code."""
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.close()
        code = self.process.wait(60)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """End it at once, if it has not ended yet."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        self._reader.join(10)


def shared_and_counting(apps: list[WordCountApp], output: OutputCounts) -> Callable[[], bool]:
    """Whether every instance runs tasks of its own, together all of them, and each count
    task has written (what `output` has read)."""

    def done() -> bool:
        output.read(0.2)
        tasks = [app.running_tasks() for app in apps]
        held = [task for each in tasks for task in each or ()]
        return (
            all(tasks)
            and sorted(held) == sorted(TASKS)
            and output.partitions_read == set(range(PARTITIONS))
        )

    return done


def until(done: Callable[[], bool], apps: list[WordCountApp]) -> bool:
    """Wait until `done()`, for at most DEADLINE_S, and no longer than every app is alive;
    whether it is done."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline or any(app.process.poll() is not None for app in apps):
            return done()
        time.sleep(0.2)
    return True


class OutputCounts:
    """The output topic read from its start as it grows: each word's latest count."""

    def __init__(self, bootstrap: str, topic: str, guarantee: str) -> None:
        isolation = "read_committed" if guarantee == "exactly_once_v2" else "read_uncommitted"
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{topic}-reader",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": isolation,
            }
        )
        self.consumer.assign(
            [TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in range(PARTITIONS)]
        )
        self.latest: dict[str, int] = {}
        self.partitions_read: set[int] = set()
        """The partitions it read a count from."""
        self.at_end: set[int] = set()
        """The partitions whose end it reached since it last read a count from them."""

    def read(self, seconds: float = 0.5) -> None:
        """What the topic holds beyond what was read, for up to `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for message in self.consumer.consume(500, 0.1):
                error, partition = message.error(), message.partition()
                assert partition is not None
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    self.at_end.add(partition)
                    continue
                assert error is None, error
                key, value = message.key(), message.value()
                assert key is not None and value is not None and len(value) == 8
                self.latest[key.decode()] = int.from_bytes(value, "big", signed=True)
                self.partitions_read.add(partition)
                self.at_end.discard(partition)

    def close(self) -> None:
        self.consumer.close()


def final_counts(bootstrap: str, topic: str, guarantee: str) -> dict[str, int]:
    """Each word's latest count, the output topic read whole by a new consumer."""
    output = OutputCounts(bootstrap, topic, guarantee)
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(output.at_end) < PARTITIONS and time.monotonic() < deadline:
            output.read()
        assert len(output.at_end) == PARTITIONS, "the output topic was not read to its end"
        return output.latest
    finally:
        output.close()


@dataclass(frozen=True, slots=True)
class Described:
    """A streams group as kafka-streams-groups --describe shows it: each member's active
    tasks (--members), in an order of their own, and the partitions whose offsets and lag it
    lists (the default)."""

    members: tuple[frozenset[str], ...]
    partitions: frozenset[tuple[str, int]]

    def shape(self, app_id: str) -> tuple[int, frozenset[str], frozenset[tuple[str, int]]]:
        """What any broker's description of WordCount's group shows alike: how many members,
        the tasks they hold, and the partitions listed (topics named without the app id).
        Which member holds which task is the broker's assignor's choice."""
        return (
            len(self.members),
            frozenset().union(*self.members),
            frozenset(
                (topic.removeprefix(app_id), partition) for topic, partition in self.partitions
            ),
        )


SHAPES: dict[tuple[str, str], tuple[int, frozenset[str], frozenset[tuple[str, int]]]] = {}
"""Each target's Described.shape, by target and guarantee: the second target described is
compared with the first (a test file runs whole in one process, tests/support/parallel.py)."""


LABEL = re.compile(r"(?:^|\s)([A-Z][A-Z-]*):\s")
"""A label in the ASSIGNMENTS column: `ACTIVE: 0:[1]; 1:[0,1]; STANDBY: ...`."""
SUBTOPOLOGY = re.compile(r"([^\s:;]+):\[([\d,\s]*)\]")


def active_tasks(assignments: str) -> frozenset[str]:
    """The tasks after ACTIVE: in a member's ASSIGNMENTS column, as TaskIds print them."""
    parts = LABEL.split(assignments)
    labelled = dict(zip(parts[1::2], parts[2::2], strict=True))
    return frozenset(
        f"{subtopology}_{partition.strip()}"
        for subtopology, partitions in SUBTOPOLOGY.findall(labelled.get("ACTIVE", ""))
        for partition in partitions.split(",")
        if partition.strip()
    )


def rows(output: str, group: str) -> list[str]:
    """The table's lines that describe `group` (not its header)."""
    return [line for line in output.splitlines() if line.split(None, 1)[:1] == [group]]


def in_order(members: tuple[frozenset[str], ...]) -> tuple[frozenset[str], ...]:
    """Members' task sets in an order of their own, to compare them as a whole."""
    return tuple(sorted(members, key=sorted))


def describe(bootstrap: str, group: str) -> Described:
    """kafka-streams-groups --describe --members and --describe (its offsets) of `group`."""
    server = ("--bootstrap-server", bootstrap)
    members = run_tool("kafka-streams-groups", *server, "--describe", "--group", group, "--members")
    offsets = run_tool("kafka-streams-groups", *server, "--describe", "--group", group)
    # GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS, the last with spaces in it.
    tasks = in_order(
        tuple(
            active_tasks(fields[4] if len(fields) > 4 else "")
            for fields in (line.split(None, 4) for line in rows(members, group))
        )
    )
    # GROUP TOPIC PARTITION OFFSET-LAG
    partitions = frozenset(
        (fields[1], int(fields[2])) for fields in map(str.split, rows(offsets, group))
    )
    return Described(tasks, partitions)


def described_until(bootstrap: str, group: str, expected: Described) -> Described:
    """kafka-streams-groups' description of the group, asked again while it is not
    `expected` (a rebalance may be under way), for at most DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        described = describe(bootstrap, group)
        if described == expected or time.monotonic() > deadline:
            return described
        time.sleep(1)


def create_topics(bootstrap: str, *topics: str) -> None:
    """The topics, of PARTITIONS partitions each."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(topic, PARTITIONS, 1) for topic in topics])
    for future in created.values():
        future.result(30)


def counts_words(app: WordCountApp) -> list[str]:
    """The count tasks (subtopology 1) the instance runs."""
    return sorted(task for task in app.running_tasks() or () if task.startswith("1_"))


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_word_count_counts_every_word_once_as_an_instance_leaves(
    target: Target, word_count_classes: Path, guarantee: str, tmp_path: Path
) -> None:
    app_id = f"streams-{guarantee.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
    source, sink = f"{app_id}-lines", f"{app_id}-counts"
    repartition = f"{app_id}-counts-repartition"
    create_topics(target.bootstrap, source, sink)
    first, first_words = lines(1, FIRST_LINES)
    second, second_words = lines(2, SECOND_LINES)
    expected = dict(first_words + second_words)
    produce(target.bootstrap, source, first)

    apps = [
        WordCountApp(word_count_classes, target.bootstrap, app_id, guarantee, tmp_path / name)
        for name in ("one", "two")
    ]
    output = OutputCounts(target.bootstrap, sink, guarantee)
    try:
        assert until(shared_and_counting(apps, output), apps), "\n".join(
            app.account() for app in apps
        )
        shared = in_order(tuple(app.running_tasks() or frozenset() for app in apps))
        listed = frozenset((topic, p) for topic in (source, repartition) for p in range(PARTITIONS))
        described = described_until(target.bootstrap, app_id, Described(shared, listed))
        assert len(described.members) == 2
        assert frozenset().union(*described.members) == TASKS
        assert described.members == shared, "the tool and the instances disagree"
        assert described.partitions == listed
        shape = described.shape(app_id)
        for (other, other_guarantee), other_shape in SHAPES.items():
            if other_guarantee == guarantee:
                assert shape == other_shape, f"described unlike on {other}"
        SHAPES[(target.name, guarantee)] = shape

        # The instance with a count task leaves: the other takes its tasks over, restoring
        # their counts from the changelog.
        leaving, staying = sorted(apps, key=lambda app: not counts_words(app))
        moved = counts_words(leaving)
        assert leaving.stop() == 0, leaving.account()
        assert until(lambda: staying.running_tasks() == TASKS, [staying]), staying.account()
        restored = staying.restored()
        for task in moved:
            changelog = f"{app_id}-counts-changelog-{task.split('_')[1]}"
            assert restored.get(changelog, 0) > 0, staying.account()

        produce(target.bootstrap, source, second)

        def all_counted() -> bool:
            output.read(0.2)
            return output.latest == expected

        # Not asserted here: the output is read again, whole, once the instance has closed.
        until(all_counted, [staying])
        assert staying.stop() == 0, staying.account()
    finally:
        output.close()
        for app in apps:
            app.kill()
    assert final_counts(target.bootstrap, sink, guarantee) == expected


def test_word_count_on_the_classic_protocol_counts_every_word_once_as_an_instance_leaves(
    target: Target, word_count_classes: Path, tmp_path: Path
) -> None:
    """The same WordCount, exactly_once_v2, with the classic group protocol (Kafka Streams'
    own assignor, in its group leader; its internal topics made by its admin client): two
    instances, then one; the final counts equal the input's, on each target."""
    app_id = f"classic-eos-{uuid.uuid4().hex[:8]}"
    source, sink = f"{app_id}-lines", f"{app_id}-counts"
    create_topics(target.bootstrap, source, sink)
    first, first_words = lines(3, FIRST_LINES)
    second, second_words = lines(4, SECOND_LINES)
    expected = dict(first_words + second_words)
    produce(target.bootstrap, source, first)
    guarantee = "exactly_once_v2"
    apps = [
        WordCountApp(
            word_count_classes, target.bootstrap, app_id, guarantee, tmp_path / name,
            protocol="classic",
        )
        for name in ("one", "two")
    ]  # fmt: skip
    output = OutputCounts(target.bootstrap, sink, guarantee)
    try:
        assert until(shared_and_counting(apps, output), apps), "\n".join(
            app.account() for app in apps
        )
        leaving, staying = apps
        assert leaving.stop() == 0, leaving.account()
        assert until(lambda: staying.running_tasks() == TASKS, [staying]), staying.account()
        produce(target.bootstrap, source, second)

        def all_counted() -> bool:
            output.read(0.2)
            return output.latest == expected

        until(all_counted, [staying])
        assert staying.stop() == 0, staying.account()
    finally:
        output.close()
        for app in apps:
            app.kill()
    assert final_counts(target.bootstrap, sink, guarantee) == expected


CHANGELOG_BYTES = 64 << 10
"""The changelog's retention.bytes in the restore test: less than the count updates it is
written (some 200 KiB a partition, the store's cache off), more than a batch of them (the
producer's batch.size, 16 KiB) and than its latest count of each word."""


def test_a_store_restored_from_a_cleaned_changelog_counts_as_kafka_s(
    target: Target, word_count_classes: Path, tmp_path: Path
) -> None:
    """An instance counts the first lines; a new instance, with no state of its own,
    restores the store from the changelog and counts the rest. Kafka keeps the compacted
    changelog whole (retention.bytes means nothing to a compact-only topic); nullbroker keeps
    64 KiB of each partition, cleaned to the latest count of each word (nullbroker's
    compaction), and the counts must come out the same."""
    app_id = f"streams-restore-{uuid.uuid4().hex[:8]}"
    source, sink = f"{app_id}-lines", f"{app_id}-counts"
    create_topics(target.bootstrap, source, sink)
    first, first_words = lines(3, FIRST_LINES)
    second, second_words = lines(4, SECOND_LINES)
    # Words said once at the very start and once after the restore: their counts are the
    # changelog's oldest records, which a ring that is not compacted has let go, and a store
    # restored without them would count them 1, not 2.
    rare = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    first.insert(0, " ".join(rare).capitalize() + ".")
    second.append(" ".join(rare).capitalize() + ".")
    first_words.update(rare)
    second_words.update(rare)
    expected = dict(first_words + second_words)
    produce(target.bootstrap, source, first)

    def instance(name: str) -> WordCountApp:
        return WordCountApp(word_count_classes, target.bootstrap, app_id, "at_least_once",
                            tmp_path / name, CHANGELOG_BYTES)  # fmt: skip

    output = OutputCounts(target.bootstrap, sink, "at_least_once")
    apps = [instance("first")]
    try:

        def first_counted() -> bool:
            output.read(0.2)
            return output.latest == dict(first_words)

        assert until(first_counted, apps), apps[0].account()
        assert apps[0].stop() == 0, apps[0].account()
        if target.nullbroker is not None:
            kept, written = changelog_records(target.bootstrap, f"{app_id}-counts-changelog")
            assert kept < written, f"the ring kept all {written} records: nothing was cleaned"
        apps.append(instance("second"))  # a state directory of its own: it restores all
        assert until(lambda: apps[1].running_tasks() == TASKS, apps[1:]), apps[1].account()
        assert sum(apps[1].restored().values()) > 0, apps[1].account()
        produce(target.bootstrap, source, second)

        def all_counted() -> bool:
            output.read(0.2)
            return output.latest == expected

        until(all_counted, apps[1:])
        assert apps[1].stop() == 0, apps[1].account()
    finally:
        output.close()
        for app in apps:
            app.kill()
    assert final_counts(target.bootstrap, sink, "at_least_once") == expected


def changelog_records(bootstrap: str, topic: str) -> tuple[int, int]:
    """How many records reading `topic` from its start gives, and how many were written
    to it (its log end offsets)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "enable.partition.eof": True}
    )
    try:
        written = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
                      for p in range(PARTITIONS))  # fmt: skip
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        kept, ended = 0, set()
        deadline = time.monotonic() + DEADLINE_S
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.2):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                elif error is None:
                    kept += 1
        return kept, written
    finally:
        consumer.close()
