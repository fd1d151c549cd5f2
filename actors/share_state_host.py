"""ShareStateHost: the broker's shell around the pure share coordinator
(share/coordinator.py), a CoordinatorHost (actors/coordinator_host.py) of
`__share_group_state`.

Rules:
- Load: every record of the partition's log from the log start, in order, as (key, value)
  pairs (a tombstone's value is None); the coordinator replays them.
- `__share_group_state` is created on first use: share.coordinator.state.topic.num.partitions
  partitions (Kafka's default 50), replication factor min(3, live brokers), compacted, and
  min.insync.replicas 2 (Kafka's share.coordinator.state.topic.min.isr; capped by the
  replication factor): a leader cut off from its followers (paused, then back before it
  heard it was replaced) cannot write a state the new leader's coordinator never sees.
- `call(event)` answers a share-partition leader's ReadState / WriteState (the leader is
  this broker, or another one through the native door BrokerActor.share_state).
"""

from __future__ import annotations

import logging

from actors.coordinator_host import CoordinatorHost, clock_ms
from replicas import records
from replicas.control import CONTROL_FLAG
from share import coordinator as sc

log = logging.getLogger(__name__)

STATE_TOPIC = "__share_group_state"
STATE_REPLICATION_FACTOR = 3
STATE_MIN_ISR = 2        # Kafka's share.coordinator.state.topic.min.isr


class ShareStateHost(CoordinatorHost):
    topic = STATE_TOPIC
    messages = sc

    def __init__(self, broker, partitions: int):
        self.partitions = partitions
        super().__init__(broker, sc.ShareCoordinator(partitions, clock_ms), "share-state")

    def load_events(self, partition: int, leader_epoch: int):
        yield sc.BeginLoad(partition)
        loaded = tuple((r.key, r.value) for h, raw in self.read_batches(partition)
                       if not h.attributes & CONTROL_FLAG
                       for r in records.decode_records(raw) if r.key is not None)
        yield sc.LoadPartition(partition, loaded)
        (log.info if loaded else log.debug)("broker %s: loaded %d records of %s-%s",
                                            self.broker.id, len(loaded), self.topic, partition)

    def unload_event(self, partition: int, leader_epoch: int):
        return sc.UnloadPartition(partition)

    def topic_plan(self) -> tuple[int, int, dict]:
        return self.partitions, STATE_REPLICATION_FACTOR, {
            "cleanup.policy": "compact", "min.insync.replicas": str(STATE_MIN_ISR)}
