"""Kafka's ZooKeeper format for ACLs: the znode paths, the ACL JSON and the change events.

Rules (Kafka 3.x: core's ZkData, AclEntry, ZkAclStore and the ACL change stores):
- LITERAL ACLs live at /kafka-acl/<Type>/<name>, PREFIXED ones at
  /kafka-acl-extended/prefixed/<Type>/<name>; the data is AclEntry's JSON as Kafka's Jackson
  writes it ({"acls":[{"principal","permissionType","host","operation"}],"version":1}, keys
  in Java HashMap order; entries sorted here).
- A change is a sequential znode "acl_changes_" under /kafka-acl-changes holding
  "TOPIC:<name>" (ResourceType.toString) for LITERAL, or under /kafka-acl-extended-changes
  holding {"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"} (enum
  names).
- Decoding takes what Kafka writes; anything else is a ValueError (the caller decides).
Pure: stdlib only, no clock, no I/O.
"""

from __future__ import annotations

import json
from typing import Iterable

from protocol.security.acl import (CONCRETE_TYPES, AccessControlEntry, PatternType,
                                   ResourcePattern, ResourceType, operation_name,
                                   parse_operation, parse_permission, parse_principal,
                                   parse_resource_type, permission_name, resource_type_name)

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
