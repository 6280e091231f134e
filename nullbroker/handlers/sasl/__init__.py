"""SASL: SaslHandshake and SaslAuthenticate, and gate.py, what a SASL listener makes of the
other requests while a client authenticates (nullbroker.sessions.sasl holds the mechanisms and
the states).

One module per Kafka API, each declaring its KEY beside its `handle`, imported by its key's
first request (nullbroker.handlers.IMPORTED_ON_FIRST_USE): this package imports none of
them, so that one does not bring the others."""
