"""Faults on demand: what a pipeline does when a broker is slow, erring, down, or loses a
leader. Given at start (`--fault SPEC`, `[[fault]]` in TOML) or live over HTTP on the
metrics listener (`GET`, `POST` and `DELETE /faults`; `nullbroker fault add|list|clear`).

A SPEC is `KIND:option=value,...`, like `--source`'s:

- `latency:api=Produce,ms=20[,node=N]`: the answers to that API (from node N, or any) are
  sent `ms` later; `p50=5,p99=50` instead of `ms` draws each delay from a log-normal
  distribution with those percentiles. Requests behind a delayed one on its connection wait
  for it, as on a slow broker.
- `error:api=Produce,code=NOT_LEADER_OR_FOLLOWER[,rate=0.01][,node=N]`: that share of the
  API's requests (all, by default) is answered with the error in every partition, and
  nothing is appended or served. Produce and Fetch only.
- `down:node=1[,for=5s]`: the node's connections are reset and new ones refused at once,
  Metadata leaves it out and its partitions are led by the next live node, with leader
  epochs bumped, until `for` (s or ms; for ever without it) has passed or the fault is
  cleared. Node 0 answers the bootstrap, and at least one node stays up.
- `move:topic=T,partition=P,to=N`: the partition's leader becomes node N.
- `throttle:produce-mbps=50[,fetch-mbps=100][,node=N]`: a quota, as Kafka's: each node (or
  node N) takes Produce record bytes at that many MB/s (2^20 bytes) and serves Fetch bytes
  at that many; past it, answers carry `throttle_time_ms`, the time until the rate is back
  within the quota (a token bucket holding one second's bytes), which clients honour
  before their next request to that node, as Kafka's quotas ask of them (KIP-219).

Each fault is counted in `/metrics` (`nullbroker_faults_total{kind}`); a SPEC that cannot
be applied is refused with the reason, and changes nothing.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .cluster import Cluster

if TYPE_CHECKING:
    from .http import Handler, HttpRequest, HttpResponse

KINDS = ("latency", "error", "down", "move", "throttle")
MB = 1 << 20
ERROR_APIS = ("Produce", "Fetch")
# How far p99 lies from the median of a normal distribution, in standard deviations.
_P99_SIGMAS = 2.3263


class FaultSpecError(ValueError):
    """A SPEC that cannot be applied; the message says why."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault as its SPEC gives it."""

    kind: str
    spec: str
    api: str | None = None
    node: int | None = None
    ms: float | None = None
    p50: float | None = None
    p99: float | None = None
    code: ErrorCode | None = None
    rate: float = 1.0
    seconds: float | None = None
    topic: str | None = None
    partition: int | None = None
    to: int | None = None
    produce_mbps: float | None = None
    fetch_mbps: float | None = None

    @classmethod
    def parse(cls, text: str) -> Fault:
        kind, _, rest = text.strip().partition(":")
        kind = kind.strip().lower()
        if kind not in KINDS:
            raise FaultSpecError(f"fault {text!r}: the kind must be one of {', '.join(KINDS)}")
        options: dict[str, str] = {}
        for option in filter(None, (part.strip() for part in rest.split(","))):
            key, sep, value = option.partition("=")
            if not sep or not value.strip():
                raise FaultSpecError(f"fault {text!r}: {option!r} is not option=value")
            options[key.strip().lower().replace("-", "_")] = value.strip()
        return _BUILDERS[kind](text.strip(), options)

    def delay_s(self, draw: Callable[[], float]) -> float:
        """One delay of a latency fault, in seconds."""
        if self.ms is not None:
            return self.ms / 1000
        assert self.p50 is not None and self.p99 is not None
        sigma = (math.log(self.p99) - math.log(self.p50)) / _P99_SIGMAS
        return math.exp(math.log(self.p50) + sigma * draw()) / 1000


