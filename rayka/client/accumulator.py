"""Kafka's RecordAccumulator, reduced to what the rayka producer needs (pure: no Ray).

Rules:
- Records are grouped per TopicPartition into ProducerBatches kept in a FIFO queue.
  `append` adds to the LAST batch of the partition if it is still open and has room
  (estimated size + the record's upper-bound estimate <= batch_size); otherwise it opens
  a new batch. A new batch always takes its first record, however large.
  With `abort_on_new_batch=True` it opens nothing and returns None instead, so a
  sticky partitioner can switch partitions first (Kafka's abortOnNewBatch).
- Size estimates are Kafka's upper bounds: 61 bytes of batch header plus, per record,
  21 bytes of overhead + varint room + key + value + headers. A batch is FULL when
  its estimate reaches batch_size.
- A batch is READY to send when it is full, or not the last batch of its queue (a
  newer one was opened behind it), or sealed (bulk or retried), or at least linger_ms
  old (clock_ms() - created_ms >= linger_ms). drain(ready_only=True) pops, per
  partition, the ready batches from the front of the queue, stopping at the first one
  that is not; drain(ready_only=False) pops everything (flush/close); partitions passed
  in `skip` (pipeline full) are left alone, so their open batch keeps growing; in `busy`
  (a batch in flight) linger does not make a batch ready, only size or a seal does.
- Idempotence (producer_id >= 0): sequence numbers are assigned at DRAIN time, per
  partition, starting at 0 and increasing by each batch's record count (int32, wrapping
  to 0 like Kafka). A drained batch is sealed: nothing more is appended to it.
  Without a producer id every batch carries base_sequence -1 (NO_SEQUENCE). A
  transactional producer's batches carry the transactional bit; `reset_producer` (a new
  id or epoch) starts every sequence again at 0.
- `reenqueue(batch)` puts a drained batch (a retry) back at the FRONT of its queue, in
  drain order among other retried batches, keeping its base_sequence; it is ready at
  once (backoff is the caller's business). Draining it again assigns nothing new.
- Timestamps default to wall_clock_ms() at append (epoch ms, Kafka's CreateTime; defaults
  to clock_ms when not given, e.g. in tests). `append_many` (bulk API) seals the
  partition's open batch and cuts the values into sealed batches of <= batch_size
  estimated bytes each (at least one record per batch).
- Completion: the sender calls batch.complete(base_offset) or batch.fail(error); each
  RecordHandle (batch, index) then yields RecordMetadata(topic, partition, base + index).
"""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from typing import Callable, Sequence

from rayka.client.types import RecordMetadata, TopicPartition
from replicas.records import HEADER_SIZE, NO_SEQUENCE, build_batch

RECORD_OVERHEAD = 21 + 5 + 5 + 5  # Kafka MAX_RECORD_OVERHEAD + key/value/header-count varints
HEADER_OVERHEAD = 5 + 5           # per header: key-length and value-length varints
_INT32_MAX = 0x7FFFFFFF

Headers = Sequence[tuple[str, bytes | None]]


def estimate_record_bytes(value: bytes | None, key: bytes | None = None,
                          headers: Headers | None = None) -> int:
    """Upper bound of a record's encoded size inside a v2 batch."""
    size = RECORD_OVERHEAD + (len(value) if value is not None else 0) \
        + (len(key) if key is not None else 0)
    for hkey, hvalue in headers or ():
        size += HEADER_OVERHEAD + len(hkey.encode()) + (len(hvalue) if hvalue is not None else 0)
    return size


