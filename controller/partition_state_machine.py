"""Kafka's partition state machine (ZkPartitionStateMachine), elections by
Kafka's PartitionLeaderElectionAlgorithms.scala.

Rules:
- Valid transitions come from `controller.states`; invalid ones are logged and skipped.
- New: only recorded in the context.
- "Online" below is per replica (ControllerContext.is_replica_online): its broker is live
  (not shutting down, except for controlled shutdown) and its log directory is not offline.
- New → Online: leader = first ONLINE replica in assignment order, ISR = all online replicas,
  leader epoch 0; the state znode is created (fenced); if it already exists the partition
  stays New. LeaderAndIsr(is_new) goes to the ISR, UpdateMetadata to every live broker.
  A partition with no online replica fails and stays New.
- Online/Offline → Online: elect with the given strategy (offline, reassign, preferred,
  controlled shutdown), bump the leader epoch, write the state znode conditionally on its
  partition epoch (retrying on conflicts), then LeaderAndIsr to the online replicas of the
  assignment (for controlled shutdown: shutting-down ones too), UpdateMetadata to all.
  Each election sees, as its live set, the online replicas of THAT partition.
  A failed election leaves the partition where it was and reports an error.
- Every committed state notes its reason in the batch as an election's (for the
  controller's journal): "created" (New → Online), else the election's strategy
  ("election", "unclean-election" when no ISR member could lead, "reassignment",
  "preferred", "controlled-shutdown").
- Offline, NonExistent: only recorded.
- Unclean election for the offline strategy follows the topic config
  `unclean.leader.election.enable` (default false) unless the caller forces it.
- startup(): partitions with leadership whose leader replica is online → Online, with
  leadership but a leader that is not → Offline, without → New; then every New/Offline
  partition not queued for deletion → Online (offline strategy).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from controller import leader_election as elections
from controller.context import ControllerContext, TopicPartition
from controller.leader_isr import new_leader_and_isr, update_leader_and_isr
from controller.requests import RequestBatch
from controller.states import PartitionState, split_valid
from controller.store_api import ControllerStore, ZkStoreError
from controller.layout import LeaderIsrAndControllerEpoch
from replicas.errors import EligibleLeadersNotAvailable, KafkaError, PreferredLeaderNotAvailable

log = logging.getLogger(__name__)
P = PartitionState
UNCLEAN_CONFIG = "unclean.leader.election.enable"


class Strategy(enum.Enum):
    OFFLINE = "offline"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


@dataclass(frozen=True, slots=True)
class Election:
    strategy: Strategy = Strategy.OFFLINE
    allow_unclean: bool | None = None      # None: the topic's config decides (offline only)


# why a partition's leader changed, as the controller's journal names it
REASONS = {Strategy.OFFLINE: "election", Strategy.REASSIGN: "reassignment",
           Strategy.PREFERRED: "preferred", Strategy.CONTROLLED_SHUTDOWN: "controlled-shutdown"}

Result = dict[TopicPartition, LeaderIsrAndControllerEpoch | KafkaError]


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, batch: RequestBatch, store: ControllerStore):
        self.ctx = ctx
        self.batch = batch
        self.store = store
        self.unclean_elections = 0

    def state(self, tp: TopicPartition) -> PartitionState:
        return self.ctx.partition_states.get(tp, P.NON_EXISTENT)

    # -- lifecycle -------------------------------------------------------------------------
    def startup(self) -> Result:
        for tp in self.ctx.all_partitions():
            leadership = self.ctx.leadership.get(tp)
            if leadership is None:
                self.ctx.partition_states[tp] = P.NEW
            elif self.ctx.is_replica_online(leadership.leader, tp):
                self.ctx.partition_states[tp] = P.ONLINE
            else:
                self.ctx.partition_states[tp] = P.OFFLINE
        return self.trigger_online_state_change()

    def trigger_online_state_change(self, partitions=None) -> Result:
        """Every New/Offline partition (of `partitions`, default all) not being deleted → Online."""
        candidates = self.ctx.all_partitions() if partitions is None else partitions
        todo = [tp for tp in candidates if self.state(tp) in (P.NEW, P.OFFLINE)
                and not self.ctx.is_topic_queued_for_deletion(tp.topic)]
        return self.handle_state_changes(todo, P.ONLINE, Election(Strategy.OFFLINE))

    # -- transitions ------------------------------------------------------------------------
    def handle_state_changes(self, partitions, target: PartitionState,
                             election: Election | None = None) -> Result:
        valid, _ = split_valid(self.ctx.partition_states, partitions, target, P.NON_EXISTENT)
        if target != P.ONLINE:
            for tp in valid:
                self.ctx.partition_states[tp] = target
            return {}
        results: Result = {}
        new = [tp for tp in valid if self.state(tp) == P.NEW]
        elect = [tp for tp in valid if self.state(tp) in (P.ONLINE, P.OFFLINE)]
        if new:
            results.update(self._initialize(new))
        if elect:
            results.update(self.elect_leaders(elect, election or Election()))
        return results

    def _initialize(self, partitions) -> Result:
        results: Result = {}
        by_topic: dict[str, dict[int, LeaderIsrAndControllerEpoch]] = {}
        for tp in partitions:
            replicas = self.ctx.replicas(tp)
            live_replicas = [r for r in replicas if self.ctx.is_replica_online(r, tp)]
            if not live_replicas:
                results[tp] = EligibleLeadersNotAvailable(
                    f"{tp.topic}-{tp.partition}: no online replica among {list(replicas)}")
                continue
            state = LeaderIsrAndControllerEpoch(live_replicas[0], 0, tuple(live_replicas),
                                                self.ctx.epoch)
            by_topic.setdefault(tp.topic, {})[tp.partition] = state
        for topic, states in by_topic.items():
            created = self.store.create_partition_states(topic, states)
            for partition, outcome in created.items():
                tp = TopicPartition(topic, partition)
                if isinstance(outcome, ZkStoreError):
                    log.warning("%s stays New: %s", tp, outcome)
                    results[tp] = KafkaError(f"{topic}-{partition}: {outcome}")
                    continue
                self.ctx.leadership[tp] = outcome
                self.batch.add_leader_and_isr(outcome.isr, tp, self.ctx.replicas(tp), is_new=True)
                self.batch.note_reason(tp, "created", election=True)
                self.ctx.partition_states[tp] = P.ONLINE
                results[tp] = outcome
        return results

    def elect_leaders(self, partitions, election: Election) -> Result:
        ctx = self.ctx
        shutting_too = election.strategy == Strategy.CONTROLLED_SHUTDOWN
        unclean: set[TopicPartition] = set()

        def change(tp: TopicPartition, state: LeaderIsrAndControllerEpoch):
            assignment = ctx.assignment(tp)
            replicas = assignment.replicas if assignment else ()
            # ISR members count too: the offline election's new ISR is ISR ∩ live
            live = {r for r in (*replicas, *state.isr)
                    if ctx.is_replica_online(r, tp, include_shutting_down=shutting_too)}
            strategy = election.strategy
            if strategy == Strategy.OFFLINE:
                allow = election.allow_unclean
                if allow is None:
                    allow = ctx.topic_config(tp.topic, UNCLEAN_CONFIG, "false").lower() == "true"
                outcome = elections.elect_offline(replicas, state.isr, live, allow)
            elif strategy == Strategy.REASSIGN:
                outcome = elections.elect_reassign(assignment.target_replicas, state.isr, live)
            elif strategy == Strategy.PREFERRED:
                outcome = elections.elect_preferred(replicas, state.isr, live)
                if outcome.leader is None:
                    return PreferredLeaderNotAvailable(
                        f"{tp.topic}-{tp.partition}: preferred replica {replicas[:1]} not live in ISR")
            else:
                outcome = elections.elect_controlled_shutdown(replicas, state.isr, live,
                                                              ctx.shutting_down)
            if outcome.leader is None:
                return EligibleLeadersNotAvailable(
                    f"{tp.topic}-{tp.partition}: no eligible leader ({strategy.value}) among "
                    f"replicas {list(replicas)}, ISR {list(state.isr)}")
            if outcome.unclean:
                unclean.add(tp)
            return new_leader_and_isr(state, outcome.leader, outcome.isr, ctx.epoch)

        results = update_leader_and_isr(ctx, self.store, partitions, change)
        for tp, outcome in results.items():
            if isinstance(outcome, KafkaError):
                log.warning("leader election for %s failed: %s", tp, outcome)
                continue
            self.ctx.partition_states[tp] = P.ONLINE
            recipients = [r for r in ctx.replicas(tp)
                          if ctx.is_replica_online(r, tp, include_shutting_down=shutting_too)]
            self.batch.add_leader_and_isr(recipients, tp, ctx.replicas(tp), is_new=False)
            self.batch.note_reason(tp, "unclean-election" if tp in unclean
                                   else REASONS[election.strategy], election=True)
        self.unclean_elections += len(unclean & {tp for tp, r in results.items()
                                                 if not isinstance(r, KafkaError)})
        return results
