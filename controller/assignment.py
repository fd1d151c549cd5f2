"""Replica assignment and topic-name validation, as Kafka 3.8's ZooKeeper-mode admin path does
them (AdminUtils.assignReplicasToBrokersRackUnaware, AdminZkClient, Topic.validate).

Rules:
- Brokers are taken sorted by id (AdminZkClient.getBrokerMetadatas sorts them).
- Rack-unaware round robin: with n brokers, start index s and initial follower shift h,
  partition p (numbered from `start_partition_id`, or 0) gets first replica
  brokers[(p + s) % n]; the shift grows by one at every p > 0 with p % n == 0 (checked
  for the first partition too); follower j (0-based) sits at
  (first + 1 + (shift + j) % (n - 1)) % n. So leaders go round robin and, once every
  broker has led a partition, the followers rotate instead of repeating.
- s and h are both `start_index` when it is ≥ 0; otherwise two independent draws
  rng.randrange(n) (first s, then h), like Kafka's two RAND.nextInt(n). No global random
  state is touched: without a fixed start index an `rng` is required.
- Errors, in Kafka's order and words: partitions < 1 → InvalidPartitions; replication
  factor < 1 or > number of brokers (including no brokers) → InvalidReplicationFactor.
- Adding partitions (createPartitions): the new partitions continue the numbering at
  len(existing), the start index is the index of the first broker whose id is ≥ the
  first replica of existing partition 0 (0 if none), used as the fixed start index; the
  replication factor is partition 0's. A new total that is not an increase →
  InvalidPartitions.
- Topic names (Topic.validate): non-empty, not "." or "..", at most 249 characters, only
  ASCII letters, digits, '.', '_' and '-'; otherwise InvalidTopic.
- A manual assignment: at least one partition, partitions 0..n-1, every replica list
  non-empty, without duplicates, on known brokers, all of the same length; otherwise
  InvalidPartitions (no partitions) or InvalidReplicaAssignment.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence

from replicas.errors import (InvalidPartitions, InvalidReplicaAssignment,
                             InvalidReplicationFactor, InvalidTopic, UnknownServerError)

__all__ = [
    "MAX_TOPIC_NAME_LENGTH", "assign_replicas", "replica_index", "add_partitions_assignment",
    "validate_topic_name", "validate_manual_assignment",
]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def replica_index(first_replica_index: int, shift: int, j: int, n_brokers: int) -> int:
    """Index of follower `j` (0-based) of a partition whose first replica is at
    `first_replica_index` (Kafka's AdminUtils.replicaIndex)."""
    return (first_replica_index + 1 + (shift + j) % (n_brokers - 1)) % n_brokers


def assign_replicas(brokers: Iterable[int], partitions: int, replication_factor: int,
                    rng: random.Random | None = None, start_index: int = -1,
                    start_partition_id: int = -1) -> dict[int, list[int]]:
    """Kafka's rack-unaware assignment: {partition id: [replica broker ids]}, the first
    replica being the preferred leader."""
    ids = sorted(set(brokers))
    n = len(ids)
    if partitions <= 0:
        raise InvalidPartitions("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0.")
    if replication_factor > n:
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    if start_index >= 0:
        first_start, shift = start_index, start_index
    elif rng is None:
        raise ValueError("assign_replicas needs an rng when no fixed start_index is given")
    else:
        first_start = rng.randrange(n)
        shift = rng.randrange(n)
    result: dict[int, list[int]] = {}
    p = max(0, start_partition_id)
    for _ in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + first_start) % n
        result[p] = [ids[first]] + [ids[replica_index(first, shift, j, n)]
                                    for j in range(replication_factor - 1)]
        p += 1
    return result


def add_partitions_assignment(existing: Mapping[int, Sequence[int]], new_total: int,
                              brokers: Iterable[int], rng: random.Random | None = None,
                              *, topic: str = "") -> dict[int, list[int]]:
    """Assignment for the partitions len(existing)..new_total-1 of a topic (Kafka's
    AdminZkClient.createNewPartitionsAssignment without a manual assignment).

    `rng` is accepted for symmetry with assign_replicas but never drawn from: Kafka fixes
    the start index from partition 0, so adding partitions is deterministic."""
    name = topic or "<unnamed>"
    if 0 not in existing:
        raise UnknownServerError(
            f"Unexpected existing replica assignment for topic '{name}', partition id 0 is "
            f"missing. Assignment: {dict(existing)}")
    if new_total - len(existing) <= 0:
        raise InvalidPartitions(
            f"The number of partitions for a topic can only be increased. Topic {name} "
            f"currently has {len(existing)} partitions, {new_total} would not be an increase.")
    ids = sorted(set(brokers))
    partition0 = list(existing[0])
    start = next((i for i, b in enumerate(ids) if partition0 and b >= partition0[0]), 0)
    return assign_replicas(ids, new_total - len(existing), len(partition0), rng,
                           start_index=start, start_partition_id=len(existing))


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: raise InvalidTopic with Kafka's message if `name` is illegal."""
    if name == "":
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (f"the length of '{name}' is longer than the max allowed length "
                  f"{MAX_TOPIC_NAME_LENGTH}")
    elif not set(name) <= _LEGAL:
        reason = (f"'{name}' contains one or more characters other than "
                  "ASCII alphanumerics, '.', '_' and '-'")
    else:
        return
    raise InvalidTopic(f"Topic name is invalid: {reason}")


def validate_manual_assignment(assignment: Mapping[int, Sequence[int]],
                               live_brokers: Collection[int]) -> None:
    """Check a user-given {partition: replicas} for topic creation; raise the typed error.

    Checks run per partition in id order (empty, duplicates, unknown brokers), then the
    replication factor across partitions, then the partition numbering."""
    if not assignment:
        raise InvalidPartitions("Number of partitions must be larger than 0.")
    known = set(live_brokers)
    for p in sorted(assignment):
        replicas = list(assignment[p])
        if not replicas:
            raise InvalidReplicaAssignment(
                f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {p}.")
        if not set(replicas) <= known:
            raise InvalidReplicaAssignment(
                f"Some brokers specified for partition id {p} are not available. "
                f"Specified brokers: {', '.join(map(str, replicas))}, "
                f"available brokers: {', '.join(map(str, sorted(known)))}.")
    if len({len(r) for r in assignment.values()}) != 1:
        raise InvalidReplicaAssignment("All partitions should have the same number of replicas")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence")
