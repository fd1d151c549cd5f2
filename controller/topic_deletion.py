"""Topic deletion (Kafka's TopicDeletionManager, ZooKeeper mode).

Rules:
- A topic is queued for deletion when /admin/delete_topics/<t> appears (or is found there on
  failover). Markers for topics that do not exist are removed at once; with
  delete.topic.enable=false every marker is removed and nothing is deleted.
- Queuing a topic cancels its reassignments (Kafka halts the deletion instead, which can
  deadlock: the partitions of a topic being deleted are never brought back online, so a
  reassignment waiting for its ISR to grow never finishes). Every replica of the full
  replica set, including replicas being added, is deleted.
- Deletion of a queued topic starts unless it is ineligible: a replica sits on a dead
  broker or on an offline log directory (it cannot delete; Kafka's isReplicaOnline, here
  with shutting-down brokers still counted as reachable), or failed to delete. An
  ineligible topic waits: broker startup, reassignment completion or a new deletion request
  make it eligible again and deletion resumes.
- Starting (Kafka's onTopicDeletion): the first time, its partitions → Offline →
  NonExistent; UpdateMetadata announces them with leader -2 (LeaderDuringDelete); then
  replicas on dead brokers → ReplicaDeletionIneligible, the others (not yet deleted) →
  Offline (StopReplica delete=false, leave the ISR) → ReplicaDeletionStarted
  (StopReplica delete=true).
- A StopReplica(delete=true) answer moves the replica to ReplicaDeletionSuccessful, or on
  error to ReplicaDeletionIneligible (topic ineligible; retried later).
- When every replica of the topic is ReplicaDeletionSuccessful: replicas → NonExistent,
  the topic leaves the context, and the fenced writer removes /brokers/topics/<t>,
  /config/topics/<t> and, last, the marker /admin/delete_topics/<t>.
- A broker failure marks its replicas of topics being deleted as failed
  (ReplicaDeletionIneligible; the state table ignores those already deleted).
"""

from __future__ import annotations

import logging
from typing import Iterable

from controller.context import PartitionReplica, TopicPartition
from controller.states import PartitionState as P, ReplicaState as R

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, controller, enabled: bool = True):
        self.c = controller
        self.enabled = enabled

    @property
    def ctx(self):
        return self.c.ctx

    # -- entry points ------------------------------------------------------------------------
    def init(self, requested: set[str]) -> None:
        """On failover: queue the requested topics that exist; drop the other markers."""
        self.process_requests(requested)

    def process_requests(self, requested: set[str]) -> None:
        """The children of /admin/delete_topics, read after a watch fired."""
        unknown = {t for t in requested if t not in self.ctx.all_topics}
        if not self.enabled:
            unknown = set(requested)
        for topic in sorted(unknown):
            log.info("removing deletion marker of %s (%s)", topic,
                     "unknown topic" if self.enabled else "delete.topic.enable=false")
            self.c.fenced.writer.delete_topic_marker(topic)
        topics = set(requested) - unknown
        if not topics:
            return
        for topic in topics:
            self.c.reassignment.forget_topic(topic)  # no point moving what will be deleted
        self.ctx.topics_to_delete |= topics
        self.resume()

    def process_stop_replica_response(self, broker_id: int, errors: dict) -> None:
        ok, failed = [], []
        for raw_tp, code in errors.items():
            tp = TopicPartition(*raw_tp)
            if not self.ctx.is_topic_queued_for_deletion(tp.topic):
                continue
            (failed if code else ok).append(PartitionReplica(tp.topic, tp.partition, broker_id))
        if failed:
            self.fail_replica_deletion(failed)
        if ok:
            self.c.rsm.handle_state_changes(ok, R.DELETION_SUCCESSFUL)
            self.resume()

    def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        replicas = [r for r in replicas if self.ctx.is_topic_queued_for_deletion(r.topic)]
        if not replicas:
            return
        self.c.rsm.handle_state_changes(replicas, R.DELETION_INELIGIBLE)
        self.ctx.topics_ineligible_for_deletion |= {r.topic for r in replicas}
        self.resume()

    def resume_for_topics(self, topics: Iterable[str]) -> None:
        """Something changed that may unblock these topics (broker up, reassignment done)."""
        topics = set(topics) & self.ctx.topics_to_delete
        if topics:
            self.ctx.topics_ineligible_for_deletion -= topics
            self.resume()

    def on_broker_startup(self, broker_ids: set[int]) -> None:
        self.resume_for_topics({r.topic for r in self.ctx.replicas_on_brokers(broker_ids)})

    # -- the work ---------------------------------------------------------------------------
    def resume(self) -> None:
        ctx = self.ctx
        for topic in sorted(ctx.topics_to_delete):
            replicas = self._replicas(topic)
            states = [ctx.replica_states.get(r, R.NON_EXISTENT) for r in replicas]
            if all(s == R.DELETION_SUCCESSFUL for s in states):
                self._complete(topic, replicas)
                continue
            if any(s == R.DELETION_STARTED for s in states):
                continue  # answers still outstanding
            if any(s == R.DELETION_INELIGIBLE for s in states):
                # Kafka's retryDeletionForIneligibleReplicas: back to Offline for a new try
                self.c.rsm.handle_state_changes(
                    [r for r, s in zip(replicas, states) if s == R.DELETION_INELIGIBLE], R.OFFLINE)
            if topic not in ctx.topics_ineligible_for_deletion:
                self._start(topic)

    def _replicas(self, topic: str) -> list[PartitionReplica]:
        return self.ctx.replicas_for_partitions(self.ctx.partitions_for_topic(topic))

    def _start(self, topic: str) -> None:
        ctx, c = self.ctx, self.c
        partitions = ctx.partitions_for_topic(topic)
        if topic not in ctx.topics_deletion_started:
            c.psm.handle_state_changes(partitions, P.OFFLINE)
            c.psm.handle_state_changes(partitions, P.NON_EXISTENT)
            ctx.topics_deletion_started.add(topic)
        c.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids(), partitions)
        dead, retry = [], []
        for r in self._replicas(topic):
            if not ctx.is_replica_online(r.replica, r.tp, include_shutting_down=True):
                dead.append(r)
            elif ctx.replica_states.get(r) != R.DELETION_SUCCESSFUL:
                retry.append(r)
        c.rsm.handle_state_changes(dead, R.DELETION_INELIGIBLE)
        c.rsm.handle_state_changes(retry, R.OFFLINE)
        c.rsm.handle_state_changes(retry, R.DELETION_STARTED)
        if dead:
            ctx.topics_ineligible_for_deletion.add(topic)
            log.info("deletion of %s waits for brokers %s", topic, sorted({r.replica for r in dead}))

    def _complete(self, topic: str, replicas: list[PartitionReplica]) -> None:
        self.c.rsm.handle_state_changes(replicas, R.NON_EXISTENT)
        self.c.forget_topic(topic)
        self.c.fenced.writer.delete_topic_znodes(topic)
        log.info("topic %s deleted", topic)
