"""The controller's handlers for topics, partitions, configs, ISR changes, broker requests
and admin operations (a mixin of controller.controller.Controller, split out for size).

Rules:
- Every handler runs on the controller's event thread, does nothing unless this candidate
  is the active controller, and ends by sending the event's request batch.
- New topics/partitions go New → Online (offline election) with their replicas New → Online;
  topics that vanished from /brokers/topics leave the context (and their watches go).
- A topic config change is read from ZooKeeper; turning unclean.leader.election.enable on
  retries the topic's offline partitions at once (Kafka's TopicUncleanLeaderElectionEnable).
- Any ISR change (AlterPartition, ISR change notification) re-checks partitions being
  reassigned, through a PartitionReassignmentIsrChange event.
- Preferred elections answer per partition; the ZooKeeper-triggered one deletes
  /admin/preferred_replica_election when done. The auto-rebalance check reschedules itself.
"""

from __future__ import annotations

import logging

from controller import events as ev
from controller.broker_requests import alter_partition, controlled_shutdown
from controller.context import ReplicaAssignment, TopicPartition
from controller.partition_state_machine import UNCLEAN_CONFIG, Election, Strategy
from controller.rebalance import imbalanced_partitions, split_election_request
from controller.states import PartitionState as P, ReplicaState as R

log = logging.getLogger(__name__)


class TopicEventsMixin:
    # -- topics --------------------------------------------------------------------------------
    def process_topic_change(self, _e) -> None:
        if not self.is_active:
            return
        topics = self.store.get_topics()
        new = topics - self.ctx.all_topics
        for gone in self.ctx.all_topics - topics:
            self.forget_topic(gone)
        if not new:
            return
        created = []
        for topic, assignment in self.store.get_all_assignments(new).items():
            self._add_topic(topic, assignment)
            created += self.ctx.partitions_for_topic(topic)
        self.on_new_partition_creation(created)
        self.send()

    def on_new_partition_creation(self, partitions) -> None:
        replicas = self.ctx.replicas_for_partitions(partitions)
        self.psm.handle_state_changes(partitions, P.NEW)
        self.rsm.handle_state_changes(replicas, R.NEW)
        self.psm.handle_state_changes(partitions, P.ONLINE, Election(Strategy.OFFLINE, False))
        self.rsm.handle_state_changes(replicas, R.ONLINE)

    def process_partition_modifications(self, e: ev.PartitionModifications) -> None:
        if not self.is_active or e.topic not in self.ctx.assignments:
            return
        assignment = self.store.get_topic_assignment(e.topic)
        if assignment is None:
            return
        added = [TopicPartition(e.topic, p) for p in assignment.partitions
                 if TopicPartition(e.topic, p) not in self.ctx.partition_states]
        for tp in added:
            self.ctx.set_assignment(tp, ReplicaAssignment(tuple(assignment.partitions[tp.partition])))
        if added:
            self.on_new_partition_creation(added)
            self.send()

    def process_topic_config_change(self, e: ev.TopicConfigChange) -> None:
        """Kafka's TopicUncleanLeaderElectionEnable: turning unclean election on retries the
        topic's offline partitions at once."""
        if not self.is_active or e.topic not in self.ctx.assignments:
            return
        self.ctx.topic_configs[e.topic] = self.store.get_topic_config(e.topic) or {}
        if self.ctx.topic_config(e.topic, UNCLEAN_CONFIG, "false") == "true":
            self.psm.trigger_online_state_change(self.ctx.partitions_for_topic(e.topic))
            self.send()

    def process_isr_change_notification(self, _e) -> None:
        """Refresh partitions some broker changed in ZK directly (Kafka < 2.7 path)."""
        if not self.is_active:
            return
        names = self.store.get_isr_change_notifications()
        if not names:
            return
        partitions = self.store.read_isr_change_notifications(names)
        for t, p in partitions:
            state = self.store.get_partition_state(t, p)
            if state is not None:
                self.ctx.leadership[TopicPartition(t, p)] = state
        self.fenced.writer.delete_isr_change_notifications(names)
        changed = [TopicPartition(t, p) for t, p in partitions]
        self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids(), changed)
        self.on_isr_changed(changed)
        self.send()

    def on_isr_changed(self, partitions) -> None:
        """A reassignment may complete once its new replicas joined the ISR."""
        for tp in partitions:
            if tp in self.reassignment.in_progress:
                self.loop.put(ev.PartitionReassignmentIsrChange(tp))

    # -- broker requests -------------------------------------------------------------------------
    def process_alter_partition(self, e: ev.AlterPartition) -> None:
        e.reply(alter_partition(self, e))

    def process_controlled_shutdown(self, e: ev.ControlledShutdown) -> None:
        e.reply(controlled_shutdown(self, e))

    def process_leader_and_isr_response(self, e: ev.LeaderAndIsrResponse) -> None:
        for tp, code in e.errors.items():
            if code:
                log.warning("broker %s: LeaderAndIsr for %s failed with error %s", e.broker_id, tp, code)

    def process_stop_replica_response(self, e: ev.StopReplicaResponse) -> None:
        if self.is_active:
            self.deletion.process_stop_replica_response(e.broker_id, e.errors)
            self.send()

    # -- admin: deletion, reassignment, preferred elections --------------------------------------
    def process_topic_deletion(self, _e) -> None:
        if self.is_active:
            self.deletion.process_requests(self.store.get_topic_deletions())
            self.send()

    def process_reassign_partitions(self, _e) -> None:
        if self.is_active:
            self.reassignment.process_zk_request()
            self.send()

    def process_partition_reassignment_isr_change(self, e: ev.PartitionReassignmentIsrChange) -> None:
        if self.is_active:
            self.reassignment.process_isr_change(TopicPartition(*e.partition))
            self.send()

    def process_preferred_replica_election(self, e: ev.PreferredReplicaElection) -> None:
        """Answer: partition → committed state or error (admin); ZooKeeper requests are read
        from /admin/preferred_replica_election, which is deleted afterwards."""
        if not self.is_active:
            e.reply({})
            return
        requested = self.store.get_preferred_election() if e.trigger == "zk" else e.partitions
        electable, answers = split_election_request(self.ctx, requested)
        results = dict(answers)
        results.update(self.psm.handle_state_changes(electable, P.ONLINE,
                                                     Election(Strategy.PREFERRED)))
        if e.trigger == "zk":
            self.fenced.writer.delete_preferred_election()
        self.send()
        e.reply(results)

    def process_auto_preferred_replica_election(self, _e) -> None:
        if not self.is_active:
            return
        partitions = imbalanced_partitions(self.ctx, self.config.leader_imbalance_per_broker_percentage)
        if partitions:
            log.info("auto leader rebalance: preferred elections for %d partitions", len(partitions))
            self.psm.handle_state_changes(partitions, P.ONLINE, Election(Strategy.PREFERRED))
            self.send()
        self.maybe_schedule_rebalance()

    def maybe_schedule_rebalance(self) -> None:
        if self.config.auto_leader_rebalance_enable:
            put = self.loop.put
            self.scheduler.schedule(self.config.leader_imbalance_check_interval_ms,
                                    lambda: put(ev.AutoPreferredReplicaElection()))
