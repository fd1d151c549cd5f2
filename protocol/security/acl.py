"""Kafka's ACL model: resource patterns, entries, bindings and the filters that match them.

Rules (Kafka 3.x: clients' org.apache.kafka.common.{acl,resource}, server's AclEntry and
AuthorizerUtils, AclApis.handleCreateAcls):
- Enums carry Kafka's wire codes. Names are spelled as Kafka's SecurityUtils does: Pascal case
  in JSON and the CLI ("Read", "DescribeConfigs", "TransactionalId"); parsing also takes the
  upper-cased Pascal form ("READ", "DESCRIBECONFIGS") and answers UNKNOWN for anything else.
- A filter (AclBindingFilter) matches a binding field by field, None and ANY matching
  anything; its pattern type MATCH finds every pattern that applies to a literal name.
- `validate_binding` is CreateAcls' per-binding check, INVALID_REQUEST (42) with Kafka's
  message: a type, operation or permission that is UNKNOWN, ANY or MATCH (KRaft's
  AclControlManager.validateNewAcl; ZooKeeper Kafka fails the whole request instead), a
  Cluster resource not named "kafka-cluster", an empty name, a name with "/" (AclAuthorizer).
  A principal not of the form "<type>:<name>" fails in AclAuthorizer with
  UNKNOWN_SERVER_ERROR (-1) and no message. The broker accepts PREFIXED "*" and operations
  that do not apply to the type (only Kafka's CLI checks those: `supported_operations`).
- Who may do what is authorizer.py's; how ACLs are stored in ZooKeeper is acl_znodes.py's.
Pure: stdlib only, no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from replicas.errors import ErrorCode as E


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
CONCRETE_TYPES = tuple(t for t in ResourceType if t > ResourceType.ANY)

_Op, _Rt = AclOperation, ResourceType
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
        return E.INVALID_REQUEST, f"Invalid resourceType {p.resource_type.name}"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return E.INVALID_REQUEST, f"Invalid patternType {p.pattern_type.name}"
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return E.INVALID_REQUEST, f"Invalid operation {e.operation.name}"
    if e.permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return E.INVALID_REQUEST, f"Invalid permissionType {e.permission.name}"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return E.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return E.INVALID_REQUEST, "Invalid empty resource name"
    if "/" in p.name:
        return E.INVALID_REQUEST, "Failed to create ACL"
    try:
        parse_principal(e.principal)
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR, None
    return None
