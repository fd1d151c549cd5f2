"""Security in the shell: the broker's users and ACLs from ZooKeeper, TLS contexts, sessions.

Rules:
- Broker configs with Kafka's names (`SecurityConfig.pop_from`, dotted or underscored):
  `authorizer.class.name` (Kafka's AclAuthorizer / SimpleAclAuthorizer / StandardAuthorizer
  names turn ACLs on; empty or absent: no authorizer, everything allowed), `super.users`
  ("User:a;User:b"), `allow.everyone.if.no.acl.found` (false), `sasl.enabled.mechanisms`
  (SCRAM-SHA-256,SCRAM-SHA-512; PLAIN only when listed), every `ssl.*` key, and every
  `listener.name.<listener>.<key>` override of them (Kafka's per-listener prefix).
- A bad TLS config fails the broker's start, with the key named (InvalidConfig), before it
  registers: a broker never advertises a listener it cannot serve.
- Users (SCRAM credentials, Kafka's /config/users/<user>) and ACLs (Kafka's AclAuthorizer
  znodes) are read from ZooKeeper at start and again whenever a change notification appears,
  on a thread of their own (ZooKeeper callbacks must not block); a reload replaces the whole
  set it read at once, and reads only what was announced (users or ACLs). Until the first load is done no one authenticates and nothing is authorised.
- This broker as a client of another broker (replication over the inter-broker
  listener): TLS with the same ssl.* keys (the truststore checks the peer, the keystore is
  this broker's certificate), SASL with sasl.mechanism.inter.broker.protocol and the
  credentials of listener.name.<listener>.<mechanism>.sasl.jaas.config, as Kafka's. With an
  authorizer, that principal needs ClusterAction on the cluster (a super user, as in
  Kafka), or followers are refused.
- Reading and writing the users and ACLs in ZooKeeper is actors/security_store.py's.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from actors.security_store import read_bindings, read_users
from controller.zookeeper.store import ZkStore
from controller.layout import CONFIG_CHANGES
from protocol.security.acl_znodes import ACL_CHANGES_EXTENDED, ACL_CHANGES_LITERAL
from protocol.security.authorizer import Authorizer
from protocol.security.credentials import MECHANISMS
from protocol.security.sasl import SaslServer
from protocol.security.sasl_client import SaslClient, jaas_credentials
from protocol.security.session import SASL_PROTOCOLS, TLS_PROTOCOLS, Session, tls_principal
from actors.tls_context import client_ssl_context, ssl_context_from_config
from replicas.config_keys import dotted_key
from replicas.errors import InvalidConfig

log = logging.getLogger(__name__)

AUTHORIZERS = {"kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
               "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
PREFIXES = ("ssl.", "sasl.", "listener.name.")
NAMES = ("authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
         "zookeeper.auth", "connections.max.reauth.ms")
REAUTH = "connections.max.reauth.ms"
USERS, ACLS = "users", "acls"


@dataclass(frozen=True)
class SecurityConfig:
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    zookeeper_auth: str | None = None                # "user:password" (digest)
    props: dict = field(default_factory=dict)       # ssl.*, sasl.*, listener.name.* (dotted)

    @classmethod
    def pop_from(cls, config: dict) -> "SecurityConfig":
        props = {}
        for key in list(config):
            dotted = dotted_key(key)
            if dotted.startswith(PREFIXES) or dotted in NAMES:
                props[dotted] = str(config.pop(key))
        name = props.pop("authorizer.class.name", "").strip()
        if name and name not in AUTHORIZERS:
            raise InvalidConfig(f"authorizer.class.name {name!r} is not supported: use "
                                "kafka.security.authorizer.AclAuthorizer")
        supers = tuple(u.strip() for u in props.pop("super.users", "").split(";") if u.strip())
        everyone = props.pop("allow.everyone.if.no.acl.found", "false").strip().lower()
        if everyone not in ("true", "false"):
            raise InvalidConfig(f"Invalid value {everyone!r} for configuration "
                                "allow.everyone.if.no.acl.found")
        out = cls(bool(name), supers, everyone == "true", props.pop("zookeeper.auth", None), props)
        for mech in out.mechanisms(None):
            if mech not in MECHANISMS + ("PLAIN",):
                raise InvalidConfig(f"sasl.enabled.mechanisms: {mech} is not supported "
                                    f"(supported: {', '.join(MECHANISMS + ('PLAIN',))})")
        for key, value in props.items():
            if key == REAUTH or key.endswith("." + REAUTH):
                try:
                    if int(value) < 0:
                        raise ValueError
                except ValueError:
                    raise InvalidConfig(f"Invalid value {value} for configuration {key}: "
                                        "must be a whole number of ms >= 0") from None
        return out

    def reauth_ms(self, listener: str | None = None, mechanism: str | None = None) -> int:
        """connections.max.reauth.ms (KIP-368) of a listener's mechanism: listener.name.<l>.
        <mechanism>.connections.max.reauth.ms, else listener.name.<l>.connections.max.
        reauth.ms, else the broker's; 0 (Kafka's default): sessions never expire."""
        value = self.get(f"{mechanism.lower()}.{REAUTH}", listener) if mechanism else None
        return int(value if value is not None else self.get(REAUTH, listener, 0))

    def get(self, key: str, listener: str | None, default=None):
        if listener is not None:
            value = self.props.get(f"listener.name.{listener.lower()}.{key}")
            if value is not None:
                return value
        return self.props.get(key, default)

    def mechanisms(self, listener: str | None) -> tuple[str, ...]:
        raw = self.get("sasl.enabled.mechanisms", listener, ",".join(MECHANISMS))
        return tuple(m.strip().upper() for m in raw.split(",") if m.strip())

    def inter_broker_credentials(self, listener: str) -> tuple[str, str, str]:
        """(mechanism, username, password) this broker authenticates with on another broker's
        SASL `listener`: Kafka's sasl.mechanism.inter.broker.protocol (default: the
        listener's first enabled mechanism) and listener.name.<listener>.<mechanism>.sasl.
        jaas.config (else sasl.jaas.config); InvalidConfig naming the key when it is not set."""
        mechanism = (self.props.get("sasl.mechanism.inter.broker.protocol")
                     or self.mechanisms(listener)[0]).strip().upper()
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas = self.props.get(key) or self.props.get("sasl.jaas.config")
        if not jaas:
            raise InvalidConfig(f"{key} is not set: this broker needs a username and password "
                                f"to replicate over the {listener} listener")
        return (mechanism, *jaas_credentials(jaas))


class BrokerSecurity:
    """One per broker: sessions for its listeners, its authorizer, its view of the users."""

    def __init__(self, store: ZkStore, config: SecurityConfig, endpoints=()):
        self.store, self.config = store, config
        self.authorizer = Authorizer(config.super_users, config.allow_everyone_if_no_acl_found) \
            if config.authorizer else None
        self._users: dict[str, dict] = {}
        self._tls = {ep.listener: ssl_context_from_config(config.props, ep.listener)
                     for ep in endpoints if ep.security_protocol in TLS_PROTOCOLS}
        self._client_tls: dict[str, object] = {}
        self._dirty = threading.Event()
        self._pending: set[str] = set()             # "users" / "acls": what changed since
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._watches = []

    def start(self) -> "BrokerSecurity":
        """Watch the notifications, then load once: a watch reports at registration too, and
        anything announced after that reload is reloaded again by the thread."""
        kinds = {CONFIG_CHANGES: USERS}
        if self.authorizer is not None:
            kinds.update({ACL_CHANGES_LITERAL: ACLS, ACL_CHANGES_EXTENDED: ACLS})
        for path, kind in kinds.items():
            self._watches.append(self.store.watch_notices(
                path, lambda _names, kind=kind: self._mark({kind})))
        self._take()
        self._reload(set(kinds.values()))
        threading.Thread(target=self._reloader, daemon=True, name="broker-security").start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()
        for w in self._watches:
            w.cancel()

    def _mark(self, kinds: set[str]) -> None:
        with self._lock:
            self._pending |= kinds
            self._dirty.set()

    def _take(self) -> set[str]:
        with self._lock:
            kinds, self._pending = self._pending, set()
            self._dirty.clear()
        return kinds

    def _reloader(self) -> None:
        while not self._stopped.is_set():
            self._dirty.wait()
            if self._stopped.is_set():
                return
            kinds = self._take()
            try:
                self._reload(kinds)
            except Exception:               # ZooKeeper away: retried after a pause
                log.exception("reloading %s failed", " and ".join(sorted(kinds)))
                self._mark(kinds)
                self._stopped.wait(1.0)

    def acls_written(self) -> None:
        """This broker changed the ACLs: reload them before answering, so its own next
        request sees them (Kafka's AclAuthorizer updates its cache in the same call; other
        brokers follow the notification)."""
        if self.authorizer is not None:
            self._reload({ACLS})

    def _reload(self, kinds: set[str]) -> None:
        """Only what was announced: a user's change does not re-read every ACL."""
        if USERS in kinds:
            self._users = read_users(self.store)
        if ACLS in kinds and self.authorizer is not None:
            self.authorizer.replace_all(read_bindings(self.store))

    # -- what the listener asks ------------------------------------------------------------
    def tls_context(self, listener: str):
        return self._tls.get(listener)

    def session(self, endpoint, peer_host: str, peer_cert: dict | None = None) -> Session:
        listener = endpoint.listener
        sasl = SaslServer(self.config.mechanisms(listener), self.credential,
                          reauth_ms=lambda mechanism: self.config.reauth_ms(listener, mechanism),
                          clock_ms=lambda: int(time.monotonic() * 1000)) \
            if endpoint.security_protocol in SASL_PROTOCOLS else None
        return Session(endpoint.listener, peer_host, endpoint.security_protocol, sasl,
                       self.authorizer, tls_principal(peer_cert))

    def credential(self, mechanism: str, user: str):
        return self._users.get(user, {}).get(mechanism)

    # -- this broker as a client of another broker's listener (replication) --------------------
    def client_tls_context(self, listener: str):
        """TLS to another broker's `listener` (actors/tls_context.py), made once."""
        ctx = self._client_tls.get(listener)
        if ctx is None:
            ctx = self._client_tls[listener] = client_ssl_context(self.config.props, listener)
        return ctx

    def client_sasl(self, listener: str) -> SaslClient:
        """Kafka's inter-broker SASL: sasl.mechanism.inter.broker.protocol (default: the
        listener's first enabled mechanism) with the username and password of
        listener.name.<listener>.<mechanism>.sasl.jaas.config (else sasl.jaas.config)."""
        return SaslClient(*self.config.inter_broker_credentials(listener))
