"""Users and ACLs in ZooKeeper, in Kafka's formats: what the broker reads and what the wire's
CreateAcls / DeleteAcls / AlterUserScramCredentials, rayka's Admin and the `rayka
users|acls` commands write.

Rules:
- Users are Kafka's /config/users/<user> (SCRAM credentials, protocol/security/
  credentials.py; the name URL-encoded as Kafka's Sanitizer does), shared with the user's
  quotas: a SCRAM write keeps the quota keys (actors/config_store.py rewrites).
- ACLs are Kafka's AclAuthorizer znodes, one per resource pattern
  (protocol/security/acl_znodes.py), each write announced by a change notification.
- Writes read the znode, change it and write it back conditionally with its notification,
  retrying when another writer got there first (Kafka's way); a batch answers per item.
- Unreadable znodes are skipped with a warning (a broker keeps serving with what it can
  read).
"""

from __future__ import annotations

import logging

from actors.config_store import read_configs, read_entity, rewrite_entity
from controller.layout import check_name
from controller.zookeeper.store import BadVersion, ZkStore
from protocol.security.acl import AclBinding, AclBindingFilter, PatternType
from protocol.security.acl_znodes import (ACL_CHANGES_EXTENDED, ACL_CHANGES_LITERAL,
                                          CHANGE_PREFIX, acl_path, decode_acls, encode_acls,
                                          encode_change, pattern_of_path)
from protocol.entity_config import desanitize, sanitize
from protocol.security.credentials import (MECHANISMS, MAX_ITERATIONS, MIN_ITERATIONS,
                                           credential_from_salted,
                                           decode_credential, encode_credential,
                                           make_credential)
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidConfig

log = logging.getLogger(__name__)
WRITE_RETRIES = 20
LITERAL_ROOT, PREFIXED_ROOT = "/kafka-acl", "/kafka-acl-extended/prefixed"

def read_users(store: ZkStore) -> dict[str, dict]:
    """user → {mechanism: ScramCredential}, users without credentials left out."""
    users = {}
    for path, config in read_configs(store, "users", 1).items():
        creds = {}
        for mech in MECHANISMS:
            if mech in config:
                try:
                    creds[mech] = decode_credential(config[mech])
                except ValueError:
                    log.warning("ignoring unreadable %s credential at %s", mech, path)
        if creds:
            users[desanitize(path.partition("/")[2])] = creds
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
    replace) the user's credentials for each mechanism, keeping the others and its quotas."""
    check_name(user, "user name")
    if not password:
        raise InvalidConfig("a SCRAM password must not be empty")
    made = {mech: encode_credential(make_credential(mech, password, iterations))
            for mech in mechanisms}
    rewrite_entity(store, f"users/{sanitize(user)}", lambda cfg: {**cfg, **made})


def delete_user(store: ZkStore, user: str) -> bool:
    """Remove the user's credentials (its quotas stay); False when there were none."""
    path = f"users/{sanitize(check_name(user, 'user name'))}"
    if not any(m in read_entity(store, path) for m in MECHANISMS):
        return False
    rewrite_entity(store, path, lambda cfg: {k: v for k, v in cfg.items() if k not in MECHANISMS},
                   delete_when_empty=True)
    return True


def list_users(store: ZkStore) -> dict[str, tuple[str, ...]]:
    """user → the SCRAM mechanisms it has credentials for."""
    return {u: tuple(sorted(c)) for u, c in sorted(read_users(store).items())}


# -- DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554) -------------------------
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}      # Kafka's ScramMechanism.type
TYPE_OF = {name: t for t, name in MECHANISM_TYPES.items()}


