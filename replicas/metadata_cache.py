"""A broker's metadata cache, fed by UpdateMetadata (Kafka's ZkMetadataCache).

Rules:
- `live_brokers` is REPLACED by each UpdateMetadata (it always carries the full live set);
  partition states are upserted per partition; a state whose leader is -2
  (LeaderDuringDelete: the topic is being deleted) removes the partition from the cache.
- The requests are duck-typed: anything with the attributes of
  controller.requests.UpdateMetadataRequest / PartitionLeaderState / LiveBroker works
  (replicas/ may not import controller/: docs/architecture.md).
- Topic ids (Kafka's Uuid text form) come with the partition states: a topic's id is the
  last one a state of it carried, and is forgotten with the topic's last partition.
  `topic_id(name)` and `topic_name(id)` answer None for what is not known.
- Clients ask any broker for leaders and live brokers; a missing partition or a leader
  that is not live answers None (the client refreshes and retries).
"""

from __future__ import annotations

from typing import NamedTuple

LEADER_DURING_DELETE = -2
NO_LEADER = -1


class TopicPartition(NamedTuple):
    """Equal to (and hashes like) controller.context.TopicPartition and plain (topic, p) tuples."""

    topic: str
    partition: int


class MetadataCache:
    def __init__(self) -> None:
        self.controller_id: int = -1
        self.live_brokers: dict[int, object] = {}          # id -> LiveBroker
        self.partitions: dict[TopicPartition, object] = {}  # tp -> PartitionLeaderState
        self._ids: dict[str, str] = {}                      # topic -> topic id
        self._names: dict[str, str] = {}                    # topic id -> topic

    def update(self, request) -> list[TopicPartition]:
        """Apply an UpdateMetadataRequest; returns the partitions removed (being deleted)."""
        self.controller_id = request.controller_id
        self.live_brokers = {b.id: b for b in request.live_brokers}
        deleted = []
        for state in request.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            if state.leader == LEADER_DURING_DELETE:
                if self.partitions.pop(tp, None) is not None:
                    deleted.append(tp)
            else:
                self.partitions[tp] = state
                topic_id = getattr(state, "topic_id", None)
                if topic_id and self._ids.get(state.topic) != topic_id:
                    self._forget_id(state.topic)
                    self._ids[state.topic], self._names[topic_id] = topic_id, state.topic
        if deleted:
            left = {tp.topic for tp in self.partitions}
            for topic in {tp.topic for tp in deleted} - left:
                self._forget_id(topic)
        return deleted

    def _forget_id(self, topic: str) -> None:
        old = self._ids.pop(topic, None)
        if old is not None:
            self._names.pop(old, None)

    # -- queries ---------------------------------------------------------------------------
    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions})

    def topic_id(self, topic: str) -> str | None:
        return self._ids.get(topic)

    def topic_name(self, topic_id: str) -> str | None:
        return self._names.get(topic_id)

    def topic_ids(self) -> dict[str, str]:
        """{topic: id}, a copy."""
        return dict(self._ids)

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(tp.partition for tp in self.partitions if tp.topic == topic)

    def leader(self, tp) -> int | None:
        """The live leader's broker id, or None (unknown partition, no leader, leader not live)."""
        state = self.partitions.get(TopicPartition(*tp))
        if state is None or state.leader < 0 or state.leader not in self.live_brokers:
            return None
        return state.leader

    def leader_broker(self, tp):
        leader = self.leader(tp)
        return None if leader is None else self.live_brokers[leader]

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers
