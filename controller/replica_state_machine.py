"""Kafka's replica state machine (ZkReplicaStateMachine, ReplicaStateMachine.scala).

Rules:
- Valid transitions come from `controller.states`; invalid ones are logged and skipped.
- → New: a replica that is not the partition's leader gets LeaderAndIsr(is_new) if the
  partition has leadership; a leader replica cannot become New.
- → Online: from New, only recorded (the replica joins the assignment if missing);
  otherwise LeaderAndIsr with the current leadership goes to that broker.
- → Offline: StopReplica(delete=false) to the broker; the replica leaves the ISR in ZK
  (conditional write, leader epoch +1); if it led, leader = -1 (NoLeader); an ISR of one is
  KEPT as is (the last member is remembered); LeaderAndIsr to the remaining replicas unless
  the topic is being deleted. Without leadership, only UpdateMetadata to all brokers. A
  state written notes the reason "replica-offline" in the batch (the controller's journal).
  (Where the replica was out of the ISR already, nothing is written or noted.)
- → DeletionStarted: StopReplica(delete=true). DeletionSuccessful / DeletionIneligible:
  recorded. → NonExistent: the replica leaves the assignment and the context.
- startup(): online replicas (ControllerContext.is_replica_online: live broker, log
  directory not offline) → Online, others → Offline (states only: the partition state
  machine's startup sends the requests).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from controller.context import ControllerContext, PartitionReplica, ReplicaAssignment
from controller.leader_isr import new_leader_and_isr, update_leader_and_isr
from controller.requests import NO_LEADER, RequestBatch
from controller.states import ReplicaState, split_valid
from controller.store_api import ControllerStore
from replicas.errors import KafkaError

log = logging.getLogger(__name__)
R = ReplicaState


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, batch: RequestBatch, store: ControllerStore):
        self.ctx = ctx
        self.batch = batch
        self.store = store

    def state(self, replica: PartitionReplica) -> ReplicaState:
        return self.ctx.replica_states.get(replica, R.NON_EXISTENT)

    def startup(self) -> dict:
        """Kafka's initializeReplicaState, then Online/Offline transitions (requests queued)."""
        online, offline = [], []
        for replica in self.ctx.replicas_for_partitions(self.ctx.all_partitions()):
            if self.ctx.is_replica_online(replica.replica, replica.tp):
                self.ctx.replica_states[replica] = R.ONLINE
                online.append(replica)
            else:
                self.ctx.replica_states[replica] = R.DELETION_INELIGIBLE
                offline.append(replica)
        errors = self.handle_state_changes(online, R.ONLINE)
        errors.update(self.handle_state_changes(offline, R.OFFLINE))
        return errors

    def handle_state_changes(self, replicas, target: ReplicaState) -> dict:
        """Apply `target` to `replicas`, grouped per broker as Kafka does; errors per partition."""
        errors: dict = {}
        per_broker: dict[int, list[PartitionReplica]] = defaultdict(list)
        for replica in replicas:
            per_broker[replica.replica].append(replica)
        for broker_id, group in sorted(per_broker.items()):
            valid, _ = split_valid(self.ctx.replica_states, group, target, R.NON_EXISTENT)
            errors.update(self._apply(broker_id, valid, target))
        return errors

    def _apply(self, broker_id: int, replicas: list[PartitionReplica], target: ReplicaState) -> dict:
        ctx = self.ctx
        if target == R.NEW:
            for replica in replicas:
                leadership = ctx.leadership.get(replica.tp)
                if leadership is not None and leadership.leader == broker_id:
                    log.error("%s cannot become NewReplica: it is the leader", replica)
                    continue
                if leadership is not None:
                    self.batch.add_leader_and_isr([broker_id], replica.tp, ctx.replicas(replica.tp),
                                                  is_new=True)
                ctx.replica_states[replica] = R.NEW
        elif target == R.ONLINE:
            for replica in replicas:
                if self.state(replica) == R.NEW:
                    assignment = ctx.assignment(replica.tp) or ReplicaAssignment(())
                    if broker_id not in assignment.replicas:
                        ctx.set_assignment(replica.tp, ReplicaAssignment(
                            assignment.replicas + (broker_id,), assignment.adding, assignment.removing))
                elif replica.tp in ctx.leadership:
                    self.batch.add_leader_and_isr([broker_id], replica.tp, ctx.replicas(replica.tp),
                                                  is_new=False)
                ctx.replica_states[replica] = R.ONLINE
        elif target == R.OFFLINE:
            return self._offline(broker_id, replicas)
        elif target == R.DELETION_STARTED:
            for replica in replicas:
                ctx.replica_states[replica] = R.DELETION_STARTED
                self.batch.add_stop_replica([broker_id], replica.tp, delete=True)
        elif target in (R.DELETION_SUCCESSFUL, R.DELETION_INELIGIBLE):
            for replica in replicas:
                ctx.replica_states[replica] = target
        elif target == R.NON_EXISTENT:
            for replica in replicas:
                assignment = ctx.assignment(replica.tp)
                if assignment is not None:
                    ctx.set_assignment(replica.tp, ReplicaAssignment(
                        tuple(r for r in assignment.replicas if r != broker_id),
                        tuple(r for r in assignment.adding if r != broker_id),
                        tuple(r for r in assignment.removing if r != broker_id)))
                ctx.replica_states.pop(replica, None)
        return {}

    def _offline(self, broker_id: int, replicas: list[PartitionReplica]) -> dict:
        ctx = self.ctx
        for replica in replicas:
            self.batch.add_stop_replica([broker_id], replica.tp, delete=False)
        with_leadership = [r for r in replicas if r.tp in ctx.leadership]
        without = [r for r in replicas if r.tp not in ctx.leadership]

        def remove_from_isr(tp, state):
            if broker_id not in state.isr:
                return None
            leader = NO_LEADER if state.leader == broker_id else state.leader
            isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != broker_id)
            return new_leader_and_isr(state, leader, isr, ctx.epoch)

        results = update_leader_and_isr(ctx, self.store, [r.tp for r in with_leadership],
                                        remove_from_isr)
        errors = {tp: r for tp, r in results.items() if isinstance(r, KafkaError)}
        for replica in with_leadership:
            if replica.tp in errors:
                continue
            if not ctx.is_topic_queued_for_deletion(replica.topic):
                recipients = [r for r in ctx.replicas(replica.tp) if r != broker_id]
                self.batch.add_leader_and_isr(recipients, replica.tp, ctx.replicas(replica.tp),
                                              is_new=False)
            if replica.tp in results:
                self.batch.note_reason(replica.tp, "replica-offline")
            ctx.replica_states[replica] = R.OFFLINE
        for replica in without:
            self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids(), [replica.tp])
            ctx.replica_states[replica] = R.OFFLINE
        return errors
