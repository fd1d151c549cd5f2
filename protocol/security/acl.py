"""Kafka's ACLs: the model, the authorizer's decision, and the ZooKeeper format they live in.

Rules (Kafka 3.x: clients' org.apache.kafka.common.{acl,resource}, core's AclAuthorizer and
ZkData, server's AclEntry and AuthorizerUtils, AclApis.handleCreateAcls):
- Enums carry Kafka's wire codes. Names are spelled as Kafka's SecurityUtils does: Pascal case
  in JSON and the CLI ("Read", "DescribeConfigs", "TransactionalId"); parsing also takes the
  upper-cased Pascal form ("READ", "DESCRIBECONFIGS") and answers UNKNOWN for anything else.
- `authorize(principal, host, operation, type, name)` (AclAuthorizer.authorizeAction): a super
  user is always allowed. The ACLs that apply to the resource are the LITERAL ones with its
  name, the LITERAL ones named "*", and the PREFIXED ones whose name is a prefix of its name.
  If none applies at all (to anyone) the answer is `allow.everyone.if.no.acl.found`. Otherwise
  an ACL matches when its principal is the caller's or "User:*" (whatever the caller's
  principal type), its host the caller's or "*", and its operation the one asked or ALL: any
  matching DENY refuses; then a matching ALLOW allows, where ALLOW of READ, WRITE, DELETE or
  ALTER also allows DESCRIBE and ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (allow
  only: a DENY of READ does not deny DESCRIBE). Anything else is refused.
- `may_on_some(principal, host, operation, type)` is authorizeByResourceType (KIP-679): may the
  caller do `operation` on at least one resource of the type (InitProducerId without a
  transactional id). No implied operations there, as Kafka.
- The authorizer swaps a whole new snapshot on `replace_all` (readers keep the one they
  took); decisions are cached per snapshot, at most `cache_limit` of them.
- `validate_binding` is CreateAcls' per-binding check, INVALID_REQUEST (42) with Kafka's
  message: a type, operation or permission that is UNKNOWN, ANY or MATCH (KRaft's
  AclControlManager.validateNewAcl; ZooKeeper Kafka fails the whole request instead), a
  Cluster resource not named "kafka-cluster", an empty name, a name with "/" (AclAuthorizer).
  A principal not of the form "<type>:<name>" fails in AclAuthorizer with
  UNKNOWN_SERVER_ERROR (-1) and no message. The broker accepts PREFIXED "*" and operations
  that do not apply to the type (only Kafka's CLI checks those: `supported_operations`).
- ZooKeeper (ZkData): LITERAL ACLs at /kafka-acl/<Type>/<name>, PREFIXED at
  /kafka-acl-extended/prefixed/<Type>/<name>; the data is AclEntry's JSON as Kafka's Jackson
  writes it ({"acls":[{"principal","permissionType","host","operation"}],"version":1}, keys
  in Java HashMap order; entries sorted here). A change is a sequential znode "acl_changes_"
  under /kafka-acl-changes holding "TOPIC:<name>" (ResourceType.toString) for LITERAL, or
  under /kafka-acl-extended-changes holding
  {"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"} (enum names).
Pure: stdlib only, no clock, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable


# Kafka's wire codes: each enum counts from 0 in Kafka's order.
class ResourceType(IntEnum):
    UNKNOWN, ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = range(8)


class PatternType(IntEnum):
    UNKNOWN, ANY, MATCH, LITERAL, PREFIXED = range(5)


class AclOperation(IntEnum):
    (UNKNOWN, ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION,
     DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS) = range(15)


class AclPermissionType(IntEnum):
    UNKNOWN, ANY, DENY, ALLOW = range(4)


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"                       # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
INVALID_REQUEST = 42
UNKNOWN_SERVER_ERROR = -1
CONCRETE_TYPES = tuple(t for t in ResourceType if t > ResourceType.ANY)

_Op, _Rt, _Perm = AclOperation, ResourceType, AclPermissionType
# AclAuthorizer.authorizeAction's allowOps: what an ALLOW of another operation also grants.
IMPLIED_BY = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
}
_SUPPORTED = {   # AclEntry.supportedOperations
    _Rt.TOPIC: (_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    _Rt.GROUP: (_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    _Rt.CLUSTER: (_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS,
                  _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE),
    _Rt.TRANSACTIONAL_ID: (_Op.DESCRIBE, _Op.WRITE),
    _Rt.DELEGATION_TOKEN: (_Op.DESCRIBE,),
    _Rt.USER: (_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS),
}


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """AclEntry.supportedOperations: what the CLI accepts and authorizedOperations reports."""
    if resource_type not in _SUPPORTED:
        raise ValueError(f"not a concrete resource type: {resource_type!r}")
    return frozenset(_SUPPORTED[resource_type])


# -- names, as SecurityUtils spells them -----------------------------------------------------------
def _pascal(enum_name: str) -> str:
    return "".join(part.capitalize() for part in enum_name.split("_"))


def _names(enum) -> dict:
    out = {}
    for v in enum:
        out[_pascal(v.name)] = v
        out[_pascal(v.name).upper()] = v
    return out


_RT_NAMES, _OP_NAMES, _PERM_NAMES = _names(ResourceType), _names(AclOperation), \
    _names(AclPermissionType)


def _lookup(table: dict, name: str, unknown):
    return table[name] if name in table else table.get(name.upper(), unknown)


def resource_type_name(t: ResourceType) -> str:
    return _pascal(ResourceType(t).name)


def operation_name(op: AclOperation) -> str:
    return _pascal(AclOperation(op).name)


def permission_name(p: AclPermissionType) -> str:
    return _pascal(AclPermissionType(p).name)


def parse_resource_type(name: str) -> ResourceType:
    return _lookup(_RT_NAMES, name, ResourceType.UNKNOWN)


def parse_operation(name: str) -> AclOperation:
    return _lookup(_OP_NAMES, name, AclOperation.UNKNOWN)


def parse_permission(name: str) -> AclPermissionType:
    return _lookup(_PERM_NAMES, name, AclPermissionType.UNKNOWN)


def parse_principal(s: str) -> tuple[str, str]:
    """SecurityUtils.parseKafkaPrincipal: "User:alice" -> ("User", "alice"); split at the
    first colon, either side may be empty; ValueError without a colon."""
    if not isinstance(s, str) or ":" not in s:
        raise ValueError(f"expected a string in format principalType:principalName but got {s}")
    kind, _, name = s.partition(":")
    return kind, name


# -- the model ------------------------------------------------------------------------------------
def _coerce(obj, attr: str, enum) -> None:
    value = getattr(obj, attr)
    if not isinstance(value, enum):
        object.__setattr__(obj, attr, enum(value))


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self):
        _coerce(self, "resource_type", ResourceType)
        _coerce(self, "pattern_type", PatternType)


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __post_init__(self):
        _coerce(self, "operation", AclOperation)
        _coerce(self, "permission", AclPermissionType)


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def is_unknown(self) -> bool:
        p, e = self.pattern, self.entry
        return PatternType.UNKNOWN == p.pattern_type or ResourceType.UNKNOWN == p.resource_type \
            or AclOperation.UNKNOWN == e.operation or AclPermissionType.UNKNOWN == e.permission

    def to_filter(self) -> "AclBindingFilter":
        p, e = self.pattern, self.entry
        return AclBindingFilter(p.resource_type, p.name, p.pattern_type, e.principal, e.host,
                                e.operation, e.permission)


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter (ResourcePatternFilter + AccessControlEntryFilter); None and
    ANY match anything. The default is AclBindingFilter.ANY."""
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self):
        for attr, enum in (("resource_type", ResourceType), ("pattern_type", PatternType),
                           ("operation", AclOperation), ("permission", AclPermissionType)):
            _coerce(self, attr, enum)

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_matches(binding.pattern) and self.entry_matches(binding.entry)

    def pattern_matches(self, p: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: MATCH finds every pattern that applies to the
        literal name (the name, the wildcard, its prefixes)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != p.pattern_type:
            return False
        if self.name is None:
            return True
        if pt == PatternType.ANY or pt == p.pattern_type:
            return self.name == p.name
        if p.pattern_type == PatternType.LITERAL:
            return self.name == p.name or p.name == WILDCARD
        if p.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(p.name)
        return False

    def entry_matches(self, e: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == AclOperation.ANY or self.operation == e.operation)
                and (self.permission == AclPermissionType.ANY or self.permission == e.permission))

    def find_indefinite_field(self) -> str | None:
        """Kafka's findIndefiniteField: why this filter may match more than one binding (the
        admin client refuses to create such an ACL), or None."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Resource type is {self.resource_type.name}."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type in (PatternType.MATCH, PatternType.UNKNOWN):
            return f"Resource pattern type is {self.pattern_type.name}."
        if self.principal is None or self.host is None:
            return "Principal is NULL" if self.principal is None else "Host is NULL"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}"
        if self.permission in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
            return f"Permission type is {self.permission.name}"
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def is_unknown(self) -> bool:
        """DescribeAcls / DeleteAcls refuse a filter with an UNKNOWN field (Kafka fails the
        request while parsing it)."""
        return ResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == \
            self.pattern_type or AclOperation.UNKNOWN == self.operation \
            or AclPermissionType.UNKNOWN == self.permission


AclBindingFilter.ANY = AclBindingFilter()


def validate_binding(b: AclBinding) -> tuple[int, str | None] | None:
    """CreateAcls' check of one binding: (error code, message) or None when it may be written."""
    p, e = b.pattern, b.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return INVALID_REQUEST, f"Invalid resourceType {p.resource_type.name}"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return INVALID_REQUEST, f"Invalid patternType {p.pattern_type.name}"
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return INVALID_REQUEST, f"Invalid operation {e.operation.name}"
    if e.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return INVALID_REQUEST, f"Invalid permissionType {e.permission.name}"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return INVALID_REQUEST, "Invalid empty resource name"
    if "/" in p.name:
        return INVALID_REQUEST, "Failed to create ACL"
    try:
        parse_principal(e.principal)
    except ValueError:
        return UNKNOWN_SERVER_ERROR, None
    return None