def _take(text: str, options: dict[str, str], known: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise FaultSpecError(
            f"fault {text!r}: unknown option {unknown[0]!r} (known: {', '.join(known)})"
        )


def _number(text: str, options: dict[str, str], name: str, *, integer: bool = False) -> float:
    value = options[name]
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise FaultSpecError(f"fault {text!r}: {name}={value!r} is not {kind}") from None
    if number < 0 or not math.isfinite(number):
        raise FaultSpecError(f"fault {text!r}: {name} must not be negative")
    return number


def _node(text: str, options: dict[str, str], name: str = "node") -> int | None:
    return int(_number(text, options, name, integer=True)) if name in options else None


def _api(text: str, options: dict[str, str], allowed: tuple[str, ...] | None = None) -> str:
    from codec.apis import KAFKA_4_RANGES

    if "api" not in options:
        raise FaultSpecError(f"fault {text!r}: give api=NAME (Produce, Fetch, ...)")
    names = {api.name.lower(): api.name for api in KAFKA_4_RANGES.values()}
    name = names.get(options["api"].lower())
    if name is None:
        raise FaultSpecError(f"fault {text!r}: no Kafka API is called {options['api']!r}")
    if allowed is not None and name not in allowed:
        raise FaultSpecError(f"fault {text!r}: errors are injected into {' and '.join(allowed)}")
    return name


def _latency(text: str, options: dict[str, str]) -> Fault:
    _take(text, options, ("api", "ms", "p50", "p99", "node"))
    api = _api(text, options)
    if "ms" in options:
        if "p50" in options or "p99" in options:
            raise FaultSpecError(f"fault {text!r}: give ms=, or p50= and p99=, not both")
        return Fault("latency", text, api, _node(text, options), ms=_number(text, options, "ms"))
    if "p50" not in options or "p99" not in options:
        raise FaultSpecError(f"fault {text!r}: give ms=MS, or p50=MS and p99=MS")
    p50, p99 = _number(text, options, "p50"), _number(text, options, "p99")
    if not 0 < p50 <= p99:
        raise FaultSpecError(f"fault {text!r}: p50 must be above 0 and at most p99")
    return Fault("latency", text, api, _node(text, options), p50=p50, p99=p99)


def _error(text: str, options: dict[str, str]) -> Fault:
    _take(text, options, ("api", "code", "rate", "node"))
    api = _api(text, options, ERROR_APIS)
    name = options.get("code", "")
    try:
        code = ErrorCode[name.lower()] if not name.lstrip("-").isdigit() else ErrorCode(int(name))
    except (KeyError, ValueError):
        raise FaultSpecError(f"fault {text!r}: code={name!r} is no Kafka error") from None
    if code is ErrorCode.none:
        raise FaultSpecError(f"fault {text!r}: code must be an error, not NONE")
    rate = _number(text, options, "rate") if "rate" in options else 1.0
    if not 0 < rate <= 1:
        raise FaultSpecError(f"fault {text!r}: rate must be above 0 and at most 1")
    return Fault("error", text, api, _node(text, options), code=code, rate=rate)


def _seconds(text: str, value: str) -> float:
    unit = 0.001 if value.endswith("ms") else 1.0
    number = value.removesuffix("ms").removesuffix("s")
    try:
        seconds = float(number) * unit
    except ValueError:
        raise FaultSpecError(
            f"fault {text!r}: for={value!r} is not a duration (5s, 500ms)"
        ) from None
    if not 0 < seconds < math.inf:
        raise FaultSpecError(f"fault {text!r}: for must be a positive duration")
    return seconds


def _down(text: str, options: dict[str, str]) -> Fault:
    _take(text, options, ("node", "for"))
    node = _node(text, options)
    if node is None:
        raise FaultSpecError(f"fault {text!r}: give node=N")
    seconds = _seconds(text, options["for"]) if "for" in options else None
    return Fault("down", text, node=node, seconds=seconds)


def _move(text: str, options: dict[str, str]) -> Fault:
    _take(text, options, ("topic", "partition", "to"))
    if not {"topic", "partition", "to"} <= set(options):
        raise FaultSpecError(f"fault {text!r}: give topic=T, partition=P and to=N")
    partition = int(_number(text, options, "partition", integer=True))
    return Fault(
        "move", text, topic=options["topic"], partition=partition, to=_node(text, options, "to")
    )


def _throttle(text: str, options: dict[str, str]) -> Fault:
    _take(text, options, ("produce_mbps", "fetch_mbps", "node"))
    rates = {}
    for name in ("produce_mbps", "fetch_mbps"):
        if name in options:
            rates[name] = _number(text, options, name)
            if rates[name] <= 0:
                raise FaultSpecError(f"fault {text!r}: {name.replace('_', '-')} must be above 0")
    if not rates:
        raise FaultSpecError(f"fault {text!r}: give produce-mbps=MB/S, fetch-mbps=MB/S, or both")
    return Fault(
        "throttle",
        text,
        node=_node(text, options),
        produce_mbps=rates.get("produce_mbps"),
        fetch_mbps=rates.get("fetch_mbps"),
    )


_BUILDERS: dict[str, Callable[[str, dict[str, str]], Fault]] = {
    "latency": _latency,
    "error": _error,
    "down": _down,
    "move": _move,
    "throttle": _throttle,
}


@dataclass(slots=True)
class ActiveFault:
    id: int
    fault: Fault
    until: float | None
    """time.monotonic() when it ends by itself (down with for=), or None."""
    buckets: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    """A throttle's token buckets by (API, node): [bytes left, time.monotonic() of then]."""

    def as_json(self) -> dict[str, object]:
        left = None if self.until is None else max(0.0, self.until - time.monotonic())
        return {
            "id": self.id,
            "spec": self.fault.spec,
            "kind": self.fault.kind,
            "seconds_left": left,
        }


@dataclass(slots=True)
class Faults:
    """The faults in force. Requests ask `latency` and `error` when `active` is not empty:
    with none, a request pays one truth test."""

    cluster: Cluster
    active: list[ActiveFault] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    """Faults applied, by kind: delays, errors answered, nodes taken down, moves."""
    reset_node: Callable[[int], int] = lambda node: 0
    """Resets a node's connections (set by the server); returns how many it reset."""
    rng: random.Random = field(default_factory=random.Random)
    changed: Callable[[str | None], None] = lambda spec: None
    """Told each SPEC applied, and None when all are cleared: a cluster's controller
    passes them on to its workers (nullbroker.processes)."""
    _ids: int = 0

    def add(self, text: str, *, controlled: bool = False) -> ActiveFault:
        """Apply a SPEC; raises FaultSpecError, changing nothing, for one that cannot be.

        `controlled`: a worker of several processes applying what its controller sent. The
        controller counts the cluster's changes (nodes taken down, moves) once, and keeps
        the time: it says when a node is back (`bring_up`)."""
        fault = Fault.parse(text)
        self.expire()
        self._check(fault)
        self._ids += 1
        until = None if fault.seconds is None or controlled else time.monotonic() + fault.seconds
        counted = not controlled
        active = ActiveFault(self._ids, fault, until)
        self.active.append(active)
        if fault.kind == "down":
            assert fault.node is not None
            self.cluster.take_down(fault.node, until)
            self.counts["connections_reset"] += self.reset_node(fault.node)
            self.counts["down"] += counted
        elif fault.kind == "move":
            assert fault.topic is not None and fault.partition is not None and fault.to is not None
            self.cluster.move(fault.topic, fault.partition, fault.to)
            self.counts["move"] += counted
        self.changed(text)
        return active

    def _check(self, fault: Fault) -> None:
        size = self.cluster.size
        for name, node in (("node", fault.node), ("to", fault.to)):
            if node is not None and node >= size:
                raise FaultSpecError(
                    f"fault {fault.spec!r}: {name}={node}, but the nodes are 0 to {size - 1}"
                )
        if fault.kind == "down":
            if fault.node == 0:
                raise FaultSpecError(
                    f"fault {fault.spec!r}: node 0 answers the bootstrap and stays up; "
                    "take another node down"
                )
            if len(self.cluster.live) <= 1 or fault.node not in self.cluster.live:
                raise FaultSpecError(f"fault {fault.spec!r}: node {fault.node} is not up")
        if fault.kind == "move" and size == 1:
            raise FaultSpecError(f"fault {fault.spec!r}: one node leads everything (--brokers)")

    def clear(self) -> int:
        """End every fault: nodes come back, moved partitions return. How many ended."""
        cleared = len(self.active)
        self.active.clear()
        self.cluster.restore()
        self.changed(None)
        return cleared

    def bring_up(self, node: int) -> None:
        """End the `down` faults of `node` (its controller says its time is up)."""
        self.active = [
            active
            for active in self.active
            if not (active.fault.kind == "down" and active.fault.node == node)
        ]
        self.cluster.bring_up(node)

    def expire(self) -> None:
        """Forget the faults whose time has passed (their nodes are back: see Cluster)."""
        now = time.monotonic()
        if any(active.until is not None and active.until <= now for active in self.active):
            self.active = [a for a in self.active if a.until is None or a.until > now]

    def latency_s(self, api: str, node: int) -> float:
        """How long to hold the answer to a request of `api` on `node` (0: not at all)."""
        delay = 0.0
        for active in self.active:
            fault = active.fault
            if fault.kind == "latency" and fault.api == api and fault.node in (None, node):
                delay += fault.delay_s(lambda: self.rng.gauss(0.0, 1.0))
        if delay:
            self.counts["latency"] += 1
        return delay

    def throttle_ms(self, api: str, node: int, size: int) -> int:
        """The throttle_time_ms of an answer that took or served `size` bytes of `api`
        (Produce, Fetch) on `node`: 0 within every quota."""
        wait_s = 0.0
        for active in self.active:
            fault = active.fault
            if fault.kind != "throttle" or fault.node not in (None, node):
                continue
            mbps = fault.produce_mbps if api == "Produce" else fault.fetch_mbps
            if mbps is None or api not in ("Produce", "Fetch"):
                continue
            rate = mbps * MB
            now = time.monotonic()
            bucket = active.buckets.setdefault((api, node), [rate, now])
            # One second's bytes at most in hand; what is over the quota is owed in time.
            bucket[0] = min(rate, bucket[0] + (now - bucket[1]) * rate) - size
            bucket[1] = now
            if bucket[0] < 0:
                wait_s = max(wait_s, -bucket[0] / rate)
        if not wait_s:
            return 0
        self.counts["throttle"] += 1
        return max(1, math.ceil(wait_s * 1000))

    def error(self, api: str, node: int) -> ErrorCode | None:
        """The error to answer a request of `api` on `node` with, if one is drawn."""
        for active in self.active:
            fault = active.fault
            if (
                fault.kind == "error"
                and fault.api == api
                and fault.node in (None, node)
                and (fault.rate >= 1 or self.rng.random() < fault.rate)
            ):
                self.counts["error"] += 1
                return fault.code
        return None


def faults_handler(faults: Faults, otherwise: Handler) -> Handler:
    """`/faults` on the metrics listener, `otherwise` for every other path:

    - `GET /faults`: the faults in force, as JSON;
    - `POST /faults` with a SPEC as the body: apply it (201 with the fault as JSON; 400 with
      the reason for a SPEC that cannot be applied, which changes nothing);
    - `DELETE /faults`: end them all (nodes come back, moved partitions return).
    """
    # The HTTP layer (h11) is loaded with the metrics listener, not by every broker.
    from .http import HttpResponse

    def handle(request: HttpRequest) -> HttpResponse:
        if request.path.rstrip("/") != "/faults":
            return otherwise(request)
        if request.method == b"GET":
            faults.expire()
            return _json(200, [active.as_json() for active in faults.active])
        if request.method == b"POST":
            try:
                active = faults.add(request.body.decode("utf-8", "replace"))
            except FaultSpecError as error:
                return HttpResponse(400, f"{error}\n".encode())
            return _json(201, active.as_json())
        if request.method == b"DELETE":
            return _json(200, {"cleared": faults.clear()})
        return HttpResponse(405, b"GET, POST or DELETE /faults\n")

    return handle


def _json(status: int, value: object) -> HttpResponse:
    import json

    from .http import HttpResponse

    return HttpResponse(status, json.dumps(value).encode() + b"\n", b"application/json")
