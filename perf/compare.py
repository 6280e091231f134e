"""nullbroker against Apache Kafka 4.4.0, librdkafka's mock cluster, franz-go's kfake and the
floor, side by side, in one command.

Starts the brokers, each in a process of its own on 127.0.0.1 (nullbroker with
`python -m nullbroker serve`, the mock with `python -m perf.mock_cluster`, kfake with
perf/kfake_host, built by scripts/ensure-kfake, Kafka with perf.kafka_broker: one KRaft
node, broker and controller in one JVM with `-Xmx1g`, its log folder in the run's
temporary folder on local disk, 4 partitions per auto-created topic, Kafka's defaults
otherwise: no fsync per message, every record kept; and the floor with perf/floor/floor.c,
built by scripts/ensure-floor), then runs the same workloads against each,
a load-generator process per step, the brokers taking turns to go first at each step so
that noise on the machine hits them all:

0. broker-warmup: --broker-warmup-records sent to each broker, unthrottled, into a topic of
   its own, and not measured: a JVM (Kafka's) compiles its hot paths in its first seconds
   of traffic, and the first steps would otherwise pay for that;
1. produce: perf.producer_perf (kafka-producer-perf-test's twin) at each --rates target
   (records/s; -1 is unlimited), 1 KiB records, acks=all, idempotent, batch.size=16384 and
   linger.ms=5 (the Java producer's defaults), into one topic per broker, --repeats times.
   The table takes the steady-state figures (--warmup-records: the first 10 % of a step's
   records, which wait out the client's connecting, are left out; the JSON has both);
   then one batch a request: the same producer, unthrottled, --one-batch-records a step,
   with librdkafka's sticky partitioner held on one partition for the whole step, so that
   every Produce request carries a single batch; its warm-up is at least what the
   producer's queue holds, since librdkafka spreads the records it queued before it knew
   the partitions (a step with more records outside its partition than that is marked);
2. consume: --consume-topics topics filled once on each broker, then read from the start
   by perf.consumer_perf --assign, --repeats times. The mock keeps only about the last
   5 MiB of each partition, so the consumers read as many records as it still holds;
3. java-produce and java-consume: Apache Kafka's own kafka-producer-perf-test (unthrottled,
   the same properties as step 1) and kafka-consumer-perf-test (in a group, from the start
   of what the producer sent), --java-records records a step, --repeats times, against
   nullbroker, kfake and Kafka (the mock does not work with the Java 4 client). Needs Kafka's
   tools (scripts/ensure-kafka-tools, run by make test and make kafka-tools), which Kafka's
   broker needs too.

The floor answers producers only, from recorded answers and one pre-encoded answer per
Produce: it takes part in the produce steps at every rate and in kafka-producer-perf-test's,
each sending to the one topic its recorded Metadata names, and its CPU per GB is the least
a broker can spend on them (the kernel's part, the wire's). It counts no records: its steps
count the producer's acknowledged records.

Every step records the broker's CPU time (/proc/PID/stat, user+system) and peak RSS, the
client's own CPU time, and the CPU that other processes took from the machine meanwhile;
RSS and CPU of every broker are sampled every --sample-interval seconds for the whole run.
Every broker's counts are checked against the clients': each step's records against the
growth of the topic's log-end offsets (on the floor, against the producer's
acknowledgements), the consumers' records against what the brokers hold, and nullbroker's
shutdown summary against everything it was sent.

Writes, in --results-dir, NAME.json (settings, machine, command, every step's raw numbers
and samples, medians), NAME.md (tables like Tansu's), NAME-{throughput,latency,rss,cpu}.png,
and prints the ratios of nullbroker to each other broker. A `limit` column tells which rows
were bound by the client rather than the broker: on a 2-core machine the load generator and
the brokers share the cores.

The comparison committed as perf/results/2026-11-26-kafka (the four brokers, four rates;
7-12 minutes on 2 cores in four runs; other load on the machine shows in the `other cores`
column); every default (seven rates, 28 consumed topics) takes longer:

    .venv/bin/python -m perf.compare --name 2026-11-26-kafka --rates 10000 50000 100000 -1 \\
        --repeats 3 --consume-topics 8

A quick look, against Kafka alone (about a minute):

    .venv/bin/python -m perf.compare --name quick --brokers nullbroker kafka \\
        --rates 10000 100000 -1 --records-per-step 50000 --repeats 1 --consume-topics 4

Two of the brokers, without the Java tools:

    .venv/bin/python -m perf.compare --name mock-only --brokers nullbroker mock --java-records 0

nullbroker against the floor alone, unthrottled, librdkafka's producer and Java's, 1 GB a
step (perf/README's CPU targets):

    .venv/bin/python -m perf.compare --name floor --brokers nullbroker floor --rates -1 \\
        --records-per-step 1000000 --one-batch-records 0 --consume-topics 0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nullbroker.app.launcher import RunningBroker
from perf import java_perf, kafka_broker, plots, report_md
from perf.compare_brokers import (
    ALL_BROKERS,
    FLOOR,
    INGEST_ONLY,
    JAVA_BROKERS,
    KAFKA,
    KFAKE,
    MOCK,
    MOCK_PARTITIONS,
    NULLBROKER,
    ApacheKafka,
    Floor,
    KFake,
    MockCluster,
    Offsets,
    Peer,
    build_floor,
    build_kfake,
    start_nullbroker,
)
from perf.compare_summary import derive, ratio_lines, ratios, summarise
from perf.machine import REPO_ROOT, loadavg, machine_info
from perf.proc_sampler import ProcSampler, cpu_seconds, machine_busy_seconds, peak_rss_kib, rss_kib
from perf.producer_perf import JAVA_PRODUCER_DEFAULTS

DEFAULT_RATES = (10_000, 20_000, 50_000, 100_000, 200_000, 400_000, -1)
PRODUCE_TOPIC = "compare-produce"
BROKER_WARMUP_TOPIC = "compare-broker-warmup"
ONE_BATCH_TOPIC = "compare-one-batch"
JAVA_TOPIC = "compare-java"
CONSUME_PHASES = ("consume", "java-consume")
CONSUME_TOPIC = "compare-consume-{index}"
RECORD_SIZE = 1024
PRODUCER_PROPS = ("acks=all", "enable.idempotence=true", "batch.size=16384", "linger.ms=5")
# A keyless record goes to a random partition instead of the producer's sticky one, so the
# fill spreads evenly and no partition passes the mock's 5 MiB limit before the others.
FILL_PROPS = ("sticky.partitioning.linger.ms=0",)
# librdkafka picks a new sticky partition only after this long (not when a batch fills, as
# Java's producer does): 15 minutes keeps every record of a step on one partition, so each
# Produce request carries one batch, the smallest request a producer sends at full rate.
ONE_BATCH_PROPS = ("sticky.partitioning.linger.ms=900000",)
PRODUCE_PROPS = {
    "produce": PRODUCER_PROPS,
    "one-batch": (*PRODUCER_PROPS, *ONE_BATCH_PROPS),
    "fill": (*PRODUCER_PROPS, *FILL_PROPS),
    "broker-warmup": PRODUCER_PROPS,
}
"""The producer's properties in each phase that produces."""
MEASURED_PRODUCE_PHASES = ("produce", "one-batch")
QUEUE_KIB = int(JAVA_PRODUCER_DEFAULTS["queue.buffering.max.kbytes"])
"""The load generator's queue (buffer.memory's twin): what it can hold before it sends."""
WARMUP_SHARE = 10
"""1/10 of a produce step's records are its warm-up, left out of the steady-state figures:
librdkafka queues records while it connects and obtains a producer id, so the first ones
wait out the client's start-up, whatever the broker."""
CONSUMER_IDLE_TIMEOUT_MS = 10_000
STEP_TIMEOUT_BASE_S = 120.0
STEP_TIMEOUT_SLOWEST_RATE = 5_000
# Runs write under the checkout's out/ (git ignores it); results worth keeping are written
# to perf/results with --results-dir and committed.
RESULTS_DIR = Path(__file__).resolve().parent.parent / "out"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class StepFailed(RuntimeError):
    """A load generator failed or a broker miscounted: the run stops."""


