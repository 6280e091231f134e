"""Where a Spark job's time went, task by task, from Spark's own status store (what its
listener recorded): when each task started and how long it ran, how much of that was CPU
and garbage collection, and how busy the executors' slots were over the job. A task's run
time less its CPU time is what it waited for: the network, the broker, or a core the
machine's other processes held.

    with job_group(spark, "read-1"):
        run_the_job()
    timeline = Timeline.of(spark, "read-1", slots=2)
    print(timeline.text())
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

ALL_TASKS = 1_000_000
NANOS_PER_MS = 1_000_000


@dataclass(frozen=True)
class TaskTime:
    """One task as Spark recorded it; times in ms, `start_ms` from the first task's start."""

    stage: int
    partition: int
    executor: str
    start_ms: int
    ms: int
    run_ms: int
    cpu_ms: float
    gc_ms: int

    @property
    def wait_ms(self) -> float:
        """Running but not on a CPU: waiting for the network, the broker or a core."""
        return max(self.run_ms - self.cpu_ms, 0.0)


@dataclass(frozen=True)
class Timeline:
    """The tasks of every job of one job group, and the span from the first job's submission
    to the last one's completion."""

    tasks: list[TaskTime]
    span_ms: int
    slots: int

    @classmethod
    def of(cls, spark: SparkSession, group: str, slots: int) -> Timeline:
        context = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
        # The status store hears of a job's end through the listener bus, after the action
        # that ran it has returned: wait until the bus has delivered everything.
        context.listenerBus().waitUntilEmpty()
        store = context.statusStore()
        jobs = [
            store.job(job) for job in spark.sparkContext.statusTracker().getJobIdsForGroup(group)
        ]
        stages = sorted({stage for job in jobs for stage in scala_list(job.stageIds())})
        raw = [
            (stage, task)
            for stage in stages
            for task in scala_list(store.taskList(stage, 0, ALL_TASKS))
        ]
        first = min((task.launchTime().getTime() for _, task in raw), default=0)
        tasks = [
            _task_time(stage, task, first) for stage, task in raw if task.taskMetrics().isDefined()
        ]
        submitted = [_ms(job.submissionTime()) for job in jobs if job.submissionTime().isDefined()]
        completed = [_ms(job.completionTime()) for job in jobs if job.completionTime().isDefined()]
        span = max(completed) - min(submitted) if submitted and completed else 0
        return cls(sorted(tasks, key=lambda t: (t.stage, t.start_ms)), span, slots)

    def busy(self) -> float:
        """The share of the executors' slots running a task over the jobs' span."""
        if not self.span_ms or not self.slots:
            return 0.0
        return sum(task.ms for task in self.tasks) / (self.span_ms * self.slots)

    def summary(self) -> dict[str, Any]:
        def median(values: list[float]) -> float:
            return round(statistics.median(values), 1) if values else 0.0

        return {
            "tasks": len(self.tasks),
            "span_ms": self.span_ms,
            "slots_busy": round(self.busy(), 3),
            "task_ms_median": median([t.ms for t in self.tasks]),
            "task_cpu_ms_median": median([t.cpu_ms for t in self.tasks]),
            "task_wait_ms_median": median([t.wait_ms for t in self.tasks]),
            "task_gc_ms_median": median([t.gc_ms for t in self.tasks]),
        }

    def text(self) -> str:
        lines = [
            f"  {len(self.tasks)} tasks over {self.span_ms} ms, slots busy "
            f"{self.busy():.0%}; each: start, ms, cpu, wait, gc, executor"
        ]
        lines += [
            f"    stage {t.stage} partition {t.partition}: +{t.start_ms} ms, {t.ms} ms, cpu "
            f"{t.cpu_ms:.0f}, wait {t.wait_ms:.0f}, gc {t.gc_ms}, executor {t.executor}"
            for t in self.tasks
        ]
        return "\n".join(lines)


@contextmanager
def job_group(spark: SparkSession, group: str | None = None) -> Iterator[str]:
    """The jobs started in the block belong to `group` (a new name when none is given)."""
    name = group or f"timeline-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(name, name)
    try:
        yield name
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _task_time(stage: int, task: Any, first_ms: int) -> TaskTime:
    metrics = task.taskMetrics().get()
    return TaskTime(
        stage=stage,
        partition=task.partitionId(),
        executor=task.executorId(),
        start_ms=task.launchTime().getTime() - first_ms,
        ms=task.duration().get() if task.duration().isDefined() else 0,
        run_ms=metrics.executorRunTime(),
        cpu_ms=metrics.executorCpuTime() / NANOS_PER_MS,
        gc_ms=metrics.jvmGcTime(),
    )


def _ms(date: Any) -> int:
    """A Scala Option[java.util.Date], defined, in ms since the epoch."""
    milliseconds: int = date.get().getTime()
    return milliseconds


def scala_list(scala_seq: Any) -> list[Any]:
    """A Scala Seq reached through py4j, as a list."""
    return [scala_seq.apply(index) for index in range(scala_seq.size())]
