"""The job commands' --cpu figures say "not measured" for a broker they did not start."""

from __future__ import annotations

from spark_tests.jobs import cpu


def test_a_broker_that_is_not_our_child_is_not_measured_rather_than_free() -> None:
    # Nothing here started a broker: one reached with --bootstrap runs elsewhere.
    seconds = cpu.used(cpu.snapshot())
    assert seconds["broker"] is None
    assert seconds["driver"] is not None and seconds["driver"] >= 0
    assert "broker not measured" in cpu.cpu_text(seconds)
    assert "driver 0." in cpu.cpu_text({"driver": 0.1, "broker": None})
