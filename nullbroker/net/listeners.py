"""Listeners as Kafka names them (`--listeners PLAINTEXT://HOST:PORT,SSL://HOST:PORT`), and
the TLS context of SSL ones.

Each listener is a security protocol at an address; a cluster's node `n` listens at each
listener's port + n. Metadata and FindCoordinator answer with the addresses of the
listener the client came in on (or of `--advertised-listeners`, by the same names), as Kafka
does. SASL_PLAINTEXT and SASL_SSL listeners authenticate clients (nullbroker.sessions.sasl).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from ..settings import Config

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class ListenerError(ValueError):
    """A listener list that cannot be served; the message says why (without the setting)."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    """The security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.name in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.name in (SASL_PLAINTEXT, SASL_SSL)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listeners(text: str) -> tuple[Listener, ...]:
    """`PROTOCOL://HOST:PORT,...` into listeners; ListenerError for what cannot be served."""
    listeners = []
    for item in (part.strip() for part in text.split(",")):
        name, sep, address = item.partition("://")
        name = name.upper()
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ListenerError(f"expected PROTOCOL://HOST:PORT, got {item!r}")
        if name not in PROTOCOLS:
            raise ListenerError(
                f"unknown security protocol {name!r} in {item!r}: use {', '.join(PROTOCOLS)}"
            )
        listeners.append(Listener(name, host.strip("[]") or "127.0.0.1", int(port)))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ListenerError("each security protocol may have one listener (Kafka names them so)")
    return tuple(listeners)


def listener_specs(config: Config) -> tuple[Listener, ...]:
    """Every listener: --listeners, else --listen as one PLAINTEXT listener."""
    if config.listeners is not None:
        return parse_listeners(config.listeners)
    return (Listener(PLAINTEXT, *config.listen_address),)


def advertised_specs(config: Config) -> dict[str, tuple[str, int]]:
    """The address each listener is advertised at, by protocol name (none: the address
    each client reached)."""
    if config.advertised_listeners is not None:
        advertised = parse_listeners(config.advertised_listeners)
        return {listener.name: (listener.host, listener.port) for listener in advertised}
    if config.advertise is not None:
        return {PLAINTEXT: config.advertised_address}  # type: ignore[dict-item]
    return {}


def server_context(cert: str, key: str, ca: str | None, client_auth: str) -> ssl.SSLContext:
    """The TLS context of SSL listeners; OSError or ssl.SSLError for files that will not do."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if ca:
        context.load_verify_locations(ca)
    context.verify_mode = CLIENT_AUTH[client_auth]
    return context