@dataclass(frozen=True, slots=True)
class Settings:
    name: str
    rates: tuple[float, ...]
    records_per_step: int
    max_step_seconds: float
    repeats: int
    record_size: int
    partitions: int
    consume_topics: int
    consume_records_per_topic: int
    sample_interval: float
    brokers: tuple[str, ...] = (NULLBROKER, MOCK)
    java_records: int = 0
    """Records per Java perf-tool step; 0: no Java steps."""
    one_batch_records: int = 0
    """Records per one-batch-a-request step; 0: no such steps."""
    broker_warmup_records: int = 0
    """Records each broker is sent before the measured steps; 0: none."""

    @property
    def java_brokers(self) -> tuple[str, ...]:
        if self.java_records <= 0:
            return ()
        return tuple(name for name in self.brokers if name in JAVA_BROKERS)

    @property
    def counting_brokers(self) -> tuple[str, ...]:
        """The brokers with offsets to count by and records to read back: all but the
        floor."""
        return tuple(name for name in self.brokers if name not in INGEST_ONLY)

    def records_for(self, target: float) -> int:
        """Records in a produce step: --records-per-step, or fewer when the target rate
        would take longer than --max-step-seconds to send them."""
        if target <= 0:
            return self.records_per_step
        return max(1, min(self.records_per_step, int(target * self.max_step_seconds)))


