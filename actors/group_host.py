"""GroupHost: the broker's shell around the pure group coordinator (coordinator/).

Rules:
- One lock serialises `GroupCoordinator.process`; effects are carried out before the lock
  is released, in effect order: `Respond` wakes the caller waiting on that request id,
  `Append` is appended to `__consumer_offsets`-<partition> at once (acks=-1, through the
  broker's own produce path, so appends land in token order) and its acknowledgement is
  awaited by a small pool, which reports `AppendDone(token, error)`.
- `call(event)` gives the event a request id and returns a Deferred of its result: a
  JoinGroup or SyncGroup stays parked until the coordinator answers (the Kafka listener is
  called back when it is; a native member's Ray call blocks in the "group" concurrency
  group). Callbacks run after the group lock is released.
- Time: a ticker thread sends `Tick` at the coordinator's next deadline (at least every
  TICK_MS) with the broker's monotonic clock.
- Leadership: the broker reports, in order, every `__consumer_offsets` partition it starts
  or stops leading (`became_leader`, `lost`); one worker thread loads a partition (reads its
  log from the log start to the end, decodes the key/value records, `LoadPartition`) or
  unloads it (`UnloadPartition`: parked calls answer NOT_COORDINATOR). Never called with the
  broker's lock held, and never holds the group lock while waiting for an append.
- `__consumer_offsets` is created on first use by `ensure_offsets_topic` (FindCoordinator):
  offsets.topic.num.partitions partitions, replication factor min(3, live brokers) (Kafka's
  offsets.topic.replication.factor, capped so a small cluster works), cleanup.policy compact.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from actors.completion import Completion
from coordinator import messages as m
from coordinator.config import GroupCoordinatorConfig
from coordinator.coordinator import GroupCoordinator
from coordinator.records import OffsetsRecord
from protocol.api import Deferred
from replicas import records
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, RequestTimedOut, TopicAlreadyExists

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_REPLICATION_FACTOR = 3
APPEND_TIMEOUT_MS = 5000             # Kafka's offsets.commit.timeout.ms
TICK_MS = 100
CALL_TIMEOUT_S = 30 * 60             # a parked JoinGroup may wait out a long rebalance timeout


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


class _Waiter(Completion):
    __slots__ = ("result",)

    def __init__(self):
        super().__init__()
        self.result = None

    def answer_when_ready(self):
        if not self.wait(CALL_TIMEOUT_S):
            raise RequestTimedOut("the group coordinator did not answer")
        return self.result

    def answer(self, result) -> list:
        """Store the answer; the callbacks to run (outside the group lock)."""
        def store():
            self.result = result
        return self.settle_later(store) or []


class GroupHost:
    def __init__(self, broker, config: GroupCoordinatorConfig):
        self.broker, self.config = broker, config
        self.coordinator = GroupCoordinator(broker.id, _clock_ms, config)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        self._acks = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"broker-{broker.id}-group-ack")
        self._leadership: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        threading.Thread(target=self._tick, daemon=True, name=f"broker-{broker.id}-group-tick").start()
        threading.Thread(target=self._load_unload, daemon=True,
                         name=f"broker-{broker.id}-group-load").start()

    # -- requests ---------------------------------------------------------------------------------
    def call(self, make_event) -> Deferred:
        """`make_event(request_id)` → a request event; a Deferred of the coordinator's result."""
        rid = next(self._ids)
        waiter = self._waiters[rid] = _Waiter()
        self._process(make_event(rid))
        return Deferred(waiter.answer_when_ready, waiter.when_ready)

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    # -- the coordinator ----------------------------------------------------------------------------
    def _process(self, event) -> None:
        ready = []
        with self._lock:
            effects = self.coordinator.process(event)
            for effect in effects:
                if isinstance(effect, m.Respond):
                    waiter = self._waiters.pop(effect.request_id, None)
                    if waiter is not None:
                        ready += waiter.answer(effect.result)
                elif isinstance(effect, m.Append):
                    self._append(effect)
        self._wake.set()                         # deadlines may have moved
        for callback in ready:
            callback()

    def _append(self, effect: m.Append) -> None:
        """Append now (token order = log order), await the acks off the lock."""
        tp = (OFFSETS_TOPIC, effect.partition)
        batch = records.build_batch([r.value for r in effect.records],
                                    [r.key for r in effect.records],
                                    timestamps_ms=int(time.time() * 1000))
        try:
            pending = self.broker.produce_begin([(tp, bytes(batch))], -1, APPEND_TIMEOUT_MS)
        except Exception as exc:                  # a disk error: the append failed
            log.warning("group coordinator append to %s failed: %s", tp, exc)
            self._acks.submit(self._process,
                              m.AppendDone(effect.token, E.UNKNOWN_SERVER_ERROR))
            return

        def acknowledged():
            try:
                error = pending.result()[0]["error"]
            except Exception as exc:
                log.warning("group coordinator append to %s failed: %s", tp, exc)
                error = E.UNKNOWN_SERVER_ERROR
            self._process(m.AppendDone(effect.token, error))
        self._acks.submit(acknowledged)

    def _tick(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                deadline = self.coordinator.next_deadline_ms()
            wait_ms = TICK_MS if deadline is None else max(0, min(TICK_MS, deadline - _clock_ms()))
            self._wake.wait(wait_ms / 1000)
            self._wake.clear()
            if deadline is not None and _clock_ms() >= deadline:
                self._process(m.Tick())

    # -- leadership of __consumer_offsets partitions ---------------------------------------------------
    def became_leader(self, partition: int) -> None:
        self._leadership.put(("load", partition))

    def lost(self, partition: int) -> None:
        self._leadership.put(("unload", partition))

    def _load_unload(self) -> None:
        while not self._stopped.is_set():
            item = self._leadership.get()
            if item is None:
                return
            kind, partition = item
            try:
                if kind == "load":
                    self._process(m.BeginLoad(partition))
                    records = tuple(self._read(partition))
                    self._process(m.LoadPartition(partition, records))
                    # Kafka logs every load; Ray forwards actor logs to drivers: only real ones
                    (log.info if records else log.debug)(
                        "broker %s: loaded %d records of %s-%s", self.broker.id, len(records),
                        OFFSETS_TOPIC, partition)
                else:
                    self._process(m.UnloadPartition(partition))
            except Exception:
                log.exception("group coordinator %s of partition %s failed", kind, partition)

    def _read(self, partition: int):
        """Every key/value of the partition's log, oldest first (a follower turned leader
        reads what it replicated; the last value per key wins in the coordinator)."""
        tp = (OFFSETS_TOPIC, partition)
        with self.broker.lock:
            try:
                log_ = self.broker.rm.log(tp)
            except KafkaError:
                return
            start = log_.log_start_offset
            chunks = list(log_.iter_reads(start))
        for chunk in chunks:
            for r in records.decode_records(chunk):
                if r.key is not None:
                    yield OffsetsRecord(r.key, r.value)

    # -- the topic --------------------------------------------------------------------------------
    def ensure_offsets_topic(self) -> bool:
        """True when `__consumer_offsets` exists; else create it (FindCoordinator answers
        COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does)."""
        from controller.topic_admin import plan_topic
        store = self.broker.store
        if OFFSETS_TOPIC in store.get_topics():
            return True
        live = sorted(store.get_broker_ids())
        if not live:
            return False
        plan = plan_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions,
                          min(OFFSETS_REPLICATION_FACTOR, len(live)), live,
                          config={"cleanup.policy": "compact"})
        try:
            store.create_topic(OFFSETS_TOPIC, plan.assignment, plan.config)
            log.info("broker %s: created %s (%d partitions, RF %d)", self.broker.id,
                     OFFSETS_TOPIC, plan.partitions, plan.replication_factor)
        except TopicAlreadyExists:
            pass
        return False

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._leadership.put(None)
        self._acks.shutdown(wait=False, cancel_futures=True)
