"""SCRAM credentials as Kafka keeps them in ZooKeeper, at /config/users/<user>.

A credential is what a server needs to check a SCRAM proof without knowing the password:
salt, StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
"Server Key") and the PBKDF2 iteration count (RFC 5802 §3). Kafka writes one per mechanism,
as text (ScramCredentialUtils.credentialToString) inside the user's config JSON:

    {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

Rules:
- Keys are derived as Kafka's ScramFormatter derives them: PBKDF2 over the password's plain
  UTF-8 bytes, no SASLprep. Kafka's clients (Java, librdkafka) prove over the same bytes, so
  a SASLprep'd credential would lock out a password such as "pass\u00a0word" that Kafka
  accepts. For ASCII passwords this equals scramp's make_auth_info (the tests check it).
- New credentials take MIN_ITERATIONS..MAX_ITERATIONS iterations (Kafka's ScramMechanism
  bounds) and a salt of at least 12 bytes (the least scramp's server serves). Decoding takes
  any positive count: refusing fewer than 4096 is the SASL server's job, at login.
- Malformed input is a ValueError with the reason, never a partial credential.
- verify_password lets SASL/PLAIN check a password against the same user database.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass

__all__ = [
    "MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "ScramCredential", "make_credential",
    "encode_credential", "decode_credential", "credential_from_salted", "encode_user_config",
    "decode_user_config",
    "verify_password",
]

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
MIN_SALT_BYTES = 12
USER_CONFIG_VERSION = 1

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_FIELDS = ("salt", "stored_key", "server_key", "iterations")
_INT32_MAX = 2**31 - 1
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash_name(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except (KeyError, TypeError):
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; "
                         f"supported: {', '.join(MECHANISMS)}") from None


def _salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    # "replace" turns a lone surrogate into "?" as Java's String.getBytes(UTF_8) does.
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8", "replace"), salt, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """The credential Kafka's kafka-configs would store for this password."""
    hash_name = _hash_name(mechanism)
    if type(iterations) is not int or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be an int in [{MIN_ITERATIONS}, {MAX_ITERATIONS}] "
                         f"for {mechanism}, got {iterations!r}")
    if not isinstance(password, str):
        raise ValueError("password must be a str")
    if salt is None:
        salt = secrets.token_bytes(32)     # as scramp's Salt.create()
    elif not isinstance(salt, bytes) or len(salt) < MIN_SALT_BYTES:
        raise ValueError(f"salt must be at least {MIN_SALT_BYTES} bytes")
    salted = _salted_password(hash_name, password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return ScramCredential(salt=salt,
                           stored_key=hashlib.new(hash_name, client_key).digest(),
                           server_key=hmac.new(salted, b"Server Key", hash_name).digest(),
                           iterations=iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted_password: bytes,
                           iterations: int) -> ScramCredential:
    """Kafka's ScramFormatter.generateCredential(salt, saltedPassword, iterations): what
    AlterUserScramCredentials stores from a client's salted password (KIP-554)."""
    hash_name = _hash_name(mechanism)
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    return ScramCredential(salt=salt, stored_key=hashlib.new(hash_name, client_key).digest(),
                           server_key=hmac.new(salted_password, b"Server Key", hash_name).digest(),
                           iterations=iterations)


def verify_password(cred: ScramCredential, mechanism: str, password: str) -> bool:
    """Whether `password` is the one `cred` was made from (constant-time compare)."""
    hash_name = _hash_name(mechanism)
    if type(cred.iterations) is not int or cred.iterations < 1 or not isinstance(password, str):
        return False
    salted = _salted_password(hash_name, password, cred.salt, cred.iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), cred.stored_key)


# -- Kafka's text form -----------------------------------------------------------------------------
def encode_credential(c: ScramCredential) -> str:
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return (f"salt={b64(c.salt)},stored_key={b64(c.stored_key)},"
            f"server_key={b64(c.server_key)},iterations={c.iterations}")


def decode_credential(s: str) -> ScramCredential:
    """Kafka's credentialFromString, stricter where Kafka would silently accept garbage
    (duplicate keys, signs or spaces in the count)."""
    if not isinstance(s, str):
        raise ValueError("credential must be a str")
    props: dict[str, str] = {}
    for token in s.split(","):
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise ValueError(f"credential not valid: {token!r} is not key=value")
        if key in props:
            raise ValueError(f"credential not valid: {key!r} given twice")
        props[key] = value
    if set(props) != set(_FIELDS):
        raise ValueError(f"credential not valid: expected keys {', '.join(_FIELDS)}, "
                         f"got {', '.join(props)}")
    salt, stored_key, server_key = (_b64decode(k, props[k]) for k in _FIELDS[:3])
    count = props["iterations"]
    if not _DIGITS.fullmatch(count) or not 1 <= int(count) <= _INT32_MAX:
        raise ValueError(f"credential not valid: iterations {count!r} is not a positive int32")
    return ScramCredential(salt, stored_key, server_key, int(count))


def _b64decode(key: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"credential not valid: {key} is not base64") from None


# -- the user's config znode -----------------------------------------------------------------------
def encode_user_config(creds: dict[str, ScramCredential],
                       other: dict[str, str] | None = None) -> bytes:
    """The JSON Kafka keeps at /config/users/<user>; `creds` win over same-named `other` keys."""
    config = {str(k): str(v) for k, v in (other or {}).items()}
    for mechanism, cred in creds.items():
        _hash_name(mechanism)
        config[mechanism] = encode_credential(cred)
    # Jackson's compact form, as Kafka writes it, so the znode reads the same either way.
    return json.dumps({"version": USER_CONFIG_VERSION, "config": config},
                      separators=(",", ":")).encode("utf-8")


def decode_user_config(data: bytes) -> dict[str, ScramCredential]:
    """The user's SCRAM credentials by mechanism; other config keys (quotas) are ignored."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as e:
        raise ValueError(f"user config is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("user config is not a JSON object")
    config = doc.get("config", {})     # Kafka reads a missing "config" as empty
    if not isinstance(config, dict):
        raise ValueError("user config's \"config\" is not a JSON object")
    creds = {}
    for mechanism in MECHANISMS:
        if mechanism in config:
            creds[mechanism] = decode_credential(config[mechanism])
    return creds
