"""The broker's dynamic configs from ZooKeeper, kept current without a restart: client quotas
(/config/users, /config/clients) into the broker's QuotaTracker (protocol/quotas.py), and,
when given one, a `broker_configs` object's `reload(store)` (dynamic broker configs).

Rules:
- Read once at start, then again whenever a /config/changes notification appears (Kafka's
  ZkConfigManager), on a thread of its own (ZooKeeper callbacks must not block); the
  notification names the entity, but a reload re-reads every quota entity (cheap for the
  hundreds a cluster has, not for 100k).
- A failed reload (ZooKeeper away) is retried after a pause; until then the last values
  stay in force.
"""

from __future__ import annotations

import logging
import threading

from actors.config_store import read_quotas
from controller.layout import CONFIG_CHANGES
from controller.zookeeper.store import ZkStore

log = logging.getLogger(__name__)


class DynamicConfigWatcher:
    def __init__(self, store: ZkStore, tracker, broker_configs=None):
        self.store, self.tracker, self.broker_configs = store, tracker, broker_configs
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self._watch = None
        self.loads = 0                      # reloads done (tests poll it)

    def start(self) -> "DynamicConfigWatcher":
        self._watch = self.store.watch_notices(CONFIG_CHANGES, lambda _names: self._dirty.set())
        self._dirty.clear()
        self._reload()
        threading.Thread(target=self._run, daemon=True, name="dynamic-config").start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()
        if self._watch is not None:
            self._watch.cancel()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._dirty.wait()
            if self._stopped.is_set():
                return
            self._dirty.clear()
            try:
                self._reload()
            except Exception:                   # ZooKeeper away: retried after a pause
                log.exception("reloading dynamic configs failed")
                self._dirty.set()
                self._stopped.wait(1.0)

    def _reload(self) -> None:
        self.tracker.set_quotas(read_quotas(self.store))
        if self.broker_configs is not None:
            self.broker_configs.reload(self.store)
        self.loads += 1