# -- the authorizer -------------------------------------------------------------------------------
def _sort_key(b: AclBinding):
    p, e = b.pattern, b.entry
    return (p.resource_type, p.pattern_type, p.name, e.principal, e.host, e.operation,
            e.permission)


class _Snapshot:
    """One immutable generation of ACLs with its indexes and its decision cache."""
    __slots__ = ("literal", "prefixed", "prefix_lengths", "by_entry", "bindings", "cache")

    def __init__(self, bindings: Iterable[AclBinding]):
        self.bindings = tuple(sorted(set(bindings), key=_sort_key))
        literal: dict[tuple, list] = {}
        prefixed: dict[tuple, list] = {}
        lengths: dict[ResourceType, set] = {}
        by_entry: dict[tuple, set] = {}   # AclAuthorizer's resourceCache (ResourceTypeKey)
        for b in self.bindings:
            p, e = b.pattern, b.entry
            key = (p.resource_type, p.name)
            if p.pattern_type == PatternType.LITERAL:
                literal.setdefault(key, []).append(e)
            elif p.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(key, []).append(e)
                lengths.setdefault(p.resource_type, set()).add(len(p.name))
            by_entry.setdefault((e, p.resource_type, p.pattern_type), set()).add(p.name)
        self.literal = {k: tuple(v) for k, v in literal.items()}
        self.prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self.prefix_lengths = {t: tuple(sorted(v)) for t, v in lengths.items()}
        self.by_entry = {k: frozenset(v) for k, v in by_entry.items()}
        self.cache: dict[tuple, bool] = {}

    def applying(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """AclAuthorizer.matchingAcls: prefixed, wildcard literal, literal."""
        out: list[AccessControlEntry] = []
        for n in self.prefix_lengths.get(resource_type, ()):
            if n > len(name):
                break
            if n == 0 and name:       # Kafka's range lookup never reaches the empty prefix
                continue
            out += self.prefixed.get((resource_type, name[:n]), ())
        out += self.literal.get((resource_type, WILDCARD), ())
        out += self.literal.get((resource_type, name), ())
        return out


def _matching(acls, principal: str, host: str, ops, permission: AclPermissionType) -> bool:
    return any(e.permission == permission
               and (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
               and (e.operation in ops or e.operation == AclOperation.ALL)
               and (e.host == host or e.host == WILDCARD_HOST)
               for e in acls)


class Authorizer:
    """Kafka's AclAuthorizer decisions over a snapshot that `replace_all` swaps whole."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False, cache_limit: int = 10_000):
        users = [u.strip() for u in super_users if u and u.strip()]
        for u in users:
            parse_principal(u)
        self.super_users = frozenset(users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        self.cache_limit = cache_limit
        self._snap = _Snapshot(())

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        self._snap = _Snapshot(bindings)      # one reference swap: readers see old or new

    @property
    def cached(self) -> int:
        """How many decisions the current snapshot has cached."""
        return len(self._snap.cache)

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        snap = self._snap
        key = (principal, host, operation, resource_type, name)
        got = snap.cache.get(key)
        if got is None:
            got = self._decide(snap, principal, host, operation, resource_type, name)
            if len(snap.cache) >= self.cache_limit:
                snap.cache.clear()
            snap.cache[key] = got
        return got

    def _decide(self, snap: _Snapshot, principal, host, operation, resource_type, name) -> bool:
        acls = snap.applying(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if _matching(acls, principal, host, (operation,), AclPermissionType.DENY):
            return False
        allow_ops = IMPLIED_BY.get(operation, (operation,))
        return _matching(acls, principal, host, allow_ops, AclPermissionType.ALLOW)

    def may_on_some(self, principal: str, host: str, operation: AclOperation,
                    resource_type: ResourceType) -> bool:
        """AclAuthorizer.authorizeByResourceType: is `operation` allowed on some resource of
        the type (a literal or prefixed ALLOW not dominated by a DENY)."""
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) \
                or operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError("authorizeByResourceType needs a concrete type and operation")
        if principal in self.super_users:
            return True
        by_entry = self._snap.by_entry

        def names(permission, pattern_type) -> list[frozenset]:
            return [by_entry[k] for k in (
                (AccessControlEntry(p, h, o, permission), resource_type, pattern_type)
                for p in {principal, WILDCARD_PRINCIPAL} for h in {host, WILDCARD_HOST}
                for o in {operation, AclOperation.ALL}) if k in by_entry]

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if any(WILDCARD in s for s in deny_literals):
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)
        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)
        if not deny_literals and not deny_prefixes:
            return bool(allow_prefixes or allow_literals)

        def dominated(n: str) -> bool:   # hasDominantPrefixedDeny
            return any(n[:i] in s for i in range(1, len(n) + 1) for s in deny_prefixes)

        return any(not dominated(n) for s in allow_prefixes for n in s) or any(
            n == WILDCARD or (not any(n in s for s in deny_literals) and not dominated(n))
            for s in allow_literals for n in s)

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """DescribeAcls: every binding the filter matches, by (type, pattern type, name, entry)."""
        all_ = self._snap.bindings
        return list(all_) if flt is None else [b for b in all_ if flt.matches(b)]


# -- ZooKeeper (ZkData, AclEntry) ----------------------------------------------------------------
ACL_ROOT_LITERAL = "/kafka-acl"
ACL_ROOT_EXTENDED = "/kafka-acl-extended"
ACL_CHANGES_LITERAL = "/kafka-acl-changes"
ACL_CHANGES_EXTENDED = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1
CHANGE_JSON_VERSION = 1
_SPECIFIC = (PatternType.LITERAL, PatternType.PREFIXED)


def acl_root(pattern_type: PatternType) -> str:
    """ZkAclStore(patternType).aclPath: /kafka-acl, /kafka-acl-extended/prefixed."""
    if pattern_type == PatternType.LITERAL:
        return ACL_ROOT_LITERAL
    if pattern_type == PatternType.PREFIXED:
        return f"{ACL_ROOT_EXTENDED}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type!r}")


def acl_path(pattern: ResourcePattern) -> str:
    """ResourceZNode.path: <root>/<Type>/<name>."""
    if pattern.resource_type not in CONCRETE_TYPES:
        raise ValueError(f"not a concrete resource type: {pattern.resource_type!r}")
    if not pattern.name or "/" in pattern.name or pattern.name in (".", ".."):
        raise ValueError(f"not a resource name for a znode: {pattern.name!r}")
    return f"{acl_root(pattern.pattern_type)}/{resource_type_name(pattern.resource_type)}/" \
           f"{pattern.name}"


def acl_paths() -> list[str]:
    """KafkaZkClient.createAclPaths: each root, a child per resource type, the change paths."""
    out = []
    for pt in _SPECIFIC:
        out.append(acl_root(pt))
        out += [f"{acl_root(pt)}/{resource_type_name(t)}" for t in CONCRETE_TYPES]
    return out + [ACL_CHANGES_LITERAL, ACL_CHANGES_EXTENDED]


def pattern_of_path(path: str) -> ResourcePattern | None:
    """The pattern an ACL znode holds, or None when the path is not one (an unknown resource
    type is skipped, as loadAllAcls does)."""
    for pt in _SPECIFIC:
        root = acl_root(pt) + "/"
        if path.startswith(root):
            kind, sep, name = path[len(root):].partition("/")
            rt = parse_resource_type(kind)
            if sep and name and "/" not in name and rt in CONCRETE_TYPES:
                return ResourcePattern(rt, name, pt)
            return None
    return None


def _entry_json(e: AccessControlEntry) -> dict:
    # Jackson writes AclEntry.toMap's HashMap in bucket order: principal, permissionType,
    # host, operation.
    return {"principal": e.principal, "permissionType": permission_name(e.permission),
            "host": e.host, "operation": operation_name(e.operation)}


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """ResourceZNode.encode: {"acls":[...],"version":1}, compact, entries sorted."""
    ordered = sorted(set(entries), key=lambda e: (e.principal, e.host, e.operation, e.permission))
    doc = {"acls": [_entry_json(e) for e in ordered], "version": ACL_JSON_VERSION}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _strings(obj: dict, *keys: str) -> list[str]:
    out = []
    for k in keys:
        if not isinstance(obj.get(k), str):
            raise ValueError(f"ACL entry without a string {k!r}: {obj!r}")
        out.append(obj[k])
    return out


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    """AclEntry.fromBytes. Empty data is no ACLs. Names Kafka does not know become UNKNOWN, as
    Kafka's; anything structurally wrong is a ValueError (Kafka reads unparsable JSON as no
    ACLs: the caller decides)."""
    if not data:
        return frozenset()
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except ValueError as exc:
        raise ValueError(f"ACL znode data is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != ACL_JSON_VERSION \
            or isinstance(doc.get("version"), bool) or not isinstance(doc.get("acls"), list):
        raise ValueError(f"not version 1 ACL JSON: {data[:200]!r}")
    out = set()
    for item in doc["acls"]:
        if not isinstance(item, dict):
            raise ValueError(f"ACL entry is not an object: {item!r}")
        principal, permission, host, operation = _strings(
            item, "principal", "permissionType", "host", "operation")
        parse_principal(principal)
        out.add(AccessControlEntry(principal, host, parse_operation(operation),
                                   parse_permission(permission)))
    return frozenset(out)


def change_path(pattern: ResourcePattern) -> str:
    """Where the pattern's change notification goes (ZkAclStore(..).changeStore)."""
    if pattern.pattern_type not in _SPECIFIC:
        raise ValueError(f"Invalid pattern type: {pattern.pattern_type!r}")
    return ACL_CHANGES_LITERAL if pattern.pattern_type == PatternType.LITERAL \
        else ACL_CHANGES_EXTENDED


def encode_change(pattern: ResourcePattern) -> bytes:
    """LiteralAclChangeStore: "TOPIC:foo"; ExtendedAclChangeStore: its JSON event."""
    change_path(pattern)
    if pattern.resource_type not in CONCRETE_TYPES:
        raise ValueError(f"not a concrete resource type: {pattern.resource_type!r}")
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode("utf-8")
    doc = {"version": CHANGE_JSON_VERSION, "resourceType": pattern.resource_type.name,
           "name": pattern.name, "patternType": pattern.pattern_type.name}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _change_type(name: str) -> ResourceType:
    """ResourceType.fromString (enum name, any case), and the Pascal names too."""
    rt = ResourceType.__members__.get(name.upper(), parse_resource_type(name))
    if rt not in CONCRETE_TYPES:
        raise ValueError(f"unknown resource type in ACL change: {name!r}")
    return rt


def decode_change(data: bytes) -> ResourcePattern:
    """Either store's notification (the extended one is JSON, the literal one never starts
    with "{"); ValueError when unreadable."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"ACL change is not UTF-8: {exc}") from None
    if not text.startswith("{"):
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError("expected a string in format ResourceType:ResourceName but got "
                             + text)
        return ResourcePattern(_change_type(kind), name, PatternType.LITERAL)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"Failed to parse ACL change event: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"Failed to parse ACL change event: {text[:200]!r}")
    version = doc.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool) \
            or version > CHANGE_JSON_VERSION:
        raise ValueError(f"Acl change event received for unsupported version: {version!r}")
    kind, name, pattern = _strings(doc, "resourceType", "name", "patternType")
    pt = PatternType.__members__.get(pattern)          # PatternType.fromString: exact name
    if pt not in _SPECIFIC:
        raise ValueError(f"unknown pattern type in ACL change: {pattern!r}")
    return ResourcePattern(_change_type(kind), name, pt)
