"""Conditional leader/ISR writes with Kafka's retry loop (KafkaZkClient.updateLeaderAndIsr).

Rules:
- Each partition's state znode is written conditionally on the zk_version the controller
  last saw (its partition epoch). BadVersion means someone else wrote it: re-read that
  partition, recompute the change from the fresh state, try again.
- A state written by a NEWER controller epoch is never overwritten (Kafka: "leader and isr
  path written by another controller"); that partition fails with StaleControllerEpoch.
- Successful writes update the context's leadership with the new zk_version before the
  caller queues any request, so requests always carry the committed partition epoch.
- ControllerMovedError from the store propagates: the whole event aborts and the
  controller resigns.
"""

from __future__ import annotations

from typing import Callable

from controller.context import ControllerContext, TopicPartition
from controller.store_api import BadVersion, ControllerStore, NoNode, ZkStoreError
from controller.layout import LeaderIsrAndControllerEpoch
from replicas.errors import KafkaError, StaleControllerEpoch, UnknownTopicOrPartition

# Given the current state, the new state to write (leader epoch already bumped), or an
# error for this partition (election failed), or None (nothing to change).
Change = Callable[[TopicPartition, LeaderIsrAndControllerEpoch],
                  LeaderIsrAndControllerEpoch | KafkaError | None]

MAX_ROUNDS = 10


def update_leader_and_isr(ctx: ControllerContext, store: ControllerStore,
                          partitions, change: Change
                          ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | KafkaError]:
    """Apply `change` to each partition's current leadership and write it conditionally.

    Returns, per partition, the committed state (also put in ctx.leadership) or an error.
    Partitions for which `change` returns None are left out of the result.
    """
    results: dict[TopicPartition, LeaderIsrAndControllerEpoch | KafkaError] = {}
    current = {tp: ctx.leadership.get(tp) for tp in partitions}
    for _ in range(MAX_ROUNDS):
        updates: dict[TopicPartition, tuple[LeaderIsrAndControllerEpoch, int]] = {}
        for tp, state in current.items():
            if state is None:
                results[tp] = UnknownTopicOrPartition(f"{tp.topic}-{tp.partition} has no leadership state")
                continue
            if state.controller_epoch > ctx.epoch:
                results[tp] = StaleControllerEpoch(
                    f"{tp.topic}-{tp.partition} state written by controller epoch "
                    f"{state.controller_epoch} > ours {ctx.epoch}")
                continue
            new = change(tp, state)
            if new is None:
                continue
            if isinstance(new, KafkaError):
                results[tp] = new
                continue
            updates[tp] = (new, state.zk_version)
        if not updates:
            return results
        written = store.update_partition_states(updates)
        retry = {}
        for tp, outcome in written.items():
            new, _ = updates[tp]
            if isinstance(outcome, BadVersion):
                retry[tp] = store.get_partition_state(tp.topic, tp.partition)
            elif isinstance(outcome, NoNode):
                results[tp] = UnknownTopicOrPartition(f"{tp.topic}-{tp.partition} state znode is gone")
            elif isinstance(outcome, ZkStoreError):
                results[tp] = KafkaError(str(outcome))
            else:
                committed = new.with_version(outcome)
                ctx.leadership[tp] = committed
                results[tp] = committed
        for tp, state in retry.items():
            if state is not None:
                ctx.leadership[tp] = state
        current = retry
    for tp in current:
        results[tp] = KafkaError(f"{tp.topic}-{tp.partition}: gave up after {MAX_ROUNDS} conflicting writes")
    return results


def new_leader_and_isr(state: LeaderIsrAndControllerEpoch, leader: int, isr, controller_epoch: int
                       ) -> LeaderIsrAndControllerEpoch:
    """Kafka's LeaderAndIsr.newLeaderAndIsr: every change bumps the leader epoch."""
    return LeaderIsrAndControllerEpoch(leader, state.leader_epoch + 1, tuple(isr), controller_epoch,
                                       state.zk_version)