class ProducerBatch:
    """The records bound for one partition, sent (and retried) as one RecordBatch v2."""

    __slots__ = ("tp", "values", "keys", "timestamps_ms", "headers", "created_ms",
                 "estimated_bytes", "sealed", "base_sequence", "producer_id",
                 "producer_epoch", "attempts", "done", "base_offset", "error", "_order",
                 "_has_keys", "_has_headers", "_encoded", "compression_type", "watchers",
                 "transactional")

    def __init__(self, tp: TopicPartition, created_ms: int, compression_type: int = 0):
        self.tp = tp
        self.compression_type = compression_type
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] = []
        self.timestamps_ms: list[int] = []
        self.headers: list[Headers] = []
        self.created_ms = created_ms
        self.estimated_bytes = HEADER_SIZE
        self.sealed = False
        self.base_sequence: int | None = None  # set at first drain
        self.producer_id = -1
        self.producer_epoch = -1
        self.transactional = False             # set at first drain, with the producer id
        self.attempts = 0                      # times reenqueued
        self.done = False
        self.base_offset: int | None = None
        self.error: BaseException | None = None
        self._order: int | None = None         # drain order, for reenqueue
        self._has_keys = False
        self._has_headers = False
        self._encoded: bytes | None = None     # build() of the sealed batch, kept for retries
        self.watchers: list = []               # (future, callback): rayka/client/futures.py

    @property
    def record_count(self) -> int:
        return len(self.values)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence is None or self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + len(self.values) - 1) & _INT32_MAX

    def _add(self, value, key, headers, timestamp_ms: int, size: int) -> int:
        self.values.append(value)
        self.keys.append(key)
        self.timestamps_ms.append(timestamp_ms)
        self.headers.append(tuple(headers) if headers else ())
        self._has_keys = self._has_keys or key is not None
        self._has_headers = self._has_headers or bool(headers)
        self.estimated_bytes += size
        return len(self.values) - 1

    def build(self) -> bytearray:
        """Encode the batch (offsets from 0; the leader assigns the real ones)."""
        return build_batch(self.values, self.keys if self._has_keys else None,
                           self.timestamps_ms, self.headers if self._has_headers else None,
                           producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=NO_SEQUENCE if self.base_sequence is None
                           else self.base_sequence, compression_type=self.compression_type,
                           transactional=self.transactional)

    def encoded(self) -> bytes:
        """The batch's bytes, built once: a drained (sealed, sequenced) batch never changes,
        so a retry resends exactly what was sent before."""
        if self._encoded is None:
            self._encoded = bytes(self.build())
        return self._encoded

    def complete(self, base_offset: int) -> None:
        self.done, self.base_offset, self.error = True, base_offset, None

    def fail(self, error: BaseException) -> None:
        self.done, self.base_offset, self.error = True, None, error

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.tp!r}, records={len(self.values)}, "
                f"bytes~{self.estimated_bytes}, base_sequence={self.base_sequence})")


