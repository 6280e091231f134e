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

from .nodes import Cluster

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

    from .fault_specs import Fault

MB = 1 << 20


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
    """Told each SPEC applied, and None when all are cleared: a cluster's supervisor
    passes them on to its workers (nullbroker.workers.processes)."""
    _ids: int = 0

    def add(self, text: str, *, controlled: bool = False) -> ActiveFault:
        """Apply a SPEC; raises FaultSpecError, changing nothing, for one that cannot be.

        `controlled`: a worker of several processes applying what its supervisor sent. The
        supervisor counts the cluster's changes (nodes taken down, moves) once, and keeps
        the time: it says when a node is back (`bring_up`)."""
        from .fault_specs import Fault  # by the first fault: most brokers never see one

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
        from .fault_specs import FaultSpecError

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
        """End the `down` faults of `node` (its supervisor says its time is up)."""
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
