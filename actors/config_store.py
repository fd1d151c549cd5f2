"""Kafka's dynamic entity configs in ZooKeeper: client quotas (/config/users, /config/clients)
dynamic broker configs (/config/brokers) and groups' own configs (/config/groups), read and
rewritten as Kafka's AdminZkClient
does (formats: protocol/entity_config.py).

Rules:
- A rewrite reads the entity's znode, changes ITS keys only (a user's quotas and SCRAM
  credentials share one znode: each writer keeps the other's keys), and writes it back
  conditionally together with its /config/changes notification, retrying when another
  writer got there first. A config left empty is written as {"config":{}}, as Kafka does;
  a user znode with nothing left at all is deleted (the SCRAM `rayka users delete`).
- User znodes are created readable by rayka's ZooKeeper identity only (they may hold
  credentials); clients and brokers are not secret.
- Unreadable znodes are skipped with a warning: a broker keeps serving with what it reads.
"""

from __future__ import annotations

import logging
from typing import Callable

from controller.layout import CONFIG, CONFIG_CHANGE_PREFIX, CONFIG_CHANGES
from controller.zookeeper.store import BadVersion, ZkStore
from protocol.entity_config import (change_notice, decode_config, desanitize, encode_config,
                                    entity_of_path, quota_config_of)
from protocol.quotas import QuotaEntity

log = logging.getLogger(__name__)
WRITE_RETRIES = 20


def read_entity(store: ZkStore, path: str) -> dict[str, str]:
    """The config of /config/<path> ({} when absent or unreadable)."""
    got = store.read_znode(f"{CONFIG}/{path}")
    try:
        return decode_config(got[0]) if got else {}
    except ValueError:
        log.warning("ignoring unreadable config at %s/%s", CONFIG, path)
        return {}


def rewrite_entity(store: ZkStore, path: str,
                   change: Callable[[dict[str, str]], dict[str, str] | None],
                   delete_when_empty: bool = False) -> dict[str, str]:
    """Apply `change(config) -> new config` (None: leave it) to /config/<path>; the config
    written (or kept)."""
    full = f"{CONFIG}/{path}"
    for _ in range(WRITE_RETRIES):
        got = store.read_znode(full)
        try:
            before = decode_config(got[0]) if got else {}
        except ValueError:
            before = {}
        after = change(dict(before))
        if after is None or (after == before and got is not None):
            return before
        if not after and delete_when_empty:
            if got is None:
                return after
            data, version = None, got[1]
        else:
            data, version = encode_config(after), (got[1] if got else -1)
        try:
            store.write_with_notice(full, data, version, CONFIG_CHANGES, CONFIG_CHANGE_PREFIX,
                                    change_notice(path), sensitive=path.startswith("users/"))
            return after
        except BadVersion:
            continue                     # someone else wrote it: read again
    raise BadVersion(full)


def set_or_delete(ops) -> Callable[[dict], dict]:
    """A rewrite_entity change: each (key, value) sets the key, a None value deletes it."""
    def change(config: dict) -> dict:
        for key, value in ops:
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        return config
    return change


def read_configs(store: ZkStore, kind: str, depth: int = 1) -> dict[str, dict[str, str]]:
    """Every entity `depth` levels under /config/<kind>: path below /config → config."""
    out = {}
    for path, (data, _version) in store.read_tree(f"{CONFIG}/{kind}", depth).items():
        rel = path[len(CONFIG) + 1:]
        try:
            out[rel] = decode_config(data)
        except ValueError:
            log.warning("ignoring unreadable config at %s", path)
    return out


def read_quotas(store: ZkStore) -> dict[QuotaEntity, dict[str, float]]:
    """Every user, client and user+client entity that sets a quota."""
    out = {}
    found = {**read_configs(store, "users", 1), **read_configs(store, "users", 3),
             **read_configs(store, "clients", 1)}
    for path, config in found.items():
        entity = entity_of_path(path)
        quotas = quota_config_of(config)
        if entity is not None and quotas:
            out[entity] = quotas
    return out


def read_group_configs(store: ZkStore) -> dict[str, dict[str, str]]:
    """Every group's own configs (/config/groups/<group>), by group id."""
    return {desanitize(path.split("/", 1)[1]): config
            for path, config in read_configs(store, "groups", 1).items() if config}
