"""FakeSecurity: actors/security.py's BrokerSecurity without ZooKeeper, for listener tests.

What it is:
- The two methods KafkaListener asks (`tls_context(listener)`, `session(endpoint, peer_host,
  peer_cert)`), made as BrokerSecurity makes them: a TLS context per TLS listener from
  Kafka's ssl.* configs (actors.tls_context.ssl_context_from_config), and per connection a REAL
  Session with a REAL SaslServer on SASL listeners over an in-memory user table of SCRAM
  credentials (protocol.security.credentials.make_credential), plus an optional Authorizer.
- Every Session it made is recorded, in order (`sessions`), so a test can read who the
  listener decided a connection was (Session.principal) after the fact.
"""

from __future__ import annotations

import threading
import time

from actors.tls_context import ssl_context_from_config
from protocol.security.credentials import MECHANISMS, make_credential
from protocol.security.sasl import SaslServer
from protocol.security.session import SASL_PROTOCOLS, TLS_PROTOCOLS, Session, tls_principal

DEFAULT_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


class FakeSecurity:
    def __init__(self, endpoints=(), ssl_config: dict | None = None,
                 mechanisms=DEFAULT_MECHANISMS, users: dict[str, str] | None = None,
                 authorizer=None, reauth_ms: int = 0):
        """`ssl_config`: Kafka's ssl.* broker configs (tests/certs.py's broker_config()) for
        every SSL / SASL_SSL endpoint; `users`: user → password (SCRAM credentials made
        for both SCRAM mechanisms, as kafka-configs would store them)."""
        self.mechanisms = tuple(mechanisms)
        self.authorizer = authorizer
        self.reauth_ms = reauth_ms          # connections.max.reauth.ms, every mechanism
        self._tls = {ep.listener: ssl_context_from_config(ssl_config or {}, ep.listener)
                     for ep in endpoints if ep.security_protocol in TLS_PROTOCOLS}
        self._users = {user: {m: make_credential(m, password) for m in MECHANISMS}
                       for user, password in (users or {}).items()}
        self._lock = threading.Lock()
        self.sessions: list[Session] = []

    # -- what the listener asks (BrokerSecurity's API) -------------------------------------------
    def tls_context(self, listener: str):
        return self._tls.get(listener)

    def session(self, endpoint, peer_host: str, peer_cert: dict | None = None) -> Session:
        sasl = SaslServer(self.mechanisms, self.credential,
                          reauth_ms=lambda _mechanism: self.reauth_ms,
                          clock_ms=lambda: int(time.monotonic() * 1000)) \
            if endpoint.security_protocol in SASL_PROTOCOLS else None
        session = Session(endpoint.listener, peer_host, endpoint.security_protocol, sasl,
                          self.authorizer, tls_principal(peer_cert))
        with self._lock:
            self.sessions.append(session)
        return session

    def credential(self, mechanism: str, user: str):
        return self._users.get(user, {}).get(mechanism)

    # -- for the tests -----------------------------------------------------------------------------
    def principals(self) -> list[str]:
        """The principal of every session made so far, in order."""
        with self._lock:
            return [s.principal for s in self.sessions]
