"""SASL on a Kafka connection (SaslHandshake 17, SaslAuthenticate 36) as a pure state machine.

One SaslServer per connection, modelled on Kafka's SaslServerAuthenticator with its
ScramSaslServer (RFC 5802/7677) and PlainSaslServer (RFC 4616). The caller
parses frames and builds answers; this decides what is allowed and what to answer.

    handshake_or_versions --ApiVersions--> handshake --SaslHandshake--> authenticate
    authenticate --SaslAuthenticate (1 for PLAIN, 2 for SCRAM)--> complete
    any violation or failed authentication --> failed

Rules:
- allows(api_key) gates every request. Before completion: ApiVersions only as the first
  request (it moves the state to handshake), SaslHandshake until a mechanism is chosen,
  then SaslAuthenticate only. After completion everything but the two SASL APIs, save a
  re-authentication's SaslHandshake (below). A False answer moves to failed: the caller
  answers ILLEGAL_SASL_STATE if it can and closes, as Kafka does during authentication.
- Re-authentication (KIP-368, Kafka's SaslServerAuthenticator / KafkaChannel): with
  connections.max.reauth.ms > 0 for the mechanism (`reauth_ms(mechanism)`, 0: none) a
  successful exchange opens a session of that many ms, answered as session_lifetime_ms
  to SaslAuthenticate v1+. Once it has expired, any request fails the gate (Kafka closes
  an expired connection at its next request; a client that cannot re-authenticate, one
  that used SaslAuthenticate v0, included). Before that, a client that used v1+ may send
  SaslHandshake again: only the SASL APIs pass until the new exchange completes, with the
  same mechanism (else UNSUPPORTED_SASL_MECHANISM) and the same principal (else
  SASL_AUTHENTICATION_FAILED), each failure closing; meanwhile the old principal stays
  the connection's and `authenticated` stays true. Success starts a new session. Without
  an expiry a second SaslHandshake fails, as before. Time comes from `clock_ms`
  (monotonic milliseconds), required when re-authentication can be on.
- An ApiVersions answered UNSUPPORTED_VERSION lets the client retry with an older version,
  as Kafka allows: the caller reports it with process_api_versions_rejected().
- Any answer with a non-zero error code has close=True and leaves the state failed.
- Total: every input gives a result and no exception escapes, a raising `lookup` included.
- No word about whether a user exists: every SCRAM failure reads "Authentication failed
  during authentication due to invalid credentials with SASL mechanism <m>" (Kafka's
  wording for a SaslException), save Kafka's own authzid message, which it too sends only
  for a known user. PLAIN keeps Kafka's messages; unknown user and wrong password are both
  "Invalid username or password" and both cost a PBKDF2 run.
- SCRAM: both messages must match Kafka's grammar (ScramMessages). Extension tokenauth=true
  fails (no delegation tokens here); stored credentials with fewer than 4096 iterations
  fail; an authzid must equal the username. The final message's nonce must END WITH the
  server-first nonce, as Kafka checks it: librdkafka < 2.11 (kcat's 2.0.2) repeats its own
  nonce in front, and scramp, which insists on equality, refused it, so the two steps are
  the RFC's few lines here (HMAC, stored-key check, server signature), as in Kafka.
  Principal "User:<name>", with the saslname's "=2C" and "=3D" decoded as Kafka does.
- PLAIN: "[authzid] NUL authcid NUL passwd"; the password is checked against the user's
  SCRAM-SHA-512 credential, else SCRAM-SHA-256; an authzid must equal the authcid.
- Framing is the caller's: after a SaslHandshake v0 the tokens come raw rather than inside
  SaslAuthenticate requests; process_authenticate takes them either way.
- Sans-I/O: no sockets; the clock is the caller's (`clock_ms`). Server nonces come from
  `secrets` unless a `server_nonce` source is given (tests pin RFC vectors with it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.security.credentials import (MECHANISMS, MIN_ITERATIONS, ScramCredential,
                                           verify_password)
from replicas.errors import ErrorCode as E

__all__ = ["SaslServer", "HandshakeResult", "AuthenticateResult", "PLAIN",
           "SUPPORTED_MECHANISMS"]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
PLAIN_LOOKUP_ORDER = ("SCRAM-SHA-512", "SCRAM-SHA-256")

# Which APIs each unauthenticated state lets through.
_ALLOWED_BEFORE = {
    "handshake_or_versions": (API_VERSIONS, SASL_HANDSHAKE),
    "handshake": (SASL_HANDSHAKE,),
    "authenticate": (SASL_AUTHENTICATE,),
}

AUTHZID_MISMATCH = ("Authentication failed: Client requested an authorization id that is "
                    "different from username")
PLAIN_INVALID = "Authentication failed: Invalid username or password"
AFTER_COMPLETION = "SaslAuthenticate request received after successful authentication"

# Kafka's ScramMessages.ClientFirstMessage grammar: ASCII only, saslname with =2C / =3D.
_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"
_SASLNAME = rf"(?:{_SAFE}|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>(?:,[A-Za-z]+={_VALUE})*)")

# ScramMessages.ClientFinalMessage: c=<b64 channel binding>,r=<nonce>[,ext...],p=<b64 proof>
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=[A-Za-z0-9+/]+=*,r=(?P<nonce>{_PRINTABLE})(?:,[A-Za-z]+={_VALUE})*)"
    r",p=(?P<proof>[A-Za-z0-9+/]+=*)")
_DIGESTS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

# Unknown users still pay for one PBKDF2 run, so PLAIN's timing does not tell them apart.
_DUMMY = ScramCredential(salt=b"\0" * 16, stored_key=b"", server_key=b"", iterations=MIN_ITERATIONS)


@dataclass(frozen=True)
class HandshakeResult:
    error_code: int
    mechanisms: tuple[str, ...]
    close: bool = False


@dataclass(frozen=True)
class AuthenticateResult:
    error_code: int
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0
    close: bool = False


class _Failed(Exception):
    """Authentication failed; `message` is what the client may read (None: the generic one)."""

    def __init__(self, message: str | None = None):
        super().__init__(message)
        self.message = message


def _username(saslname: str) -> str:
    # Kafka's ScramFormatter.username: "=2C" first, then "=3D".
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    pairs = (item.partition("=") for item in text.split(",") if item)
    return {key: value for key, _, value in pairs}


class SaslServer:
    """The SASL side of one connection. `lookup(mechanism, username)` gives the user's
    credential for that SCRAM mechanism, or None."""

    def __init__(self, enabled_mechanisms: Sequence[str],
                 lookup: Callable[[str, str], ScramCredential | None], *,
                 server_nonce: Callable[[], str] | None = None,
                 reauth_ms: Callable[[str], int] | None = None,
                 clock_ms: Callable[[], int] | None = None):
        enabled = tuple(enabled_mechanisms)
        if not enabled:
            raise ValueError("no SASL mechanisms are enabled")
        unknown = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise ValueError(f"unsupported SASL mechanisms {unknown}; "
                             f"supported: {', '.join(SUPPORTED_MECHANISMS)}")
        self.enabled_mechanisms = enabled
        self.state = "handshake_or_versions"
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._scram = None                  # the exchange so far, between the two SCRAM messages
        self._scram_user: str | None = None
        if reauth_ms is not None and clock_ms is None:
            raise ValueError("re-authentication needs a clock")
        self._reauth_ms, self._clock_ms = reauth_ms, clock_ms
        self.expires_ms: int | None = None        # the session's end (clock_ms), if it has one
        self._client_reauths = False              # it used SaslAuthenticate v1+
        self._previous: tuple[str, str] | None = None   # (principal, mechanism) re-authenticating
        self.reauthentications = 0                # completed on this connection

    @property
    def authenticated(self) -> bool:
        """A principal is established (a re-authentication under way keeps it)."""
        return self.state == "complete" or self._previous is not None

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def expired(self) -> bool:
        return (self.state == "complete" and self.expires_ms is not None
                and self._clock_ms() > self.expires_ms)

    # -- the gate ----------------------------------------------------------------------------------
    def allows(self, api_key: int) -> bool:
        """May this API be handled now? False: answer ILLEGAL_SASL_STATE and close."""
        if self.state == "complete":
            if self.expired():
                ok = False
            elif api_key == SASL_HANDSHAKE and self._client_reauths \
                    and self.expires_ms is not None:
                self._previous = (self.principal, self.mechanism)
                self.state = "handshake"
                return True
            else:
                ok = api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE)
        else:
            ok = api_key in _ALLOWED_BEFORE.get(self.state, ())
        if not ok:
            self._to_failed()
        elif api_key == API_VERSIONS and self.state == "handshake_or_versions":
            self.state = "handshake"
        return ok

    def process_api_versions_rejected(self) -> None:
        """The ApiVersions just allowed was answered UNSUPPORTED_VERSION: the client retries
        with an older version, which Kafka lets it do (it only advances on a valid request)."""
        if self.state == "handshake":
            self.state = "handshake_or_versions"

    # -- SaslHandshake -----------------------------------------------------------------------------
    def process_handshake(self, mechanism: str) -> HandshakeResult:
        if self.state not in ("handshake_or_versions", "handshake"):
            self._to_failed()
            return HandshakeResult(E.ILLEGAL_SASL_STATE, self.enabled_mechanisms, close=True)
        if mechanism not in self.enabled_mechanisms or (
                self._previous is not None and mechanism != self._previous[1]):
            # case-sensitive, as Kafka's contains(); a re-authentication keeps its mechanism
            self._to_failed()
            return HandshakeResult(E.UNSUPPORTED_SASL_MECHANISM, self.enabled_mechanisms,
                                   close=True)
        self.mechanism = mechanism
        self.state = "authenticate"
        return HandshakeResult(E.NONE, self.enabled_mechanisms)

    # -- SaslAuthenticate --------------------------------------------------------------------------
    def process_authenticate(self, auth_bytes: bytes, version: int = 1) -> AuthenticateResult:
        """One SaslAuthenticate (`version` its request version; a raw token counts as 0)."""
        if self.state != "authenticate":
            message = (AFTER_COMPLETION if self.state == "complete" else
                       f"Unexpected SaslAuthenticate request in SASL state {self.state}")
            self._to_failed()
            return AuthenticateResult(E.ILLEGAL_SASL_STATE, message, close=True)
        try:
            data = bytes(auth_bytes)
            if self.mechanism == PLAIN:
                out = self._plain(data)
            elif self._scram is None:
                out = self._scram_first(data)
            else:
                out = self._scram_final(data)
        except _Failed as e:
            return self._fail(e.message)
        except Exception:  # noqa: BLE001 — total: a raising lookup, bad data
            return self._fail(None)
        lifetime = 0
        if self.state == "complete":
            self._client_reauths = version >= 1
            lifetime = self._start_session()
        return AuthenticateResult(E.NONE, None, out, lifetime if version >= 1 else 0)

    def _start_session(self) -> int:
        """The new session's lifetime in ms (0: it never expires)."""
        lifetime = max(0, int(self._reauth_ms(self.mechanism))) if self._reauth_ms else 0
        self.expires_ms = self._clock_ms() + lifetime if lifetime else None
        return lifetime

    def _plain(self, data: bytes) -> bytes:
        # Java decodes with replacement characters; so do we, to read the same tokens.
        tokens = data.decode("utf-8", "replace").split("\0")
        if len(tokens) != 3:
            raise _Failed("Invalid SASL/PLAIN response: expected 3 tokens, "
                          f"got {min(len(tokens), 4)}")
        authzid, username, password = tokens
        if not username:
            raise _Failed("Authentication failed: username not specified")
        if not password:
            raise _Failed("Authentication failed: password not specified")
        mechanism, cred = PLAIN_LOOKUP_ORDER[0], None
        try:
            for mechanism in PLAIN_LOOKUP_ORDER:
                if (cred := self._lookup(mechanism, username)) is not None:
                    break
        except Exception:  # noqa: BLE001 — the store's trouble is not the client's to read
            raise _Failed("Authentication failed: credentials for user could not be verified")
        ok = verify_password(cred or _DUMMY, mechanism, password)
        if cred is None or not ok or cred.iterations < MIN_ITERATIONS:
            raise _Failed(PLAIN_INVALID)
        if authzid and authzid != username:    # after the password, as Kafka: no leak
            raise _Failed(AUTHZID_MISMATCH)
        self._complete(username)
        return b""

    def _scram_first(self, data: bytes) -> bytes:
        text = data.decode("utf-8")
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise _Failed()
        username = _username(m["saslname"])
        if _extensions(m["extensions"]).get("tokenauth", "").lower() == "true":
            raise _Failed()    # a delegation token; none are kept, so none is valid
        cred = self._lookup(self.mechanism, username)
        if cred is None:
            raise _Failed()
        authzid = m["authzid"] or ""
        if authzid and authzid != username:
            raise _Failed(AUTHZID_MISMATCH)
        if cred.iterations < MIN_ITERATIONS:
            raise _Failed()
        nonce = m["nonce"] + (self._server_nonce() if self._server_nonce is not None
                              else secrets.token_hex(16))
        server_first = (f"r={nonce},s={base64.b64encode(cred.salt).decode()},"
                        f"i={cred.iterations}")
        bare = text.split(",", 2)[2]                 # after the gs2 header
        self._scram = (bare, server_first, nonce, cred)
        self._scram_user = username
        return server_first.encode("utf-8")

    def _scram_final(self, data: bytes) -> bytes:
        """Kafka's ScramSaslServer: the final nonce must END WITH the server-first nonce (old
        librdkafka sends its own nonce in front of it again), then the proof is checked."""
        (bare, server_first, nonce, cred), self._scram = self._scram, None
        text = data.decode("utf-8")
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None or not m["nonce"].endswith(nonce):
            raise _Failed()
        digest = _DIGESTS[self.mechanism]
        auth_message = f"{bare},{server_first},{m['without_proof']}".encode("utf-8")
        proof = base64.b64decode(m["proof"], validate=True)
        signature = hmac.new(cred.stored_key, auth_message, digest).digest()
        if len(proof) != len(signature):
            raise _Failed()
        client_key = bytes(x ^ y for x, y in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), cred.stored_key):
            raise _Failed()
        server_signature = hmac.new(cred.server_key, auth_message, digest).digest()
        self._complete(self._scram_user)
        return b"v=" + base64.b64encode(server_signature)

    # -- outcomes ----------------------------------------------------------------------------------
    def _complete(self, username: str) -> None:
        principal = f"User:{username}"
        if self._previous is not None and principal != self._previous[0]:
            raise _Failed(f"Cannot change principals during re-authentication from "
                          f"{self._previous[0]}: {principal}")
        self.reauthentications += self._previous is not None
        self.state = "complete"
        self.principal = principal
        self._previous = None
        self._scram_user = None

    def _to_failed(self) -> None:
        self.state = "failed"
        self.principal = None
        self._previous = None
        self._scram, self._scram_user = None, None

    def _fail(self, message: str | None) -> AuthenticateResult:
        mechanism = self.mechanism
        self._to_failed()
        if message is None:
            message = ("Authentication failed during authentication due to invalid "
                       f"credentials with SASL mechanism {mechanism}")
        return AuthenticateResult(E.SASL_AUTHENTICATION_FAILED, message, close=True)
