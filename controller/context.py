"""The controller's in-memory picture of the cluster (Kafka's ControllerContext).

Rules:
- Loaded from ZooKeeper on failover, then changed only by the controller's single event
  thread; nothing else writes it, so it needs no locks.
- Facts only: live brokers and their epochs, assignments (with reassignment's adding /
  removing replicas), leadership (leader, ISR, epochs, partition epoch = zk_version),
  partition and replica states, topics queued for deletion. Decisions live elsewhere.
- Missing partition/replica states read as NonExistent.
- A broker is "live" for elections if registered and not shutting down; requests still go
  to shutting-down brokers (`live_or_shutting_down_broker_ids`), as in Kafka.
- A REPLICA is online (Kafka's isReplicaOnline) if its broker is live (or, when asked,
  shutting down) and it is not on one of that broker's offline log directories
  (`replicas_on_offline_dirs`: broker → partitions it answered KAFKA_STORAGE_ERROR for,
  KIP-112). Whatever elects, counts or announces replicas per partition asks
  `is_replica_online`, not the broker sets. A broker's entry goes when it starts or fails
  (a new incarnation reports its directories afresh), a topic's partitions when the topic
  leaves the context, everything on resignation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from controller.states import PartitionState, ReplicaState
from controller.layout import BrokerRegistration, LeaderIsrAndControllerEpoch


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class PartitionReplica(NamedTuple):
    topic: str
    partition: int
    replica: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """Kafka's ReplicaAssignment: full replica set RS plus reassignment's adding/removing."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    # -- brokers -------------------------------------------------------------------------
    def broker_epoch(self, broker_id: int) -> int:
        reg = self.live_brokers.get(broker_id)
        return reg.epoch if reg is not None else -1

    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def live_broker_ids(self) -> set[int]:
        """Brokers eligible to lead: registered and not shutting down."""
        return set(self.live_brokers) - self.shutting_down

    def is_replica_online(self, broker_id: int, tp: TopicPartition,
                          include_shutting_down: bool = False) -> bool:
        """Kafka's ControllerContext.isReplicaOnline: the broker is live (or shutting down,
        if `include_shutting_down`) and `tp` is not on one of its offline log directories."""
        if broker_id not in self.live_brokers or (
                not include_shutting_down and broker_id in self.shutting_down):
            return False
        return tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    # -- topics and partitions ---------------------------------------------------------------
    @property
    def all_topics(self) -> set[str]:
        return set(self.assignments)

    def all_partitions(self) -> list[TopicPartition]:
        # list() copies each dict in one C call: the health figures below are read from
        # another thread (the actor's status call) while the event thread changes them
        return [TopicPartition(t, p) for t, parts in list(self.assignments.items())
                for p in list(parts)]

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment | None:
        return self.assignments.get(tp[0], {}).get(tp[1])

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.assignment(tp)
        return a.replicas if a is not None else ()

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = assignment

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_for_topic(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
        for pr in [pr for pr in self.replica_states if pr.topic == topic]:
            del self.replica_states[pr]
        # a topic created again under this name gets its logs on an online directory
        for b, tps in list(self.replicas_on_offline_dirs.items()):
            tps -= {tp for tp in tps if tp[0] == topic}
            if not tps:
                del self.replicas_on_offline_dirs[b]
        for collection in (self.assignments, self.topic_ids, self.topic_configs):
            collection.pop(topic, None)
        for s in (self.topics_to_delete, self.topics_deletion_started,
                  self.topics_ineligible_for_deletion):
            s.discard(topic)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, parts in self.assignments.items()
                for p, a in parts.items() if broker_id in a.replicas]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionReplica]:
        ids = set(broker_ids)
        return [PartitionReplica(t, p, r) for t, parts in self.assignments.items()
                for p, a in parts.items() for r in a.replicas if r in ids]

    def replicas_for_partitions(self, tps: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica(tp.topic, tp.partition, r) for tp in tps for r in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, l in self.leadership.items() if l.leader == broker_id]

    def partitions_in_state(self, state: PartitionState) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions()
                if self.partition_states.get(tp, PartitionState.NON_EXISTENT) == state]

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def topic_config(self, topic: str, key: str, default: str) -> str:
        return self.topic_configs.get(topic, {}).get(key, default)

    # -- health figures for `rayka status` ------------------------------------------------
    def offline_partition_count(self) -> int:
        return sum(1 for tp in self.all_partitions()
                   if self.partition_states.get(tp) == PartitionState.OFFLINE
                   and not self.is_topic_queued_for_deletion(tp.topic))

    def under_replicated(self) -> list[TopicPartition]:
        return [tp for tp, l in list(self.leadership.items())
                if len(l.isr) < len(self.replicas(tp))]
