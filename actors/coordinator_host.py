"""CoordinatorHost: the broker's shell around a pure coordinator (the group coordinator,
coordinator/, and the transaction coordinator, transactions/): its lock, waiters, appends,
ticker and the load/unload worker. actors/group_host.py and actors/txn_host.py are its two
kinds.

Rules:
- One lock serialises `coordinator.process`; effects are carried out before the lock is
  released, in effect order: `Respond` wakes the caller waiting on that request id,
  `Append` is appended to the coordinator's topic-<partition> at once (acks=-1, through the
  broker's own produce path with origin COORDINATOR, so appends land in token order and a
  coordinator's transactional batch is not taken for a client's duplicate) and its
  acknowledgement is awaited by a small pool, which reports `AppendDone(token, error)`;
  any other effect goes to the kind's `on_effect`.
- `call(event)` gives the event a request id and returns a Deferred of its result: a request
  that parks stays parked until the coordinator answers (the Kafka listener is called back
  when it is; a native client's Ray call blocks in its concurrency group). Callbacks run
  after the lock is released.
- Time: a ticker thread sends `Tick` at the coordinator's next deadline (at least every
  TICK_MS). The coordinators' clock is the wall clock, as Kafka's time.milliseconds():
  it is written into `__consumer_offsets` (commit timestamps, which offset retention and
  lag checkers such as Burrow read) and `__transaction_state`, so it must mean the same
  after a restart or on another broker.
- Leadership: the broker reports, in order, every partition of the coordinator's topic it
  starts or stops leading, with the partition's leader epoch (`became_leader`, `lost`); one
  worker thread loads it (the kind reads its log from the log start to the end and names
  the events) or unloads it. Never called with the broker's lock held, and never holds the
  coordinator lock while waiting for an append.
- The topic is created on first use by `ensure_topic` (FindCoordinator): its partition
  count, replication factor min(configured, live brokers) (capped so a small cluster
  works) and configs (cleanup.policy compact, ...) come from the kind.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from actors.completion import Completion
from protocol.api import Deferred
from replicas import records
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, RequestTimedOut, TopicAlreadyExists
from replicas.replica_manager import COORDINATOR

log = logging.getLogger(__name__)

APPEND_TIMEOUT_MS = 5000             # Kafka's offsets.commit.timeout.ms / request timeout
TICK_MS = 100
CALL_TIMEOUT_S = 30 * 60             # a parked JoinGroup may wait out a long rebalance timeout


def clock_ms() -> int:
    return int(time.time() * 1000)


class Waiter(Completion):
    __slots__ = ("result",)

    def __init__(self):
        super().__init__()
        self.result = None

    def answer_when_ready(self):
        if not self.wait(CALL_TIMEOUT_S):
            raise RequestTimedOut("the coordinator did not answer")
        return self.result

    def answer(self, result) -> list:
        """Store the answer; the callbacks to run (outside the coordinator lock)."""
        def store():
            self.result = result
        return self.settle_later(store) or []


class CoordinatorHost:
    """See the module docstring. A kind sets `topic` and `messages` (its messages module:
    Respond, Append, AppendDone, Tick) and implements `load_events`, `unload_event`,
    `topic_plan` and, for effects of its own, `on_effect`."""

    topic = ""
    messages = None

    def __init__(self, broker, coordinator, name: str):
        self.broker, self.coordinator, self.name = broker, coordinator, name
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[int, Waiter] = {}
        self._acks = ThreadPoolExecutor(max_workers=8,
                                        thread_name_prefix=f"broker-{broker.id}-{name}-ack")
        self._leadership: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        threading.Thread(target=self._tick, daemon=True, name=f"broker-{broker.id}-{name}-tick").start()
        threading.Thread(target=self._load_unload, daemon=True,
                         name=f"broker-{broker.id}-{name}-load").start()

    # -- requests ---------------------------------------------------------------------------------
    def call(self, make_event, rid: int | None = None) -> Deferred:
        """`make_event(request_id)` → a request event; a Deferred of the coordinator's result."""
        rid = next(self._ids) if rid is None else rid
        waiter = self._waiters[rid] = Waiter()
        self.process(make_event(rid))
        return Deferred(waiter.answer_when_ready, waiter.when_ready)

    def partition_for(self, key: str) -> int:
        return self.coordinator.partition_for(key)

    # -- the coordinator ----------------------------------------------------------------------------
    def process(self, event) -> None:
        m = self.messages
        ready = []
        with self._lock:
            for effect in self.coordinator.process(event):
                if isinstance(effect, m.Respond):
                    waiter = self._waiters.pop(effect.request_id, None)
                    if waiter is not None:
                        ready += waiter.answer(effect.result)
                elif isinstance(effect, m.Append):
                    self._append(effect)
                else:
                    self.on_effect(effect)
        self._wake.set()                         # deadlines may have moved
        for callback in ready:
            callback()

    def on_effect(self, effect) -> None:
        raise TypeError(f"{self.name}: unexpected effect {type(effect).__name__}")

    def batch_of(self, effect) -> bytes:
        """The record batch an Append writes (plain key/value records by default)."""
        return bytes(records.build_batch([r.value for r in effect.records],
                                         [r.key for r in effect.records],
                                         timestamps_ms=int(time.time() * 1000)))

    def _append(self, effect) -> None:
        """Append now (token order = log order), await the acks off the lock."""
        m = self.messages
        tp = (self.topic, effect.partition)
        try:
            pending = self.broker.produce_begin([(tp, self.batch_of(effect))], -1,
                                                APPEND_TIMEOUT_MS, origin=COORDINATOR)
        except Exception as exc:                  # a disk error: the append failed
            log.warning("%s append to %s failed: %s", self.name, tp, exc)
            self._acks.submit(self.process, m.AppendDone(effect.token, E.UNKNOWN_SERVER_ERROR))
            return

        def acknowledged():
            try:
                error = pending.result()[0]["error"]
            except Exception as exc:
                log.warning("%s append to %s failed: %s", self.name, tp, exc)
                error = E.UNKNOWN_SERVER_ERROR
            self.process(m.AppendDone(effect.token, error))
        self._acks.submit(acknowledged)

    def _tick(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                deadline = self.coordinator.next_deadline_ms()
            wait_ms = TICK_MS if deadline is None else max(0, min(TICK_MS, deadline - clock_ms()))
            self._wake.wait(wait_ms / 1000)
            self._wake.clear()
            if deadline is not None and clock_ms() >= deadline:
                self.process(self.messages.Tick())

    # -- leadership of the topic's partitions --------------------------------------------------------
    def became_leader(self, partition: int, leader_epoch: int = -1) -> None:
        self._leadership.put(("load", partition, leader_epoch))

    def lost(self, partition: int, leader_epoch: int = -1) -> None:
        self._leadership.put(("unload", partition, leader_epoch))

    def _load_unload(self) -> None:
        while not self._stopped.is_set():
            item = self._leadership.get()
            if item is None:
                return
            kind, partition, epoch = item
            try:
                if kind == "load":
                    for event in self.load_events(partition, epoch):
                        self.process(event)
                else:
                    self.process(self.unload_event(partition, epoch))
            except Exception:
                log.exception("%s %s of partition %s failed", self.name, kind, partition)

    def load_events(self, partition: int, leader_epoch: int):
        """The events that load a partition (read its log here, off every lock)."""
        raise NotImplementedError

    def unload_event(self, partition: int, leader_epoch: int):
        raise NotImplementedError

    def read_batches(self, partition: int):
        """(batch header, its bytes) of every batch of the partition's log, oldest first (a
        follower turned leader reads what it replicated)."""
        tp = (self.topic, partition)
        with self.broker.lock:
            try:
                log_ = self.broker.rm.log(tp)
            except KafkaError:
                return
            chunks = list(log_.iter_reads(log_.log_start_offset))
        for chunk in chunks:
            view = memoryview(chunk)
            for h in records.iter_headers(chunk):
                yield h, view[h.position:h.position + h.size]

    # -- the topic ------------------------------------------------------------------------------------
    def topic_plan(self) -> tuple[int, int, dict]:
        """(partitions, replication factor wanted, topic configs) of the coordinator's topic."""
        raise NotImplementedError

    def ensure_topic(self) -> bool:
        """True when the topic exists; else create it (FindCoordinator answers
        COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does)."""
        from controller.topic_admin import plan_topic
        store = self.broker.store
        if self.topic in store.get_topics():
            return True
        live = sorted(store.get_broker_ids())
        if not live:
            return False
        partitions, replication, config = self.topic_plan()
        rf = min(replication, len(live))
        if "min.insync.replicas" in config:
            config = dict(config, **{"min.insync.replicas":
                                     str(min(int(config["min.insync.replicas"]), rf))})
        plan = plan_topic(self.topic, partitions, rf, live, config=config)
        try:
            store.create_topic(self.topic, plan.assignment, plan.config)
            log.info("broker %s: created %s (%d partitions, RF %d)", self.broker.id,
                     self.topic, plan.partitions, plan.replication_factor)
        except TopicAlreadyExists:
            pass
        return False

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._leadership.put(None)
        self._acks.shutdown(wait=False, cancel_futures=True)
