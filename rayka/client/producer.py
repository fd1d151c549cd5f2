"""Producer: Kafka's producer over broker actors (accumulate, batch, send, retry).

Rules:
- `send` picks the partition (explicit; key → Kafka's murmur2; no key → sticky), appends
  to the accumulator and returns a concurrent.futures.Future[RecordMetadata]. `send_batch`
  (bulk) routes the same way (keys → murmur2, null keys → one sticky partition), cuts
  values into sealed batches and returns ONE Future of the list of metadata, in input order.
- One sender thread: drains ready batches (linger_ms / batch_size), keeps at most ONE
  batch in flight per partition (order is kept; with idempotence a retry carries the same
  producer id and sequence, so the leader answers a duplicate with its original offsets),
  and sends, per leader broker, ONE `produce_many` call carrying the head batch of every
  ready partition it leads (Kafka's one ProduceRequest per broker); the answer has a
  result per partition, each handled as below. Batches are encoded once (retries resend
  the same bytes). More than one batch in flight per partition is NOT done: a retried
  batch could be overtaken by the next one (the leader would answer
  OUT_OF_ORDER_SEQUENCE), so parallelism comes from partitions, not depth.
- Retriable answers (NOT_LEADER, LEADER_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, a dead or
  restarting broker actor, or no answer within request_timeout_ms + a grace: a paused
  broker, a request sent to a broker that metadata no longer names as leader: a frozen
  leader replaced) refresh metadata and retry after retry_backoff_ms until delivery_timeout_ms;
  anything else fails the batch's futures with the typed error. The sender thread survives
  any unexpected error (logged), so futures never hang on a dead thread.
- acks ∈ {"all", -1, 1, 0}; anything else raises InvalidRequiredAcks (21) at once.
- compression_type ∈ {none, gzip, snappy, lz4, zstd} (replicas/compression.py): each batch is
  built compressed once and resent as built; anything else raises InvalidConfig (40).
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

from rayka.client.accumulator import RecordAccumulator
from rayka.client.metadata import Metadata
from rayka.client.partitioner import StickyPartitioner, partition_for_key
from rayka.client.types import RecordMetadata
from replicas.compression import producer_codec
from replicas.errors import (InvalidRequiredAcks, KafkaError, RequestTimedOut,
                             UnknownTopicOrPartition, error_for_code)

log = logging.getLogger(__name__)
RETRIABLE = {3, 5, 6, 7, 19, 20, 74, 75}
REQUEST_GRACE_MS = 5_000      # the broker's own timeout answers first when it can
EXPIRE_CHECK_MS = 100         # how often in-flight requests are checked for expiry / moves
STALL_MS = 1_000              # an acks=all answer this late: is its leader frozen?
STALL_REFRESH_MS = 500        # metadata refreshed this often while one is that late
_new = tuple.__new__          # builds a NamedTuple without its Python-level __new__ (hot path)
_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


def _wall_ms() -> int:
    """Record timestamps: epoch milliseconds (Kafka's CreateTime)."""
    return int(time.time() * 1000)


class Producer:
    def __init__(self, cluster, acks="all", linger_ms: int = 5, batch_size: int = 1 << 20,
                 enable_idempotence: bool = True, retries: int = 2**31 - 1,
                 delivery_timeout_ms: int = 120_000, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, seed: int | None = None,
                 compression_type: str = "none"):
        if acks not in _ACKS:
            raise InvalidRequiredAcks(f"acks must be 'all', -1, 1 or 0 (got {acks!r})")
        codec = producer_codec(compression_type)
        self.cluster = cluster
        self.acks = _ACKS[acks]
        self.retries, self.delivery_timeout_ms = retries, delivery_timeout_ms
        self.request_timeout_ms, self.retry_backoff_ms = request_timeout_ms, retry_backoff_ms
        self.producer_id = (cluster.store.allocate_producer_id_block(size=1)[0]
                            if enable_idempotence else -1)
        self.acc = RecordAccumulator(batch_size, linger_ms, _clock_ms, self.producer_id,
                                     0 if enable_idempotence else -1, wall_clock_ms=_wall_ms,
                                     compression_type=codec)
        self.metadata = Metadata(cluster)
        self.sticky = StickyPartitioner(random.Random(seed))
        self.cond = threading.Condition()
        self.waiters: dict[int, list] = collections.defaultdict(list)  # id(batch) → [(future, index)]
        self.outbox: dict[tuple, collections.deque] = collections.defaultdict(collections.deque)
        self.in_flight: dict = {}            # ObjectRef → (broker id, when sent, [batches])
        self.busy: set[tuple] = set()        # partitions with a batch in flight
        self._actors: dict[int, object] = {}  # broker id → actor handle (get_actor is a GCS call)
        self._counts: tuple = (None, {})     # (metadata dict it was read from, topic → count)
        self._next_expire_ms = self._next_stall_refresh_ms = 0
        self.retry_at: dict[tuple, int] = {}
        self.first_try_ms: dict[int, int] = {}
        self.unfinished = 0
        self.closed = False
        self.flushing = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="rayka-producer")
        self._thread.start()

    # -- the API ------------------------------------------------------------------------------------
    def _partition_count(self, topic: str) -> int:
        """metadata.partition_count, cached until metadata is refreshed (it scans every
        partition, once per record otherwise)."""
        source, counts = self._counts
        if source is not self.metadata.partitions:
            source, counts = self.metadata.partitions, {}
            self._counts = (source, counts)
        n = counts.get(topic)
        if n is None:
            n = counts[topic] = self.metadata.partition_count(topic)
        return n

    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None, headers=None, timestamp_ms: int | None = None) -> Future:
        n = self._partition_count(topic)
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
        """Bulk: one Future resolving to the list of RecordMetadata, in input order. Without
        an explicit partition, keyed records go to murmur2(key) as send() puts them (order
        kept per key) and the null-keyed ones to one sticky partition."""
        n = self._partition_count(topic)
        if partition is not None and not 0 <= partition < n:
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist ({n} partitions)")
        values = list(values)
        keys = list(keys) if keys is not None else None
        if partition is not None or keys is None or all(k is None for k in keys):
            return self._send_batch_to(topic, self._sticky_unless(topic, partition, n),
                                       values, keys)
        sticky = None
        groups: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            if key is not None:
                p = partition_for_key(key, n)
            else:
                sticky = self._sticky_unless(topic, sticky, n)
                p = sticky
            groups.setdefault(p, []).append(i)
        parts = {p: self._send_batch_to(topic, p, [values[i] for i in idx],
                                        [keys[i] for i in idx]) for p, idx in groups.items()}
        outer: Future = Future()

        def gather(_f=None):
            if all(f.done() for f in parts.values()) and not outer.done():
                errors = [f.exception() for f in parts.values() if f.exception() is not None]
                if errors:
                    outer.set_exception(errors[0])
                    return
                ordered: list = [None] * len(values)
                for p, f in parts.items():
                    for i, md in zip(groups[p], f.result()):
                        ordered[i] = md
                outer.set_result(ordered)
        for f in parts.values():
            f.add_done_callback(gather)
        return outer

    def _sticky_unless(self, topic: str, partition: int | None, n: int) -> int:
        if partition is None:
            partition = self.sticky.partition(topic, n)
            self.sticky.on_new_batch(topic, partition, n)
        return partition

    def _send_batch_to(self, topic: str, partition: int, values: list, keys) -> Future:
        outer: Future = Future()
        with self.cond:
            self._check_open()
            batches = self.acc.append_many((topic, partition), values, keys)
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
        # outbox, busy, in_flight, retry_at and first_try_ms belong to this thread alone: only
        # the accumulator, the waiters and `unfinished` need the lock, so send() callers never
        # wait behind an actor call or a batch's worth of future resolutions.
        waiting = self.busy | {tp for tp, q in self.outbox.items() if q}
        with self.cond:
            if self.closed and not self.unfinished:
                return True
            drained = self.acc.drain(ready_only=not self.flushing, skip=waiting)
        now = _clock_ms()
        for batch in drained:
            self.outbox[batch.tp].append(batch)
            self.first_try_ms.setdefault(id(batch), now)
        self._dispatch()
        refs = list(self.in_flight)
        if not refs:
            with self.cond:
                if self.closed and not self.unfinished:
                    return True
                nxt = self.acc.next_ready_ms(skip=waiting)
                wait_ms = 50 if nxt is None else max(0, nxt - _clock_ms())
                if self.retry_at:
                    wait_ms = min(wait_ms, max(0, min(self.retry_at.values()) - _clock_ms()))
                self.cond.wait(wait_ms / 1000)
                return False
        done, rest = ray.wait(refs, num_returns=1, timeout=0.005)
        if done and rest:           # collect every answer already there in the same round
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            done += more
        for ref in done:
            self._on_answer(ref)
        self._expire_requests()
        return False

    def _expire_requests(self) -> None:
        """A request unanswered past request_timeout_ms (its broker paused, partitioned), or
        sent to a broker that metadata no longer names as leader of one of its partitions,
        is given up as REQUEST_TIMED_OUT and retried: the idempotent sequence makes a late
        landing of the abandoned one harmless (the leader answers the retry as a duplicate,
        or no longer leads). Checked every EXPIRE_CHECK_MS, not every round. A frozen leader
        never answers and no error triggers a refresh, so while a request is older than
        STALL_MS metadata is refreshed every STALL_REFRESH_MS: once the controller has
        elected a new leader (the frozen one's ZooKeeper session expired) the batches move
        to it within STALL_REFRESH_MS instead of waiting out request_timeout_ms."""
        now = _clock_ms()
        if now < self._next_expire_ms or not self.in_flight:
            return
        self._next_expire_ms = now + EXPIRE_CHECK_MS
        oldest = min(sent for _, sent, _ in self.in_flight.values())
        if oldest < now - STALL_MS and now >= self._next_stall_refresh_ms:
            self._next_stall_refresh_ms = now + STALL_REFRESH_MS
            self.metadata.refresh()
        limit = now - self.request_timeout_ms - REQUEST_GRACE_MS
        for ref, (broker, sent, batches) in list(self.in_flight.items()):
            moved = False
            for batch in batches:
                leader = self.metadata.leader(batch.tp)
                if leader is not None and leader[0] != broker:   # a newer leader is known
                    moved = True
                    break
            if sent < limit or moved:
                self._on_answer(ref, timed_out=True)

    def _actor(self, broker_id: int):
        actor = self._actors.get(broker_id)
        if actor is None:
            actor = self.cluster.broker_actor(broker_id)
            if actor is not None:
                self._actors[broker_id] = actor
        return actor

    def _dispatch(self) -> None:
        """Per leader broker, ONE produce_many with the head batch of each ready partition."""
        now = _clock_ms()
        by_broker: dict[int, list] = {}
        refresh = False
        for tp, queue in self.outbox.items():
            if not queue or tp in self.busy or self.retry_at.get(tp, 0) > now:
                continue
            leader = self.metadata.leader(tp)
            if leader is None:
                refresh = True
                self.retry_at[tp] = now + self.retry_backoff_ms
                continue
            by_broker.setdefault(leader[0], []).append(queue[0])
        for broker, batches in by_broker.items():
            actor = self._actor(broker)
            if actor is None:           # broker actor not found (restarting, or gone for good)
                refresh = True          # a dead leader's actor never comes back by itself
                for batch in batches:
                    self.retry_at[batch.tp] = now + self.retry_backoff_ms
                continue
            ref = actor.produce_many.remote([(b.tp, b.encoded()) for b in batches],
                                            self.acks, self.request_timeout_ms)
            self.in_flight[ref] = (broker, now, batches)
            for batch in batches:
                self.retry_at.pop(batch.tp, None)
                self.busy.add(batch.tp)
        if refresh:
            self.metadata.refresh()

    def _on_answer(self, ref, timed_out: bool = False) -> None:
        broker, _sent, batches = self.in_flight.pop(ref)
        answers = None
        if not timed_out:
            try:
                answers = ray.get(ref)
            except RayError:        # the broker died or restarted: like NOT_LEADER
                self._actors.pop(broker, None)
        refresh = False
        now = _clock_ms()
        finished = []
        for batch in batches:
            answer = None if answers is None else answers.get(batch.tp)
            if answer is None:
                code = RequestTimedOut.code if timed_out else 6
            else:
                code = answer["error"]
            self.busy.discard(batch.tp)
            expired = now - self.first_try_ms[id(batch)] > self.delivery_timeout_ms
            if code in RETRIABLE and not expired and batch.attempts < self.retries:
                batch.attempts += 1
                refresh = True
                self.retry_at[batch.tp] = now + self.retry_backoff_ms
                continue
            self.outbox[batch.tp].popleft()
            self.first_try_ms.pop(id(batch), None)
            if code == 0:
                batch.complete(answer["base_offset"])
            else:
                batch.fail(error_for_code(code, f"produce to {batch.tp[0]}-{batch.tp[1]} failed"))
            finished.append(batch)
        if refresh:
            self.metadata.refresh()
        if not finished:
            return
        with self.cond:      # a drained batch gets no new waiters: take its list, resolve outside
            resolved = [(batch, self.waiters.pop(id(batch), [])) for batch in finished]
        for batch, waiters in resolved:
            self._resolve(batch, waiters)
        with self.cond:      # only now: flush() returns after every future is resolved
            self.unfinished -= sum(len(w) for _, w in resolved)
            self.cond.notify_all()

    @staticmethod
    def _resolve(batch, waiters) -> None:
        topic, partition = batch.tp
        base = batch.base_offset
        for future, index in waiters:
            if batch.error is not None:
                future.set_exception(batch.error)
            elif index is None:        # a bulk batch: the metadata of all its records
                future.set_result([_new(RecordMetadata, (topic, partition, o))
                                   for o in range(base, base + batch.record_count)])
            else:
                future.set_result(_new(RecordMetadata, (topic, partition, base + index)))