def describe_scram(store: ZkStore, users: list[str] | None
                   ) -> list[tuple[str, int, str | None, tuple[tuple[int, int], ...]]]:
    """ZkAdminManager.describeUserScramCredentials: (user, error, message, ((mechanism type,
    iterations), ...)) per user; all users with credentials (sorted) when `users` is empty
    or None, else each asked user once, in order."""
    def infos(config: dict) -> tuple:
        return tuple((t, decode_credential(config[name]).iterations)
                     for t, name in sorted(MECHANISM_TYPES.items()) if name in config)

    if not users:
        out = []
        for path, config in sorted(read_configs(store, "users", 1).items(),
                                   key=lambda kv: desanitize(kv[0].partition("/")[2])):
            if any(m in config for m in MECHANISMS):
                user = desanitize(path.partition("/")[2])
                try:
                    out.append((user, E.NONE, None, infos(config)))
                except ValueError as exc:
                    out.append((user, E.UNKNOWN_SERVER_ERROR,
                                f"Error retrieving credentials: {exc}", ()))
        return sorted(out, key=lambda r: r[0])
    counts: dict[str, int] = {}
    for u in users:
        counts[u] = counts.get(u, 0) + 1
    out = []
    for user in dict.fromkeys(users):
        if not user:
            out.append((user, E.RESOURCE_NOT_FOUND,
                        "Cannot describe SCRAM credentials for empty username", ()))
        elif counts[user] > 1:
            out.append((user, E.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the "
                        f"same user twice in a single request: {user}", ()))
        else:
            config = read_entity(store, f"users/{sanitize(user)}")
            if not any(m in config for m in MECHANISMS):
                out.append((user, E.RESOURCE_NOT_FOUND,
                            f"Attempt to describe a user credential that does not exist: {user}",
                            ()))
                continue
            try:
                out.append((user, E.NONE, None, infos(config)))
            except ValueError as exc:
                out.append((user, E.UNKNOWN_SERVER_ERROR,
                            f"Error retrieving credentials: {exc}", ()))
    return out


def alter_scram(store: ZkStore, upsertions, deletions) -> list[tuple[str, int, str | None]]:
    """ZkAdminManager.alterUserScramCredentials. upsertions: (user, mechanism type,
    iterations, salt, salted password); deletions: (user, mechanism type). One result
    (user, error, message) per user, in Kafka's order: bad requests, duplicates, missing
    deletions, then the users written."""
    results: list[tuple[str, int, str | None]] = []
    illegal: dict[str, tuple[int, str]] = {}
    for user, mech, *rest in deletions:
        if not user:
            illegal[user] = (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech not in MECHANISM_TYPES:
            illegal[user] = (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for user, mech, iterations, _salt, _salted in upsertions:
        if not user:
            illegal[user] = (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech not in MECHANISM_TYPES:
            illegal[user] = (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif iterations < MIN_ITERATIONS:
            illegal[user] = (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif iterations > MAX_ITERATIONS:
            illegal[user] = (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    results += [(u, code, msg) for u, (code, msg) in illegal.items()]
    pairs = [(u, m) for u, m, *_ in upsertions if u not in illegal] + \
            [(u, m) for u, m, *_ in deletions if u not in illegal]
    seen, dup_users = set(), []
    for pair in pairs:
        if pair in seen and pair[0] not in dup_users:
            dup_users.append(pair[0])
        seen.add(pair)
    results += [(u, E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the "
                 "same request") for u in dup_users]
    users = list(dict.fromkeys(u for u, _ in pairs if u not in dup_users))
    configs = {u: read_entity(store, f"users/{sanitize(u)}") for u in users}
    missing = list(dict.fromkeys(u for u, m, *_ in deletions if u in configs
                                 and MECHANISM_TYPES[m] not in configs[u]))
    results += [(u, E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not "
                 "exist") for u in missing]
    for user in (u for u in users if u not in missing):
        try:
            dropped = {MECHANISM_TYPES[m] for u, m, *_ in deletions if u == user}
            made = {MECHANISM_TYPES[m]: encode_credential(credential_from_salted(
                MECHANISM_TYPES[m], bytes(salt), bytes(salted), iterations))
                for u, m, iterations, salt, salted in upsertions if u == user}

            def change(cfg, dropped=dropped, made=made):
                return {**{k: v for k, v in cfg.items() if k not in dropped}, **made}
            rewrite_entity(store, f"users/{sanitize(user)}", change, delete_when_empty=True)
            results.append((user, E.NONE, None))
        except Exception as exc:                 # noqa: BLE001 - per user, as Kafka
            log.warning("altering SCRAM credentials of %s: %s", user, exc)
            results.append((user, E.UNKNOWN_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))
    return results
