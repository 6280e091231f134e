"""TLS certificates for the tests of SSL and SASL_SSL listeners, made by trustme: a CA, the
broker's certificate for 127.0.0.1, a client certificate, and another CA no one trusts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def make_certificates(folder: Path) -> Certificates:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client@example.test")
    paths = Certificates(*(folder / name for name in (
        "ca.pem", "cert.pem", "key.pem", "client-cert.pem", "client-key.pem", "other-ca.pem",
    )))  # fmt: skip
    ca.cert_pem.write_to_path(str(paths.ca))
    server.cert_chain_pems[0].write_to_path(str(paths.cert))
    server.private_key_pem.write_to_path(str(paths.key))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    client.private_key_pem.write_to_path(str(paths.client_key))
    trustme.CA().cert_pem.write_to_path(str(paths.other_ca))
    return paths
