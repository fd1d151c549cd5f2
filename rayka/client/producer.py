"""Producer: Kafka's producer over broker actors (accumulate, batch, send, retry).

Rules:
- `send` picks the partition (explicit; key → Kafka's murmur2; no key → sticky), appends
  to the accumulator and returns a RecordFuture (rayka/client/futures.py: a
  concurrent.futures.Future that costs nothing per record until waited on);
  `on_delivery(error, metadata)` is librdkafka's delivery report. `send_batch`
  (bulk) routes the same way (keys → murmur2, null keys → one sticky partition), cuts
  values into sealed batches and returns ONE Future of the list of metadata, in input order.
  send() takes one plain lock and notifies the sender only when it is idle; `unfinished`
  counts batches, not records.
- One sender thread: drains ready batches (linger_ms / batch_size) into SendQueues
  (rayka/client/sender.py: up to max_in_flight_requests_per_connection batches in flight
  per partition, 5 with idempotence as Kafka; the leader orders them by sequence and a
  retry is never overtaken), and sends, per leader broker, ONE `produce_batches` call
  carrying every batch let go in that round (Kafka's one ProduceRequest per broker); the
  answer has a result per partition, each handled as below. Batches are encoded once
  (retries resend the same bytes unless renumbered). Without idempotence one batch is in
  flight per partition (a retry could be overtaken). The sender sleeps on a condition
  woken by send() (when idle), by any answer (each request's ObjectRef future calls back)
  and by the next linger / retry deadline: no polling.
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
- Transactions (`transactional_id`; Kafka's transactional producer, the state machine in
  rayka/client/transaction_manager.py): idempotence and acks=all are implied.
  `init_transactions` gets the producer id and epoch from the transaction coordinator
  (fencing an older producer of the same id); `begin_transaction`, then `send` (the
  sender adds each partition to the transaction, AddPartitionsToTxn, before its first
  batch goes out, and names the transactional id on every produce: the leader verifies
  it, KIP-890), `send_offsets_to_transaction` (AddOffsetsToTxn, then TxnOffsetCommit to
  the group's coordinator), `commit_transaction` (flush, then EndTxn) or
  `abort_transaction`. A failed batch inside a transaction makes it abortable (commit
  raises); a fenced producer raises ProducerFenced from then on.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import Future

import ray
from ray.exceptions import RayError

from rayka.client import futures
from rayka.client.accumulator import RecordAccumulator
from rayka.client.futures import MetadataRun, RecordFuture, on_delivery_callback
from rayka.client.metadata import Metadata
from rayka.client.partitioner import StickyPartitioner, partition_for_key
from replicas.compression import producer_codec
from rayka.client.sender import RESENT, SendQueues
from rayka.client.transaction_manager import (REDISCOVER, RETRY, TransactionManager, TxnState,
                                              classify)
from replicas.errors import ErrorCode as E
from replicas.errors import (InvalidConfig, InvalidRequiredAcks, KafkaError, NotLeaderOrFollower,
                             RequestTimedOut, UnknownTopicOrPartition, error_for_code)

log = logging.getLogger(__name__)
REQUEST_GRACE_MS = 5_000      # the broker's own timeout answers first when it can
EXPIRE_CHECK_MS = 100         # how often in-flight requests are checked for expiry / moves
STALL_MS = 1_000              # an acks=all answer this late: is its leader frozen? (probe)
STALL_REFRESH_MS = 500        # a probe this late: frozen; metadata refreshed this often
_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


def _first_error(result, partitions) -> int:
    """AddPartitionsToTxn's answer: the first partition's error, else the top-level one."""
    for tp in partitions:
        code = result.partition_errors.get(tuple(tp), result.error)
        if code:
            return code
    return result.error


def _wall_ms() -> int:
    """Record timestamps: epoch milliseconds (Kafka's CreateTime)."""
    return int(time.time() * 1000)


class Producer:
    def __init__(self, cluster, acks="all", linger_ms: int = 5, batch_size: int = 1 << 20,
                 enable_idempotence: bool = True, retries: int = 2**31 - 1,
                 delivery_timeout_ms: int = 120_000, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, seed: int | None = None,
                 compression_type: str = "none",
                 max_in_flight_requests_per_connection: int | None = None,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60_000):
        if transactional_id is not None:
            if not enable_idempotence or _ACKS.get(acks) != -1:
                raise InvalidConfig("a transactional producer needs enable_idempotence=True "
                                    "and acks='all'")
        if acks not in _ACKS:
            raise InvalidRequiredAcks(f"acks must be 'all', -1, 1 or 0 (got {acks!r})")
        codec = producer_codec(compression_type)
        max_in_flight = max_in_flight_requests_per_connection or (5 if enable_idempotence else 1)
        if not 1 <= max_in_flight <= 5 or (max_in_flight > 1 and not enable_idempotence):
            raise InvalidConfig("max_in_flight_requests_per_connection must be 1-5, and 1 "
                                f"without idempotence (got {max_in_flight})")
        self.cluster = cluster
        self.acks = _ACKS[acks]
        self.request_timeout_ms, self.retry_backoff_ms = request_timeout_ms, retry_backoff_ms
        self.retries, self.delivery_timeout_ms = retries, delivery_timeout_ms
        self.transactional_id = transactional_id
        self.txn = TransactionManager(transactional_id, transaction_timeout_ms) \
            if transactional_id is not None else None
        self.producer_id = (cluster.store.allocate_producer_id_block(size=1)[0]
                            if enable_idempotence and self.txn is None else -1)
        self.acc = RecordAccumulator(batch_size, linger_ms, _clock_ms, self.producer_id,
                                     0 if enable_idempotence else -1, wall_clock_ms=_wall_ms,
                                     compression_type=codec)
        self.acc.transactional = self.txn is not None
        self._txn_coordinator = None         # CoordinatorLink of the transactional id
        self._txn_failed: list = []          # batches of the current transaction that failed
        self.metadata = Metadata(cluster)
        self.sticky = StickyPartitioner(random.Random(seed))
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)      # flush() waits here
        self._wakeup = threading.Condition(self.lock)  # the sender alone sleeps here
        self._idle = False                   # the sender sleeps: send() must wake it
        self._answered = False               # an in-flight request has its answer
        # the sender thread's own (no lock): what is in flight, retried, waiting
        self.queues = SendQueues(max_in_flight, retries, delivery_timeout_ms, retry_backoff_ms)
        self.in_flight: dict = {}            # ObjectRef → (broker id, when sent, [batches])
        self._actors: dict[int, object] = {}  # broker id → actor handle (get_actor is a GCS call)
        self._counts: tuple = (None, {})     # (metadata dict it was read from, topic → count)
        self._next_expire_ms = self._next_stall_refresh_ms = 0
        self._moves_checked = None           # the metadata last scanned for moved leaders
        self._probes: dict[int, tuple] = {}   # broker → (pid() probe, sent ms): frozen?
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
             partition: int | None = None, headers=None, timestamp_ms: int | None = None,
             on_delivery=None) -> RecordFuture:
        """Queue one record; its future resolves to RecordMetadata (or raises the typed
        error). `on_delivery(error, metadata)` is called in the producer's thread once the
        record is acknowledged or failed (librdkafka's delivery report), error None on
        success: keep it short, it delays the next answers."""
        if self.txn is not None:
            self.txn.require(TxnState.IN_TRANSACTION)
        n = self._partition_count(topic)
        sticky = partition is None and key is None
        if partition is None:
            partition = partition_for_key(key, n) if key is not None else self.sticky.partition(topic, n)
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist ({n} partitions)")
        with self.lock:
            self._check_open()
            tp = (topic, partition)
            got = self.acc.append_record(tp, value, key, headers, timestamp_ms, sticky)
            if got is None:     # sticky: a new batch is due, move to another partition
                self.sticky.on_new_batch(topic, partition, n)
                tp = (topic, self.sticky.partition(topic, n))
                got = self.acc.append_record(tp, value, key, headers, timestamp_ms)
            batch, index = got
            future = RecordFuture(batch, index)
            if index == 0:          # a new batch: `unfinished` counts batches
                self.unfinished += 1
            if on_delivery is not None:  # the open batch cannot complete under our lock
                batch.watchers.append((future, on_delivery_callback(on_delivery)))
            if self._idle:
                self._wakeup.notify()
        return future

    def send_batch(self, topic: str, values, keys=None, partition: int | None = None) -> Future:
        """Bulk: one Future resolving to the list of RecordMetadata, in input order. Without
        an explicit partition, keyed records go to murmur2(key) as send() puts them (order
        kept per key) and the null-keyed ones to one sticky partition."""
        if self.txn is not None:
            self.txn.require(TxnState.IN_TRANSACTION)
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
        with self.lock:
            self._check_open()
            batches = self.acc.append_many((topic, partition), values, keys)
            parts = [RecordFuture(batch, None) for batch in batches]
            self.unfinished += len(batches)
            if self._idle:
                self._wakeup.notify()

        def gather(_f=None):
            if all(p.done() for p in parts) and not outer.done():
                errors = [p.exception() for p in parts if p.exception() is not None]
                if errors:
                    outer.set_exception(errors[0])
                else:
                    outer.set_result(MetadataRun.concat(p.result() for p in parts))
        for p in parts:
            p.add_done_callback(gather)
        if not parts:
            outer.set_result(MetadataRun([]))
        return outer

    def flush(self, timeout_s: float | None = None) -> None:
        with self.cond:
            self.flushing += 1
            self._wakeup.notify()
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
                self._wakeup.notify()
            self._thread.join(5)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError("the producer is closed")

    # -- transactions -----------------------------------------------------------------------------
    def _txn_link(self):
        from rayka.client.group import CoordinatorLink
        if self._txn_coordinator is None:
            self._txn_coordinator = CoordinatorLink(self.cluster, self.transactional_id,
                                                    key_type=1, method="txn")
        return self._txn_coordinator

    def _txn_call(self, make, what: str, timeout_s: float, error_of=lambda r: r.error):
        """One transaction coordinator request until it is answered for good: retried on
        the retriable codes, the coordinator found again when it moved; the final result
        (its error decided by the caller) or RequestTimedOut at the deadline."""
        deadline = time.monotonic() + timeout_s
        link = self._txn_link()
        while True:
            result = link.call(make(), deadline)
            kind = classify(error_of(result))
            if kind not in (RETRY, REDISCOVER) or time.monotonic() > deadline:
                return result
            if kind == REDISCOVER:
                link.forget(link.epoch)
            time.sleep(self.retry_backoff_ms / 1000)   # back-off before the retry

    def _require_txn(self):
        if self.txn is None:
            raise InvalidConfig("not a transactional producer (give transactional_id)")
        return self.txn

    def init_transactions(self, timeout_s: float = 60.0) -> None:
        """Get this transactional id's producer id and epoch (fencing any older producer of
        it; an open transaction of theirs is aborted by the coordinator)."""
        from transactions import messages as tm
        txn = self._require_txn()
        with self.lock:
            txn.transition(TxnState.INITIALIZING)
            pid, epoch = (txn.producer_id, txn.producer_epoch) if txn.needs_epoch_bump \
                else (-1, -1)
        r = self._txn_call(lambda: tm.InitProducerId(0, self.transactional_id,
                                                      txn.transaction_timeout_ms, pid, epoch),
                           "init_transactions", timeout_s)
        with self.lock:
            if r.error:
                raise txn.fail(r.error, "InitProducerId")
            txn.initialized(r.producer_id, r.producer_epoch)
            self.acc.reset_producer(r.producer_id, r.producer_epoch)
            self.producer_id = r.producer_id

    def begin_transaction(self) -> None:
        txn = self._require_txn()
        with self.lock:
            txn.transition(TxnState.IN_TRANSACTION)
            self._txn_failed = []

    def _join_transaction(self, drained: list) -> list:
        """Add the drained batches' new partitions to the transaction (AddPartitionsToTxn)
        before they are sent; the batches of partitions that could not join fail."""
        from transactions import messages as tm
        txn = self.txn
        with self.lock:
            new = txn.to_add(b.tp for b in drained)
            pid, epoch = txn.producer_id, txn.producer_epoch
        if not new:
            return drained
        r = self._txn_call(lambda: tm.AddPartitionsToTxn(0, self.transactional_id, pid, epoch,
                                                          tuple(new)),
                           "AddPartitionsToTxn", self.request_timeout_ms / 1000,
                           error_of=lambda r: _first_error(r, new))
        error = _first_error(r, new)
        with self.lock:
            if not error:
                txn.added(new)
                return drained
            exc = txn.fail(error, f"AddPartitionsToTxn {new}")
        failed = [b for b in drained if b.tp in set(new)]
        for batch in failed:
            batch.error = exc
        futures.complete(failed)
        with self.lock:
            self.unfinished -= len(failed)
            self.cond.notify_all()
        return [b for b in drained if b.tp not in set(new)]

    def send_offsets_to_transaction(self, offsets: dict, group_metadata,
                                    timeout_s: float = 60.0) -> None:
        """Commit the consumer's `offsets` ({(topic, partition): next offset, or (next
        offset, metadata string)}) with the transaction: AddOffsetsToTxn, then
        TxnOffsetCommit to the group's coordinator. `group_metadata`: the consumer's
        group_metadata() (KIP-447 fencing) or a group id."""
        from coordinator import messages as gm
        from rayka.client.group import CoordinatorLink
        from transactions import messages as tm
        txn = self._require_txn()
        with self.lock:
            txn.require(TxnState.IN_TRANSACTION)
            pid, epoch = txn.producer_id, txn.producer_epoch
        if isinstance(group_metadata, str):
            group_id, generation, member, instance = group_metadata, -1, "", None
        else:
            group_id, generation, member, instance = group_metadata
        r = self._txn_call(lambda: tm.AddOffsetsToTxn(0, self.transactional_id, pid, epoch,
                                                       group_id), "AddOffsetsToTxn", timeout_s)
        if r.error:
            with self.lock:
                raise txn.fail(r.error, "AddOffsetsToTxn")
        with self.lock:
            txn.offsets_added = True
        commit = tuple(gm.CommitOffset(tp[0], tp[1], int(o[0]), -1, o[1])
                       if isinstance(o, tuple) else gm.CommitOffset(tp[0], tp[1], int(o))
                       for tp, o in offsets.items())
        link = CoordinatorLink(self.cluster, group_id)
        deadline = time.monotonic() + timeout_s
        while True:
            result = link.call(gm.TxnOffsetCommit(0, self.transactional_id, group_id, pid, epoch,
                                                  commit, generation, member, instance),
                               deadline)
            codes = {p.error for p in result.partitions}
            error = next((c for c in sorted(codes) if c), E.NONE)
            if classify(error) not in (RETRY, REDISCOVER) or time.monotonic() > deadline:
                break
            time.sleep(self.retry_backoff_ms / 1000)   # back-off before the retry
        if error:
            with self.lock:
                raise txn.fail(error, f"TxnOffsetCommit to {group_id}")

    def commit_transaction(self, timeout_s: float = 60.0) -> None:
        """Flush, then commit: every record sent in the transaction becomes visible to
        read_committed consumers at once, with the offsets sent to it. Raises the error of a
        failed batch (the transaction must then be aborted)."""
        self._end_transaction(True, timeout_s)

    def abort_transaction(self, timeout_s: float = 60.0) -> None:
        """Flush what is in flight, then abort: nothing of the transaction is ever visible
        to read_committed consumers."""
        self._end_transaction(False, timeout_s)

    def _end_transaction(self, commit: bool, timeout_s: float) -> None:
        from transactions import messages as tm
        txn = self._require_txn()
        with self.lock:
            txn.transition(TxnState.COMMITTING if commit else TxnState.ABORTING)
        try:
            self.flush(timeout_s)
        except RequestTimedOut:
            if commit:
                with self.lock:
                    txn.fail(E.REQUEST_TIMED_OUT, "commit_transaction: flush")
                raise
        with self.lock:     # a batch failed for good (abortable, or fenced): no EndTxn(commit)
            if commit and txn.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
                raise txn.error
            pid, epoch = txn.producer_id, txn.producer_epoch
            started = txn.started
        if started:
            r = self._txn_call(lambda: tm.EndTxn(0, self.transactional_id, pid, epoch, commit),
                               "EndTxn", timeout_s)
            if r.error:
                with self.lock:
                    raise txn.fail(r.error, "commit_transaction" if commit
                                   else "abort_transaction")
        with self.lock:
            txn.completed()
            bump = txn.needs_epoch_bump
        if bump:                          # KIP-360: a new epoch, sequences from 0
            self.init_transactions(timeout_s)

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
        """One round of the sender: drain, dispatch, collect answers, then sleep until a
        record, an answer (each request's ObjectRef wakes it), linger or a retry is due;
        True when closed. Only the accumulator, `unfinished` and the wake flags need the
        lock: send() callers never wait behind an actor call or a callback."""
        with self.lock:
            if self.closed and not self.unfinished:
                return True
            drained = self.acc.drain(ready_only=not self.flushing, skip=self.queues.full(),
                                     busy=self.queues.busy())
        if self.txn is not None and drained:
            drained = self._join_transaction(drained)
        now = _clock_ms()
        for batch in drained:
            self.queues.add(batch, now)
        self._dispatch(now)
        if self._answered:
            self._collect()
        self._expire_requests()
        with self.lock:
            if self.closed and not self.unfinished:
                return True
            if self._answered:
                return False
            nxt = self.acc.next_ready_ms(busy=self.queues.busy())
            now = _clock_ms()
            wait_ms = 50 if nxt is None else max(0, nxt - now)
            if self.in_flight:
                wait_ms = min(wait_ms, EXPIRE_CHECK_MS)
            if self.queues.retry_at:
                wait_ms = min(wait_ms, max(0, min(self.queues.retry_at.values()) - now))
            if wait_ms:
                self._idle = True
                self._wakeup.wait(wait_ms / 1000)
                self._idle = False
        return False

    def _wake(self, _future=None) -> None:
        """An in-flight request was answered (called on a Ray thread)."""
        with self.lock:
            self._answered = True
            self._wakeup.notify()

    def _collect(self) -> None:
        self._answered = False      # before the wait: a later answer sets it again
        refs = list(self.in_flight)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            self._on_answer(ref)

    def _expire_requests(self) -> None:
        """A request unanswered past request_timeout_ms (its broker paused, partitioned), or
        sent to a broker that metadata no longer names as leader of one of its partitions,
        is given up as REQUEST_TIMED_OUT and retried: the idempotent sequence makes a late
        landing of the abandoned one harmless (the leader answers the retry as a duplicate,
        or no longer leads). Checked every EXPIRE_CHECK_MS, not every round. A frozen leader
        never answers and no error triggers a refresh: see _maybe_refresh_for_frozen."""
        now = _clock_ms()
        if now < self._next_expire_ms or not self.in_flight:
            return
        self._next_expire_ms = now + EXPIRE_CHECK_MS
        self._maybe_refresh_for_frozen(now)
        limit = now - self.request_timeout_ms - REQUEST_GRACE_MS
        check_moves = self._moves_checked is not self.metadata.partitions
        self._moves_checked = self.metadata.partitions
        for ref, (broker, sent, batches) in list(self.in_flight.items()):
            moved = False
            for batch in batches if check_moves else ():
                leader = self.metadata.leader(batch.tp)
                if leader is not None and leader[0] != broker:   # a newer leader is known
                    moved = True
                    break
            if sent < limit or moved:
                self._on_answer(ref, timed_out=True)

    def _maybe_refresh_for_frozen(self, now: int) -> None:
        """A broker whose answer is over STALL_MS late gets a probe (pid(): no lock, its own
        thread pool); a probe unanswered for STALL_REFRESH_MS means a frozen process, and
        metadata is refreshed every STALL_REFRESH_MS until the controller has elected new
        leaders (the frozen one's ZooKeeper session expired): _expire_requests then moves
        the batches at once instead of after request_timeout_ms. A slow but live broker
        (acks=all at 10,000 partitions takes seconds) answers its probes and costs no
        refresh (a full refresh is three brokers' metadata of every partition)."""
        late = {broker for broker, sent, _ in self.in_flight.values() if sent < now - STALL_MS}
        for broker in [b for b in self._probes if b not in late]:
            del self._probes[broker]
        frozen = False
        for broker in late:
            probe = self._probes.get(broker)
            if probe is not None and ray.wait([probe[0]], timeout=0)[0]:
                probe = None                # answered: alive; probe again next check
            if probe is None:
                actor = self._actor(broker)
                if actor is not None:
                    self._probes[broker] = (actor.pid.remote(), now)
            elif probe[1] < now - STALL_REFRESH_MS:
                frozen = True
        if frozen and now >= self._next_stall_refresh_ms:
            self._next_stall_refresh_ms = now + STALL_REFRESH_MS
            self.metadata.refresh()

    def _actor(self, broker_id: int):
        actor = self._actors.get(broker_id)
        if actor is None:
            actor = self.cluster.broker_actor(broker_id)
            if actor is not None:
                self._actors[broker_id] = actor
        return actor

    def _dispatch(self, now: int) -> None:
        """Per leader broker, ONE produce_batches call with every batch SendQueues lets go now
        (consecutive batches of a partition in sequence order, answered one by one)."""
        by_broker: dict[int, list] = {}
        refresh = False
        for batch in self.queues.sendable(now):
            leader = self.metadata.leader(batch.tp)
            if leader is None:
                refresh = True
                self.queues.unsend(batch, now)
                continue
            by_broker.setdefault(leader[0], []).append(batch)
        for broker, batches in by_broker.items():
            actor = self._actor(broker)
            if actor is None:           # broker actor not found (restarting, or gone for good)
                refresh = True          # a dead leader's actor never comes back by itself
                for batch in batches:
                    self.queues.unsend(batch, now)
                continue
            ref = actor.produce_batches.remote([(b.tp, b.encoded()) for b in batches],
                                               self.acks, self.request_timeout_ms,
                                               self.transactional_id)
            self.in_flight[ref] = (broker, now, batches)
            ref.future().add_done_callback(self._wake)
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
        finished, rewinds = [], []
        for i, batch in enumerate(batches):
            answer = None if answers is None else answers[i]
            if answer is None:
                code = RequestTimedOut.code if timed_out else NotLeaderOrFollower.code
            else:
                code = answer["error"]
            outcome = self.queues.on_answer(batch, code, now)
            if outcome.kind == "retry":
                refresh = refresh or code in RESENT
                continue
            if outcome.kind == "done":
                batch.base_offset = answer["base_offset"]
            else:
                batch.error = error_for_code(code, f"produce to {batch.tp[0]}-{batch.tp[1]} failed")
                if outcome.rewind:
                    rewinds.append((batch.tp, outcome.rewind))
                if self.txn is not None:
                    with self.lock:
                        self.txn.fail(code, f"produce to {batch.tp[0]}-{batch.tp[1]}")
            finished.append(batch)
        if rewinds:
            with self.lock:
                for tp, count in rewinds:
                    self.acc.rewind_sequence(tp, count)
        if refresh:
            self.metadata.refresh()
        if not finished:
            return
        futures.complete(finished)      # waiters woken, callbacks run: outside our lock
        with self.lock:      # only now: flush() returns after every callback has run
            self.unfinished -= len(finished)
            if self.flushing or self.closed:
                self.cond.notify_all()
