"""Client quotas and SCRAM administration: DescribeClientQuotas (48), AlterClientQuotas (49),
DescribeUserScramCredentials (50), AlterUserScramCredentials (51).

Rules (Kafka 3.8 ZooKeeper mode: KafkaApis, ZkAdminManager, DescribeClientQuotasRequest):
- Describe needs DescribeConfigs on the cluster, Alter needs AlterConfigs (quotas) or Alter
  (SCRAM) on the cluster; denied: CLUSTER_AUTHORIZATION_FAILED (31) for everything asked.
- DescribeClientQuotas: a filter component per entity type (user, client-id) matching an
  exact name, the default entity or any; a duplicate or empty type, a bad match type or
  match string, or ip mixed with user/client-id is INVALID_REQUEST for the whole answer, an
  unknown type UNSUPPORTED_VERSION. Without `strict`, entities with other parts match too;
  with it, only entities made of exactly the components given. Only entities with a quota
  key are answered; the default entity's name is null. Ip entities (connection-rate
  quotas) are never stored here, so an ip filter finds nothing.
- AlterClientQuotas: one result per entry, in order: an empty entity, an unknown type, an
  empty name or an ip entity is INVALID_REQUEST; ops are checked by
  protocol/entity_config.py (unknown key, a LONG that is not whole, a value <= 0:
  INVALID_REQUEST); validate_only writes nothing. Writes go through the broker
  (BrokerApi.alter_client_quotas) to ZooKeeper, announced to every broker.
- SCRAM: BrokerApi.describe_scram / alter_scram (actors/security_store.py has Kafka's
  rules and codes: RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL,
  UNSUPPORTED_SASL_MECHANISM). Any broker answers (Kafka 3.8 sends Alter to the active
  controller: rayka's "controller" broker serves it as every other broker does).
"""

from __future__ import annotations

from protocol.build import build
from protocol.entity_config import CLIENT_ID, IP, USER, quota_value
from protocol.quotas import DEFAULT, QuotaEntity
from protocol.security.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as Res
from replicas.errors import ErrorCode as E

EXACT, DEFAULT_MATCH, ANY = 0, 1, 2
ANY_NAME = object()                               # a component matching any name


