"""Client-side cluster metadata: which broker leads which partition, at which leader epoch.

Rules:
- Read from a live broker's metadata cache (fed by the controller's UpdateMetadata), as a
  Kafka client does; any broker will do, the first that answers is used.
- `refresh()` is called on a miss or after a NOT_LEADER / FENCED / UNKNOWN error; callers
  never trust Ray's view of which actor is alive for leadership.
- Unknown topics are retried until `topic_wait_s` before UnknownTopicOrPartition (3): a
  topic just created may not have reached every broker's cache yet.
"""

from __future__ import annotations

import threading
import time

import ray

from controller.store_api import ZkStoreError
from replicas.errors import UnknownTopicOrPartition

POLL_S = 0.05


class Metadata:
    def __init__(self, cluster, topic_wait_s: float = 10.0):
        self.cluster = cluster
        self.topic_wait_s = topic_wait_s
        self.partitions: dict[tuple, tuple] = {}   # tp → (leader, leader_epoch, replicas, isr)
        self._lock = threading.Lock()

    def refresh(self) -> None:
        try:
            live = sorted(self.cluster.store.get_broker_ids())
        except ZkStoreError:       # ZooKeeper is failing over: keep what we know, retry later
            return
        for broker in self.cluster.broker_actors(live):
            try:
                md = ray.get(broker.metadata.remote(), timeout=5)
            except Exception:  # that broker is down or restarting: ask the next one
                continue
            with self._lock:
                self.partitions = {tuple(tp): v for tp, v in md["partitions"].items()}
            return

    def partition_count(self, topic: str) -> int:
        deadline = time.monotonic() + self.topic_wait_s
        while True:
            with self._lock:
                n = sum(1 for t, _ in self.partitions if t == topic)
            if n:
                return n
            if time.monotonic() >= deadline:
                raise UnknownTopicOrPartition(f"Topic '{topic}' not present in metadata")
            self.refresh()
            time.sleep(POLL_S)  # poll interval of a deadline loop

    def leader(self, tp) -> tuple[int, int] | None:
        """(leader id, leader epoch) or None when unknown / no leader."""
        with self._lock:
            got = self.partitions.get(tuple(tp))
        if got is None or got[0] < 0:
            return None
        return got[0], got[1]
