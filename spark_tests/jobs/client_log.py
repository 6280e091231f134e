"""The Kafka client's own timeline inside Spark: every request each consumer sent and when its
answer came, from kafka-clients' NetworkClient at DEBUG, written by the driver's JVM and every
executor's to one file (log4j2, milliseconds), and what it says about where a reading task
waits: the Fetches the broker held, and the ListOffsets requests a task sent while its own
consumer's Fetch was still out, which wait for it (a broker answers a connection's requests
in order, as Kafka does).

    conf = client_log.session_conf(folder)      # for build_session(conf=...)
    ... run the job ...
    print(client_log.summary_text(client_log.summary(client_log.requests(folder), 500)))
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

LOG = "kafka-clients.log"
LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.bufferedIO = false
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %pid %m%n
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = debug
logger.network.additivity = false
logger.network.appenderRef.file.ref = file
"""
# NetworkClient's lines for a request sent and its answer received; both name the header.
# Client ids repeat from one executor's JVM to the next: the process id tells them apart.
LINE = re.compile(
    r"^(?P<time>\d\d:\d\d:\d\d\.\d{3}) (?P<pid>\d+) .*?(?P<what>Sending|Received) "
    r"(?P<api>[A-Z_]+) "
    r"(?:request|response).*?clientId=(?P<client>[^,]+), correlationId=(?P<correlation>\d+)"
)
HELD_SHARE = 0.8
"""A Fetch answered after this share of fetch.max.wait.ms was held at the log end."""


@dataclass(frozen=True)
class Request:
    """One request of one client (`PID/CLIENT-ID`): its API, when it was sent and answered
    (ms of the day)."""

    client: str
    api: str
    sent_ms: float
    received_ms: float

    @property
    def ms(self) -> float:
        return self.received_ms - self.sent_ms


def session_conf(folder: Path) -> dict[str, str]:
    """Spark settings that make the driver's JVM and every executor's log their Kafka
    clients' requests to folder/kafka-clients.log (a path every executor reaches: absolute,
    as their working folders are their workers')."""
    folder = folder.resolve()
    config = folder / "log4j2.properties"
    config.write_text(LOG4J.format(log=folder / LOG))
    option = f"-Dlog4j2.configurationFile=file:{config}"
    return {"spark.driver.extraJavaOptions": option, "spark.executor.extraJavaOptions": option}


def log_size(folder: Path) -> int:
    """Where the log ends now: requests(folder, since=it) are those logged from now on."""
    log = folder / LOG
    return log.stat().st_size if log.exists() else 0


def requests(folder: Path, since: int = 0) -> list[Request]:
    """The consumers' requests that were answered, in the order they were sent, from byte
    `since` of the log."""
    sent: dict[tuple[str, str], tuple[str, float]] = {}
    answered = []
    with open(folder / LOG, "rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    for line in text.splitlines():
        found = LINE.match(line)
        if not found or not found["client"].startswith("consumer-"):
            continue
        client = f"{found['pid']}/{found['client']}"
        key = (client, found["correlation"])
        at = _ms_of_day(found["time"])
        if found["what"] == "Sending":
            sent[key] = (found["api"], at)
        elif key in sent:
            api, sent_at = sent.pop(key)
            answered.append(Request(client, api, sent_at, at))
    return sorted(answered, key=lambda request: request.sent_ms)


def summary(answered: Sequence[Request], fetch_max_wait_ms: float) -> dict[str, Any]:
    """Per API: how many, median and slowest ms; the Fetches held at the log end; the
    ListOffsets sent while the same consumer's Fetch was out, and their wait in all."""
    fetches = [r for r in answered if r.api == "FETCH"]
    list_offsets = [r for r in answered if r.api == "LIST_OFFSETS"]
    fetches_of: dict[str, list[Request]] = {}
    for fetch in fetches:
        fetches_of.setdefault(fetch.client, []).append(fetch)
    behind = [r for r in list_offsets if _fetch_out(fetches_of.get(r.client, []), r)]
    held = [r for r in fetches if r.ms >= HELD_SHARE * fetch_max_wait_ms]
    clients = {r.client for r in answered}
    return {
        "consumers": len(clients),
        "fetches": len(fetches),
        "fetch_ms_median": _median(fetches),
        "fetches_held": len(held),
        "fetches_held_s": round(sum(r.ms for r in held) / 1000, 3),
        "list_offsets": len(list_offsets),
        "list_offsets_ms_median": _median(list_offsets),
        "list_offsets_behind_a_fetch": len(behind),
        "list_offsets_behind_a_fetch_s": round(sum(r.ms for r in behind) / 1000, 3),
        "list_offsets_s": round(sum(r.ms for r in list_offsets) / 1000, 3),
        "fetch_s": round(sum(r.ms for r in fetches) / 1000, 3),
    }


def summary_text(counts: dict[str, Any]) -> str:
    return (
        f"{counts['consumers']} consumers: {counts['fetches']} Fetches (median "
        f"{counts['fetch_ms_median']} ms, {counts['fetch_s']} s in all; {counts['fetches_held']}"
        f" held at the log end, {counts['fetches_held_s']} s), {counts['list_offsets']} "
        f"ListOffsets (median {counts['list_offsets_ms_median']} ms, {counts['list_offsets_s']}"
        f" s in all; {counts['list_offsets_behind_a_fetch']} sent while the consumer's Fetch "
        f"was out, waiting {counts['list_offsets_behind_a_fetch_s']} s)"
    )


def _fetch_out(fetches: Sequence[Request], request: Request) -> bool:
    """Whether one of these Fetches (the same consumer's) was out when `request` was sent."""
    return any(fetch.sent_ms <= request.sent_ms < fetch.received_ms for fetch in fetches)


def _median(answered: Sequence[Request]) -> float:
    return round(statistics.median(r.ms for r in answered), 1) if answered else 0.0


def _ms_of_day(text: str) -> float:
    moment = datetime.strptime(text, "%H:%M:%S.%f")
    return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1000 + (
        moment.microsecond / 1000
    )
