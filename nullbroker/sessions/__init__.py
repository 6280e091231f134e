"""A connection's session, below the handlers that read it and the connection layer that
makes it: the per-connection `Session` and `Endpoint` (session.py), the SASL mechanisms'
names (mechanisms.py), and the sans-IO SASL exchanges a SASL listener's connections go
through (sasl.py with PLAIN, scram.py, oauthbearer.py).

Importing the package loads the session and nothing of SASL: the exchanges are imported by
a SASL listener's first connection and by the SASL handlers' first request."""

from .session import Endpoint, Session

__all__ = ["Endpoint", "Session"]
