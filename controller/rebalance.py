"""Preferred-leader elections: which partitions to move (Kafka's auto leader rebalance and
replica leader election checks), as pure functions of the controller context.

Rules:
- A partition's preferred leader is the first replica of its assignment.
- It can be made leader only if it is online (ControllerContext.is_replica_online:
  registered, not shutting down, its log directory not offline) and in the ISR.
- Auto rebalance (checkAndTriggerAutoLeaderRebalance): for each preferred broker, the
  imbalance ratio = partitions that have a leader other than it / partitions it prefers.
  If the ratio exceeds leader.imbalance.per.broker.percentage / 100, elect those of its
  partitions whose preferred replica can lead. Topics queued for deletion are skipped.
- An admin election answers per partition: unknown → UnknownTopicOrPartition, topic being
  deleted → InvalidTopic, already led by the preferred replica → ElectionNotNeeded; the
  rest go to the preferred-replica election. An unclean election (ElectLeaders type 1)
  needs no election when the partition has a live leader; the rest are elected as offline
  partitions with unclean election allowed (KafkaController.processReplicaLeaderElection).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from controller.context import ControllerContext, TopicPartition
from replicas.errors import ElectionNotNeeded, InvalidTopic, KafkaError, UnknownTopicOrPartition


def can_preferred_lead(ctx: ControllerContext, tp: TopicPartition) -> bool:
    replicas = ctx.replicas(tp)
    leadership = ctx.leadership.get(tp)
    return bool(replicas) and leadership is not None \
        and ctx.is_replica_online(replicas[0], tp) and replicas[0] in leadership.isr


def imbalanced_partitions(ctx: ControllerContext, percentage: int) -> list[TopicPartition]:
    by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in ctx.all_partitions():
        replicas = ctx.replicas(tp)
        if replicas and not ctx.is_topic_queued_for_deletion(tp.topic):
            by_preferred[replicas[0]].append(tp)
    out: list[TopicPartition] = []
    for broker, tps in sorted(by_preferred.items()):
        off = [tp for tp in tps if (l := ctx.leadership.get(tp)) is not None and l.leader != broker]
        if len(off) / len(tps) > percentage / 100:
            out += [tp for tp in off if can_preferred_lead(ctx, tp)]
    return sorted(out)


def split_election_request(ctx: ControllerContext, partitions: Iterable, unclean: bool = False
                           ) -> tuple[list[TopicPartition], dict[TopicPartition, KafkaError]]:
    """(partitions to elect, early answers) for an admin preferred (or unclean) election."""
    electable: list[TopicPartition] = []
    answers: dict[TopicPartition, KafkaError] = {}
    for raw in partitions:
        tp = TopicPartition(*raw)
        name = f"{tp.topic}-{tp.partition}"
        leadership = ctx.leadership.get(tp)
        if ctx.assignment(tp) is None:
            answers[tp] = UnknownTopicOrPartition(f"{name} does not exist")
        elif ctx.is_topic_queued_for_deletion(tp.topic):
            answers[tp] = InvalidTopic(f"{name}: the topic is being deleted")
        elif unclean and leadership is not None and leadership.leader >= 0 \
                and leadership.leader in ctx.live_broker_ids():
            answers[tp] = ElectionNotNeeded(f"{name} has a live leader")
        elif not unclean and leadership is not None and leadership.leader == ctx.replicas(tp)[0]:
            answers[tp] = ElectionNotNeeded(f"{name} is already led by its preferred replica")
        else:
            electable.append(tp)
    return sorted(electable), answers
