"""The store's znodes for security: SCRAM users and ACLs, written with change notifications.

Part of the ZooKeeper store (``ZkStore`` mixes this in). Kafka's ZooKeeper layout, relative
to the chroot; the formats of the data are not known here (protocol/security/ encodes them,
the caller passes bytes and paths):
- ``/config/users/<user>``: the user's SCRAM credentials (sensitive: no world READ when the
  session is secured); a change is announced by a sequential
  ``/config/changes/config_change_<n>`` holding ``{"version":2,"entity_path":"users/<user>"}``.
- ACLs: one znode per resource pattern (``/kafka-acl/...``, ``/kafka-acl-extended/...``),
  announced in the caller's change directory (``/kafka-acl-changes`` ...).

Rules:
- A write and its notification are ONE multi, conditional on the version the caller read
  (``BadVersion`` when someone else changed the znode meanwhile: read again and retry, as
  Kafka's AclAuthorizer does), so a watcher that sees the notification sees the write.
- Readers watch the notification directories (children) and reload what they hold; the
  writer purges notifications older than ``NOTICE_TTL_MS`` (Kafka's 15 minutes), so a broker
  that was away longer than that still reloads everything on its first watch callback.
"""

from __future__ import annotations

import json
import time
from typing import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.zookeeper.client import BadVersion, NoNode, ZkWatch, _zk_call

CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
NOTICE_TTL_MS = 15 * 60 * 1000


class SecurityZnodes:
    """Mixed into ZkStore (needs its ``_client``, ``_abs``, ``_children_watch``)."""

    # -- reads ---------------------------------------------------------------------------
    @_zk_call
    def read_tree(self, path: str, depth: int) -> dict[str, tuple[bytes, int]]:
        """Every znode exactly `depth` levels below `path`: relative path → (data, version)."""
        level = [path]
        for _ in range(depth):
            nxt = []
            for p in level:
                try:
                    nxt += [f"{p}/{c}" for c in self._client.get_children(self._abs(p))]
                except NoNodeError:
                    pass
            level = nxt
        out = {}
        for p in level:
            try:
                data, stat = self._client.get(self._abs(p))
            except NoNodeError:
                continue
            out[p] = (data or b"", stat.version)
        return out

    @_zk_call
    def read_znode(self, path: str) -> tuple[bytes, int] | None:
        try:
            data, stat = self._client.get(self._abs(path))
        except NoNodeError:
            return None
        return data or b"", stat.version

    @_zk_call
    def watch_notices(self, path: str, callback: Callable[[list[str]], None]) -> ZkWatch:
        """callback(sorted notification names) now and on every change (they may coalesce)."""
        self._client.ensure_path(self._abs(path))
        return self._children_watch(path, lambda children: sorted(children or ()), callback)

    # -- writes --------------------------------------------------------------------------
    @_zk_call
    def write_with_notice(self, path: str, data: bytes | None, version: int,
                          notice_dir: str, notice_prefix: str, notice: bytes,
                          sensitive: bool = False) -> None:
        """Set `path` to `data` (None: delete it) if its version is still `version` (-1: it
        must not exist yet), and announce it in `notice_dir`, in one multi."""
        self._client.ensure_path(self._abs(notice_dir))
        parent = path.rpartition("/")[0]
        if parent:
            self._client.ensure_path(self._abs(parent),
                                     acl=self.private_acl if sensitive else None)
        t = self._client.transaction()
        if data is None:
            t.delete(self._abs(path), version=version)
        elif version < 0:
            t.create(self._abs(path), data, acl=self.private_acl if sensitive else None)
        else:
            t.set_data(self._abs(path), data, version=version)
        t.create(self._abs(f"{notice_dir}/{notice_prefix}"), notice, sequence=True)
        results = t.commit()
        failure = next((r for r in results if isinstance(r, Exception)
                        and type(r).__name__ != "RuntimeInconsistency"), None)
        if isinstance(failure, (BadVersionError, NodeExistsError)):
            raise BadVersion(path)
        if isinstance(failure, NoNodeError):
            raise NoNode(path)
        if failure is not None:
            raise failure
        self._purge_notices(notice_dir)

    def _purge_notices(self, notice_dir: str) -> None:
        """Oldest first (the sequence numbers are creation order), stopping at the first one
        still young: a write costs one read per expired notice, not one per notice."""
        horizon_ms = time.time() * 1000 - NOTICE_TTL_MS
        for name in sorted(self._client.get_children(self._abs(notice_dir))):
            p = self._abs(f"{notice_dir}/{name}")
            stat = self._client.exists(p)
            if stat is not None and stat.ctime >= horizon_ms:
                return
            try:
                self._client.delete(p)
            except NoNodeError:
                pass                               # another writer purged it first

    def set_user_credentials(self, user: str, data: bytes | None, version: int) -> None:
        """Kafka's /config/users/<user> (None: delete), conditional on `version`."""
        self.write_with_notice(f"{CONFIG_USERS}/{user}", data, version, CONFIG_CHANGES,
                               CONFIG_CHANGE_PREFIX,
                               json.dumps({"version": 2, "entity_path": f"users/{user}"}).encode(),
                               sensitive=True)
