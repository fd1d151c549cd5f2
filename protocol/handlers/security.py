"""Security APIs: SaslHandshake (17), SaslAuthenticate (36), DescribeAcls (29), CreateAcls (30),
DeleteAcls (31).

Rules (Kafka's SaslServerAuthenticator and KafkaApis / AclAuthorizer):
- The SASL exchange is the connection's `SaslServer` (protocol/security/sasl.py): these
  handlers only translate. SaslHandshake / SaslAuthenticate on a listener without SASL is
  ILLEGAL_SASL_STATE (34; the handshake lists no mechanisms), and the connection stays open
  (Kafka's KafkaApis.handleSaslHandshakeRequest / handleSaslAuthenticateRequest answer and
  go on).
  An answer the SaslServer marks `close` (an unsupported mechanism, a failed
  authentication) is the connection's last: `session.closing` tells the listener.
  SaslHandshake v0: the tokens that follow come bare (protocol/connection.py), answered
  bare; a failed one is answered by closing the connection, as Kafka does.
- The ACL APIs need an authorizer (authorizer.class.name); without one every ACL API answers
  SECURITY_DISABLED (54), as Kafka does (DescribeAcls: "No Authorizer is configured on the
  broker", the others "No Authorizer is configured."). DescribeAcls needs Describe on the
  cluster, CreateAcls and DeleteAcls need Alter on it (CLUSTER_AUTHORIZATION_FAILED, 31).
- CreateAcls checks each binding (validate_binding: INVALID_REQUEST with Kafka's message) and
  writes the valid ones; DeleteAcls answers, per filter, the bindings it removed. Writes go
  to ZooKeeper through the broker (BrokerApi.create_acls / delete_acls); every broker's
  authorizer reloads from the change notification. DescribeAcls reads this broker's
  authorizer, as Kafka's does (a change just made elsewhere may not be visible yet).
"""

from __future__ import annotations

from protocol.build import build
from protocol.errors import ProtocolError
from protocol.security.acl import (CLUSTER_NAME, AccessControlEntry, AclBinding,
                                   AclBindingFilter, AclOperation as Op, AclPermissionType,
                                   PatternType, ResourcePattern, ResourceType as Res,
                                   validate_binding)
from replicas.errors import ErrorCode as E

NO_AUTHORIZER = "No Authorizer is configured on the broker"       # AclApis.handleDescribeAcls
NO_AUTHORIZER_ALTER = "No Authorizer is configured."               # handleCreate/DeleteAcls


# -- SASL ----------------------------------------------------------------------------------------
def sasl_handshake(_api, request, session):
    key, v = request.api_key, request.api_version
    if session.sasl is None:
        return build(key, v, "SaslHandshakeResponse", error_code=E.ILLEGAL_SASL_STATE,
                     mechanisms=())
    r = session.sasl.process_handshake(request.body.mechanism)
    session.closing = session.closing or bool(r.error_code)
    return build(key, v, "SaslHandshakeResponse", error_code=r.error_code,
                 mechanisms=tuple(r.mechanisms))


def sasl_authenticate(_api, request, session):
    key, v = request.api_key, request.api_version
    if session.sasl is None:
        return build(key, v, "SaslAuthenticateResponse", error_code=E.ILLEGAL_SASL_STATE,
                     error_message="SASL is not enabled on this listener", auth_bytes=b"")
    r = session.sasl.process_authenticate(bytes(request.body.auth_bytes), v)
    if r.error_code and getattr(request, "raw_sasl", False):
        # a bare token has no answer for a failure: Kafka closes the connection
        raise ProtocolError(f"SASL authentication failed: {r.error_message}",
                            api_key=key, api_version=v)
    session.closing = session.closing or r.close
    return build(key, v, "SaslAuthenticateResponse", error_code=r.error_code,
                 error_message=r.error_message, auth_bytes=r.auth_bytes,
                 session_lifetime=r.session_lifetime_ms)


