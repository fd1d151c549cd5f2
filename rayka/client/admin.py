"""Admin: topic and leadership operations, Kafka's AdminClient over rayka's ZooKeeper layout.

Rules:
- Admin writes go to Kafka's ZooKeeper paths (/brokers/topics, /admin/..., /config/topics)
  and the active controller acts on its watches, as in Kafka's ZooKeeper mode.
- Bad input raises a typed error before anything is written: InvalidTopic (17),
  InvalidPartitions (37), InvalidReplicationFactor (38) when RF < 1 or RF > live brokers,
  InvalidConfig (40), TopicAlreadyExists (36), UnknownTopicOrPartition (3),
  InvalidReplicaAssignment (39).
- With wait=True (default) an operation returns once its effect is visible: every partition
  of a new topic led by a live broker AND known with that leader to every live broker's
  metadata cache; a deleted topic gone from ZooKeeper; a reassignment finished. A change
  not visible within `timeout_s` raises RequestTimedOut (7) (the change itself stays).
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import ray

from controller.assignment import validate_topic_name
from controller.topic_admin import plan_topic
from rayka.client.types import ControllerInfo, PartitionInfo, TopicPartition
from replicas.errors import (InvalidPartitions, InvalidReplicaAssignment, InvalidReplicationFactor,
                             KafkaError, RequestTimedOut, UnknownTopicOrPartition)

POLL_S = 0.02


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str,
             poll_s: float | None = None):
    """Poll `predicate` until truthy (returned) or raise RequestTimedOut after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise RequestTimedOut(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(POLL_S if poll_s is None else poll_s)  # poll interval of a deadline loop


class Admin:
    def __init__(self, cluster):
        self.cluster = cluster
        self.store = cluster.store

    # -- topics ------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     config: Mapping[str, object] | None = None, *, wait: bool = True,
                     timeout_s: float = 30.0) -> list[PartitionInfo]:
        validate_topic_name(name)
        if not isinstance(partitions, int) or partitions < 1:      # -1 is not "the default" here
            raise InvalidPartitions(f"Number of partitions must be at least 1 (got {partitions!r}).")
        if not isinstance(replication_factor, int) or replication_factor < 1:
            raise InvalidReplicationFactor(
                f"Replication factor must be at least 1 (got {replication_factor!r}).")
        plan = plan_topic(name, partitions, replication_factor, self.store.get_broker_ids(),
                          config=config)
        self.store.create_topic(name, plan.assignment, plan.config)
        if wait:
            self.wait_for_leaders(name, timeout_s)
        return self.describe_topic(name)

    def delete_topic(self, name: str, *, wait: bool = True, timeout_s: float = 30.0) -> None:
        self.store.request_topic_deletion(name)
        if wait:
            wait_for(lambda: name not in self.store.get_topics()
                     and name not in self.store.get_topic_deletions(),
                     timeout_s, f"topic {name} to be deleted")

    def list_topics(self) -> list[str]:
        return sorted(self.store.get_topics())

    def describe_topic(self, name: str) -> list[PartitionInfo]:
        assignment = self.store.get_topic_assignment(name)
        if assignment is None:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        states = self.store.get_partition_states([name])
        out = []
        for p, replicas in sorted(assignment.partitions.items()):
            s = states.get((name, p))
            out.append(PartitionInfo(p, s.leader if s else -1, s.leader_epoch if s else -1,
                                     tuple(replicas), tuple(s.isr) if s else ()))
        return out

    def set_topic_config(self, name: str, config: Mapping[str, object]) -> None:
        self.store.set_topic_config(name, config)

    def topic_config(self, name: str) -> dict[str, str]:
        got = self.store.get_topic_config(name)
        if got is None and name not in self.store.get_topics():
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        return got or {}

    # -- leadership ----------------------------------------------------------------------------------
    def controller(self) -> ControllerInfo:
        return ControllerInfo(self.store.get_controller(), self.store.get_controller_epoch()[0])

    def elect_preferred_leaders(self, topic: str | None = None) -> dict:
        """Preferred-replica election; per partition the new PartitionInfo or a KafkaError
        (ElectionNotNeeded when the preferred replica already leads)."""
        topics = [topic] if topic is not None else self.list_topics()
        partitions = []
        for t in topics:
            partitions += [(t, p.partition) for p in self.describe_topic(t)]
        controller = self.cluster.active_controller_actor()
        answers = ray.get(controller.elect_preferred_leaders.remote(partitions))
        if isinstance(answers, KafkaError):
            raise answers
        out = {}
        for tp, result in answers.items():
            tp = TopicPartition(*tp)
            out[tp] = result if isinstance(result, KafkaError) else PartitionInfo(
                tp.partition, result.leader, result.leader_epoch,
                tuple(self.store.get_topic_assignment(tp.topic).partitions[tp.partition]),
                tuple(result.isr))
        return out

    def reassign_partitions(self, topic: str, targets: Mapping[int, Sequence[int]], *,
                            wait: bool = True, timeout_s: float = 60.0) -> list[PartitionInfo]:
        current = self.describe_topic(topic)
        live = self.store.get_broker_ids()
        known = {p.partition for p in current}
        for p, replicas in targets.items():
            if p not in known:
                raise UnknownTopicOrPartition(f"{topic}-{p} does not exist.")
            if not replicas or len(set(replicas)) != len(replicas) or set(replicas) - live:
                raise InvalidReplicaAssignment(
                    f"{topic}-{p}: target {list(replicas)} must be distinct live brokers {sorted(live)}")
        self.store.request_reassignment({(topic, p): list(r) for p, r in targets.items()})
        if wait:
            def done():
                if self.store.get_reassignment():
                    return False
                got = self.store.get_topic_assignment(topic)
                return all(tuple(got.partitions[p]) == tuple(r) for p, r in targets.items())
            wait_for(done, timeout_s, f"reassignment of {topic}")
            self.wait_for_leaders(topic, timeout_s)
        return self.describe_topic(topic)

    # -- visibility ----------------------------------------------------------------------------------
    def wait_for_leaders(self, topic: str, timeout_s: float) -> None:
        """Every partition led by a live broker, and every live broker's metadata agrees."""
        def visible():
            live = self.store.get_broker_ids()
            infos = self.describe_topic(topic)
            if not all(p.leader in live for p in infos):
                return False
            want = {(topic, p.partition): (p.leader, p.leader_epoch) for p in infos}
            for broker in self.cluster.broker_actors(live):
                try:
                    seen = ray.get(broker.metadata_leaders.remote([topic]), timeout=5)
                except Exception:
                    return False
                if {tuple(k): tuple(v) for k, v in seen.items()} != want:
                    return False
            return True
        wait_for(visible, timeout_s, f"leaders of {topic} in broker metadata")
