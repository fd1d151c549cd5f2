"""Producer: Kafka's producer over broker actors (accumulate, batch, send, retry).

Rules:
- `send` picks the partition (explicit; key → Kafka's murmur2; no key → sticky), appends
  to the accumulator and returns a concurrent.futures.Future[RecordMetadata]. `send_batch`
  (bulk) cuts values into sealed batches and returns ONE Future of the list of metadata.
- One sender thread: drains ready batches (linger_ms / batch_size), keeps at most ONE
  batch in flight per partition (order is kept; with idempotence a retry carries the same
  producer id and sequence, so the leader answers a duplicate with its original offsets).
- Retriable answers (NOT_LEADER, LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, a dead or
  restarting broker actor, or no answer within request_timeout_ms + a grace: a paused
  broker) refresh metadata and retry after retry_backoff_ms until delivery_timeout_ms;
  anything else fails the batch's futures with the typed error. The sender thread survives
  any unexpected error (logged), so futures never hang on a dead thread.
- acks ∈ {"all", -1, 1, 0}; anything else raises InvalidRequiredAcks (21) at once.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from concurrent.futures import Future

import ray
from ray.exceptions import RayError

from rayka.accumulator import RecordAccumulator
from rayka.metadata import Metadata
from rayka.partitioner import StickyPartitioner, partition_for_key
from rayka.types import RecordMetadata
from replicas.errors import (InvalidRequiredAcks, KafkaError, RequestTimedOut,
                             UnknownTopicOrPartition, error_for_code)

log = logging.getLogger(__name__)
RETRIABLE = {3, 5, 6, 7, 19, 20, 74, 75}
REQUEST_GRACE_MS = 5_000      # the broker's own timeout answers first when it can
_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


class Producer:
    def __init__(self, cluster, acks="all", linger_ms: int = 5, batch_size: int = 1 << 20,
                 enable_idempotence: bool = True, retries: int = 2**31 - 1,
                 delivery_timeout_ms: int = 120_000, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, seed: int | None = None):
        if acks not in _ACKS:
            raise InvalidRequiredAcks(f"acks must be 'all', -1, 1 or 0 (got {acks!r})")
        self.cluster = cluster
        self.acks = _ACKS[acks]
        self.retries, self.delivery_timeout_ms = retries, delivery_timeout_ms
        self.request_timeout_ms, self.retry_backoff_ms = request_timeout_ms, retry_backoff_ms
        self.producer_id = (cluster.store.allocate_producer_id_block(size=1)[0]
                            if enable_idempotence else -1)
        self.acc = RecordAccumulator(batch_size, linger_ms, _clock_ms, self.producer_id,
                                     0 if enable_idempotence else -1)
        self.metadata = Metadata(cluster)
        self.sticky = StickyPartitioner(random.Random(seed))
        self.cond = threading.Condition()
        self.waiters: dict[int, list] = collections.defaultdict(list)  # id(batch) → [(future, index)]
        self.outbox: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self.in_flight: dict = {}            # ObjectRef → batch
        self.sent_ms: dict = {}              # ObjectRef → (when sent, to which broker)
        self.busy: set[tuple] = set()        # partitions with a batch in flight
        self.retry_at: dict[tuple, int] = {}
        self.first_try_ms: dict[int, int] = {}
        self.unfinished = 0
        self.closed = False
        self.flushing = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="rayka-producer")
        self._thread.start()

    # -- the API ------------------------------------------------------------------------------------
    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None, headers=None, timestamp_ms: int | None = None) -> Future:
        n = self.metadata.partition_count(topic)
        sticky = partition is None and key is None
        if partition is None:
            partition = partition_for_key(key, n) if key is not None else self.sticky.partition(topic, n)
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist ({n} partitions)")
        future: Future = Future()
        with self.cond:
            self._check_open()
            tp = (topic, partition)
            handle = self.acc.append(tp, value, key, headers, timestamp_ms,
                                     abort_on_new_batch=sticky)
            if handle is None:     # sticky: a new batch is due, move to another partition
                self.sticky.on_new_batch(topic, partition, n)
                tp = (topic, self.sticky.partition(topic, n))
                handle = self.acc.append(tp, value, key, headers, timestamp_ms)
            self.waiters[id(handle.batch)].append((future, handle.index))
            self.unfinished += 1
            self.cond.notify_all()
        return future

    def send_batch(self, topic: str, values, keys=None, partition: int | None = None) -> Future:
        """Bulk: one Future resolving to the list of RecordMetadata, in input order."""
        n = self.metadata.partition_count(topic)
        if partition is None:
            partition = self.sticky.partition(topic, n)
            self.sticky.on_new_batch(topic, partition, n)
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist ({n} partitions)")
        outer: Future = Future()
        with self.cond:
            self._check_open()
            batches = self.acc.append_many((topic, partition), list(values),
                                           list(keys) if keys is not None else None)
            parts = [Future() for _ in batches]
            for batch, f in zip(batches, parts):
                self.waiters[id(batch)].append((f, None))
                self.unfinished += 1
            self.cond.notify_all()

        def gather(_f=None):
            if all(p.done() for p in parts) and not outer.done():
                errors = [p.exception() for p in parts if p.exception() is not None]
                if errors:
                    outer.set_exception(errors[0])
                else:
                    outer.set_result([m for p in parts for m in p.result()])
        for p in parts:
            p.add_done_callback(gather)
        if not parts:
            outer.set_result([])
        return outer

    def flush(self, timeout_s: float | None = None) -> None:
        with self.cond:
            self.flushing += 1
            self.cond.notify_all()
            try:
                if not self.cond.wait_for(lambda: self.unfinished == 0, timeout_s):
                    raise RequestTimedOut(f"flush: {self.unfinished} batches still unacknowledged")
            finally:
                self.flushing -= 1

    def close(self, timeout_s: float | None = None) -> None:
        if not self.closed:
            self.flush(timeout_s)
            with self.cond:
                self.closed = True
                self.cond.notify_all()
            self._thread.join(5)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError("the producer is closed")

    # -- the sender ----------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                if self._run_once():
                    return
            except Exception:  # the sender must outlive any surprise, or every future hangs
                log.exception("producer sender: unexpected error; continuing")
                time.sleep(self.retry_backoff_ms / 1000)   # back-off before the next round

    def _run_once(self) -> bool:
        """One round of the sender: drain, dispatch, collect answers; True when closed."""
        with self.cond:
            if self.closed and not self.unfinished:
                return True
            waiting = self.busy | {tp for tp, q in self.outbox.items() if q}
            for batch in self.acc.drain(ready_only=not self.flushing, skip=waiting):
                self.outbox[batch.tp].append(batch)
                self.first_try_ms.setdefault(id(batch), _clock_ms())
            self._dispatch()
            refs = list(self.in_flight)
            if not refs:
                nxt = self.acc.next_ready_ms(skip=waiting)
                wait_ms = 50 if nxt is None else max(0, nxt - _clock_ms())
                if self.retry_at:
                    wait_ms = min(wait_ms, max(0, min(self.retry_at.values()) - _clock_ms()))
                self.cond.wait(wait_ms / 1000)
                return False
        done, _ = ray.wait(refs, num_returns=1, timeout=0.005)
        for ref in done:
            self._on_answer(ref)
        self._expire_requests()
        return False

    def _expire_requests(self) -> None:
        """A request unanswered past request_timeout_ms (its broker paused, partitioned), or
        sent to a broker that metadata no longer names as leader, is given up as
        REQUEST_TIMED_OUT and retried: the idempotent sequence makes a late landing of the
        abandoned one harmless (the leader answers the retry as a duplicate, or no longer
        leads)."""
        limit = _clock_ms() - self.request_timeout_ms - REQUEST_GRACE_MS
        for ref, (sent, broker) in list(self.sent_ms.items()):
            leader = self.metadata.leader(self.in_flight[ref].tp)
            moved = leader is not None and leader[0] != broker   # a newer leader is known
            if sent < limit or moved:
                self._on_answer(ref, timed_out=True)

    def _dispatch(self) -> None:
        now = _clock_ms()
        for tp, queue in self.outbox.items():
            if not queue or tp in self.busy or self.retry_at.get(tp, 0) > now:
                continue
            leader = self.metadata.leader(tp)
            if leader is None:
                self.metadata.refresh()
                self.retry_at[tp] = now + self.retry_backoff_ms
                continue
            batch = queue[0]
            try:
                ref = self.cluster.broker_actor(leader[0]).produce.remote(
                    tp, bytes(batch.build()), self.acks, self.request_timeout_ms)
            except AttributeError:      # broker actor not found (restarting, or gone for good)
                self.metadata.refresh()     # a dead leader's actor never comes back by itself
                self.retry_at[tp] = now + self.retry_backoff_ms
                continue
            self.retry_at.pop(tp, None)
            self.in_flight[ref] = batch
            self.sent_ms[ref] = (now, leader[0])
            self.busy.add(tp)

    def _on_answer(self, ref, timed_out: bool = False) -> None:
        batch = self.in_flight.pop(ref)
        self.sent_ms.pop(ref, None)
        try:
            if timed_out:
                answer, code = None, RequestTimedOut.code
            else:
                answer = ray.get(ref)
                code = answer["error"]
        except RayError:
            answer, code = None, 6        # the broker died or restarted: like NOT_LEADER
        with self.cond:
            self.busy.discard(batch.tp)
            expired = _clock_ms() - self.first_try_ms[id(batch)] > self.delivery_timeout_ms
            if code in RETRIABLE and not expired and batch.attempts < self.retries:
                batch.attempts += 1
                self.metadata.refresh()
                self.retry_at[batch.tp] = _clock_ms() + self.retry_backoff_ms
                return
            self.outbox[batch.tp].popleft()
            self.first_try_ms.pop(id(batch), None)
            if code == 0:
                batch.complete(answer["base_offset"])
            else:
                batch.fail(error_for_code(code, f"produce to {batch.tp[0]}-{batch.tp[1]} failed"))
            self._resolve(batch)
            self.cond.notify_all()

    def _resolve(self, batch) -> None:
        waiters = self.waiters.pop(id(batch), [])
        for future, index in waiters:
            if batch.error is not None:
                future.set_exception(batch.error)
            elif index is None:        # a bulk batch: the metadata of all its records
                future.set_result([RecordMetadata(batch.tp[0], batch.tp[1], batch.base_offset + i)
                                   for i in range(batch.record_count)])
            else:
                future.set_result(RecordMetadata(batch.tp[0], batch.tp[1], batch.base_offset + index))
        self.unfinished -= len(waiters)