class RecordHandle:
    """One appended record: its batch and index; resolved when the batch completes."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: ProducerBatch, index: int):
        self.batch, self.index = batch, index

    @property
    def done(self) -> bool:
        return self.batch.done

    def metadata(self) -> RecordMetadata:
        """The record's RecordMetadata; raises the batch's error, or if not done yet."""
        batch = self.batch
        if not batch.done:
            raise RuntimeError("record not acknowledged yet")
        if batch.error is not None:
            raise batch.error
        return RecordMetadata(batch.tp[0], batch.tp[1], batch.base_offset + self.index)


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, clock_ms: Callable[[], int],
                 producer_id: int = -1, producer_epoch: int = -1,
                 wall_clock_ms: Callable[[], int] | None = None, compression_type: int = 0):
        if batch_size <= 0 or linger_ms < 0:
            raise ValueError("batch_size must be > 0 and linger_ms >= 0")
        self.compression_type = compression_type
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.transactional = False
        self._clock = clock_ms
        # record timestamps (CreateTime) are wall-clock epoch ms; linger uses the monotonic
        # clock_ms, which may be any origin
        self._wall = wall_clock_ms or clock_ms
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._next_sequence: dict[TopicPartition, int] = {}
        self._drain_order = itertools.count()

    def append(self, tp: TopicPartition, value: bytes | None, key: bytes | None = None,
               headers: Headers | None = None, timestamp_ms: int | None = None,
               abort_on_new_batch: bool = False) -> RecordHandle | None:
        got = self.append_record(tp, value, key, headers, timestamp_ms, abort_on_new_batch)
        return None if got is None else RecordHandle(*got)

    def append_record(self, tp: TopicPartition, value: bytes | None, key: bytes | None = None,
                      headers: Headers | None = None, timestamp_ms: int | None = None,
                      abort_on_new_batch: bool = False) -> tuple[ProducerBatch, int] | None:
        """append() without the RecordHandle: (batch, index), or None (abort_on_new_batch)."""
        if headers:
            size = estimate_record_bytes(value, key, headers)
        else:       # the common case inlined: this runs once per record
            size = RECORD_OVERHEAD + (len(value) if value is not None else 0) \
                + (len(key) if key is not None else 0)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        last = queue[-1] if queue else None
        if last is None or last.sealed or last.estimated_bytes + size > self.batch_size:
            if abort_on_new_batch:
                return None
            last = ProducerBatch(tp, self._clock(), self.compression_type)
            queue.append(last)
        index = last._add(value, key, headers,
                          self._wall() if timestamp_ms is None else timestamp_ms, size)
        return last, index

    def append_many(self, tp: TopicPartition, values: Sequence[bytes | None],
                    keys: Sequence[bytes | None] | None = None) -> list[ProducerBatch]:
        """Bulk append: sealed batches of <= batch_size estimated bytes, in order."""
        if keys is not None and len(keys) != len(values):
            raise ValueError("keys and values differ in length")
        now, stamp = self._clock(), self._wall()
        queue = self._queues.setdefault(tp, deque())
        if queue:
            queue[-1].sealed = True
        # cut points from running sizes (C loops; this runs for millions of records)
        sizes = [RECORD_OVERHEAD + (len(v) if v is not None else 0) for v in values]
        if keys is not None:
            sizes = [n + (len(k) if k is not None else 0) for n, k in zip(sizes, keys)]
        ends = list(itertools.accumulate(sizes))
        room = self.batch_size - HEADER_SIZE
        batches: list[ProducerBatch] = []
        start, total = 0, 0
        while start < len(values):
            end = max(bisect.bisect_right(ends, total + room, lo=start), start + 1)
            batch = ProducerBatch(tp, now, self.compression_type)
            n = end - start
            batch.values = list(values[start:end])
            batch.keys = list(keys[start:end]) if keys is not None else [None] * n
            batch._has_keys = keys is not None and any(k is not None for k in batch.keys)
            batch.timestamps_ms = [stamp] * n
            batch.headers = [()] * n
            batch.estimated_bytes = HEADER_SIZE + ends[end - 1] - total
            batch.sealed = True
            batches.append(batch)
            start, total = end, ends[end - 1]
        queue.extend(batches)
        return batches

    def _ready(self, batch: ProducerBatch, queue_len: int, now: int,
               by_linger: bool = True) -> bool:
        return (batch.sealed or queue_len > 1 or batch.estimated_bytes >= self.batch_size
                or by_linger and now - batch.created_ms >= self.linger_ms)

    def drain(self, ready_only: bool = True, skip=frozenset(),
              busy=frozenset()) -> list[ProducerBatch]:
        """Pop the sendable batches (all of them when not ready_only), sequences assigned.
        Partitions in `skip` (their pipeline is full) keep theirs: their open batch goes on
        filling up instead of becoming a queue of tiny batches sent one by one. Partitions
        in `busy` (a batch in flight) give only batches ready by size or seal, not by
        linger: a trickle of records fills one batch per round trip instead of one request
        each (a request costs the brokers more than its bytes)."""
        now = self._clock()
        out: list[ProducerBatch] = []
        for tp, queue in list(self._queues.items()):
            if tp in skip:
                continue
            linger_done = tp not in busy
            while queue and (not ready_only or self._ready(queue[0], len(queue), now, linger_done)):
                batch = queue.popleft()
                batch.sealed = True
                if batch._order is None:
                    batch._order = next(self._drain_order)
                    batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
                    batch.transactional = self.transactional
                    if self.producer_id >= 0:
                        batch.base_sequence = self._next_sequence.get(tp, 0)
                        self._next_sequence[tp] = (batch.base_sequence + len(batch.values)) \
                            & _INT32_MAX
                    else:
                        batch.base_sequence = NO_SEQUENCE
                out.append(batch)
            if not queue:
                del self._queues[tp]
        return out

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a drained batch back at the front of its queue, keeping its sequence."""
        if batch._order is None:
            raise ValueError("only a drained batch can be reenqueued")
        queue = self._queues.setdefault(batch.tp, deque())
        i = 0
        while i < len(queue) and queue[i]._order is not None and queue[i]._order < batch._order:
            i += 1
        queue.insert(i, batch)
        batch.attempts += 1
        batch.done, batch.base_offset, batch.error = False, None, None

    def next_ready_ms(self, skip=frozenset(), busy=frozenset()) -> int | None:
        """Earliest clock time at which some queued batch outside `skip` is ready (None if
        nothing is queued there; a `busy` partition's batch waits for an answer instead)."""
        now = self._clock()
        times = [now if self._ready(q[0], len(q), now) else q[0].created_ms + self.linger_ms
                 for tp, q in self._queues.items() if q and tp not in skip and tp not in busy]
        return min(times) if times else None

    def rewind_sequence(self, tp: TopicPartition, count: int) -> None:
        """A drained batch of `count` records was refused (not written): the partition's
        next sequence moves back by it (the sender renumbers the later drained ones)."""
        if self.producer_id >= 0:
            self._next_sequence[tp] = (self._next_sequence.get(tp, 0) - count) & _INT32_MAX

    def reset_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch (a transactional producer's InitProducerId): every
        partition's sequence starts again at 0."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._next_sequence.clear()

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._next_sequence.get(tp, 0)

    def pending_batches(self) -> int:
        return sum(len(q) for q in self._queues.values())