class Comparison:
    """The run: the brokers, the sampler, and every step's record."""

    def __init__(self, settings: Settings, brokers: dict[str, Peer], workdir: Path) -> None:
        self.settings = settings
        self.brokers = brokers
        self.offsets = {
            name: Offsets(brokers[name].bootstrap) for name in settings.counting_brokers
        }
        self.workdir = workdir
        self.cores = os.cpu_count() or 1
        self.sampler = ProcSampler(settings.sample_interval)
        for name, broker in brokers.items():
            self.sampler.watch(name, broker.pid)
        self.steps: list[dict[str, Any]] = []
        rates, repeats = len(settings.rates), settings.repeats
        one_batch = repeats if settings.one_batch_records > 0 else 0
        consume = settings.consume_topics + repeats if settings.consume_topics > 0 else 0
        warmup = 1 if settings.broker_warmup_records > 0 else 0
        java_consumers = [name for name in settings.java_brokers if name not in INGEST_ONLY]
        self.total_steps = (
            len(brokers) * rates * repeats
            + len(self.offsets) * (warmup + one_batch + consume)
            + (len(settings.java_brokers) + len(java_consumers)) * repeats
        )
        self.consumed_records = 0

    def close(self) -> None:
        """Drop the offset clients before the brokers stop, so they log no reconnects."""
        self.offsets.clear()

    def order(self, turn: int, names: Sequence[str] | None = None) -> list[str]:
        """The brokers in turn: which goes first rotates from one step to the next."""
        names = list(self.brokers if names is None else names)
        if not names:  # no Java steps (--java-records 0)
            return []
        shift = turn % len(names)
        return names[shift:] + names[:shift]

    def topic(self, name: str, topic: str) -> str:
        """The topic broker `name` is sent `topic`'s records in: the floor's own topic."""
        broker = self.brokers[name]
        return broker.topic if isinstance(broker, Floor) else topic

    def broker_warmup_phase(self) -> None:
        """--broker-warmup-records to each broker, unmeasured (left out of every table)."""
        records = self.settings.broker_warmup_records
        if records <= 0:
            return
        for name in self.order(0):
            if name not in self.offsets:
                continue  # the floor: nothing in it to warm up, and no topic but its own
            self.offsets[name].log_end(BROKER_WARMUP_TOPIC)  # created now, as below
            self.produce(name, "broker-warmup", 0, -1, BROKER_WARMUP_TOPIC, records)

    def produce_phase(self) -> None:
        for offsets in self.offsets.values():
            # Created now, by a Metadata request, so no step pays for creating it.
            offsets.log_end(PRODUCE_TOPIC)
        turn = 0
        for repeat in range(self.settings.repeats):
            for target in self.settings.rates:
                records = self.settings.records_for(target)
                for name in self.order(turn):
                    self.produce(name, "produce", repeat, target, PRODUCE_TOPIC, records)
                turn += 1

    def one_batch_phase(self) -> None:
        """Unthrottled steps whose records all go to one partition: one batch a request."""
        records = self.settings.one_batch_records
        if records <= 0:
            return
        for offsets in self.offsets.values():
            offsets.log_end(ONE_BATCH_TOPIC)  # created now, as in produce_phase
        for repeat in range(self.settings.repeats):
            for name in self.order(repeat, self.settings.counting_brokers):
                self.produce(name, "one-batch", repeat, -1, ONE_BATCH_TOPIC, records)

    def consume_phase(self) -> None:
        if self.settings.consume_topics <= 0:
            return
        topics = [CONSUME_TOPIC.format(index=i) for i in range(self.settings.consume_topics)]
        for name in self.order(0, self.settings.counting_brokers):
            for topic in topics:
                self.offsets[name].log_end(topic)
                self.produce(name, "fill", 0, -1, topic, self.settings.consume_records_per_topic)
        held = {name: offsets.retained(topics) for name, offsets in self.offsets.items()}
        # The same count from each: all the mock still holds (nullbroker holds everything).
        self.consumed_records = min(held.values())
        if self.consumed_records <= 0:
            raise StepFailed(f"nothing to consume: the brokers hold {held} records")
        for repeat in range(self.settings.repeats):
            for name in self.order(repeat, self.settings.counting_brokers):
                self.consume(name, repeat, topics, held[name])

    def java_phase(self) -> None:
        """Kafka's own perf tools against the brokers the Java client works with: each
        producer step adds --java-records to one topic, kept whole, then each consumer step
        reads that many of it from the start."""
        names = self.settings.java_brokers
        consumers = [name for name in names if name in self.offsets]
        for name in consumers:
            # Kept whole (kfake keeps only the last 10 MiB of other topics' partitions), and
            # created now, so no step pays for creating it.
            self.offsets[name].create_keeping_all(JAVA_TOPIC, self.settings.partitions)
        for repeat in range(self.settings.repeats):
            for name in self.order(repeat, names):
                self.java_produce(name, repeat)
        for repeat in range(self.settings.repeats):
            for name in self.order(repeat, consumers):
                self.java_consume(name, repeat)

    def java_produce(self, name: str, repeat: int) -> None:
        records, size = self.settings.java_records, self.settings.record_size
        topic = self.topic(name, JAVA_TOPIC)
        before = self.log_end(name, topic)
        command = java_perf.producer_command(
            self.brokers[name].bootstrap, topic, records, size, PRODUCER_PROPS
        )
        step = self.run_client(
            name, "java-produce", repeat, -1, topic, records, command,
            read=lambda output: java_perf.parse_producer(output, size),
        )  # fmt: skip
        self.count(step, before, self.log_end(name, topic))
        self.finish(step)

    def log_end(self, name: str, topic: str) -> dict[int, int] | None:
        """The log-end offset of each of the topic's partitions on broker `name`; None for
        the floor, which keeps none."""
        offsets = self.offsets.get(name)
        return None if offsets is None else offsets.offsets([topic], latest=True)[topic]

    def count(
        self, step: dict[str, Any], before: dict[int, int] | None, after: dict[int, int] | None
    ) -> None:
        """Check a producing step's records: the growth of the topic's log-end offsets over
        the step against what the client sent; on the floor, which keeps no offsets, what
        the client had acknowledged (every record, none failed)."""
        records, client = step["records"], step["client"]
        if before is None or after is None:
            step["broker_counted"] = None
            step["count_ok"] = client["records"] == records and not client.get("failed")
            return
        counted = sum(after.values()) - sum(before.values())
        step["broker_counted"] = counted
        step["count_ok"] = counted == records == client["records"]
        grown = {partition: end - before.get(partition, 0) for partition, end in after.items()}
        step["partition_records"] = {str(p): grown[p] for p in sorted(grown)}

    def java_consume(self, name: str, repeat: int) -> None:
        records = self.settings.java_records
        command = java_perf.consumer_command(self.brokers[name].bootstrap, JAVA_TOPIC, records)
        step = self.run_client(
            name, "java-consume", repeat, None, JAVA_TOPIC, records, command,
            read=java_perf.parse_consumer,
        )  # fmt: skip
        step["broker_counted"] = self.offsets[name].retained([JAVA_TOPIC])
        # It stops at --messages, counting every record of its last poll.
        step["count_ok"] = step["client"]["records"] >= records and not step["client"]["timed_out"]
        self.finish(step)

    def produce(
        self,
        name: str,
        phase: str,
        repeat: int,
        target: float,
        topic: str,
        records: int,
    ) -> None:
        """Send `records` to `topic` on broker `name`; a fill spreads them over the
        partitions, a one-batch step keeps them on one, and a measured step leaves its
        warm-up (`warmup_records`) out of its steady state. The floor is sent them in its
        own topic."""
        topic = self.topic(name, topic)
        props = PRODUCE_PROPS[phase]
        args = [
            "--topic", topic,
            "--num-records", str(records),
            "--record-size", str(self.settings.record_size),
            "--throughput", f"{target:g}",
            "--command-property", *props,
        ]  # fmt: skip
        warmup = warmup_records(phase, records, self.settings.record_size)
        if warmup:
            args += ["--warmup-records", str(warmup)]
        before = self.log_end(name, topic)
        step = self.run_client(
            name, phase, repeat, target, topic, records, self.python_tool(name, "producer", args)
        )
        self.count(step, before, self.log_end(name, topic))
        if phase == "one-batch":
            # Records past the warm-up on other partitions went in requests of several
            # batches: the step still counts, and the table says it (a step so short that
            # the producer queued most of it before it knew the partitions, say).
            grown = step["partition_records"].values()
            step["spread_records"] = step["broker_counted"] - max(grown, default=0)
            step["one_batch_ok"] = step["spread_records"] <= warmup
        self.finish(step)
        if not step.get("one_batch_ok", True):
            print(f"  {one_batch_warning(step, warmup)}", flush=True)

    def consume(self, name: str, repeat: int, topics: list[str], held: int) -> None:
        records = self.consumed_records
        args = [
            "--topic", ",".join(topics),
            "--num-records", str(records),
            "--assign",
            "--timeout", str(CONSUMER_IDLE_TIMEOUT_MS),
        ]  # fmt: skip
        command = self.python_tool(name, "consumer", args)
        step = self.run_client(name, "consume", repeat, None, ",".join(topics), records, command)
        step["broker_counted"] = held
        read = step["client"]["records"]
        # The consumer stops at --num-records, counting every record of its last batch.
        step["count_ok"] = read >= records and not step["client"]["timed_out"]
        self.finish(step)

    def python_tool(self, name: str, kind: str, args: list[str]) -> list[str]:
        """perf.producer_perf or perf.consumer_perf against broker `name`; run_client adds
        where it writes its JSON."""
        return [
            sys.executable, "-m", f"perf.{kind}_perf",
            "--bootstrap-server", self.brokers[name].bootstrap,
            *args,
        ]  # fmt: skip

    def run_client(
        self,
        name: str,
        phase: str,
        repeat: int,
        target: float | None,
        topic: str,
        records: int,
        command: list[str],
        read: Callable[[str], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """One load-generator process against broker `name`, measured from its start to its
        exit. Without `read` it is one of perf's Python tools, which writes its figures to
        the --json file added here; with it, `read(output)` finds them in what the tool
        printed."""
        broker = self.brokers[name]
        index = len(self.steps)
        out = self.workdir / f"{index:03d}-{phase}-{name}.json"
        log = self.workdir / f"{index:03d}-{phase}-{name}.log"
        if read is None:
            command = [*command, "--json", str(out)]
        rate = target if target and target > 0 else STEP_TIMEOUT_SLOWEST_RATE
        timeout = STEP_TIMEOUT_BASE_S + 10 * records / rate
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy, cpu, start = machine_busy_seconds(), cpu_seconds(broker.pid), self.sampler.now()
        with open(log, "wb") as log_file:
            client = subprocess.Popen(
                command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
            )
            try:
                code = client.wait(timeout)
            except subprocess.TimeoutExpired:
                client.kill()
                client.wait()
                raise StepFailed(
                    f"{phase} against {name} took over {timeout:.0f} s: "
                    f"{log.read_text(errors='replace')[-2000:]}"
                ) from None
        end, cpu_end, busy_end = self.sampler.now(), cpu_seconds(broker.pid), machine_busy_seconds()
        children_end = resource.getrusage(resource.RUSAGE_CHILDREN)
        client_cpu = (children_end.ru_utime + children_end.ru_stime) - (
            children.ru_utime + children.ru_stime
        )
        output = log.read_text(errors="replace")
        if code != 0 or (read is None and not out.exists()):
            raise StepFailed(f"{phase} against {name} exited with {code}: {output[-2000:]}")
        if read is None:
            client = json.loads(out.read_text())
        else:
            try:
                client = read(output)
            except ValueError as error:
                raise StepFailed(f"{phase} against {name}: {error}: {output[-2000:]}") from None
            # A JVM has no thread of ours to time: its whole process, start-up included.
            client["process_cpu_s"] = client_cpu
            client["process_wall_s"] = end - start
        return {
            "phase": phase,
            "broker": name,
            "repeat": repeat,
            "target": target,
            "topic": topic,
            "records": records,
            "window": {"start_s": round(start, 3), "end_s": round(end, 3)},
            "wall_s": end - start,
            "broker_cpu_s": cpu_end - cpu,
            "broker_peak_rss_kib": self.sampler.peak_rss_kib(name, start, end),
            "machine_busy_s": busy_end - busy,
            # Only this client is reaped between the two readings: the brokers still run.
            "client_total_cpu_s": client_cpu,
            "client_command": shown_command(command),
            "client": client,
        }

    def finish(self, step: dict[str, Any]) -> None:
        step["figures"] = derive(step, self.cores)
        self.steps.append(step)
        print(progress_line(len(self.steps), self.total_steps, step), flush=True)
        if not step["count_ok"]:
            raise StepFailed(
                f"{step['broker']} {step['phase']}: the client sent or read "
                f"{step['client']['records']} of {step['records']} records and the broker "
                f"counted {step['broker_counted']}"
            )


def warmup_records(phase: str, records: int, record_size: int) -> int:
    """The records a produce step leaves out of its steady state: none in a fill, a tenth
    of a measured step, and in a one-batch step at least what librdkafka's queue holds
    (at most half the step). While it waits for the topic's metadata and a producer id the
    producer queues records, and those queued before it knows the partition count are
    spread over every partition, sticky or not: the warm-up keeps them out of a steady
    state of one batch a request."""
    if phase not in MEASURED_PRODUCE_PHASES or records < WARMUP_SHARE:
        return 0
    share = records // WARMUP_SHARE
    if phase == "one-batch":
        queued = QUEUE_KIB * 1024 // record_size
        return max(share, min(queued, records // 2))
    return share


def one_batch_warning(step: dict[str, Any], warmup: int) -> str:
    return (
        f"not one batch a request throughout: {step['spread_records']:,} of "
        f"{step['records']:,} records reached other partitions, more than the warm-up of "
        f"{warmup:,}"
    )


def shown_command(command: list[str]) -> str:
    """The client's command as a user would type it in the checkout."""
    if command[0] == sys.executable:
        return shlex.join(["python", *command[1:]])
    program = Path(command[0])
    if program.is_relative_to(REPO_ROOT):
        return shlex.join([str(program.relative_to(REPO_ROOT)), *command[1:]])
    return shlex.join(command)


def progress_line(number: int, total: int, step: dict[str, Any]) -> str:
    figures = step["figures"]
    target = report_md.rate_label(step["target"])
    latency = f", p99 {figures['p99_ms']:.2f} ms" if figures.get("p99_ms") is not None else ""
    per_gb = figures["broker_cpu_s_per_gb"]
    return (
        f"[{number:>3}/{total}] {step['phase']:<12} {step['broker']:<10} {target:>9}: "
        f"{figures['records_per_sec']:>9,.0f} records/s{latency}, broker "
        f"{figures['broker_cores'] or 0:.2f} cores {per_gb or 0:.2f} s/GB "
        f"{figures['broker_peak_rss_mib']:.1f} MiB, client {figures['client_cores'] or 0:.2f} "
        f"cores ({figures['client_thread_cores'] or 0:.2f} Python), others "
        f"{figures['other_cores'] or 0:.2f} cores: {figures['limit']}"
    )


def nullbroker_checks(summary: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """nullbroker's shutdown summary against what its clients sent and read, per topic."""
    sent: dict[str, int] = {}
    for step in steps:
        if step["broker"] == NULLBROKER and step["phase"] not in CONSUME_PHASES:
            sent[step["topic"]] = sent.get(step["topic"], 0) + step["client"]["records"]
    counted = {topic: entry["records"] for topic, entry in summary["produced"]["topics"].items()}
    read = sum(
        step["client"]["records"]
        for step in steps
        if step["broker"] == NULLBROKER and step["phase"] in CONSUME_PHASES
    )
    return {
        "produced_sent": sent,
        "produced_counted": counted,
        "produced_ok": counted == sent,
        "fetched_records": summary["fetched"]["records"],
        "consumer_read": read,
        # Consumers prefetch: the broker may have served a little more than they used.
        "fetched_ok": summary["fetched"]["records"] >= read,
    }


def start_broker(
    name: str, settings: Settings, workdir: Path, kfake: Path | None, floor: Path | None
) -> Peer:
    if name == NULLBROKER:
        return start_nullbroker(workdir, settings.record_size)
    if name == MOCK:
        return MockCluster(workdir)
    if name == FLOOR:
        assert floor is not None
        return Floor(workdir, floor)
    if name == KAFKA:
        return ApacheKafka(workdir)
    assert name == KFAKE and kfake is not None
    return KFake(workdir, kfake)


def describe(broker: Peer) -> dict[str, Any]:
    """What the result records of a broker as it starts: where, how big idle, and for the
    peers what they are (the size of the mock's Python host, kfake's version, Kafka's
    version, heap and settings)."""
    info: dict[str, Any] = {"bootstrap": broker.bootstrap, "idle_rss_kib": rss_kib(broker.pid)}
    if isinstance(broker, MockCluster):
        info["host_rss_kib"] = broker.host_rss_kib
    if isinstance(broker, KFake):
        info["version"] = broker.version
    if isinstance(broker, Floor):
        info["topic"] = broker.topic
    if isinstance(broker, ApacheKafka):
        info["version"] = broker.version
        info["heap"] = broker.heap
        info["child_processes"] = broker.child_processes()
        info["server_properties"] = broker.server_properties
    return info


def run(
    settings: Settings,
    results_dir: Path,
    command: str,
    kfake: Path | None = None,
    floor: Path | None = None,
) -> dict[str, Any]:
    """Start the brokers, run every step, stop them, and write the result files."""
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="perf-compare-") as work:
        workdir = Path(work)
        started: list[Peer] = []
        try:
            for name in settings.brokers:
                started.append(start_broker(name, settings, workdir, kfake, floor))
            brokers = {broker.name: broker for broker in started}
            nullbroker = brokers[NULLBROKER]
            assert isinstance(nullbroker, RunningBroker)
            brokers_info = {name: describe(broker) for name, broker in brokers.items()}
            for name, broker in brokers.items():
                print(f"{name} listening on {broker.bootstrap}", flush=True)
            comparison = Comparison(settings, brokers, workdir)
            comparison.sampler.start()
            try:
                comparison.broker_warmup_phase()
                comparison.produce_phase()
                comparison.one_batch_phase()
                comparison.consume_phase()
                comparison.java_phase()
            finally:
                comparison.sampler.stop()
                comparison.close()
            for name, broker in brokers.items():
                brokers_info[name]["peak_rss_kib"] = peak_rss_kib(broker.pid)
        except BaseException:
            for broker in started:
                broker.end()
                print(f"{broker.name} stderr: {broker.stderr_tail()}", file=sys.stderr)
            raise
        for broker in started:
            brokers_info[broker.name]["exit_code"] = broker.end()
            if isinstance(broker, Floor):
                brokers_info[broker.name]["served"] = broker.served()
                brokers_info[broker.name]["unanswered"] = broker.unanswered()
        nullbroker_summary = nullbroker.summary()
    machine["loadavg_end"] = loadavg()
    steps = comparison.steps
    result: dict[str, Any] = {
        "name": settings.name,
        "command": command,
        "settings": asdict(settings),
        "machine": machine,
        "brokers": brokers_info,
        "checks": {"nullbroker": nullbroker_checks(nullbroker_summary, steps)},
        "steps": steps,
        "samples": {
            name: [asdict(sample) for sample in samples]
            for name, samples in comparison.sampler.samples.items()
        },
        "nullbroker_summary": nullbroker_summary,
    }
    write_results(result, results_dir)
    return result


def write_results(result: dict[str, Any], results_dir: Path) -> None:
    """Derive every figure from the raw steps, then write NAME.json, NAME.md and the plots:
    the same for a fresh run and for --render-only on a saved one."""
    cores = result["machine"]["cores"]
    for step in result["steps"]:
        step["figures"] = derive(step, cores)
    rows = summarise(result["steps"], cores)
    peaks = {name: info["peak_rss_kib"] for name, info in result["brokers"].items()}
    result["summary"] = rows
    result["ratios"] = ratios(rows, peaks)
    name = result["name"]
    results_dir.mkdir(parents=True, exist_ok=True)
    pictures = plots.write_all(result, results_dir, name)
    result["plots"] = list(pictures)
    (results_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (results_dir / f"{name}.md").write_text(report_md.render(result, pictures))


def parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    command = argparse.ArgumentParser(
        prog="python -m perf.compare",
        description=doc.split("\n\n")[0],
        epilog="\n\n".join(doc.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--name", required=True, help="names the result files: NAME.json, NAME.md, NAME-*.png"
    )
    command.add_argument(
        "--rates",
        type=float,
        nargs="+",
        default=list(DEFAULT_RATES),
        metavar="RATE",
        help="target rates in records/s, -1 for unlimited "
        f"(default {' '.join(f'{r:g}' for r in DEFAULT_RATES)})",
    )
    command.add_argument(
        "--records-per-step",
        type=int,
        default=200_000,
        metavar="N",
        help="records per produce step (default 200000)",
    )
    command.add_argument(
        "--max-step-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="fewer records at low rates, so a step lasts about S seconds at most (default 10)",
    )
    command.add_argument("--repeats", type=int, default=3, metavar="N", help="(default 3)")
    command.add_argument(
        "--consume-topics",
        type=int,
        default=28,
        metavar="N",
        help="topics the consumers read, 0 for no consuming steps (default 28: about 0.5 GB, "
        "as the mock holds about 20 MiB per topic)",
    )
    command.add_argument(
        "--consume-records-per-topic",
        type=int,
        default=18_000,
        metavar="N",
        help="records filled into each of them (default 18000: below the mock's "
        "5 MiB per partition)",
    )
    command.add_argument(
        "--brokers",
        nargs="+",
        choices=ALL_BROKERS,
        default=list(ALL_BROKERS),
        metavar="BROKER",
        help="which to run, nullbroker always among them: nullbroker, mock (librdkafka's), "
        "kfake (franz-go's, built by scripts/ensure-kfake on first use with go), kafka "
        "(Apache Kafka 4.4.0 from scripts/ensure-kafka-tools' jars: one KRaft node, -Xmx1g, "
        "its log on local disk), floor (recorded answers and nothing else, producing steps "
        "only; built by scripts/ensure-floor on first use with a C compiler) "
        f"(default {' '.join(ALL_BROKERS)})",
    )
    command.add_argument(
        "--java-records",
        type=int,
        metavar="N",
        help="records per step of Kafka's Java perf tools, against nullbroker, kfake, kafka "
        "and the floor (its producer only); 0 "
        "runs none (default: --records-per-step; needs scripts/ensure-kafka-tools)",
    )
    command.add_argument(
        "--one-batch-records",
        type=int,
        metavar="N",
        help="records per step producing one batch a request (every record of a step to "
        "one partition), unthrottled, --repeats times; 0 runs none (default: "
        "--records-per-step)",
    )
    command.add_argument(
        "--broker-warmup-records",
        type=int,
        metavar="N",
        help="records each broker is sent, unthrottled and unmeasured, before the first step "
        "(Kafka's JVM compiles its hot paths meanwhile); 0 sends none (default: "
        "--records-per-step)",
    )
    command.add_argument(
        "--sample-interval",
        type=float,
        default=0.1,
        metavar="S",
        help="seconds between RSS and CPU samples of the brokers (default 0.1)",
    )
    command.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: derive the figures, table and plots again from the raw steps in "
        "an existing DIR/NAME.json",
    )
    command.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        metavar="DIR",
        help="where the result files go (default out/, which git ignores; perf/results "
        "holds the committed ones)",
    )
    return command


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = command.parse_args(arguments)
    if not NAME.match(args.name):
        command.error("--name: letters, digits, '.', '_' and '-' only")
    if args.render_only:
        saved = args.results_dir / f"{args.name}.json"
        if not saved.is_file():
            command.error(f"--render-only: no {saved}")
        result = json.loads(saved.read_text())
        write_results(result, args.results_dir)
        report(result, args.results_dir)
        return 0
    if any(rate <= 0 and rate != -1 for rate in args.rates):
        command.error("--rates: positive records/s, or -1 for unlimited")
    positive = ("records_per_step", "max_step_seconds", "repeats", "consume_records_per_topic")
    if any(getattr(args, key) <= 0 for key in positive):
        command.error("counts, seconds and repeats must be positive")
    if args.consume_topics < 0:
        command.error("--consume-topics: 0 for none, or a positive count")
    if args.sample_interval <= 0:
        command.error("--sample-interval must be positive")
    brokers = tuple(name for name in ALL_BROKERS if name in args.brokers)
    if NULLBROKER not in brokers or len(brokers) < 2:
        command.error("--brokers: nullbroker and at least one other")
    java_records = args.records_per_step if args.java_records is None else args.java_records
    if java_records < 0:
        command.error("--java-records: 0 for none, or a positive count")
    if java_records and (reason := java_perf.missing()):
        command.error(f"Kafka's Java tools cannot run: {reason}; --java-records 0 runs without")
    one_batch = args.records_per_step if args.one_batch_records is None else args.one_batch_records
    if one_batch < 0:
        command.error("--one-batch-records: 0 for none, or a positive count")
    broker_warmup = (
        args.records_per_step if args.broker_warmup_records is None else args.broker_warmup_records
    )
    if broker_warmup < 0:
        command.error("--broker-warmup-records: 0 for none, or a positive count")
    if KAFKA in brokers and (reason := kafka_broker.missing()):
        command.error(
            f"Kafka cannot be started: {reason}; "
            f"--brokers {' '.join(b for b in brokers if b != KAFKA)} runs without it"
        )
    kfake = None
    if KFAKE in brokers and (kfake := build_kfake()) is None:
        command.error(
            "kfake could not be built (scripts/ensure-kfake said why above); "
            f"--brokers {' '.join(b for b in brokers if b != KFAKE)} runs without it"
        )
    floor = None
    if FLOOR in brokers and (floor := build_floor()) is None:
        command.error(
            "the floor could not be built (scripts/ensure-floor said why above); "
            f"--brokers {' '.join(b for b in brokers if b != FLOOR)} runs without it"
        )
    settings = Settings(
        name=args.name,
        rates=tuple(dict.fromkeys(args.rates)),
        records_per_step=args.records_per_step,
        max_step_seconds=args.max_step_seconds,
        repeats=args.repeats,
        record_size=RECORD_SIZE,
        partitions=MOCK_PARTITIONS,
        consume_topics=args.consume_topics,
        consume_records_per_topic=args.consume_records_per_topic,
        sample_interval=args.sample_interval,
        brokers=brokers,
        java_records=java_records,
        one_batch_records=one_batch,
        broker_warmup_records=broker_warmup,
    )
    run_command = f"python -m perf.compare {shlex.join(arguments)}"
    try:
        result = run(settings, args.results_dir, run_command, kfake, floor)
    except StepFailed as error:
        print(f"compare: {error}", file=sys.stderr)
        return 1
    print()
    report(result, args.results_dir)
    return 0


def report(result: dict[str, Any], results_dir: Path) -> None:
    """The ratios, the client-bound rows and the files written, on stdout."""
    print("\n".join(ratio_lines(result["ratios"])))
    print(f"client-bound rows: {report_md.client_bound(result['summary'])}")
    for file in (f"{result['name']}.json", f"{result['name']}.md", *result["plots"]):
        print(f"wrote {results_dir / file}")


if __name__ == "__main__":
    sys.exit(main())
