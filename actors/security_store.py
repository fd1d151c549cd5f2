"""Users and ACLs in ZooKeeper, in Kafka's formats: what the broker reads and what the wire's
CreateAcls / DeleteAcls, rayka's Admin and the `rayka users|acls` commands write.

Rules:
- Users are Kafka's /config/users/<user> (SCRAM credentials, protocol/security/
  credentials.py); ACLs are Kafka's AclAuthorizer znodes, one per resource pattern
  (protocol/security/acl_znodes.py), each write announced by a change notification.
- Writes read the znode, change it and write it back conditionally with its notification,
  retrying when another writer got there first (Kafka's way); a batch answers per item.
- Unreadable znodes are skipped with a warning (a broker keeps serving with what it can
  read).
"""

from __future__ import annotations

import logging

from controller.layout import CONFIG_USERS, check_name
from controller.zookeeper.store import BadVersion, ZkStore
from protocol.security.acl import AclBinding, AclBindingFilter, PatternType
from protocol.security.acl_znodes import (ACL_CHANGES_EXTENDED, ACL_CHANGES_LITERAL,
                                          CHANGE_PREFIX, acl_path, decode_acls, encode_acls,
                                          encode_change, pattern_of_path)
from protocol.security.credentials import (MECHANISMS, decode_user_config, encode_user_config,
                                           make_credential)
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidConfig

log = logging.getLogger(__name__)
WRITE_RETRIES = 20
LITERAL_ROOT, PREFIXED_ROOT = "/kafka-acl", "/kafka-acl-extended/prefixed"

def read_users(store: ZkStore) -> dict[str, dict]:
    users = {}
    for path, (data, _version) in store.read_tree(CONFIG_USERS, 1).items():
        try:
            users[path.rpartition("/")[2]] = decode_user_config(data)
        except ValueError:
            log.warning("ignoring unreadable credentials at %s", path)
    return users


def read_bindings(store: ZkStore) -> list[AclBinding]:
    out = []
    for root in (LITERAL_ROOT, PREFIXED_ROOT):
        for path, (data, _version) in store.read_tree(root, 2).items():
            pattern = pattern_of_path(path)
            if pattern is None:
                continue
            try:
                out += [AclBinding(pattern, e) for e in decode_acls(data)]
            except ValueError:
                log.warning("ignoring unreadable ACLs at %s", path)
    return out


def _rewrite(store: ZkStore, pattern, change) -> None:
    """Apply `change(set of entries) -> set` to the pattern's znode, conditionally, retrying."""
    path = acl_path(pattern)
    notices = ACL_CHANGES_EXTENDED if pattern.pattern_type == PatternType.PREFIXED \
        else ACL_CHANGES_LITERAL
    for _ in range(WRITE_RETRIES):
        got = store.read_znode(path)
        before = decode_acls(got[0]) if got and got[0] else frozenset()
        after = frozenset(change(set(before)))
        if after == before:
            return
        data = encode_acls(after) if after else None
        try:
            store.write_with_notice(path, data, got[1] if got else -1, notices, CHANGE_PREFIX,
                                    encode_change(pattern))
            return
        except BadVersion:
            continue                         # someone else wrote it: read again
    raise BadVersion(path)


def create_acls(store: ZkStore, bindings) -> list[tuple[int, str | None]]:
    by_pattern: dict = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    failed = {}
    for pattern, entries in by_pattern.items():
        try:
            _rewrite(store, pattern, lambda cur, e=entries: cur | e)
        except Exception as exc:                     # noqa: BLE001 - per item, as Kafka
            failed[pattern] = f"{type(exc).__name__}: {exc}"
    return [(E.UNKNOWN_SERVER_ERROR, failed[b.pattern]) if b.pattern in failed
            else (E.NONE, None) for b in bindings]


def delete_acls(store: ZkStore, filters) -> list[tuple[int, str | None, tuple]]:
    current = read_bindings(store)
    out = []
    for flt in filters:
        matched = tuple(b for b in current if flt.matches(b))
        by_pattern: dict = {}
        for b in matched:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        try:
            for pattern, entries in by_pattern.items():
                _rewrite(store, pattern, lambda cur, e=entries: cur - e)
            out.append((E.NONE, None, matched))
        except Exception as exc:                     # noqa: BLE001 - per filter, as Kafka
            out.append((E.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}", ()))
    return out


def list_acls(store: ZkStore, flt: AclBindingFilter | None = None) -> list[AclBinding]:
    return sorted((b for b in read_bindings(store) if flt is None or flt.matches(b)), key=str)


def add_user(store: ZkStore, user: str, password: str, mechanisms=MECHANISMS,
             iterations: int = 4096) -> None:
    """Kafka's `kafka-configs --alter --add-config SCRAM-SHA-256=[password=...]`: set (or
    replace) the user's credentials for each mechanism, keeping the others."""
    check_name(user, "user name")
    if not password:
        raise InvalidConfig("a SCRAM password must not be empty")
    path = f"{CONFIG_USERS}/{user}"
    for _ in range(WRITE_RETRIES):
        got = store.read_znode(path)
        creds = decode_user_config(got[0]) if got and got[0] else {}
        for mech in mechanisms:
            creds[mech] = make_credential(mech, password, iterations)
        try:
            store.set_user_credentials(user, encode_user_config(creds), got[1] if got else -1)
            return
        except BadVersion:
            continue
    raise BadVersion(path)


def delete_user(store: ZkStore, user: str) -> bool:
    """Remove the user's credentials; False when there were none."""
    got = store.read_znode(f"{CONFIG_USERS}/{check_name(user, 'user name')}")
    if got is None:
        return False
    store.set_user_credentials(user, None, got[1])
    return True


def list_users(store: ZkStore) -> dict[str, tuple[str, ...]]:
    """user → the SCRAM mechanisms it has credentials for."""
    return {u: tuple(sorted(c)) for u, c in sorted(read_users(store).items())}
