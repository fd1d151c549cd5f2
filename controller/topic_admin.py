"""Planning admin changes to topics: what to write, or the typed error, before any write.

Used by rayka's Admin (rayka/client/admin.py) and by the brokers' Kafka CreateTopics /
CreatePartitions handlers (actors/kafka_api.py): one set of rules for both doors. Pure: the
caller passes the live brokers and writes the plan to ZooKeeper itself.

Rules (Kafka's ZkAdminManager.createTopics / createPartitions, AdminZkClient):
- Checked in Kafka's order: the topic name (InvalidTopic); a manual assignment excludes
  num_partitions / replication_factor (both must be -1, else InvalidRequest); partitions -1
  and replication factor -1 take the broker defaults (num.partitions, default.replication.
  factor) when the caller passes them (a Kafka CreateTopics request); without them (rayka's
  Admin) -1 is a count like any other; partitions < 1 → InvalidPartitions; replication
  factor < 1 or > live brokers → InvalidReplicationFactor; then the config (InvalidConfig,
  controller/topic_config.py).
- A manual assignment follows controller/assignment.py's checks; otherwise Kafka's
  rack-unaware assignment over the live brokers.
- Adding partitions: the new total must exceed the current count (InvalidPartitions); a
  manual assignment lists exactly the new partitions' replicas, with the topic's
  replication factor, on live brokers (InvalidReplicaAssignment); a topic being reassigned
  is ReassignmentInProgress.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from controller.assignment import (add_partitions_assignment, assign_replicas,
                                   validate_manual_assignment, validate_topic_name)
from controller.topic_config import normalize_topic_config
from replicas.errors import (InvalidPartitions, InvalidReplicaAssignment,
                             InvalidReplicationFactor, InvalidRequest, ReassignmentInProgress)


@dataclass(frozen=True, slots=True)
class TopicPlan:
    name: str
    assignment: dict[int, tuple[int, ...]]
    config: dict[str, str]

    @property
    def partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0]) if self.assignment else 0


def plan_topic(name: str, partitions: int, replication_factor: int,
               live_brokers: Collection[int], *, config: Mapping[str, object] | None = None,
               assignment: Mapping[int, Sequence[int]] | None = None,
               default_partitions: int | None = None,
               default_replication_factor: int | None = None,
               rng: random.Random | None = None) -> TopicPlan:
    validate_topic_name(name)
    live = sorted(live_brokers)
    if assignment:
        if partitions != -1 or replication_factor != -1:
            raise InvalidRequest("Both numPartitions or replicationFactor and "
                                 "replicasAssignments were set. Both cannot be used at the same time.")
        validate_manual_assignment(assignment, live)
        chosen = {int(p): tuple(int(b) for b in r) for p, r in assignment.items()}
        return TopicPlan(name, chosen, normalize_topic_config(config))
    if partitions == -1 and default_partitions is not None:
        partitions = default_partitions
    rf = replication_factor
    if rf == -1 and default_replication_factor is not None:
        rf = default_replication_factor
    if not isinstance(partitions, int) or partitions < 1:
        raise InvalidPartitions(f"Number of partitions must be at least 1 (got {partitions!r}).")
    if not isinstance(rf, int) or not 1 <= rf <= len(live):
        raise InvalidReplicationFactor(
            f"Replication factor: {rf} larger than available brokers: {len(live)}."
            if isinstance(rf, int) and rf > 0 else
            f"Replication factor must be at least 1 (got {rf!r}).")
    config = normalize_topic_config(config)
    chosen = assign_replicas(live, partitions, rf, rng=rng or random.Random())
    return TopicPlan(name, {p: tuple(r) for p, r in chosen.items()}, config)


def plan_partitions(name: str, existing: Mapping[int, Sequence[int]], new_total: int,
                    live_brokers: Collection[int], *,
                    assignment: Sequence[Sequence[int]] | None = None,
                    reassigning: bool = False) -> dict[int, tuple[int, ...]]:
    """{new partition: replicas} to add to topic `name`."""
    if reassigning:
        raise ReassignmentInProgress(f"A partition reassignment is in progress for topic '{name}'.")
    if new_total <= len(existing):
        raise InvalidPartitions(
            f"Topic already has {len(existing)} partitions." if new_total == len(existing) else
            f"Topic currently has {len(existing)} partitions, which is higher than the "
            f"requested {new_total}.")
    live = sorted(live_brokers)
    if assignment is None:
        return {p: tuple(r) for p, r in
                add_partitions_assignment(existing, new_total, live, topic=name).items()}
    rf = len(existing[0]) if 0 in existing else 0
    wanted = new_total - len(existing)
    if len(assignment) != wanted:
        raise InvalidReplicaAssignment(
            f"Increasing the number of partitions by {wanted} but {len(assignment)} "
            f"assignments provided.")
    new = {len(existing) + i: tuple(int(b) for b in r) for i, r in enumerate(assignment)}
    validate_manual_assignment({p - len(existing): r for p, r in new.items()}, live)
    if any(len(r) != rf for r in new.values()):
        raise InvalidReplicaAssignment(
            f"Inconsistent replication factor between partitions, partition 0 has {rf} "
            f"while the new partitions have a different one.")
    return new
