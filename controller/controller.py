"""The controller (Kafka's KafkaController.scala, ZooKeeper mode, with ControllerChannelManager).

Rules:
- Every change happens in `process(event)` on the event loop's one thread; ZooKeeper
  watches and broker replies only enqueue events.
- Election (`elect`): if /controller names someone, remember them and stop; otherwise the
  store's one multi-op creates /controller and bumps /controller_epoch. Losing the race is
  "controller moved" → maybe_resign. Any other failure half-way → trigger_controller_move
  (delete /controller if ours, resign) so another candidate can try.
- on_controller_failover, in Kafka's order: register watches → delete the log dir event
  notices (the failover's LeaderAndIsr to every replica asks what they ask) → load the
  context from ZK → UpdateMetadata to all live brokers → replica state machine startup →
  partition state machine startup → resume reassignments → resume topic deletions →
  pending preferred elections → schedule the auto leader-rebalance check.
- Every ZooKeeper write goes through the FencedWriter of the won epoch; a failed epoch
  check (ControllerMovedError) aborts the event and resigns at once.
- Resignation drops watches, context and pending requests; brokers will ignore anything a
  resigned controller might still have in flight because its epoch is stale.
- Broker change: (ZK ids − cached) started, (cached − ZK ids) failed, same id with a newer
  czxid (broker epoch) bounced = failure then startup.
- Requests from brokers (AlterPartition, ControlledShutdown) carry the broker epoch; a stale
  one is rejected with STALE_BROKER_EPOCH (77).
- /admin/reassign_partitions and /admin/preferred_replica_election are acted on whenever
  they exist or change (a watch that only saw creations could miss a re-creation between
  two deliveries); handlers skip what is already under way, so the controller's own
  rewrites are harmless.
- A ZooKeeper failure in the middle of an event (connection lost) abandons the term:
  resign, free /controller, re-elect after `reelect_backoff_ms`; the next failover reloads
  everything from ZooKeeper. A standby that fails to read retries its election the same
  way. Topic deletion: controller/topic_deletion.py; reassignment:
  controller/reassignment.py; which partitions a preferred election moves:
  controller/rebalance.py.
- Timers (auto rebalance) only enqueue events and are cancelled on resignation.
- Topics, partitions, configs, ISR changes, broker requests and admin operations: every
  handler does nothing unless this candidate is the active controller, and ends by sending
  the event's request batch. New topics/partitions go New → Online (offline election) with
  their replicas New → Online; topics that vanished from /brokers/topics leave the context
  (and their watches go). A topic config change is read from ZooKeeper; turning
  unclean.leader.election.enable on retries the topic's offline partitions at once (Kafka's
  TopicUncleanLeaderElectionEnable). Any ISR change (AlterPartition, ISR change
  notification) re-checks partitions being reassigned, through a
  PartitionReassignmentIsrChange event. Preferred elections answer per partition; the
  ZooKeeper-triggered one deletes /admin/preferred_replica_election when done. The
  auto-rebalance check reschedules itself.
- Log directory failure (KIP-112, Kafka's ZooKeeper mode): a notice under
  /log_dir_event_notification names a broker; the controller deletes the notices (fenced)
  and sends LeaderAndIsr for every replica of the named live brokers (OnlineReplica,
  topics being deleted left out). A LeaderAndIsr answer of KAFKA_STORAGE_ERROR (56) marks
  that replica offline (ctx.replicas_on_offline_dirs), NONE marks it online again; other
  errors are only logged. Replicas newly offline go through on_replicas_become_offline:
  partitions they led → Offline → re-elected among the online ISR replicas (unclean only
  if the topic allows it), the replicas → OfflineReplica (StopReplica without delete, out
  of the ISR), those of topics being deleted fail their deletion, and UpdateMetadata
  names them in offline_replicas. A broker that starts or fails loses its entry (its next
  incarnation answers afresh); answers from brokers not live are ignored.
- The journal (`journal`, controller/journal.py) outlives terms: a term opens with
  "active" and ends with "resigned" (moved, session-expired, shutdown, error); brokers
  joining, leaving (a bounce is both), shutting down and losing log directories are
  journaled as they are handled. Partition changes are journaled in `send`, from the
  batch: the state of every partition its UpdateMetadata announces is compared with the
  last journaled one (cost per event: the partitions it changed). A failover remembers
  the loaded states without journaling them; a forgotten topic leaves the journal's
  memory. Times come from `wall_clock_ms` (default: the clock), never from the system.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from typing import Callable

from controller import events as ev
from controller.broker_requests import alter_partition, controlled_shutdown
from controller.context import (ControllerContext, PartitionReplica, ReplicaAssignment,
                                TopicPartition)
from controller.event_loop import EventLoop
from controller.journal import Journal
from controller.partition_state_machine import (UNCLEAN_CONFIG, Election,
                                                PartitionStateMachine, Strategy)
from controller.reassignment import ReassignmentManager
from controller.rebalance import imbalanced_partitions, split_election_request
from controller.replica_state_machine import ReplicaStateMachine
from controller.requests import BrokerChannel, RequestBatch
from controller.scheduler import ThreadScheduler
from controller.states import PartitionState as P, ReplicaState as R
from controller.store_api import ControllerMovedError, ZkStoreError
from controller.topic_deletion import TopicDeletionManager
from replicas.dispatch import handler_name
from replicas.errors import ErrorCode, InvalidConfig, NotController

UNCLEAN = 1                 # Kafka's ElectionType.UNCLEAN (0 is PREFERRED)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True
    reelect_backoff_ms: int = 500

    @classmethod
    def parse(cls, values: dict) -> "ControllerConfig":
        """From field names to values as a command line gives them ("false", "300000");
        InvalidConfig names the key of a value that does not parse."""
        kw = {}
        for f in fields(cls):
            if f.name not in values:
                continue
            raw, want = values[f.name], type(f.default)
            text = str(raw).strip().lower()
            if want is bool and text in ("true", "false"):
                kw[f.name] = text == "true"
            elif want is int and text.lstrip("-").isdigit():
                kw[f.name] = int(text)
            else:
                raise InvalidConfig(f"Invalid value {raw!r} for configuration "
                                    f"{f.name.replace('_', '.')}")
        return cls(**kw)


class _Fenced:
    """The ControllerStore the state machines use: fenced writes, plain reads."""

    def __init__(self, store, writer):
        self.store, self.writer = store, writer

    def create_partition_states(self, topic, states):
        return self.writer.create_partition_states(topic, states)

    def update_partition_states(self, updates):
        return self.writer.update_partition_states(updates)

    def get_partition_state(self, topic, partition):
        return self.store.get_partition_state(topic, partition)


class Controller:
    def __init__(self, controller_id: int, store, channel: BrokerChannel,
                 clock_ms: Callable[[], int], config: ControllerConfig = ControllerConfig(),
                 scheduler=None, wall_clock_ms: Callable[[], int] | None = None,
                 journal: Journal | None = None):
        self.id = controller_id
        self.store = store
        self.channel = channel
        self.clock_ms = clock_ms
        self.wall_clock_ms = wall_clock_ms if wall_clock_ms is not None else clock_ms
        self.journal = journal if journal is not None else Journal()
        self.config = config
        self.scheduler = scheduler if scheduler is not None else ThreadScheduler()
        self.active_controller_id: int | None = None
        self.election = None
        self._session_lost = False
        self.failovers_completed = 0        # for tests/benchmarks: on_controller_failover done
        self.loop = EventLoop(self.process, name=f"controller-{controller_id}-events")
        self._watches: list = []
        self._topic_watches: dict[str, list] = {}
        self._reset()

    def _reset(self) -> None:
        self.ctx = ControllerContext()
        self.batch = RequestBatch(self.id, self.ctx)
        self.fenced = None
        self.psm = self.rsm = None
        self.deletion = TopicDeletionManager(self, self.config.delete_topic_enable)
        self.reassignment = ReassignmentManager(self)

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.id and self.election is not None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Controller":
        self.store.add_state_listener(self._on_session_state)
        self.loop.start()
        self.loop.put(ev.Startup())
        return self

    def shutdown(self) -> None:
        self.loop.shutdown()

    def _on_session_state(self, state: str) -> None:
        """kazoo's thread: only enqueue. A new session after LOST must re-run the election."""
        if state == "LOST":
            self._session_lost = True
            self.loop.expire()
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            self.loop.put(ev.Reelect())

    def process(self, event) -> None:
        handler = getattr(self, handler_name(type(event)))
        try:
            self.batch.new_batch()
            handler(event)
        except ControllerMovedError as exc:
            log.warning("controller %s: %s; resigning", self.id, exc)
            self.batch.clear()
            self.maybe_resign()
            _reply_not_controller(event, f"controller {self.id} was fenced: {exc}")
        except ZkStoreError as exc:
            # The event's work is half done and ZooKeeper (the truth) is out of reach: give
            # up the term so a fresh failover, ours or another candidate's, reloads it.
            log.warning("controller %s: %s during %s; moving the controller", self.id, exc,
                        type(event).__name__)
            self.batch.clear()
            if self.election is not None:
                self.trigger_controller_move()
            else:
                self._schedule_reelect()
            _reply_not_controller(event, f"controller {self.id}: {exc}")

    # -- election ----------------------------------------------------------------------------
    def process_startup(self, _e) -> None:
        self._watches.append(self.store.watch_controller(self._on_controller_znode))
        self.elect()

    def _on_controller_znode(self, controller_id) -> None:
        self.loop.put(ev.Reelect() if controller_id is None else ev.ControllerChange())

    def process_controller_change(self, _e) -> None:
        self.maybe_resign()

    def process_reelect(self, _e) -> None:
        self.maybe_resign()
        self.elect()

    def process_expire(self, _e) -> None:
        self.active_controller_id = None
        if self.election is not None:
            self.on_controller_resignation(reason="session-expired")

    def process_shutdown(self, _e) -> None:
        if self.is_active:
            self.on_controller_resignation(reason="shutdown")
            self.store.delete_controller_if_ours()

    def elect(self) -> None:
        current = self.store.get_controller()
        if current == self.id and self.election is None:
            # /controller left by our own failed term in this session: clear it and compete
            self.store.delete_controller_if_ours()
            current = self.store.get_controller()
        if current is not None:
            self.active_controller_id = current
            return
        try:
            self.election = self.store.elect_controller(self.id)
        except ControllerMovedError as exc:
            self.election = None
            self.active_controller_id = exc.controller_id
            return
        self.active_controller_id = self.id
        try:
            self.on_controller_failover()
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("controller %s failed during failover; moving", self.id)
            self.trigger_controller_move()

    def maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = self.store.get_controller()
        if was_active and self.active_controller_id != self.id:
            self.on_controller_resignation(reason="moved")

    def trigger_controller_move(self) -> None:
        """Resign and free /controller. Our own Reelect follows after a back-off: the other
        candidates' watches may coalesce the create+delete into no change at all."""
        self.on_controller_resignation(reason="error")
        self.active_controller_id = None
        try:
            self.store.delete_controller_if_ours()
        except ZkStoreError as exc:
            # ZooKeeper out of reach: /controller is ephemeral and goes with our session
            log.warning("controller %s: could not free /controller: %s", self.id, exc)
        finally:
            self._schedule_reelect()

    def _schedule_reelect(self) -> None:
        put = self.loop.put
        self.scheduler.schedule(self.config.reelect_backoff_ms, lambda: put(ev.Reelect()))

    def on_controller_resignation(self, reason: str | None = None) -> None:
        if self.election is not None:
            self.journal.controller(self.wall_clock_ms(), "resigned", self.election.epoch,
                                    reason)
        self.journal.forget_partitions()
        self.scheduler.cancel_all()
        for watch in self._watches[1:] + [w for ws in self._topic_watches.values() for w in ws]:
            watch.cancel()
        del self._watches[1:]
        self._topic_watches.clear()
        self.election = None
        self._reset()

    def on_controller_failover(self) -> None:
        election = self.election
        self.fenced = _Fenced(self.store, self.store.fenced(election))
        self.ctx.epoch, self.ctx.epoch_zk_version = election.epoch, election.epoch_zk_version
        self.journal.controller(self.wall_clock_ms(), "active", election.epoch)
        self.psm = PartitionStateMachine(self.ctx, self.batch, self.fenced)
        self.rsm = ReplicaStateMachine(self.ctx, self.batch, self.fenced)
        put = self.loop.put
        self._watches += [
            self.store.watch_broker_ids(lambda _ids: put(ev.BrokerChange())),
            self.store.watch_topics(lambda _t: put(ev.TopicChange())),
            self.store.watch_topic_deletions(lambda _t: put(ev.TopicDeletion())),
            self.store.watch_isr_change_notifications(lambda _n: put(ev.IsrChangeNotification())),
            self.store.watch_log_dir_event_notifications(
                lambda _n: put(ev.LogDirEventNotification())),
            self.store.watch_reassignment(_when_present(lambda: put(ev.ReassignPartitions()))),
            self.store.watch_preferred_election(_when_present(
                lambda: put(ev.PreferredReplicaElection(trigger="zk")))),
        ]
        self.fenced.writer.delete_log_dir_event_notifications(
            self.store.get_log_dir_event_notifications())
        requested_deletions = self._load_context()
        self.journal.forget_partitions()
        for tp, s in self.ctx.leadership.items():     # the previous controllers' doing
            self.journal.baseline(tp.topic, tp.partition, s.leader, s.leader_epoch, s.isr,
                                  s.zk_version)
        self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids())
        self.rsm.startup()
        self.psm.startup()
        self.reassignment.init()
        self.deletion.init(requested_deletions)
        self.send()
        self.maybe_schedule_rebalance()
        self.failovers_completed += 1
        log.info("controller %s active at epoch %s: %d brokers, %d partitions", self.id,
                 self.ctx.epoch, len(self.ctx.live_brokers), len(self.ctx.leadership))

    def _load_context(self) -> set[str]:
        """Fill the context from ZooKeeper; returns the topics whose deletion was requested."""
        ctx = self.ctx
        ctx.live_brokers = self.store.get_brokers()
        for topic, assignment in self.store.get_all_assignments().items():
            self._add_topic(topic, assignment)
        ctx.leadership.update((TopicPartition(*tp), state)
                              for tp, state in self.store.get_partition_states().items())
        requested = self.store.get_topic_deletions()
        ctx.topics_to_delete |= requested & ctx.all_topics
        return requested

    def _add_topic(self, topic, assignment) -> None:
        self.ctx.topic_ids[topic] = assignment.topic_id
        self.ctx.topic_configs[topic] = self.store.get_topic_config(topic) or {}
        for p, replicas in assignment.partitions.items():
            self.ctx.set_assignment(TopicPartition(topic, p), ReplicaAssignment(
                tuple(replicas), assignment.adding_replicas.get(p, ()),
                assignment.removing_replicas.get(p, ())))
        put = self.loop.put
        self._topic_watches[topic] = [
            self.store.watch_topic_assignment(
                topic, lambda *_a, t=topic: put(ev.PartitionModifications(t))),
            self.store.watch_topic_config(
                topic, _on_change(lambda t=topic: put(ev.TopicConfigChange(t)))),
        ]

    def forget_topic(self, topic: str) -> None:
        self.reassignment.forget_topic(topic)
        self.ctx.remove_topic(topic)
        self.journal.forget_topic(topic)
        for watch in self._topic_watches.pop(topic, []):
            watch.cancel()

    def send(self) -> None:
        self.journal_batch()
        self.batch.send(self.channel)

    # -- the journal (controller/journal.py) -------------------------------------------------
    def journal_batch(self) -> None:
        """Journal the state of every partition the batch announces: its UpdateMetadata
        names each partition whose leader, leader epoch or ISR changed (every partition
        after a failover or a broker change, which that UpdateMetadata lists anyway)."""
        announced = self.batch.announced_partitions()
        if announced is not None and not announced:
            return
        leadership, reasons = self.ctx.leadership, self.batch.reasons
        tps = sorted(leadership) if announced is None else sorted(announced)
        observe, now = self.journal.observe, self.wall_clock_ms()
        for tp in tps:
            s = leadership.get(tp)
            if s is not None:
                observe(now, tp.topic, tp.partition, s.leader, s.leader_epoch, s.isr,
                        s.zk_version, reasons.get(tp))

    def journal_broker(self, event: str, broker_id: int, epoch: int | None = None,
                       **fields) -> None:
        self.journal.broker(self.wall_clock_ms(), event, broker_id, epoch, **fields)

    # -- brokers -----------------------------------------------------------------------------
    def process_broker_change(self, _e) -> None:
        if not self.is_active:
            return
        current = self.store.get_brokers()
        cached = self.ctx.live_brokers
        started = set(current) - set(cached)
        failed = set(cached) - set(current)
        bounced = {b for b in set(current) & set(cached) if current[b].epoch > cached[b].epoch}
        for b in sorted(failed | bounced):
            self.journal_broker("left", b, cached[b].epoch)
        for b in sorted(started | bounced):
            self.journal_broker("joined", b, current[b].epoch)
        for b in failed | bounced:
            cached.pop(b)
        if failed or bounced:
            self.on_broker_failure(failed | bounced)
            self.batch.discard_stop_replica(bounced)  # the new incarnation must not get them
        for b in started | bounced:
            cached[b] = current[b]
        if started or bounced:
            self.on_broker_startup(started | bounced)
        self.send()

    def process_broker_modification(self, e: ev.BrokerModification) -> None:
        if self.is_active and (reg := self.store.get_broker(e.broker_id)) is not None:
            self.ctx.live_brokers[e.broker_id] = reg
            self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids())
            self.send()

    def _split_deleting(self, replicas):
        deleting = [r for r in replicas if self.ctx.is_topic_queued_for_deletion(r.topic)]
        return [r for r in replicas if not self.ctx.is_topic_queued_for_deletion(r.topic)], deleting

    def on_broker_startup(self, broker_ids: set[int]) -> None:
        ctx = self.ctx
        for b in broker_ids:
            ctx.replicas_on_offline_dirs.pop(b, None)
        ctx.shutting_down -= broker_ids
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids())
        replicas, deleting = self._split_deleting(ctx.replicas_on_brokers(broker_ids))
        self.rsm.handle_state_changes(replicas, R.ONLINE)
        self.psm.trigger_online_state_change()
        for tp in sorted(self.reassignment.in_progress):
            if set(ctx.replicas(tp)) & broker_ids:
                self.reassignment.process_isr_change(tp)
        if deleting:
            self.deletion.on_broker_startup(broker_ids)

    def on_broker_failure(self, broker_ids: set[int]) -> None:
        ctx = self.ctx
        for b in broker_ids:
            ctx.replicas_on_offline_dirs.pop(b, None)
        ctx.shutting_down -= broker_ids
        led = [tp for tp in ctx.all_partitions()
               if (s := ctx.leadership.get(tp)) is not None and s.leader in broker_ids
               and not ctx.is_topic_queued_for_deletion(tp.topic)]
        self.psm.handle_state_changes(led, P.OFFLINE)
        self.psm.trigger_online_state_change()
        replicas, deleting = self._split_deleting(ctx.replicas_on_brokers(broker_ids))
        self.rsm.handle_state_changes(replicas, R.OFFLINE)
        self.deletion.fail_replica_deletion(deleting)
        if not led:
            self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids())

    # -- topics ------------------------------------------------------------------------------
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
            self.ctx.set_assignment(
                tp, ReplicaAssignment(tuple(assignment.partitions[tp.partition])))
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
        for tp in changed:
            self.batch.note_reason(tp, "isr-change-notification")
        self.batch.add_update_metadata(self.ctx.live_or_shutting_down_broker_ids(), changed)
        self.on_isr_changed(changed)
        self.send()

    def process_log_dir_event_notification(self, _e) -> None:
        """Kafka's processLogDirEventNotification: brokers say a log directory failed."""
        if not self.is_active:
            return
        names = self.store.get_log_dir_event_notifications()
        if not names:
            return
        broker_ids = set(self.store.read_log_dir_event_notifications(names))
        self.fenced.writer.delete_log_dir_event_notifications(names)
        self.on_broker_log_dir_failure(broker_ids)
        self.send()

    def on_broker_log_dir_failure(self, broker_ids: set[int]) -> None:
        """LeaderAndIsr for every replica on these brokers: those on a failed directory
        answer KAFKA_STORAGE_ERROR (process_leader_and_isr_response). A broker no longer
        live is skipped: its replicas are offline already and its restart gets them all."""
        live = broker_ids & self.ctx.live_or_shutting_down_broker_ids()
        log.info("log directory failure on brokers %s", sorted(broker_ids))
        for b in sorted(live):
            self.journal_broker("log-dir-failure", b, self.ctx.broker_epoch(b))
        replicas, _deleting = self._split_deleting(self.ctx.replicas_on_brokers(live))
        self.rsm.handle_state_changes(replicas, R.ONLINE)

    def on_replicas_become_offline(self, replicas) -> None:
        """Kafka's onReplicasBecomeOffline for replicas on offline log directories."""
        ctx = self.ctx
        keep, deleting = self._split_deleting(replicas)
        gone = {(r.tp, r.replica) for r in keep}
        led = sorted({r.tp for r in keep if (s := ctx.leadership.get(r.tp)) is not None
                      and (r.tp, s.leader) in gone})
        self.psm.handle_state_changes(led, P.OFFLINE)
        self.psm.trigger_online_state_change()
        self.rsm.handle_state_changes(keep, R.OFFLINE)
        self.deletion.fail_replica_deletion(deleting)
        # offline_replicas must reach clients even where no leader or ISR changed (the
        # batch merges this with the partitions the elections already announce)
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids(),
                                       sorted({r.tp for r in replicas}))

    def on_isr_changed(self, partitions) -> None:
        """A reassignment may complete once its new replicas joined the ISR."""
        for tp in partitions:
            if tp in self.reassignment.in_progress:
                self.loop.put(ev.PartitionReassignmentIsrChange(tp))

    # -- broker requests ---------------------------------------------------------------------
    def process_alter_partition(self, e: ev.AlterPartition) -> None:
        e.reply(alter_partition(self, e))

    def process_controlled_shutdown(self, e: ev.ControlledShutdown) -> None:
        e.reply(controlled_shutdown(self, e))

    def process_leader_and_isr_response(self, e: ev.LeaderAndIsrResponse) -> None:
        """Kafka's handleLeaderAndIsrResponse: 56 = the replica's log directory is offline,
        0 = the replica is online; the newly offline ones go offline here."""
        for tp, code in e.errors.items():
            # 11 answers a LeaderAndIsr at a leader epoch the broker has: the replica state
            # machine resends the unchanged state to the other replicas, as Kafka's does
            if code == ErrorCode.STALE_CONTROLLER_EPOCH:
                log.debug("broker %s: LeaderAndIsr for %s already applied", e.broker_id, tp)
            elif code and code != ErrorCode.KAFKA_STORAGE_ERROR:
                log.warning("broker %s: LeaderAndIsr for %s failed with error %s",
                            e.broker_id, tp, code)
        # a dead broker's answer says nothing about its next incarnation, which reports
        # its directories afresh
        if not self.is_active or e.broker_id not in self.ctx.live_brokers:
            return
        offline = {TopicPartition(*tp) for tp, code in e.errors.items()
                   if code == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {TopicPartition(*tp) for tp, code in e.errors.items() if code == ErrorCode.NONE}
        previous = self.ctx.replicas_on_offline_dirs.get(e.broker_id, set())
        current = (previous - online) | offline
        if current:
            self.ctx.replicas_on_offline_dirs[e.broker_id] = current
        else:
            self.ctx.replicas_on_offline_dirs.pop(e.broker_id, None)
        new = current - previous
        if new:
            log.info("broker %s: replicas of %s are on an offline log directory", e.broker_id,
                     sorted(new))
            self.journal_broker("replicas-offline", e.broker_id,
                                self.ctx.broker_epoch(e.broker_id), replicas=len(new))
            self.on_replicas_become_offline(
                [PartitionReplica(tp.topic, tp.partition, e.broker_id) for tp in sorted(new)])
            self.send()

    def process_stop_replica_response(self, e: ev.StopReplicaResponse) -> None:
        if self.is_active:
            self.deletion.process_stop_replica_response(e.broker_id, e.errors)
            self.send()

    # -- admin: deletion, reassignment, preferred elections ----------------------------------
    def process_topic_deletion(self, _e) -> None:
        if self.is_active:
            self.deletion.process_requests(self.store.get_topic_deletions())
            self.send()

    def process_reassign_partitions(self, _e) -> None:
        if self.is_active:
            self.reassignment.process_zk_request()
            self.send()

    def process_partition_reassignment_isr_change(self, e: ev.PartitionReassignmentIsrChange
                                                  ) -> None:
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
        unclean = e.election_type == UNCLEAN
        electable, answers = split_election_request(self.ctx, requested, unclean)
        results = dict(answers)
        election = Election(Strategy.OFFLINE, allow_unclean=True) if unclean \
            else Election(Strategy.PREFERRED)
        results.update(self.psm.handle_state_changes(electable, P.ONLINE, election))
        if e.trigger == "zk":
            self.fenced.writer.delete_preferred_election()
        self.send()
        e.reply(results)

    def process_api_partition_reassignment(self, e: ev.ApiPartitionReassignment) -> None:
        if not self.is_active:
            e.reply(NotController(f"controller {self.id} is not active"))
            return
        results = self.reassignment.process_api_request(e.targets)
        self.send()
        e.reply(results)

    def process_list_partition_reassignments(self, e: ev.ListPartitionReassignments) -> None:
        if not self.is_active:
            e.reply(NotController(f"controller {self.id} is not active"))
            return
        e.reply(self.reassignment.ongoing(e.partitions))

    def process_auto_preferred_replica_election(self, _e) -> None:
        if not self.is_active:
            return
        partitions = imbalanced_partitions(self.ctx,
                                           self.config.leader_imbalance_per_broker_percentage)
        if partitions:
            log.info("auto leader rebalance: preferred elections for %d partitions",
                     len(partitions))
            self.psm.handle_state_changes(partitions, P.ONLINE, Election(Strategy.PREFERRED))
            self.send()
        self.maybe_schedule_rebalance()

    def maybe_schedule_rebalance(self) -> None:
        if self.config.auto_leader_rebalance_enable:
            put = self.loop.put
            self.scheduler.schedule(self.config.leader_imbalance_check_interval_ms,
                                    lambda: put(ev.AutoPreferredReplicaElection()))


def _when_present(fire: Callable[[], None]) -> Callable[[object], None]:
    """A data-watch callback that fires whenever the znode exists (created or rewritten);
    its handler reads the znode itself and ignores what is already under way."""
    def callback(value) -> None:
        if value is not None:
            fire()
    return callback


def _reply_not_controller(event, message: str) -> None:
    """An asker must not hang when the event failed: it retries on the new controller."""
    reply = getattr(event, "reply", None)
    if reply is not None:
        reply(NotController(message))


def _on_change(fire: Callable[[], None]) -> Callable[[object], None]:
    """A data-watch callback that skips the immediate first call (state already loaded)."""
    first = [True]

    def callback(_value) -> None:
        if first[0]:
            first[0] = False
            return
        fire()
    return callback
