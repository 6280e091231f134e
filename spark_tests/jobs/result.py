"""What a job run reports: rows, seconds, rows/s, and job-specific details."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .cpu import cpu_text
from .settings import JobSettings


@dataclass(frozen=True)
class JobResult:
    job: str
    format: str
    rows: int
    seconds: float
    record_size: int
    partitions: int
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        job: str,
        settings: JobSettings,
        rows: int,
        seconds: float,
        details: Mapping[str, Any] | None = None,
    ) -> JobResult:
        return cls(
            job,
            settings.format,
            rows,
            seconds,
            settings.record_size,
            settings.partitions,
            details or {},
        )

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        text = (
            f"{self.job} [{self.format}]: {self.rows:,} rows of {self.record_size} B over "
            f"{self.partitions} partitions in {self.seconds:.2f} s: {self.rows_per_s:,.0f} rows/s"
        )
        if "batch_ms_median" in self.details:
            text += (
                f"; {self.details['micro_batches']} micro-batches, median "
                f"{self.details['batch_ms_median']:.0f} ms, max {self.details['batch_ms_max']} ms"
            )
        if "cpu_seconds" in self.details:
            text += f"; CPU s: {cpu_text(self.details['cpu_seconds'])}"
        return text

    def as_json(self) -> str:
        return json.dumps(
            {
                "job": self.job,
                "format": self.format,
                "rows": self.rows,
                "seconds": round(self.seconds, 4),
                "rows_per_s": round(self.rows_per_s, 1),
                "record_size": self.record_size,
                "partitions": self.partitions,
                **dict(self.details),
            }
        )


def median_rows_per_s(results: Sequence[JobResult]) -> float:
    return statistics.median(result.rows_per_s for result in results)