class _Invalid(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _allowed(session, op) -> bool:
    return session.authorizer is None or session.allowed(op, Res.CLUSTER, CLUSTER_NAME)


# -- DescribeClientQuotas ------------------------------------------------------------------------
def _components(body) -> dict[str, object]:
    """entity type → the name wanted (a str, DEFAULT or ANY_NAME); _Invalid for a bad filter."""
    out: dict[str, object] = {}
    for c in body.components:
        if c.match_type == EXACT:
            if c.match is None:
                raise _Invalid(E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set "
                                                  "match string to null")
            want = c.match
        elif c.match_type == DEFAULT_MATCH:
            if c.match is not None:
                raise _Invalid(E.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but "
                                                  "also specified a match string")
            want = DEFAULT
        elif c.match_type == ANY:
            if c.match is not None:
                raise _Invalid(E.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but "
                                                  "also specified a match string")
            want = ANY_NAME
        else:
            raise _Invalid(E.INVALID_REQUEST, f"Unexpected match type: {c.match_type}")
        if c.entity_type in out:
            raise _Invalid(E.INVALID_REQUEST, f"Duplicate {c.entity_type} filter component "
                                              "entity type")
        if c.entity_type == "":
            raise _Invalid(E.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise _Invalid(E.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not "
                                                  "supported")
        out[c.entity_type] = want
    if IP in out and (USER in out or CLIENT_ID in out):
        raise _Invalid(E.INVALID_REQUEST, "Invalid entity filter component combination, IP "
                                          "filter component should not be used with user or "
                                          "clientId filter component.")
    return out


def filter_quotas(quotas: dict[QuotaEntity, dict[str, float]], components: dict[str, object],
                  strict: bool) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """ZkAdminManager.handleDescribeClientQuotas over every entity with a quota."""
    if IP in components:
        return []
    user_c, client_c = components.get(USER), components.get(CLIENT_ID)
    exact_user = user_c is not None and user_c is not ANY_NAME
    exact_client = client_c is not None and client_c is not ANY_NAME
    exclude_user = strict and user_c is None
    exclude_client = strict and client_c is None
    kinds = set()
    if (exact_user and exclude_client) or (not exclude_user and not exact_client):
        kinds.add("user")
    if (exclude_user and exact_client) or (not exclude_client and not exact_user):
        kinds.add("client")
    if (exact_user and exact_client) or (not exclude_user and not exclude_client):
        kinds.add("both")

    def matches(component, part) -> bool:
        if component is None:
            return part is None or not strict
        if component is ANY_NAME:
            return part is not None
        return part == component if component is not DEFAULT else part is DEFAULT

    out = []
    for entity, values in quotas.items():
        kind = "both" if entity.user is not None and entity.client_id is not None \
            else "user" if entity.user is not None else "client"
        if values and kind in kinds and matches(user_c, entity.user) \
                and matches(client_c, entity.client_id):
            out.append((entity, values))
    return sorted(out, key=lambda ev: (_sort_key(ev[0].user), _sort_key(ev[0].client_id)))


def _sort_key(part) -> tuple:
    return (0, "") if part is None else (1, "") if part is DEFAULT else (2, part)


def _entity_data(key, v, entity: QuotaEntity, cls: str) -> tuple:
    parts = [(USER, entity.user), (CLIENT_ID, entity.client_id)]
    return tuple(build(key, v, cls, entity_type=t, entity_name=None if n is DEFAULT else n)
                 for t, n in parts if n is not None)


def describe_client_quotas(api, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    if not _allowed(session, Op.DESCRIBE_CONFIGS):
        return build(key, v, "DescribeClientQuotasResponse",
                     error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                     error_message="Cluster authorization failed.", entries=None)
    try:
        components = _components(body)
    except _Invalid as exc:
        return build(key, v, "DescribeClientQuotasResponse", error_code=exc.code,
                     error_message=exc.message, entries=None)
    found = filter_quotas(api.client_quotas(), components, bool(body.strict))
    return build(key, v, "DescribeClientQuotasResponse", error_code=E.NONE, error_message=None,
                 entries=tuple(build(key, v, "EntryData",
                                     entity=_entity_data(key, v, entity, "EntityData"),
                                     values=tuple(build(key, v, "ValueData", key=k, value=val)
                                                  for k, val in sorted(values.items())))
                               for entity, values in found))


# -- AlterClientQuotas ---------------------------------------------------------------------------
def parse_entity(parts) -> QuotaEntity:
    """ZkAdminManager.parseAndSanitizeQuotaEntity; _Invalid (INVALID_REQUEST) when Kafka
    refuses it, or for an ip entity (connection-rate quotas are not kept)."""
    if not parts:
        raise _Invalid(E.INVALID_REQUEST, "Invalid empty client quota entity")
    user = client = None
    for entity_type, name in parts:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise _Invalid(E.INVALID_REQUEST, f"Unhandled client quota entity type: "
                                              f"{entity_type}")
        if name is not None and name == "":
            raise _Invalid(E.INVALID_REQUEST, f"Empty {entity_type} not supported")
        if entity_type == IP:
            raise _Invalid(E.INVALID_REQUEST, "ip quotas (connection_creation_rate) are not "
                                              "supported by this broker")
        value = DEFAULT if name is None else name
        if entity_type == USER:
            user = value
        else:
            client = value
    return QuotaEntity(user, client)


def alter_client_quotas(api, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    allowed = _allowed(session, Op.ALTER_CONFIGS)
    results: list[tuple[int, str | None] | None] = []
    asks = []
    for entry in body.entries:
        if not allowed:
            results.append((E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."))
            continue
        try:
            entity = parse_entity([(e.entity_type, e.entity_name) for e in entry.entity])
            ops = []
            for op in entry.ops:
                if op.remove:
                    ops.append((op.key, None))
                else:
                    try:
                        ops.append((op.key, quota_value(op.key, float(op.value))))
                    except ValueError as exc:
                        raise _Invalid(E.INVALID_REQUEST, str(exc)) from None
        except _Invalid as exc:
            results.append((exc.code, exc.message))
            continue
        results.append(None)
        asks.append((entity, ops))
    done = iter(api.alter_client_quotas(asks, bool(body.validate_only)) if asks else ())
    results = [r if r is not None else next(done) for r in results]
    return build(key, v, "AlterClientQuotasResponse", entries=tuple(
        build(key, v, "EntryData", error_code=code, error_message=message,
              entity=tuple(build(key, v, "EntityData", entity_type=e.entity_type,
                                 entity_name=e.entity_name) for e in entry.entity))
        for entry, (code, message) in zip(body.entries, results)))


# -- SCRAM ----------------------------------------------------------------------------------------
def describe_user_scram_credentials(api, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    if not _allowed(session, Op.DESCRIBE):
        return build(key, v, "DescribeUserScramCredentialsResponse",
                     error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                     error_message="Cluster authorization failed.", results=())
    users = None if body.users is None else [u.name for u in body.users]
    found = api.describe_scram(users)
    return build(key, v, "DescribeUserScramCredentialsResponse", error_code=E.NONE,
                 results=tuple(build(key, v, "DescribeUserScramCredentialsResult", user=user,
                                     error_code=code, error_message=message,
                                     credential_infos=tuple(
                                         build(key, v, "CredentialInfo", mechanism=m,
                                               iterations=it) for m, it in infos))
                               for user, code, message, infos in found))


def alter_user_scram_credentials(api, request, session):
    body, key, v = request.body, request.api_key, request.api_version
    if not _allowed(session, Op.ALTER):
        users = dict.fromkeys([d.name for d in body.deletions] +
                              [u.name for u in body.upsertions])
        found = [(u, E.CLUSTER_AUTHORIZATION_FAILED, None) for u in users]
    else:
        found = api.alter_scram(
            [(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
              bytes(u.salted_password)) for u in body.upsertions],
            [(d.name, int(d.mechanism)) for d in body.deletions])
    return build(key, v, "AlterUserScramCredentialsResponse", results=tuple(
        build(key, v, "AlterUserScramCredentialsResult", user=user, error_code=code,
              error_message=message) for user, code, message in found))
