"""Requests brokers make of the controller: AlterPartition (KIP-497) and ControlledShutdown.

Rules (Kafka's processAlterPartition / doControlledShutdown, ZooKeeper mode):
- Not the active controller → NotController for everything.
- The broker epoch must be the one the controller knows (czxid of /brokers/ids/<id>):
  otherwise StaleBrokerEpoch — a request from an earlier incarnation of that broker.
- AlterPartition, per partition: unknown → UnknownTopicOrPartition; the requester is not
  the current leader → NotLeaderOrFollower; a NEWER leader or partition epoch than ours →
  NotController (we are probably stale); an older leader epoch → FencedLeaderEpoch; the
  same state as ours → answered with ours (idempotent retry); an older partition epoch →
  InvalidUpdateVersion; an ISR without the leader, outside the assignment, or with
  replicas that are not online (broker dead or shutting down, or the replica on an
  offline log directory: ControllerContext.is_replica_online; Kafka 3.9 checks only the
  broker, rayka keeps a replica the controller took offline out of the ISR too) →
  IneligibleReplica. The accepted ISR is written conditionally on the partition epoch
  WITHOUT bumping the leader epoch; the committed state (new partition epoch) is the
  answer, and UpdateMetadata goes to every broker (noting the reason "alter-partition"
  for the controller's journal); a partition being reassigned is re-checked for
  completion (its new replicas may be in).
- ControlledShutdown: the broker is marked shutting down (journaled the first time);
  partitions it leads (RF > 1) move by the controlled-shutdown election; partitions it
  follows get StopReplica and lose it from their ISR; the answer is the partitions
  (RF > 1) it still leads.
"""

from __future__ import annotations

from controller.context import PartitionReplica, TopicPartition
from controller.partition_state_machine import Election, Strategy
from controller.states import PartitionState as P, ReplicaState as R
from controller.store_api import BadVersion, ZkStoreError
from controller.layout import LeaderIsrAndControllerEpoch
from replicas.errors import (BrokerNotAvailable, FencedLeaderEpoch, IneligibleReplica,
                             InvalidUpdateVersion, KafkaError, NotController, NotLeaderOrFollower,
                             StaleBrokerEpoch, UnknownTopicOrPartition)


def _check_broker_epoch(controller, broker_id: int, broker_epoch: int) -> KafkaError | None:
    if not controller.is_active:
        return NotController(f"controller {controller.id} is not the active controller")
    known = controller.ctx.broker_epoch(broker_id)
    if known < 0:
        return BrokerNotAvailable(f"broker {broker_id} is not registered")
    if broker_epoch != known:
        return StaleBrokerEpoch(f"broker {broker_id} epoch {broker_epoch} != registered {known}")
    return None


def _validate(controller, broker_id: int, tp: TopicPartition,
              proposal: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | KafkaError:
    ctx = controller.ctx
    current = ctx.leadership.get(tp)
    name = f"{tp.topic}-{tp.partition}"
    if current is None:
        return UnknownTopicOrPartition(f"{name} is unknown to the controller")
    if current.leader != broker_id:
        return NotLeaderOrFollower(f"{name} is led by {current.leader}, not {broker_id}")
    if proposal.leader_epoch > current.leader_epoch or proposal.zk_version > current.zk_version:
        return NotController(f"{name}: proposal is newer than the controller's state")
    if proposal.leader_epoch < current.leader_epoch:
        return FencedLeaderEpoch(f"{name}: leader epoch {proposal.leader_epoch} < {current.leader_epoch}")
    if proposal.leader == current.leader and tuple(proposal.isr) == tuple(current.isr):
        return current
    if proposal.zk_version < current.zk_version:
        return InvalidUpdateVersion(f"{name}: partition epoch {proposal.zk_version} < {current.zk_version}")
    replicas = set(ctx.replicas(tp))
    bad = [r for r in proposal.isr if r not in replicas or not ctx.is_replica_online(r, tp)]
    if broker_id not in proposal.isr or bad:
        return IneligibleReplica(f"{name}: ISR {list(proposal.isr)} must hold the leader and only "
                                 f"online, assigned replicas (ineligible: {bad})")
    return LeaderIsrAndControllerEpoch(current.leader, current.leader_epoch, tuple(proposal.isr),
                                       ctx.epoch, current.zk_version)


def alter_partition(controller, event) -> dict:
    """Answer: partition → committed LeaderIsrAndControllerEpoch, or a KafkaError."""
    error = _check_broker_epoch(controller, event.broker_id, event.broker_epoch)
    if error is not None:
        return {tp: error for tp in event.proposals}
    answers: dict = {}
    writes: dict = {}
    for raw_tp, proposal in event.proposals.items():
        tp = TopicPartition(*raw_tp)
        outcome = _validate(controller, event.broker_id, tp, proposal)
        if isinstance(outcome, KafkaError) or outcome is controller.ctx.leadership.get(tp):
            answers[raw_tp] = outcome
        else:
            writes[tp] = (outcome, outcome.zk_version)
    if writes:
        written = controller.fenced.update_partition_states(writes)
        changed = []
        for tp, result in written.items():
            if isinstance(result, BadVersion):
                answers[tp] = InvalidUpdateVersion(f"{tp.topic}-{tp.partition}: concurrent update")
            elif isinstance(result, ZkStoreError):
                answers[tp] = UnknownTopicOrPartition(str(result))
            else:
                committed = writes[tp][0].with_version(result)
                controller.ctx.leadership[tp] = committed
                answers[tp] = committed
                changed.append(tp)
                controller.batch.note_reason(tp, "alter-partition")
        if changed:
            controller.batch.add_update_metadata(
                controller.ctx.live_or_shutting_down_broker_ids(), changed)
            controller.send()
            controller.on_isr_changed(changed)
    return answers


def controlled_shutdown(controller, event) -> set[TopicPartition] | KafkaError:
    """Move leadership off a broker that is shutting down; answer what it still leads."""
    error = _check_broker_epoch(controller, event.broker_id, event.broker_epoch)
    if error is not None:
        return error
    ctx, broker = controller.ctx, event.broker_id
    if broker not in ctx.shutting_down:
        controller.journal_broker("controlled-shutdown", broker, ctx.broker_epoch(broker))
    ctx.shutting_down.add(broker)
    act_on = [tp for tp in ctx.partitions_on_broker(broker)
              if len(ctx.replicas(tp)) > 1 and tp in ctx.leadership
              and not ctx.is_topic_queued_for_deletion(tp.topic)]
    led = [tp for tp in act_on if ctx.leadership[tp].leader == broker]
    followed = [tp for tp in act_on if ctx.leadership[tp].leader != broker]
    controller.psm.handle_state_changes(led, P.ONLINE, Election(Strategy.CONTROLLED_SHUTDOWN))
    controller.rsm.handle_state_changes([PartitionReplica(tp.topic, tp.partition, broker)
                                         for tp in followed], R.OFFLINE)
    controller.send()
    return {tp for tp in ctx.partitions_led_by(broker) if len(ctx.replicas(tp)) > 1}