# -- ACLs ----------------------------------------------------------------------------------------
def _cluster_denial(session, op, disabled: str = NO_AUTHORIZER_ALTER) -> tuple[int, str | None]:
    if session.authorizer is None:
        return E.SECURITY_DISABLED, disabled
    if not session.allowed(op, Res.CLUSTER, CLUSTER_NAME):
        return E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    return E.NONE, None


def _filter(f, prefix: str = "") -> AclBindingFilter | None:
    """A kio filter (DescribeAcls body or a DeleteAcls filter) as an AclBindingFilter, or None
    when a field holds a value Kafka does not know (INVALID_REQUEST)."""
    try:
        return AclBindingFilter(Res(f.resource_type_filter), f.resource_name_filter,
                                PatternType(f.pattern_type_filter), f.principal_filter,
                                f.host_filter, Op(f.operation), AclPermissionType(f.permission_type))
    except ValueError:
        return None


def describe_acls(_api, request, session):
    key, v = request.api_key, request.api_version
    code, message = _cluster_denial(session, Op.DESCRIBE, NO_AUTHORIZER)
    flt = _filter(request.body) if not code else None
    if not code and (flt is None or flt.is_unknown()):
        code, message = E.INVALID_REQUEST, "invalid ACL filter"
    if code:
        return build(key, v, "DescribeAclsResponse", error_code=code, error_message=message,
                     resources=())
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in session.authorizer.bindings(flt):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    resources = tuple(
        build(key, v, "DescribeAclsResource", resource_type=int(p.resource_type),
              resource_name=p.name, pattern_type=int(p.pattern_type), acls=tuple(
                  build(key, v, "AclDescription", principal=e.principal, host=e.host,
                        operation=int(e.operation), permission_type=int(e.permission))
                  for e in entries))
        for p, entries in by_pattern.items())
    return build(key, v, "DescribeAclsResponse", error_code=E.NONE, error_message=None,
                 resources=resources)


def create_acls(api, request, session):
    key, v = request.api_key, request.api_version
    creations = request.body.creations
    code, message = _cluster_denial(session, Op.ALTER)
    if code:
        results = [(code, message)] * len(creations)
    else:
        results, valid = [], []
        for c in creations:
            problem = None
            try:
                binding = AclBinding(
                    ResourcePattern(Res(c.resource_type), c.resource_name,
                                    PatternType(c.resource_pattern_type)),
                    AccessControlEntry(c.principal, c.host, Op(c.operation),
                                       AclPermissionType(c.permission_type)))
                problem = validate_binding(binding)
            except ValueError as exc:
                problem = (E.INVALID_REQUEST, f"invalid ACL: {exc}")
            results.append(problem)
            if problem is None:
                valid.append(binding)
        written = iter(api.create_acls(valid) if valid else ())
        results = [r if r is not None else next(written) for r in results]
    return build(key, v, "CreateAclsResponse", results=tuple(
        build(key, v, "AclCreationResult", error_code=c, error_message=msg) for c, msg in results))


def delete_acls(api, request, session):
    key, v = request.api_key, request.api_version
    filters = request.body.filters
    code, message = _cluster_denial(session, Op.ALTER)
    if code:
        outcomes = [(code, message, ())] * len(filters)
    else:
        parsed = [f if f is not None and not f.is_unknown() else None
                  for f in (_filter(x) for x in filters)]
        done = iter(api.delete_acls([f for f in parsed if f is not None]))
        outcomes = [next(done) if f is not None else (E.INVALID_REQUEST, "invalid ACL filter", ())
                    for f in parsed]
    return build(key, v, "DeleteAclsResponse", filter_results=tuple(
        build(key, v, "DeleteAclsFilterResult", error_code=c, error_message=msg,
              matching_acls=tuple(
                  build(key, v, "DeleteAclsMatchingAcl", error_code=E.NONE, error_message=None,
                        resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal,
                        host=b.entry.host, operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission)) for b in matched))
        for c, msg, matched in outcomes))
