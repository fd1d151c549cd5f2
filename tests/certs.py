"""Throwaway certificates for the TLS tests (trustme): one CA, a server certificate for the
test hosts, a client certificate (for ssl.client.auth=required), all written as PEM files.

Rules:
- A helper, not a test module: `make_certs(tmp_path)` in a test or fixture.
- Every file is PEM, the one keystore format rayka reads: `server.pem` is the broker's
  keystore (private key, then the certificate chain); the key and chain are also written
  apart, and inline (`broker_config(inline=True)`), for Kafka's 2.7+ inline PEM configs.
- `server-encrypted.pem` holds the same key encrypted (PKCS#8) with `key_password`, for the
  ssl.key.password tests.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

CLIENT_NAME = "client.rayka.test"
KEY_PASSWORD = "rayka-test-key-password"


@dataclass(frozen=True)
class Certs:
    ca: Path                  # the CA certificate: the truststore of brokers and clients
    server: Path              # server key + certificate chain (the broker's PEM keystore)
    server_key: Path
    server_chain: Path
    server_encrypted: Path    # server key encrypted with key_password + certificate chain
    client: Path              # client key + certificate chain
    client_key: Path
    client_chain: Path
    hosts: tuple[str, ...]
    key_password: str = KEY_PASSWORD

    def broker_config(self, client_auth: str = "none", inline: bool = False) -> dict[str, str]:
        """Kafka's ssl.* broker configs for a TLS listener with these certificates."""
        config = {"ssl.keystore.type": "PEM"}
        if inline:
            config["ssl.keystore.key"] = self.server_key.read_text()
            config["ssl.keystore.certificate.chain"] = self.server_chain.read_text()
        else:
            config["ssl.keystore.location"] = str(self.server)
        if client_auth != "none":
            config.update({"ssl.client.auth": client_auth, "ssl.truststore.type": "PEM",
                           "ssl.truststore.location": str(self.ca)})
        return config

    def librdkafka_config(self, client_cert: bool = False) -> dict[str, str]:
        """confluent-kafka (librdkafka) settings to reach that listener over TLS."""
        config = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca),
                  "ssl.endpoint.identification.algorithm": "https"}
        if client_cert:
            config.update({"ssl.certificate.location": str(self.client_chain),
                           "ssl.key.location": str(self.client_key)})
        return config

    def client_context(self, client_cert: bool = False) -> ssl.SSLContext:
        """A Python client context trusting the CA (hostname checked), optionally
        presenting the client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if client_cert:
            ctx.load_cert_chain(str(self.client))
        return ctx


def make_certs(tmp_path: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Certs:
    """A fresh CA, server and client certificate, written under `tmp_path`."""
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="rayka tests")
    server = ca.issue_cert(*hosts, common_name=hosts[0])
    client = ca.issue_cert(CLIENT_NAME, common_name=CLIENT_NAME)
    paths = {name: tmp_path / f"{name.replace('_', '-')}.pem" for name in (
        "ca", "server", "server_key", "server_chain", "server_encrypted",
        "client", "client_key", "client_chain")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    for name, leaf in (("server", server), ("client", client)):
        leaf.private_key_and_cert_chain_pem.write_to_path(str(paths[name]))
        leaf.private_key_pem.write_to_path(str(paths[f"{name}_key"]))
        paths[f"{name}_chain"].write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(KEY_PASSWORD.encode()))
    paths["server_encrypted"].write_bytes(encrypted + paths["server_chain"].read_bytes())
    for path in paths.values():
        path.chmod(0o600)               # as a real key file would be
    return Certs(hosts=tuple(hosts), **paths)
