"""The SASL mechanisms a SASL listener may offer (`--sasl-mechanisms`), by the names Kafka
gives them.

Named apart from the exchanges (nullbroker.sessions.sasl) because every broker checks its
settings against them and the SaslHandshake handler lists them, while only a broker with a
SASL listener imports the exchanges themselves (tests/processes/test_imports.py)."""

from __future__ import annotations

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
"""What SASL listeners take (--sasl-mechanisms), in the order their names are listed."""
