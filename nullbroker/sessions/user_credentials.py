"""SCRAM credentials described and altered (KIP-554: DescribeUserScramCredentials and
AlterUserScramCredentials, what `kafka-configs --entity-type users` sends), as Kafka's
controller checks them, in its words. An altered credential is the one SCRAM authenticates
with from then on; PLAIN's passwords (the --users file) are not SCRAM's and do not change,
as in Kafka, where PLAIN's come from JAAS."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from .sasl import Users
from .scram import Credential

MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""Kafka's ScramMechanism type codes."""
CODES = {name: code for code, name in MECHANISM_CODES.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
"""The iterations Kafka takes (ScramMechanism's minimum; its controller's maximum)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()
    """(mechanism code, iterations) of each credential described."""


def described(users: Users, names: list[str] | None) -> list[Outcome]:
    """Each named user's credentials, or every user's (None, or no names)."""
    if not names:
        return [_credentials_of(users, name) for name in _users_with_credentials(users)]
    outcomes: dict[str, Outcome] = {}
    for name in names:
        if name in outcomes:
            outcomes[name] = Outcome(
                name,
                ErrorCode.duplicate_resource,
                f"Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {name}",
            )
        elif name not in _users_with_credentials(users):
            outcomes[name] = Outcome(
                name,
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            outcomes[name] = _credentials_of(users, name)
    return list(outcomes.values())


def altered(
    users: Users,
    deletions: list[tuple[str, int]],
    upsertions: list[tuple[str, int, int, bytes, bytes]],
) -> list[Outcome]:
    """Apply the deletions (user, mechanism) and upsertions (user, mechanism, iterations,
    salt, salted password); one outcome per user, in the order first named."""
    named = [user for user, *_ in deletions] + [user for user, *_ in upsertions]
    outcomes: dict[str, Outcome] = {}
    for user in named:
        if user in outcomes:
            outcomes[user] = Outcome(
                user,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
        else:
            outcomes[user] = Outcome(user)
    for user, code in deletions:
        if outcomes[user].error is not ErrorCode.none:
            continue
        mechanism = MECHANISM_CODES.get(code)
        if mechanism is None:
            outcomes[user] = Outcome(
                user, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
            )
        elif user not in users.scram[mechanism]:
            outcomes[user] = Outcome(
                user,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            del users.scram[mechanism][user]
    for user, code, iterations, salt, salted in upsertions:
        if outcomes[user].error is not ErrorCode.none:
            continue
        refusal = _refusal(user, code, iterations)
        if refusal is not None:
            outcomes[user] = Outcome(user, *refusal)
            continue
        mechanism = MECHANISM_CODES[code]
        users.scram[mechanism][user] = Credential.salted(mechanism, salt, salted, iterations)
    return list(outcomes.values())


def _refusal(user: str, code: int, iterations: int) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if code not in MECHANISM_CODES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


def _users_with_credentials(users: Users) -> list[str]:
    found: dict[str, None] = {}
    for credentials in users.scram.values():
        found.update(dict.fromkeys(credentials))
    return list(found)


def _credentials_of(users: Users, name: str) -> Outcome:
    return Outcome(
        name,
        ErrorCode.none,
        "",
        tuple(
            (CODES[mechanism], credentials[name].iterations)
            for mechanism, credentials in sorted(users.scram.items(), key=lambda m: -CODES[m[0]])
            if name in credentials
        ),
    )
