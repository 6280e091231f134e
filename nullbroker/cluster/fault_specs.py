"""Fault SPECs (nullbroker.cluster.faults), parsed or refused with the reason. Imported by the
first fault given, at start or over HTTP: a broker without faults keeps only the registry
(nullbroker.cluster.faults.Faults), which requests ask.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from codec.apis import KAFKA_4_RANGES

KINDS = ("latency", "error", "down", "move", "throttle")
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
