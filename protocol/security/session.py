"""Who is asking: the security state of one Kafka connection, as the handlers see it.

Rules:
- One `Session` per connection, made by the listener when it accepts: the listener name, the
  peer's address, the listener's security protocol, a `SaslServer` when the protocol is
  SASL_PLAINTEXT or SASL_SSL, and the broker's `Authorizer` (None: no authorizer.class.name,
  every request is allowed and the ACL APIs answer SECURITY_DISABLED, as Kafka).
- The principal is Kafka's: the SASL user once authenticated ("User:alice"), else the TLS
  client certificate's subject when the client sent one (Kafka's default principal builder
  on SSL: "User:" + the distinguished name), else "User:ANONYMOUS".
- `allowed(operation, resource_type, name)` is the one question handlers ask; the answer is
  the authorizer's for (principal, peer host, operation, resource).
- `closing` is set when the answer being sent must be the connection's last (a failed SASL
  exchange): the listener sends it and closes.
"""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


class Session:
    __slots__ = ("listener", "host", "security_protocol", "sasl", "authorizer",
                 "tls_principal", "closing")

    def __init__(self, listener: str = "PLAINTEXT", host: str = "",
                 security_protocol: str = "PLAINTEXT", sasl=None, authorizer=None,
                 tls_principal: str | None = None):
        self.listener, self.host, self.security_protocol = listener, host, security_protocol
        self.sasl, self.authorizer, self.tls_principal = sasl, authorizer, tls_principal
        self.closing = False

    @property
    def principal(self) -> str:
        if self.sasl is not None:
            return self.sasl.principal or ANONYMOUS
        return self.tls_principal or ANONYMOUS

    def allows_api(self, api_key: int) -> bool:
        """May this API be handled now (SASL: only ApiVersions and the SASL exchange before
        authentication completes; Kafka closes the connection otherwise)."""
        return self.sasl is None or self.sasl.allows(api_key)

    def allowed(self, operation, resource_type, name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type,
                                         name)

    def __repr__(self):
        return f"Session({self.listener}, {self.principal}@{self.host})"


def as_session(context) -> Session:
    """Handlers accept a bare listener name (tests, the plain listener) or a Session."""
    return context if isinstance(context, Session) else Session(listener=context or "PLAINTEXT")


def tls_principal(peer_cert: dict | None) -> str | None:
    """Kafka's default SSL principal: "User:" + the subject's distinguished name, most
    specific RDN first (X500Principal.getName()'s RFC 2253 order), or None without a cert."""
    if not peer_cert or not peer_cert.get("subject"):
        return None
    rdns = [f"{_SHORT.get(k, k)}={v}" for rdn in reversed(peer_cert["subject"]) for k, v in rdn]
    return "User:" + ",".join(rdns)


_SHORT = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
          "countryName": "C", "stateOrProvinceName": "ST", "localityName": "L",
          "domainComponent": "DC", "userId": "UID", "streetAddress": "STREET"}
