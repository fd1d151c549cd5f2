"""Partition reassignment (Kafka's onPartitionReassignment, KIP-455 on ZooKeeper).

Notation (Kafka's KafkaController.scala): ORS origin replicas, TRS target replicas,
RS = ORS + TRS (the
full set while moving), AR = TRS − ORS adding, RR = ORS − TRS removing.

Rules:
- Requests come from /admin/reassign_partitions (created by an admin). Each entry is
  checked: the topic must exist and not be queued for deletion (UnknownTopicOrPartition);
  the target must be non-empty, without duplicates, of live brokers
  (InvalidReplicaAssignment). Rejected entries are removed from the znode at once.
  Queuing a topic for deletion cancels its reassignments (`forget_topic`).
- Phase A (start, or target changed): write RS/AR/RR into /brokers/topics/<t> (fenced),
  replicas no longer needed by a changed target are stopped; bump the leader epoch (same
  leader and ISR) and send LeaderAndIsr with the new RS to ORS (is_new=false) and to AR
  (is_new=true); AR replicas → NewReplica.
- The reassignment completes once TRS ⊆ ISR, read from the partition state znode; it is
  re-checked whenever the partition's ISR changes (AlterPartition, ISR notifications).
- Phase B (complete): AR → OnlineReplica; RS := TRS in memory; if the leader is not in
  TRS or its replica is not online (dead broker, offline log directory), elect with the
  reassign strategy, else bump the leader epoch and resend
  LeaderAndIsr; RR → Offline → ReplicaDeletionStarted → ReplicaDeletionSuccessful →
  NonExistent; write RS = TRS (no AR/RR) to ZooKeeper; drop the partition from
  /admin/reassign_partitions (the znode goes when empty); UpdateMetadata to every broker;
  resume a pending deletion of the topic.
- Whatever a step of a reassignment changes in a partition's state is noted in the batch
  with the reason "reassignment" (the controller's journal).
- A target equal to the current replicas completes immediately (nothing to move).
- A request for a partition already moving to the same target is a no-op.
- AlterPartitionReassignments (KIP-455's API) goes straight to the controller: a target
  starts (or redirects) a reassignment, None cancels one (the target becomes the origin
  replicas, so the replicas being added are stopped and deleted), a cancel of a partition
  not moving is NO_REASSIGNMENT_IN_PROGRESS. Those partitions leave
  /admin/reassign_partitions (the latest request wins).
- On failover, reassignments found in /admin/reassign_partitions and partitions whose
  assignment still has AR/RR resume from where ZooKeeper says they are.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

from controller.context import PartitionReplica, ReplicaAssignment, TopicPartition
from controller.leader_isr import new_leader_and_isr, update_leader_and_isr
from controller.partition_state_machine import Election, Strategy
from controller.states import PartitionState as P, ReplicaState as R
from controller.layout import TopicAssignment
from replicas.errors import (InvalidReplicaAssignment, KafkaError, NoReassignmentInProgress,
                             UnknownTopicOrPartition)

log = logging.getLogger(__name__)


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """Kafka's ReplicaAssignment.reassignTo: RS = TRS then the ORS not in TRS."""
    origin = current.origin_replicas
    full = tuple(dict.fromkeys(tuple(target) + origin))
    return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                             tuple(r for r in full if r not in target))


