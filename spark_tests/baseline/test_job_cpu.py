"""The job commands' --cpu figures say "not measured" for a broker they did not start, and
count a started broker the run did not use apart from the one it did."""

from __future__ import annotations

import json
import subprocess
import sys

from spark_tests.jobs import cpu

# Spends a tenth of a second of CPU, says so, then waits for its stdin to close. Its command
# line names kafka.Kafka, as Kafka's JVM's does.
BUSY_THEN_WAIT = """
import sys, time
while time.process_time() < 0.1:
    pass
print("busy", flush=True)
sys.stdin.read()
"""


FIGURES_OF_A_PROCESS_WITHOUT_A_BROKER = (
    "import json; from spark_tests.jobs import cpu; print(json.dumps(cpu.used(cpu.snapshot())))"
)


def test_a_broker_that_is_not_our_child_is_not_measured_rather_than_free() -> None:
    # Asked in a process of its own that starts no broker (one reached with --bootstrap runs
    # elsewhere): this one's children include whatever brokers the suite's fixtures keep,
    # Kafka's JVM among them.
    asked = subprocess.run(
        [sys.executable, "-c", FIGURES_OF_A_PROCESS_WITHOUT_A_BROKER],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    seconds = json.loads(asked.stdout)
    assert seconds["broker"] is None
    assert seconds["driver"] is not None and seconds["driver"] >= 0
    assert "broker not measured" in cpu.cpu_text(seconds)
    assert "driver 0." in cpu.cpu_text({"driver": 0.1, "broker": None})


def test_a_started_broker_is_the_runs_only_when_the_run_names_it() -> None:
    before = cpu.snapshot()
    kafka_like = subprocess.Popen(
        [sys.executable, "-c", BUSY_THEN_WAIT, "kafka.Kafka", "server.properties"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert kafka_like.stdout is not None and kafka_like.stdout.readline() == "busy\n"
        against_nullbroker = cpu.used(before, "nullbroker")
        against_kafka = cpu.used(before, "kafka")
        either = cpu.used(before)
    finally:
        kafka_like.communicate("", timeout=10)
    assert against_nullbroker["broker"] is None and against_nullbroker["idle_broker"] > 0
    assert against_kafka["broker"] > 0 and "idle_broker" not in against_kafka
    assert either["broker"] > 0
