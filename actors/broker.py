"""Broker: one Kafka broker as a plain object, the shell around replicas.ReplicaManager.

It runs wherever it is given a ZooKeeper store, a data directory and a `BrokerHost` (what
it needs from the process it lives in: the node's address and id, how to reach the active
controller, where to report metrics). actors/broker_actor.py puts it in a Ray actor; the
tests run several in one process over a real ZooKeeper (tests/broker_world.py), no Ray.

Rules:
- Threaded: an acks=all produce or a long-poll fetch waits on its own completion and never
  blocks other calls. In the Ray actor produces, fetches (followers and consumers) and
  controller requests run in SEPARATE thread pools (Ray concurrency groups,
  actors/broker_actor.py), so waiting produces can never starve the fetches that complete
  them. Every replica manager call happens under ONE lock (the manager is
  single-threaded by design).
- Wake-ups (no thundering herd): a waiting produce call sleeps on ITS OWN condition, woken
  only when one of its pending ids completes; long-poll fetches are parked by partition
  (actors/purgatory.py), completed when a leader append adds data (Kafka completes
  DelayedFetch on append: without it a follower sat out its whole long-poll and every
  acks=all produce waited ~max_wait), when a HW moves, or on controller requests.
- `produce_many([(tp, batches), ...], acks, timeout_ms)` is Kafka's multi-partition
  ProduceRequest: one call per broker carrying every partition's batches (one entry per
  partition); the answer is {tp: result} with a result per partition (its own error code),
  sent when every acks=all partition has its HW past its batch or timed out. `produce` is
  the one-partition case; `produce_batches` answers a list, one result per entry, and takes
  a partition more than once (the native producer's pipeline). actors/produce.py appends.
- Start (also after a Ray restart, which re-runs __init__): recover the logs from disk,
  register in ZooKeeper (an ephemeral /brokers/ids/<id> whose czxid is the broker epoch,
  with its broker.rack, which reaches every broker's metadata through the controller),
  then obey the controller. A fresh broker waits out a previous registration's session; a
  RESTARTED one (the host says so: Ray only restarts a dead actor) deletes its dead
  incarnation's node, so the controller sees a bounce within the restart time instead of
  a session timeout.
- Kafka clients are served once this incarnation knows the cluster: the listeners are
  bound (their ports go into the registration) but accept nothing until the controller's
  first UpdateMetadata (as a KRaft broker waits to catch up on metadata before it serves),
  or SERVE_ANYWAY_S without one. A restarted broker so never answers Metadata from an
  empty cache ("unknown topic"): a client is refused and asks another broker.
- A new ZooKeeper session after expiry re-registers (a new broker epoch): the controller
  sees a bounce and resends everything.
- Effects of the replica manager are carried out here: ISR proposals go to the active
  controller (AlterPartition, retried until answered or moot), finished acks=all produces
  and HW moves wake the waiting threads, leadership changes start/stop follower fetchers.
- Config: actors/broker_config.py splits it. Background: the replica manager's tick every
  `tick_ms` (ISR shrink, produce timeouts, HW checkpoints, flush.ms); a retention check
  every `log.retention.check.interval.ms` with the topic configs ZooKeeper has then; an
  altered topic config reaches the hosted replicas when ZooKeeper's watch fires.
- Evidence for the chaos checker: the first time this incarnation ACCEPTS (error 0) a
  controller request of a (controller_epoch, controller_id) pair, it appends
  `<controller_epoch> <controller_id>` to `<data_dir>/controller-epochs.log`. Two ids on one epoch would
  mean two controllers acted in the same term.
- Metrics: the host reports `metrics()` (the Ray actor: Ray gauges every
  `metrics_interval_s`, actors/metrics.py); security (TLS, SASL, ACLs) is
  actors/security.py's, handed to the listeners.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import queue
import threading
import time
from typing import Callable, Protocol

from actors import metrics
from actors.fetcher import Fetcher
from actors.share_host import ShareHost
from actors.share_state_host import STATE_TOPIC, ShareStateHost
from actors.group_host import OFFSETS_TOPIC, GroupHost
from actors.broker_config import BrokerSettings, inter_broker_principal
from actors.kafka_api import KafkaBrokerApi
from actors.listener import EventLoop, KafkaListener
from actors.produce import REORDER_WAIT_S, PendingProduce, markers_begin
from actors.produce import produce_begin as begin_produce
from actors.txn_host import TXN_TOPIC, TxnHost
from actors.txn_verification import TxnVerifier
from actors.topic_io import TopicIO
from actors.fetch import fetch_begin as begin_fetch
from actors.delete_records import DeletePurgatory
from actors.purgatory import DelayedFetch, FetchPurgatory
from actors.timers import Timers
from actors.dynamic_config import BrokerDynamicConfig, DynamicConfigWatcher
from actors.security import BrokerSecurity
from actors.log_cleaner import LogCleaner
from coordinator import messages as gm
from controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from controller.layout import DEFAULT_FEATURES, BrokerRegistration, LeaderIsrAndControllerEpoch
from protocol.api import Deferred
from replicas.errors import (BrokerNotAvailable, KafkaError, NotController, RequestTimedOut,
                            error_for_code)
from replicas.replica_manager import (CLIENT, BrokerConfig, ClientMetadata,
                                      HighWatermarkChanged, ProduceDone, ProposeIsr,
                                      ReplicaManager)

log = logging.getLogger(__name__)
CONTROLLER_EPOCHS_LOG = "controller-epochs.log"
LISTENER_PORTS_FILE = "kafka-listener-ports.json"
SERVE_ANYWAY_S = 15.0         # no controller this long: serve what the cache holds
FETCH_MAX_BYTES = 50 << 20   # a native share fetch, as librdkafka's fetch.max.bytes


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


def settle_long_lived() -> None:
    """Replicas (logs, segments, states) live as long as the broker: move them out of the
    collector's sight (gc.freeze, after a young collection so no fresh garbage is frozen).
    Without it every full collection walks them all: at 10,000 partitions ~500,000 objects,
    0.7-0.9 s pauses of every thread of the broker, acks and fetches included."""
    gc.collect(1)
    gc.freeze()


class BrokerHost(Protocol):
    """What a broker needs from the process it runs in."""

    def node_ip(self) -> str:
        """The address advertised for listeners bound to a wildcard host."""

    def node_id(self) -> str:
        """The node this broker runs on (Ray's node id in a Ray actor)."""

    def registration_name(self) -> str:
        """How drivers find this broker (its actor name), written into its registration."""

    def was_restarted(self) -> bool:
        """Is this a restart of a dead incarnation (whose registration may be taken over)?"""

    def ask_controller(self, controller_id: int, method: str, *args):
        """Call `method` (alter_partition, controlled_shutdown) on that controller and wait
        for its answer; ValueError when that controller cannot be found."""

    def report_metrics(self, figures: Callable[[], dict], stop: threading.Event) -> None:
        """Publish figures() from now until `stop` is set."""

    def call_broker(self, broker_id: int, method: str, *args):
        """Call `method` (share_state) on another broker and wait for its answer;
        LookupError when that broker cannot be found."""


class Broker:
    """One broker; see the module docstring. `store` is a started ZooKeeper store
    (controller.zookeeper.store.ZkStore, closed by shutdown)."""

    def __init__(self, broker_id: int, store, data_dir: str, settings: BrokerSettings,
                 host: BrokerHost):
        self.id, self.host = broker_id, host
        self.tick_ms = settings.tick_ms
        self.kafka_config = settings.kafka
        self.inter_broker_listener = settings.kafka.inter_broker_listener()
        self.inter_broker_principal = inter_broker_principal(settings)
        self._peers: dict[int, object] = {}        # broker id → LiveBroker (its endpoints)
        self.topic_defaults = settings.topic_defaults
        os.makedirs(data_dir, exist_ok=True)
        self.data_dir = data_dir
        self._controller_terms: set[tuple[int, int]] = set()  # recorded by THIS incarnation
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)   # metadata waits, reordered produces
        self._config_watches: dict = {}                 # topic → its config's ZooKeeper watch
        self.parked = FetchPurgatory()                   # long-poll fetches, by partition
        self.deletions = DeletePurgatory()               # DeleteRecords awaiting followers
        self.topic_io = TopicIO()                        # Kafka's per-topic bytes in/out
        self.network = EventLoop(f"broker-{broker_id}-network")   # sockets, timers, fetchers
        self.timers = Timers(self.network)
        self._produce_waiters: dict[int, PendingProduce] = {}   # pending id → its call
        self.fetchers: dict[int, Fetcher] = {}
        self._cut_until: dict[int | None, float] = {}    # link-cut failpoint, by leader
        self._alter = queue.Queue()
        self.stopped = threading.Event()
        self.store = store
        self._serving_dirs = False       # failures before that are learnt from LeaderAndIsr
        rm_settings = dict(settings.replica_manager)
        log_dirs = tuple(os.path.join(d, f"broker-{broker_id}")
                         for d in rm_settings.pop("log_dirs", ()))
        self.rm = ReplicaManager(broker_id, BrokerConfig(data_dir=data_dir, log_dirs=log_dirs,
                                                         default_topic_config=self.topic_defaults,
                                                         **rm_settings),
                                 _clock_ms, wall_clock_ms=lambda: int(time.time() * 1000),
                                 on_log_dir_failure=self._on_log_dir_failure)
        self.recovery = self.rm.startup()
        self._session_lost = False
        self.store.add_state_listener(self._on_zk_state)
        self.groups = GroupHost(self, settings.group)
        self.share_states = ShareStateHost(
            self, settings.group.share_coordinator_state_topic_num_partitions)
        self.shares = ShareHost(self, settings.group)
        self._verifying: dict = {}          # (tp, producer id) → buffers awaiting verification
        self.txns = TxnHost(self, settings.txn, lambda: self.kafka_api.new_producer_id())
        self.verifier = TxnVerifier(self)
        self.finalized_features: tuple[dict, int] = ({}, -1)
        self._on_features(self.store.get_or_create_features(DEFAULT_FEATURES))
        self._features_watch = self.store.watch_features(self._on_features)
        self.security = BrokerSecurity(self.store, settings.security,
                                       self.kafka_config.bind_endpoints()).start()
        self.kafka_api = KafkaBrokerApi(self, self.kafka_config,
                                        self.store.get_or_create_cluster_id())
        self.dynamic_broker_config = BrokerDynamicConfig(self.id, self.topic_defaults, self.lock)
        self.dynamic_config = DynamicConfigWatcher(self.store, self.kafka_api.quota_tracker,
                                                   self.dynamic_broker_config,
                                                   self.groups.set_group_configs).start()
        self.listeners = self._start_listeners()
        self._serve_anyway = threading.Timer(SERVE_ANYWAY_S, self._maybe_serve, ("no controller",))
        self._serve_anyway.daemon = True
        self._serve_anyway.start()
        self._register()
        self._serving_dirs = True
        threading.Thread(target=self._background, daemon=True, name="broker-background").start()
        threading.Thread(target=self._alter_sender, daemon=True, name="broker-alter").start()
        if self.rm.config.log_cleaner_enable:
            self.cleaner = LogCleaner(self, self.rm.config.log_cleaner_backoff_ms, self.stopped)
        host.report_metrics(self.metrics, self.stopped)

    # -- ZooKeeper registration ---------------------------------------------------------------------
    def _start_listeners(self) -> list[KafkaListener]:
        """Kafka's listeners, bound before registering (their ports go into the znode). A
        listener asked on port 0 gets a free port once and keeps it across restarts on this
        node (remembered in the data dir), so clients find a restarted broker where it was."""
        remembered_file = os.path.join(self.data_dir, LISTENER_PORTS_FILE)
        try:
            with open(remembered_file) as f:
                remembered = {k: int(v) for k, v in json.load(f).items()}
        except (OSError, ValueError):
            remembered = {}
        out = []
        try:
            for ep in self.kafka_config.bind_endpoints():
                listener = None
                for port in ([remembered[ep.listener]] if not ep.port and ep.listener in remembered
                             else []) + [ep.port]:
                    listener = KafkaListener(dataclasses.replace(ep, port=port), self.kafka_api,
                                             self.kafka_config.socket_request_max_bytes,
                                             self.kafka_config.connections_max_idle_ms,
                                             f"broker-{self.id}-{ep.listener.lower()}",
                                             self.security, self.network)
                    try:
                        listener.start(serve=False)       # served from `_maybe_serve`
                        break
                    except OSError:
                        if port == ep.port:        # the configured port itself: give up
                            raise
                out.append(listener)
        except OSError as exc:
            for listener in out:
                listener.stop()
            raise BrokerNotAvailable(f"broker {self.id}: cannot listen on "
                                     f"{self.kafka_config.listeners}: {exc}") from None
        with open(remembered_file + ".tmp", "w") as f:
            json.dump({x.endpoint.listener: x.port for x in out}, f)
        os.replace(remembered_file + ".tmp", remembered_file)
        self.advertised = self.kafka_config.advertised(
            {x.endpoint.listener: x.port for x in out}, self.host.node_ip())
        return out

    def endpoints(self) -> list[str]:
        """The advertised Kafka listeners, `NAME://host:port`."""
        return [e.url() for e in self.advertised]

    def kafka_stats(self) -> dict:
        """Per listener and API: requests, handler CPU seconds, bytes in and out."""
        return {x.endpoint.listener: x.stats() for x in self.listeners}

    def fetch_session_stats(self) -> dict:
        """Kafka fetch sessions (KIP-227), per kind of fetcher (consumer, follower): full,
        incremental and sessionless fetches served, session errors, evictions; and the
        sessions cached now."""
        cache = self.kafka_api.fetch_sessions
        with cache.lock:
            return {**{kind: dict(counts) for kind, counts in cache.stats.items()},
                    "sessions": len(cache)}

    def _maybe_serve(self, why: str) -> None:
        """Open the Kafka listeners (once; see the module docstring)."""
        self._serve_anyway.cancel()
        for listener in self.listeners:
            if not listener.serving:
                listener.serve(wait=False)    # the caller may hold the lock the loop needs
                log.info("broker %s: serving %s on port %s (%s)", self.id,
                         listener.endpoint.listener, listener.port, why)

    def _on_features(self, finalized) -> None:
        """/feature read or changed: ApiVersions answers it, the coordinator takes its
        transaction.version (its own aborts and the log value's version follow it)."""
        if finalized is None:
            return
        levels, epoch = finalized
        if epoch <= self.finalized_features[1]:
            return
        self.finalized_features = (dict(levels), epoch)
        self.txns.set_transaction_version(levels.get("transaction.version", 0))

    def replication_problems(self) -> dict:
        """What keeps this broker's followers from replicating (`rayka status`): who it is
        on the inter-broker listener and each fetcher's problem (actors/fetcher.py)."""
        with self.lock:
            fetchers = list(self.fetchers.values())
        return {"listener": self.inter_broker_listener, "principal": self.inter_broker_principal,
                "fetchers": [p for f in fetchers if (p := f.problem()) is not None]}

    def _register(self) -> None:
        reg = BrokerRegistration.for_listeners(
            self.id, self.host.node_ip(), self.advertised,
            rack=self.kafka_config.broker_rack or None, node_id=self.host.node_id(),
            actor_name=self.host.registration_name())
        # after a Ray restart the old incarnation is dead: take its registration over at once
        epoch = self.store.register_broker(
            reg, wait_s=60, replace_dead_incarnation=self.host.was_restarted())
        with self.lock:
            self.rm.broker_epoch = epoch
        log.info("broker %d: registered at broker epoch %d", self.id, epoch)

    def _on_zk_state(self, state: str) -> None:
        if state == "LOST":
            self._session_lost = True
            log.info("broker %d: ZooKeeper session lost", self.id)
        elif state == "CONNECTED" and self._session_lost:
            self._session_lost = False
            threading.Thread(target=self._register_again, daemon=True).start()

    def _register_again(self) -> None:
        """A new session after a lost one: the ephemeral registration is gone, write it
        again. ZooKeeper may drop again meanwhile: retry until registered or stopped (a
        broker alive but unregistered is offline for the controller forever)."""
        while not self.stopped.is_set() and not self._session_lost:
            try:
                self._register()
                return
            except Exception as e:        # ZooKeeper away again: the next CONNECTED retries too
                log.info("broker %d: registering again failed: %s; retrying", self.id, e)
                self.stopped.wait(0.5)

    # -- helpers ---------------------------------------------------------------------------------
    def peer_endpoint(self, broker_id: int):
        """Another broker's endpoint on the inter-broker listener: as the controller last
        named it (LeaderAndIsr's live leaders, UpdateMetadata's live brokers), else as its
        ZooKeeper registration says; None when neither knows it."""
        with self.lock:
            live = self._peers.get(broker_id) or self.rm.metadata.live_brokers.get(broker_id)
        endpoints = tuple(live.endpoints) if live is not None else ()
        if not any(e.listener == self.inter_broker_listener for e in endpoints):
            try:
                reg = self.store.get_broker(broker_id)
            except Exception:          # ZooKeeper away: the caller backs off and asks again
                reg = None
            endpoints = tuple(reg.endpoints) if reg is not None else ()
        return next((e for e in endpoints if e.listener == self.inter_broker_listener), None)

    def _on_log_dir_failure(self, failure) -> None:
        """A log directory went offline (Kafka's ReplicaManager.handleLogDirFailure); the
        replica manager calls this under the lock. Its partitions' fetchers and coordinator
        roles stop, their waiting produces are answered, parked fetches read again (and get
        KAFKA_STORAGE_ERROR), and the controller hears of it through ZooKeeper's
        /log_dir_event_notification, then moves their leadership. A broker whose every
        directory failed stays registered and answers KAFKA_STORAGE_ERROR for all its
        replicas (Kafka halts it instead; here `rayka status` can still say why)."""
        log.error("broker %s: log directory %s is offline (%s); %d partitions stop being "
                  "served here%s", self.id, failure.path, failure.reason,
                  len(failure.partitions),
                  "; every log directory is offline" if failure.all_offline else "")
        self.apply_effects(failure.effects)
        if failure.partitions:
            self._move_fetchers(failure.partitions, {})
            self._offsets_leadership((), failure.partitions)
            self.parked.moved(list(failure.partitions))
            self.changed.notify_all()
        if self._serving_dirs:
            threading.Thread(target=self._propagate_log_dir_event, daemon=True,
                             name="broker-log-dir-event").start()

    def _propagate_log_dir_event(self) -> None:
        """Kafka's propagateLogDirEvent: a persistent sequential notice for the controller,
        retried while ZooKeeper is away (the controller must hear of it)."""
        while not self.stopped.is_set():
            try:
                self.store.propagate_log_dir_event(self.id)
                return
            except Exception as exc:
                log.warning("broker %s: log dir event not written yet: %s", self.id, exc)
                self.stopped.wait(0.5)

    def log_dirs(self, with_partitions: bool = True) -> list[dict]:
        """Every log directory: path, online, why offline, partitions held or lost (only
        how many of each without `with_partitions`: what a monitor polling it needs)."""
        with self.lock:
            dirs = self.rm.log_dirs()
        for d in dirs:
            for key in ("partitions", "offline_partitions"):
                d[key] = [list(tp) for tp in d[key]] if with_partitions else len(d[key])
        return dirs

    def apply_effects(self, effects) -> None:
        """Carry out replica-manager effects; caller holds the lock."""
        moved = []
        for e in effects:
            if isinstance(e, ProduceDone):
                waiter = self._produce_waiters.pop(e.pending_id, None)
                if waiter is not None:        # nobody waits any more: drop it (no leak)
                    waiter.acknowledged(e)
            elif isinstance(e, HighWatermarkChanged):
                moved.append(e.tp)
            elif isinstance(e, ProposeIsr):
                self._alter.put(e)
        if moved:
            self.parked.changed(moved)       # consumers' long-polls on those partitions

    # -- controller → broker ---------------------------------------------------------------------
    def cleaner_rounds(self) -> list[dict]:
        return list(self.cleaner.rounds) if self.rm.config.log_cleaner_enable else []

    def list_offsets(self, asks) -> dict:
        """ListOffsets [(tp, timestamp, current leader epoch)] → {tp: OffsetAnswer}."""
        return self.kafka_api.list_offsets(0, asks)

    def delete_records(self, asks, timeout_ms: int = 30_000) -> dict:
        """DeleteRecords on the partitions this broker leads: {tp: (error, low watermark)},
        once every live replica's log start passed the offset (REQUEST_TIMED_OUT for a
        partition whose followers did not within `timeout_ms`)."""
        got = self.kafka_api.delete_records(asks, timeout_ms)
        return got.result() if isinstance(got, Deferred) else got

    def handle_controller_request(self, request) -> dict:
        with self.lock:
            answer = self._apply_controller_request(request)
            # Replica states moved (LeaderAndIsr, StopReplica): the parked fetches reading
            # those partitions read them again (they may now fail). UpdateMetadata moves none.
            moved = getattr(request, "partitions", None) or (
                request.partition_states if isinstance(request, LeaderAndIsrRequest) else ())
            if moved:
                self.parked.moved([(p.topic, p.partition) for p in moved])
            if not answer["error"]:
                self._record_controller_term(request.controller_epoch, request.controller_id)
            return answer

    def _record_controller_term(self, epoch: int, controller_id: int) -> None:
        """Append a newly seen accepted (epoch, controller) pair; caller holds the lock, so
        the lines are in acceptance order. Open-append-close: the file survives a SIGKILL."""
        term = (int(epoch), int(controller_id))
        if term in self._controller_terms:
            return
        try:
            with open(os.path.join(self.data_dir, CONTROLLER_EPOCHS_LOG), "a") as f:
                f.write(f"{term[0]} {term[1]}\n")
                f.flush()
        except OSError as exc:       # a full or failed disk must not refuse the controller
            log.error("broker %s: cannot record controller term %s: %s", self.id, term, exc)
            return
        self._controller_terms.add(term)

    def _apply_controller_request(self, request) -> dict:
        """One controller request through the replica manager; caller holds the lock."""
        if isinstance(request, (LeaderAndIsrRequest, UpdateMetadataRequest)):
            for live in (request.live_leaders if isinstance(request, LeaderAndIsrRequest)
                         else request.live_brokers):
                self._peers[live.id] = live
        if isinstance(request, LeaderAndIsrRequest):
            topic_configs = {t: self.store.get_topic_config(t) or {}
                             for t in {s.topic for s in request.partition_states}}
            out = self.rm.handle_leader_and_isr(request, topic_configs)
            self._watch_topic_configs(topic_configs)
            self.apply_effects(out.effects)
            self._move_fetchers(out.became_leader, out.became_follower)
            self._offsets_leadership(out.became_leader, out.became_follower)
            if out.became_leader or out.became_follower:
                settle_long_lived()
            return {"error": out.error, "partition_errors": dict(out.partition_errors)}
        if isinstance(request, UpdateMetadataRequest):
            error = self.rm.handle_update_metadata(request)
            self.changed.notify_all()         # clients waiting for metadata
            if not error:
                self._maybe_serve("the controller's first UpdateMetadata")
            return {"error": error, "partition_errors": {}}
        if isinstance(request, StopReplicaRequest):
            out = self.rm.handle_stop_replica(request)
            hosted = self.rm.topics()
            for topic in [t for t in self._config_watches if t not in hosted]:
                self._config_watches.pop(topic).cancel()
            self.apply_effects(out.effects)
            self._move_fetchers(out.stopped, {})
            self._offsets_leadership((), out.stopped)
            self.changed.notify_all()
            return {"error": out.error, "partition_errors": dict(out.partition_errors)}
        raise TypeError(f"not a controller request: {type(request).__name__}")

    def _watch_topic_configs(self, topics) -> None:
        """Watch /config/topics/<t> of every hosted topic: an altered config reaches the
        replicas within moments (Kafka's config change notifications), applied on the
        network loop (never on ZooKeeper's event thread); caller holds the lock."""
        for topic in topics:
            if topic not in self._config_watches and topic in self.rm.topics():
                self._config_watches[topic] = self.store.watch_topic_config(
                    topic, lambda config, t=topic: self._on_topic_config(t, config))

    def _on_topic_config(self, topic: str, config: dict | None) -> None:
        if config is not None:
            self.timers.add(0, lambda: self._apply_topic_config(topic, config))

    def _apply_topic_config(self, topic: str, config: dict) -> None:
        with self.lock:
            self.rm.apply_topic_config(topic, config)

    def _offsets_leadership(self, led, not_led) -> None:
        """Tell the coordinators which `__consumer_offsets` / `__transaction_state`
        partitions they now load (with the leader epoch: the transaction coordinator's
        epoch) or unload (queued: they read logs on their own thread, never under this
        lock); caller holds the lock."""
        for tp in led:
            if tp[0] == OFFSETS_TOPIC:
                self.groups.became_leader(tp[1])
            elif tp[0] == TXN_TOPIC:
                self.txns.became_leader(tp[1], self.rm.partition_info(tp)["leader_epoch"])
            elif tp[0] == STATE_TOPIC:
                self.share_states.became_leader(tp[1])
        for tp in not_led:
            if tp[0] == OFFSETS_TOPIC:
                self.groups.lost(tp[1])
            elif tp[0] == TXN_TOPIC:
                self.txns.lost(tp[1])
            elif tp[0] == STATE_TOPIC:
                self.share_states.lost(tp[1])

    # -- consumer groups (the native client's door; Kafka clients come through the listener) --
    def group(self, event):
        """One coordinator request (a coordinator.messages event; its request_id is
        replaced): its result, once the coordinator answers (a JoinGroup parks). The
        native door names topics where the wire has ids (ConsumerGroupHeartbeat,
        ConsumerGroupDescribe): mapped here, both ways."""
        if isinstance(event, gm.ConsumerGroupHeartbeat):
            return self._native_consumer_heartbeat(event)
        if isinstance(event, gm.ConsumerGroupDescribe):
            return self._native_consumer_describe(event)
        return self.groups.call(lambda rid: dataclasses.replace(event, request_id=rid)).result()

    def _native_consumer_heartbeat(self, event):
        topics = self.kafka_api.topic_partition_counts()
        ids = {name: tid for name, (tid, _) in topics.items()}
        names = {tid: name for name, tid in ids.items()}
        r = event.request
        owned = None if r.owned is None else {
            ids[t]: ps for t, ps in r.owned.items() if t in ids}
        asked = dataclasses.replace(event, request=dataclasses.replace(r, owned=owned),
                                    topics=topics)
        answer = self.groups.call(lambda rid: dataclasses.replace(asked, request_id=rid)).result()
        if answer.assignment is None:
            return answer
        return dataclasses.replace(answer, assignment={
            names[t]: ps for t, ps in answer.assignment.items() if t in names})

    def _native_consumer_describe(self, event):
        result = self.groups.call(lambda rid: dataclasses.replace(event, request_id=rid)).result()
        names = {tid: name for name, tid in self.kafka_api.topic_ids().items()}

        def named(a):
            return {names[t]: ps for t, ps in a.items() if t in names}
        return dataclasses.replace(result, groups=tuple(dataclasses.replace(g, members=tuple(
            dataclasses.replace(x, assignment=named(x.assignment),
                                target_assignment=named(x.target_assignment))
            for x in g.members)) for g in result.groups))

    def find_coordinator(self, group_id: str, key_type: int = 0) -> tuple[int, int]:
        """(error, broker id of the coordinator): Kafka's FindCoordinator, of a group (key
        type 0) or a transactional id (1)."""
        return self.kafka_api.coordinator_of(group_id, key_type)

    # -- share groups (the native client's door; topics by name) ---------------------------------
    def share_group(self, request):
        """ShareGroupHeartbeat (share.group.ShareHeartbeat): the answer, its assignment by
        topic name."""
        answer = self.shares.heartbeat(request, self.kafka_api.topic_partition_counts())
        if answer.assignment is None:
            return answer
        names = {tid: name for name, tid in self.kafka_api.topic_ids().items()}
        return dataclasses.replace(answer, assignment={
            names[t]: ps for t, ps in answer.assignment.items() if t in names})

    def share_describe(self, group_id: str):
        """ShareGroupDescribe of one group (share.group.DescribedShareGroup), assignments by
        topic name."""
        d = self.shares.describe([group_id])[0]
        names = {tid: name for name, tid in self.kafka_api.topic_ids().items()}
        return dataclasses.replace(d, members=tuple(dataclasses.replace(x, assignment={
            names[t]: ps for t, ps in x.assignment.items() if t in names}) for x in d.members))

    def share_fetch(self, group_id: str, member_id: str, epoch: int, asked: dict, forgotten,
                    max_wait_ms: int, max_records: int):
        """ShareFetch: `asked` {tp: acknowledgement batches}; a ShareFetchResult once the
        long poll ends."""
        asked = {tuple(tp): list(b) for tp, b in asked.items()}
        return self.shares.fetch(group_id, member_id, epoch, asked,
                                 [tuple(tp) for tp in forgotten], max_wait_ms, 1,
                                 FETCH_MAX_BYTES, max_records).result()

    def share_offsets(self, request):
        """A share.offsets request (DescribeOffsets / AlterOffsets / DeleteOffsets) of one
        group, on its coordinator: share.offsets.OffsetsAnswer."""
        return self.shares.offsets.call(request).result()

    def share_offsets_reset(self, group_id: str, targets: dict) -> dict:
        """The partitions this broker leads of an Alter/Delete ShareGroupOffsets: {tp: new
        start offset or None}; {tp: error}."""
        return self.shares.reset_offsets(group_id, {tuple(tp): o for tp, o in
                                                    targets.items()}).result()

    def share_state(self, event):
        """One share coordinator request (share.coordinator.ReadState / WriteState; its
        request_id is replaced): its answer, once appended where it must be."""
        return self.share_states.call(
            lambda rid: dataclasses.replace(event, request_id=rid)).result()

    def group_config(self, group_id: str, ops=None) -> dict:
        """A group's own configs (resource type 32), after applying `ops` [(name, op,
        value)] as IncrementalAlterConfigs does (op 0 SET, 1 DELETE): {name: (value,
        source)}, or the KafkaError that refused them."""
        from protocol.api import ConfigResource
        res = ConfigResource(32, group_id)
        if ops:
            outcome = self.kafka_api.alter_configs([(res, list(ops))], False)[res]
            if outcome.error:
                return error_for_code(outcome.error, outcome.message)
        got = self.kafka_api.describe_configs([(res, None)])[res]
        if got.error:
            return error_for_code(got.error, got.message)
        return {e.name: (e.value, e.source) for e in got.entries}

    def share_acknowledge(self, group_id: str, member_id: str, epoch: int, acks: dict):
        """ShareAcknowledge: (error, {tp: (error, leader)}, lock duration ms)."""
        return self.shares.acknowledge(group_id, member_id, epoch,
                                       {tuple(tp): list(b) for tp, b in acks.items()}).result()

    # -- transactions (the native client's door) --------------------------------------------------
    def txn(self, event):
        """One transaction coordinator request (a transactions.messages event; its
        request_id is replaced): its result, once the coordinator answers."""
        return self.txns.call(lambda rid: dataclasses.replace(event, request_id=rid)).result()

    def write_txn_markers(self, markers, timeout_ms: int = 30_000) -> list[dict]:
        """write_txn_markers_begin, waited for (the Ray call's way: Admin.abort_transaction)."""
        pending = self.write_txn_markers_begin(markers, timeout_ms)
        pending.result()
        return pending.markers_result()

    def describe_producers(self, tps) -> dict:
        """DescribeProducers (KIP-664) of partitions this broker hosts (KafkaBrokerApi)."""
        return self.kafka_api.describe_producers([tuple(tp) for tp in tps])

    def write_txn_markers_begin(self, markers, timeout_ms: int) -> PendingProduce:
        """WriteTxnMarkers' leader side: [(producer id, epoch, committed, coordinator epoch,
        partitions)] → a PendingProduce whose markers_result() is {tp: error} per marker."""
        return markers_begin(self, markers, timeout_ms)

    def cut_replication(self, duration_s: float, leader_id: int | None = None) -> list[int]:
        """Failpoint (chaos): this broker's replication links (to `leader_id`, or to every
        leader) close and stay down for `duration_s`; 0 lifts the cut. A network partition
        between live brokers as the fetchers see it. The leaders whose links are cut now."""
        until = time.monotonic() + max(0.0, duration_s)
        with self.lock:
            if leader_id is None and duration_s <= 0:
                self._cut_until.clear()                  # every cut lifted
            self._cut_until[leader_id] = until
            cut = [lid for lid in self.fetchers if leader_id is None or lid == leader_id]
            for lid in cut:
                self.fetchers[lid].cut_link(self.replication_cut_until(lid))
        return sorted(cut)

    def replication_cut_until(self, leader_id: int) -> float:
        """Until when (monotonic s) the link-cut failpoint keeps the link to that leader down."""
        return max(self._cut_until.get(leader_id, 0.0), self._cut_until.get(None, 0.0))

    def _move_fetchers(self, not_following, following: dict) -> None:
        for tp in not_following:
            for f in self.fetchers.values():
                f.remove([tp])
        for tp, leader in following.items():
            for lid, f in self.fetchers.items():
                if lid != leader:
                    f.remove([tp])
            if leader < 0 or self.stopped.is_set():
                # a stopped broker starts no fetcher thread; an offline partition (no
                # eligible leader) has nothing to fetch from until the controller names
                # one, as Kafka's makeFollowers adds no fetcher
                continue
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = self.fetchers[leader] = Fetcher(self, leader)
            fetcher.add([tp])
        for lid in [lid for lid, f in self.fetchers.items() if f.empty]:
            self.fetchers.pop(lid).stop()

    # -- produce -----------------------------------------------------------------------------------
    def produce(self, tp, batches: bytes, acks: int = -1, timeout_ms: int = 30_000) -> dict:
        tp = tuple(tp)
        return self._produce([(tp, batches)], acks, timeout_ms)[tp]

    def produce_many(self, requests, acks: int = -1, timeout_ms: int = 30_000) -> dict:
        """requests: [(tp, batches)] (or {tp: batches}), one entry per partition → {tp: result}."""
        if isinstance(requests, dict):
            requests = requests.items()
        requests = [(tuple(tp), data) for tp, data in requests]
        answers = self.produce_begin(requests, acks, timeout_ms, REORDER_WAIT_S).result()
        return {tp: answers[i] for i, (tp, _) in enumerate(requests)}

    def produce_batches(self, requests, acks: int = -1, timeout_ms: int = 30_000,
                        transactional_id: str | None = None) -> list:
        """requests: [(tp, batch)], a partition possibly more than once (its batches in
        sequence order: the native producer's pipeline) → [result], in request order.
        A transactional producer names its transactional id (KIP-890 verification)."""
        requests = [(tuple(tp), data) for tp, data in requests]
        answers = self.produce_begin(requests, acks, timeout_ms, REORDER_WAIT_S,
                                     transactional_id=transactional_id).result()
        return [answers[i] for i in range(len(requests))]

    def _produce(self, requests, acks: int, timeout_ms: int) -> dict:
        answers = self.produce_begin(requests, acks, timeout_ms).result()
        return {tp: answers[i] for i, (tp, _) in enumerate(requests)}

    def produce_begin(self, requests, acks: int, timeout_ms: int, reorder_wait_s: float = 0.0,
                      origin: str = CLIENT, transactional_id: str | None = None,
                      add_partitions: bool = False) -> PendingProduce:
        if origin == CLIENT:
            self.topic_io.count_in(requests)
        return begin_produce(self, requests, acks, timeout_ms, reorder_wait_s, origin,
                             transactional_id, add_partitions)

    # -- fetch ---------------------------------------------------------------------------------------
    def fetch_many(self, replica_id: int, requests, max_wait_ms: int = 0, min_bytes: int = 1,
                   max_bytes: int = 4 << 20, isolation_level: int = 0) -> dict:
        """requests: [(tp, offset, current_leader_epoch, last_fetched_epoch)] → {tp: result};
        `max_bytes` per partition, no cap on the whole answer (the fetchers' Ray call)."""
        asks = [(tuple(tp), offset, ce, le, max_bytes, -1) for tp, offset, ce, le in requests]
        return {tp: {"error": r.error, "records": r.records, "high_watermark": r.high_watermark,
                     "log_start_offset": r.log_start_offset, "log_end_offset": r.log_end_offset,
                     "last_stable_offset": r.last_stable_offset,
                     "aborted_transactions": r.aborted_transactions,
                     "diverging_epoch": r.diverging_epoch}
                for tp, r in self.fetch_partitions(replica_id, asks, max_wait_ms, min_bytes,
                                                   None, isolation_level).items()}

    def fetch_partitions(self, replica_id: int, asks, max_wait_ms: int, min_bytes: int,
                         max_bytes: int | None, isolation_level: int = 0) -> dict:
        """fetch_begin, waited for (the Ray calls' way)."""
        asks = [(tuple(a[0]),) + tuple(a[1:]) for a in asks]   # lists after serialisation
        got = self.fetch_begin(replica_id, asks, max_wait_ms, min_bytes, max_bytes,
                               isolation_level=isolation_level)
        got = got.result() if isinstance(got, DelayedFetch) else got
        if replica_id < 0:
            self.topic_io.count_out((tp, r.records) for tp, r in got.items())
        return got

    def fetch_begin(self, replica_id: int, asks, max_wait_ms: int, min_bytes: int,
                    max_bytes: int | None, reads=None, isolation_level: int = 0,
                    client: ClientMetadata | None = None, session=None):
        """Kafka's fetch (actors/fetch.py): asks [(tp, offset, current_epoch, last_epoch,
        partition_max_bytes, the follower's log start or -1)] → {tp: replicas FetchResult},
        or a DelayedFetch completed later. Used by the followers, Kafka clients and the
        native consumers alike; each ask's tp is a tuple (fetch_partitions makes them so).
        `reads`: a fetch session's choice of asks to read at once; `isolation_level` 1
        (read_committed) reads below the last stable offset, with the aborted
        transactions; `client`: a consumer's Fetch v11+ metadata (KIP-392); `session`: the
        FetchContext of the fetch session the asks are all of."""
        return begin_fetch(self, replica_id, asks, max_wait_ms, min_bytes, max_bytes, reads,
                           isolation_level, client, session)

    def offsets_for_leader_epoch(self, tp, current_leader_epoch: int, leader_epoch: int):
        with self.lock:
            return self.rm.offsets_for_leader_epoch(tuple(tp), current_leader_epoch, leader_epoch)

    # -- metadata and status -----------------------------------------------------------------------
    def metadata(self) -> dict:
        with self.lock:
            md = self.rm.metadata
            return {"brokers": dict(md.live_brokers),
                    "partitions": {tp: (s.leader, s.leader_epoch, tuple(s.replicas), tuple(s.isr))
                                   for tp, s in md.partitions.items()}}

    def live_brokers(self) -> list[int]:
        with self.lock:
            return sorted(self.rm.metadata.live_brokers)

    def metadata_leaders(self, topics) -> dict:
        with self.lock:
            return {tp: (s.leader, s.leader_epoch) for tp, s in self.rm.metadata.partitions.items()
                    if tp[0] in set(topics)}

    def topic_io_stats(self) -> dict:
        """topic → (bytes in, bytes out) since this broker started (actors/topic_io.py)."""
        return self.topic_io.stats()

    def partition_stats(self) -> dict:
        """(topic, partition) → [role, log start, log end, high watermark, bytes] of every
        hosted partition (a console samples all of them with one call per broker)."""
        with self.lock:
            stats = self.rm.partition_stats()
        return {(tp[0], tp[1]): list(v) for tp, v in stats.items()}

    def partition_info(self, tp) -> dict | None:
        with self.lock:
            return self.rm.partition_info(tuple(tp))

    def metrics(self) -> dict:
        """The figures this broker publishes as Ray gauges (actors/metrics.py)."""
        with self.lock:
            return metrics.broker_figures(self.rm.role_views(),
                                          offline_log_dirs=len(self.rm.dirs.offline))

    def pid(self) -> int:
        return os.getpid()

    def zk_session(self) -> tuple[int, bytes]:
        """(session id, password) of this broker's ZooKeeper session (fault injection)."""
        return self.store.session_credentials()

    def node_id(self) -> str:
        return self.host.node_id()

    # -- background work -----------------------------------------------------------------------------
    def _background(self) -> None:
        """The broker's timer: ISR shrink, produce timeouts, deferred HW checkpoints, rolled
        segments' fsyncs, flush.ms; and every log.retention.check.interval.ms a retention
        check."""
        interval_s = self.rm.config.log_retention_check_interval_ms / 1000
        next_retention = time.monotonic() + interval_s
        while not self.stopped.wait(self.tick_ms / 1000):
            with self.lock:
                self.apply_effects(self.rm.tick())
                hws = self.rm.due_high_watermarks()
                rolled = self.rm.due_segment_flushes()
            # their fsyncs outside the lock: no produce or fetch waits (replicas/deferred_writes.py)
            if hws is not None:
                self.rm.write_high_watermarks(hws)
            if rolled:
                flushed = self.rm.write_segment_flushes(rolled)
                with self.lock:
                    points = self.rm.segments_flushed(flushed)
                if points is not None:
                    self.rm.write_recovery_points(points)
            if time.monotonic() >= next_retention:
                self.check_retention()
                next_retention = time.monotonic() + interval_s

    def check_retention(self) -> dict:
        """One retention check of every replica with the topics' configs as ZooKeeper has them
        now (read before taking the lock); answers {"topic-p": segments deleted}."""
        try:
            with self.lock:
                topics = self.rm.topics()
            configs = {t: self.store.get_topic_config(t) or {} for t in topics}
        except Exception as exc:           # ZooKeeper away: check with the configs we have
            log.warning("broker %s: topic configs unavailable for retention: %s", self.id, exc)
            configs = {}
        with self.lock:
            results = self.rm.apply_retention(int(time.time() * 1000), configs)
            if results:
                self.parked.journal.note_all()     # log starts moved
                for fetcher in self.fetchers.values():   # their next fetches carry them
                    fetcher.positions_moved(results)
        for tp, r in results.items():
            log.info("broker %s: %s-%s: deleted %d segments (%d bytes) by %s; log start %d",
                     self.id, tp[0], tp[1], r.deleted_segments, r.deleted_bytes,
                     ",".join(r.reasons), r.log_start_offset)
        return {f"{tp[0]}-{tp[1]}": r.deleted_segments for tp, r in results.items()}

    def _alter_sender(self) -> None:
        """AlterPartition proposals to the active controller, every queued one in ONE request
        (Kafka batches them too: a restarted broker rejoins thousands of ISRs at once). Only
        a controller that cannot answer (moving, restarting, unreachable) is retried, and only
        for proposals still in flight; a per-partition answer (even a retriable error such as
        NOT_LEADER_OR_FOLLOWER from a leader that was replaced) settles that proposal."""
        while not self.stopped.is_set():
            first: ProposeIsr = self._alter.get()
            if first is None:
                return
            pending = {first.tp: first}
            while True:                       # everything queued meanwhile joins the request
                try:
                    more = self._alter.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    return
                pending[more.tp] = more
            while pending and not self.stopped.is_set():
                pending = {tp: p for tp, p in pending.items() if self._in_flight(p)}
                if not pending:
                    break
                try:
                    answers = self._send_alter(pending)
                except Exception as exc:
                    log.info("AlterPartition (%d partitions) failed: %s; retrying", len(pending), exc)
                    self.stopped.wait(0.1)  # back-off before the retry
                    continue
                if isinstance(answers, (NotController, RequestTimedOut)):
                    log.info("AlterPartition (%d partitions): %s; retrying", len(pending), answers)
                    self.stopped.wait(0.1)  # back-off before the retry
                    continue
                with self.lock:
                    for tp, p in pending.items():
                        answer = answers if isinstance(answers, KafkaError) else \
                            answers.get(tp, answers.get(tuple(tp)))
                        self.apply_effects(self.rm.handle_alter_partition_response(
                            tp, answer, proposal=p))
                break

    def _in_flight(self, proposal: ProposeIsr) -> bool:
        with self.lock:
            return self.rm.alter_partition_in_flight(proposal)

    def _ask_controller(self, method: str, *args):
        """`method` of the active controller as ZooKeeper names it (never the host's view);
        RuntimeError when none is elected, ValueError when the host cannot find it."""
        cid = self.store.get_controller()
        if cid is None:
            raise RuntimeError("no active controller")
        return self.host.ask_controller(cid, method, *args)

    def _send_alter(self, proposals: dict):
        """One AlterPartition request for {tp: ProposeIsr}: {tp: answer} or a KafkaError."""
        with self.lock:
            epoch = self.rm.broker_epoch
        request = {tp: LeaderIsrAndControllerEpoch(self.id, p.leader_epoch, tuple(p.isr), -1,
                                                   p.partition_epoch)
                   for tp, p in proposals.items()}
        return self._ask_controller("alter_partition", self.id, epoch, request)

    # -- shutdown ----------------------------------------------------------------------------------
    def controlled_shutdown(self, timeout_s: float = 30.0) -> bool:
        """Ask the controller to move leadership away until nothing is led (Kafka's
        controlled shutdown); True when done within the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                epoch = self.rm.broker_epoch
            try:
                left = self._ask_controller("controlled_shutdown", self.id, epoch)
            except (RuntimeError, ValueError):    # none elected yet, or its actor restarting
                left = None
            if left is not None and not isinstance(left, KafkaError) and not left:
                return True
            self.stopped.wait(0.1)  # back-off before asking again
        return False

    def shutdown(self) -> None:
        self.stopped.set()
        self._serve_anyway.cancel()
        self._alter.put(None)
        self.groups.stop()
        self.shares.stop()
        self.share_states.stop()
        self.txns.stop()
        self.verifier.stop()
        self.security.stop()
        self.dynamic_config.stop()
        for listener in self.listeners:
            listener.stop()
        with self.lock:        # a LeaderAndIsr answered meanwhile moves fetchers under it
            fetchers = list(self.fetchers.values())
            self.fetchers.clear()
        for f in fetchers:
            f.stop()
        self.timers.stop()
        self.network.stop()
        with self.lock:
            self.rm.checkpoint_high_watermarks()
            self.rm.flush()
            self.rm.close()
        self.store.close()