class ReassignmentManager:
    def __init__(self, controller):
        self.c = controller
        self.in_progress: set[TopicPartition] = set()

    @property
    def ctx(self):
        return self.c.ctx

    # -- entry points ---------------------------------------------------------------------------
    def init(self) -> None:
        """On failover: resume API-style (AR/RR in the assignment) and ZooKeeper requests."""
        pending = {tp: None for tp in self.ctx.all_partitions()
                   if self.ctx.assignment(tp).is_being_reassigned}
        self._trigger(pending, self.c.store.get_reassignment())

    def process_zk_request(self) -> dict[TopicPartition, KafkaError | None]:
        """/admin/reassign_partitions appeared or changed: start what it asks for."""
        return self._trigger({}, self.c.store.get_reassignment())

    def process_api_request(self, targets: Mapping[tuple, Sequence[int] | None]
                            ) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments (KafkaController.processApiPartitionReassignment): a
        target, or None to cancel (back to the origin replicas); NO_REASSIGNMENT_IN_PROGRESS
        for a cancel of a partition not moving. The latest request wins over a ZooKeeper
        one for the same partitions."""
        results: dict[TopicPartition, KafkaError | None] = {}
        todo: dict[TopicPartition, ReplicaAssignment] = {}
        for raw, target in targets.items():
            tp = TopicPartition(*raw)
            current = self.ctx.assignment(tp)
            if target is not None:
                error = self._validate(tp, tuple(target))
                if error is not None:
                    results[tp] = error
                    continue
            if current is None:
                results[tp] = UnknownTopicOrPartition(f"{tp.topic}-{tp.partition} does not exist")
            elif current.is_being_reassigned:
                todo[tp] = reassign_to(current, current.origin_replicas if target is None
                                       else tuple(target))
            elif target is None:
                results[tp] = NoReassignmentInProgress(
                    f"{tp.topic}-{tp.partition} has no reassignment in progress")
            else:
                todo[tp] = reassign_to(current, tuple(target))
        self._remove_from_zk(set(todo))
        for tp, reassignment in sorted(todo.items()):
            try:
                self._on_reassignment(tp, reassignment)
                results[tp] = None
            except KafkaError as exc:
                results[tp] = exc
        return results

    def ongoing(self, partitions) -> dict[TopicPartition, ReplicaAssignment]:
        """The reassignments in progress, of `partitions` or all (None)."""
        moving = {tp for tp in self.ctx.all_partitions()
                  if self.ctx.assignment(tp).is_being_reassigned}
        if partitions is not None:
            moving &= {TopicPartition(*tp) for tp in partitions}
        return {tp: self.ctx.assignment(tp) for tp in sorted(moving)}

    def process_isr_change(self, tp: TopicPartition) -> None:
        if tp in self.in_progress:
            assignment = self.ctx.assignment(tp)
            if assignment is not None:
                self._on_reassignment(tp, assignment)

    def forget_topic(self, topic: str) -> None:
        """The topic is gone: drop its reassignments, here and in ZooKeeper."""
        gone = {tp for tp in self.in_progress if tp.topic == topic}
        gone |= {TopicPartition(*tp) for tp in self.c.store.get_reassignment() if tp[0] == topic}
        self.in_progress -= gone
        if gone:
            self._remove_from_zk(gone)

    # -- the work ---------------------------------------------------------------------------
    def _trigger(self, resumed: Mapping[TopicPartition, None],
                 requested: Mapping[tuple, Sequence[int]]) -> dict:
        results: dict[TopicPartition, KafkaError | None] = {}
        todo: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in resumed:
            if not self.ctx.is_topic_queued_for_deletion(tp.topic):
                a = self.ctx.assignment(tp)
                todo[tp] = reassign_to(a, a.target_replicas)
        for raw, target in requested.items():
            tp = TopicPartition(*raw)
            current = self.ctx.assignment(tp)
            if tp in self.in_progress and current.target_replicas == tuple(target) \
                    and tp not in resumed:
                continue  # already moving there (e.g. our own rewrite of the znode)
            error = self._validate(tp, tuple(target))
            if error is not None:
                results[tp] = error
            else:
                todo[tp] = reassign_to(self.ctx.assignment(tp), tuple(target))
        for tp, reassignment in sorted(todo.items()):
            try:
                self._on_reassignment(tp, reassignment)
                results[tp] = None
            except KafkaError as exc:
                results[tp] = exc
        failed = {tp for tp, r in results.items() if r is not None}
        if failed:
            log.warning("reassignments rejected: %s", {tp: str(results[tp]) for tp in failed})
            self._remove_from_zk(failed)
        return results

    def _validate(self, tp: TopicPartition, target: tuple[int, ...]) -> KafkaError | None:
        ctx = self.ctx
        name = f"{tp.topic}-{tp.partition}"
        if ctx.assignment(tp) is None or ctx.is_topic_queued_for_deletion(tp.topic):
            return UnknownTopicOrPartition(f"{name} does not exist")
        if not target or len(set(target)) != len(target) or min(target) < 0:
            return InvalidReplicaAssignment(f"{name}: target {list(target)} must be non-empty, "
                                            "without duplicates or negative ids")
        dead = [b for b in target if b not in ctx.live_or_shutting_down_broker_ids()]
        if dead:
            return InvalidReplicaAssignment(f"{name}: target brokers {dead} are not alive")
        return None

    def _on_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        c, ctx = self.c, self.ctx
        c.batch.note_reason(tp, "reassignment")     # whatever changes tp below is ours
        self._update_current(tp, reassignment)
        if not self._is_complete(tp, reassignment):
            self._bump_leader_epoch_and_send(tp, reassignment)
            c.rsm.handle_state_changes(self._replicas(tp, reassignment.adding), R.NEW)
            return
        # Phase B
        c.rsm.handle_state_changes(self._replicas(tp, reassignment.adding), R.ONLINE)
        completed = ReplicaAssignment(reassignment.target_replicas)
        ctx.set_assignment(tp, completed)
        leader = ctx.leadership[tp].leader
        if leader not in completed.replicas or not ctx.is_replica_online(leader, tp):
            c.psm.handle_state_changes([tp], P.ONLINE, Election(Strategy.REASSIGN))
        else:
            self._bump_leader_epoch_and_send(tp, completed)
        removed = self._replicas(tp, reassignment.removing)
        for target in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
            c.rsm.handle_state_changes(removed, target)
        self._write_assignment(tp.topic)
        self.in_progress.discard(tp)
        self._remove_from_zk({tp})
        c.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids(), [tp])
        c.deletion.resume_for_topics({tp.topic})
        log.info("reassignment of %s complete: replicas %s", tp, list(completed.replicas))

    def _replicas(self, tp: TopicPartition, brokers) -> list[PartitionReplica]:
        return [PartitionReplica(tp.topic, tp.partition, b) for b in brokers]

    def _update_current(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        current = self.ctx.assignment(tp)
        if current != reassignment:
            self.ctx.set_assignment(tp, reassignment)
            self._write_assignment(tp.topic)
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                removed = self._replicas(tp, unneeded)
                for target in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
                    self.c.rsm.handle_state_changes(removed, target)
        self.in_progress.add(tp)

    def _is_complete(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> bool:
        if not reassignment.is_being_reassigned:
            return True
        state = self.c.store.get_partition_state(tp.topic, tp.partition)
        if state is None:
            return False
        if state.zk_version >= self.ctx.leadership.get(tp, state).zk_version:
            self.ctx.leadership[tp] = state
        return set(reassignment.target_replicas) <= set(state.isr)

    def _bump_leader_epoch_and_send(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self.ctx
        results = update_leader_and_isr(
            ctx, self.c.fenced, [tp],
            lambda _tp, st: new_leader_and_isr(st, st.leader, st.isr, ctx.epoch))
        outcome = results.get(tp)
        if isinstance(outcome, KafkaError) or outcome is None:
            log.error("reassignment of %s: leader epoch bump failed: %s", tp, outcome)
            return
        origin, adding = assignment.origin_replicas, assignment.adding
        self.c.batch.add_leader_and_isr(origin, tp, assignment.replicas, is_new=False)
        self.c.batch.add_leader_and_isr(adding, tp, assignment.replicas, is_new=True)

    def _write_assignment(self, topic: str) -> None:
        parts = {tp.partition: self.ctx.assignment(tp) for tp in self.ctx.partitions_for_topic(topic)}
        self.c.fenced.writer.set_topic_assignment(TopicAssignment(
            topic, {p: a.replicas for p, a in parts.items()},
            {p: a.adding for p, a in parts.items() if a.adding},
            {p: a.removing for p, a in parts.items() if a.removing},
            topic_id=self.ctx.topic_ids.get(topic)))

    def _remove_from_zk(self, done: set[TopicPartition]) -> None:
        pending = self.c.store.get_reassignment()
        if not pending:
            return
        remaining = {tp: r for tp, r in pending.items() if TopicPartition(*tp) not in done}
        if len(remaining) != len(pending):
            self.c.fenced.writer.set_reassign_partitions(remaining)
