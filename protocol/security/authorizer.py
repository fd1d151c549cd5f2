"""Kafka's AclAuthorizer decisions over a snapshot of ACLs, with a decision cache.

Rules (Kafka 3.x: core's AclAuthorizer):
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
Pure: stdlib only, no clock, no I/O.
"""

from __future__ import annotations

from typing import Iterable

from protocol.security.acl import (WILDCARD, WILDCARD_HOST, WILDCARD_PRINCIPAL,
                                   AccessControlEntry, AclBinding, AclBindingFilter,
                                   AclOperation, AclPermissionType, PatternType, ResourceType,
                                   parse_principal)

_Op = AclOperation
# AclAuthorizer.authorizeAction's allowOps: what an ALLOW of another operation also grants.
IMPLIED_BY = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
}


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
