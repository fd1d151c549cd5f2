"""A SASL client for one Kafka connection (a broker authenticating to another broker's
listener): the tokens of PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802/7677), pure.

Rules:
- `first()` is the first token; `next(server_token)` the following one, or None when the
  exchange is over on this side. PLAIN is one token ("\\0user\\0password"). SCRAM is two:
  client-first ("n,,n=<user>,r=<nonce>"), then client-final with the proof; the server's
  final message must carry the server signature this side computes, else SaslFailed (a
  broker that does not know the password is not the one we meant to reach).
- The username is escaped as SCRAM requires ("=" as "=3D", "," as "=2C"); the server's nonce
  must start with ours and the iteration count be at least 4096 (Kafka's minimum), else
  SaslFailed.
- `jaas_credentials(text)` reads username="..." and password="..." out of a Kafka
  sasl.jaas.config value (PlainLoginModule / ScramLoginModule); missing ones raise
  InvalidConfig naming what is missing.
- Pure: no sockets; the client nonce comes from `secrets` unless given (tests pin it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

from protocol.security.credentials import MIN_ITERATIONS
from replicas.errors import ErrorCode, InvalidConfig

__all__ = ["SaslClient", "SaslFailed", "jaas_credentials"]

_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_JAAS_VALUE = r'{key}\s*=\s*"((?:[^"\\]|\\.)*)"'


class SaslFailed(Exception):
    """The server's SASL answer cannot be trusted or is not what the mechanism expects;
    `code` is the Kafka error the server answered, when it answered one."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code

    @property
    def name(self) -> str:
        return ErrorCode(self.code).name if self.code else type(self).__name__


def jaas_credentials(text: str) -> tuple[str, str]:
    """(username, password) of a sasl.jaas.config value."""
    found = {}
    for key in ("username", "password"):
        m = re.search(_JAAS_VALUE.format(key=key), text or "")
        if m is None:
            raise InvalidConfig(f"sasl.jaas.config has no {key}=\"...\"")
        found[key] = m.group(1).replace('\\"', '"').replace("\\\\", "\\")
    return found["username"], found["password"]


class SaslClient:
    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        mechanism = mechanism.upper()
        if mechanism != "PLAIN" and mechanism not in _DIGESTS:
            raise InvalidConfig(f"SASL mechanism {mechanism} is not supported for inter-broker "
                                f"traffic (PLAIN, {', '.join(_DIGESTS)})")
        self.mechanism, self.username, self.password = mechanism, username, password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = ""
        self._expected_signature: bytes | None = None
        self._step = 0

    def first(self) -> bytes:
        self._step = 1
        if self.mechanism == "PLAIN":
            return b"\0" + self.username.encode("utf-8") + b"\0" + self.password.encode("utf-8")
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        self._bare = f"n={name},r={self._nonce}"
        return ("n,," + self._bare).encode("utf-8")

    def next(self, server_token: bytes) -> bytes | None:
        """The answer to the server's token; None when this side has nothing more to say."""
        if self.mechanism == "PLAIN" or self._step >= 3:
            return None
        if self._step == 1:
            self._step = 2
            return self._final(server_token.decode("utf-8", "replace"))
        self._step = 3
        text = server_token.decode("utf-8", "replace")
        if not text.startswith("v=") or self._expected_signature is None:
            raise SaslFailed(f"unexpected SCRAM server-final message {text[:60]!r}")
        try:
            signature = base64.b64decode(text[2:].split(",")[0], validate=True)
        except ValueError:
            raise SaslFailed("undecodable SCRAM server signature") from None
        if not hmac.compare_digest(signature, self._expected_signature):
            raise SaslFailed("the server's SCRAM signature is wrong: it does not know the "
                             "password")
        return None

    def _final(self, server_first: str) -> bytes:
        fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "0")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise SaslFailed(f"unexpected SCRAM server-first message {server_first[:60]!r}")
        if int(iterations) < MIN_ITERATIONS:
            raise SaslFailed(f"SCRAM iterations {iterations} below {MIN_ITERATIONS}")
        digest = _DIGESTS[self.mechanism]
        salted = hashlib.pbkdf2_hmac(digest, self.password.encode("utf-8", "replace"),
                                     base64.b64decode(salt), int(iterations))
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        stored_key = hashlib.new(digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{server_first},{without_proof}".encode("utf-8")
        signature = hmac.new(stored_key, auth_message, digest).digest()
        proof = bytes(x ^ y for x, y in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        self._expected_signature = hmac.new(server_key, auth_message, digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode("utf-8")
