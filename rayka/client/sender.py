"""The producer's in-flight bookkeeping (Kafka's Sender + the idempotent part of its
TransactionManager), pure: batches in, sends and outcomes out; no Ray, no clock of its own.

Rules:
- Drained batches (sequenced by the accumulator) wait per partition in sequence order.
  `sendable(now)` hands out, per partition, those of the OLDEST `max_in_flight` unfinished
  batches that are not in flight (Kafka's max.in.flight.requests.per.connection, 5 with
  idempotence): batches after an unanswered one may go, the broker orders them by
  sequence. Anchoring the window at the oldest unfinished batch (not counting requests)
  matters because Ray answers come back in any order, unlike a Kafka connection's: at most
  max_in_flight - 1 batches can be written after one whose answer is still missing, so
  its resend is within the leader's 5 remembered batches. Until a first batch of the
  partition has landed, one at a time: the leader accepts an unknown producer's batch at
  ANY sequence (Kafka's rule, its state may have been lost), so a first batch overtaken by
  the second would be written after it and then refused (found by the pipeline bench:
  12 new producers, final OUT_OF_ORDER_SEQUENCE, Spark retried, duplicates).
- After a retriable failure the partition is RETRYING: nothing is sent for it until every
  in-flight batch of it is answered and its backoff passed, then only its head, one at a
  time, until the HEAD succeeds (a later batch succeeding proves nothing about it). So a
  retried batch is never overtaken, and at most max_in_flight - 1 batches were written
  after it: its resend is still within the leader's 5 remembered batches and is answered
  as a duplicate if its first attempt was written after all. Later batches already in flight come back OUT_OF_ORDER_SEQUENCE (45) from
  the leader (a gap) and are retried in order too.
- OUT_OF_ORDER_SEQUENCE is retriable when the batch was not the partition's oldest unfinished
  one when it was SENT or is not now (an earlier batch was unanswered: the leader may have
  seen the two requests in the other order, and the earlier one's success may be handled
  first), or its sequence changed since it was sent (see below); sent as the oldest with
  its own sequence it is final (the leader lost the producer's state: KIP-360's epoch
  bump is not done).
- A batch refused with a definite, non-retriable error (e.g. MESSAGE_TOO_LARGE) was not
  written: the later batches of its partition take its sequence numbers back
  (`SendQueues.adjust` + the caller rewinds the accumulator), re-encoded, as Kafka's
  adjustSequencesDueToFailedBatch does. A batch given up for its delivery timeout may have
  been written: nothing is adjusted.
- Retries are bounded by `retries` and `delivery_timeout_ms` from the batch's first drain.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from replicas.errors import RETRIABLE, ErrorCode

NONE = ErrorCode.NONE.value
OUT_OF_ORDER_SEQUENCE = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER.value
# Kafka's producer resends every retriable answer; this one fails CORRUPT_MESSAGE at once
# (Ray hands the leader the very bytes this producer encoded, so every resend is refused
# alike). KAFKA_STORAGE_ERROR is resent: the controller moves a failed directory's
# partitions to other replicas, and the resend after a metadata refresh lands there.
FAILED_AT_ONCE = frozenset({ErrorCode.CORRUPT_MESSAGE.value})
RESENT = RETRIABLE - FAILED_AT_ONCE
_INT32_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one answered batch: "done" (base_offset set), "retry" or "failed"
    (code: the error); `rewind` = records whose sequences later batches took back."""
    kind: str
    code: int = NONE
    rewind: int = 0


class SendQueues:
    def __init__(self, max_in_flight: int = 5, retries: int = 2**31 - 1,
                 delivery_timeout_ms: int = 120_000, retry_backoff_ms: int = 100):
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.max_in_flight, self.retries = max_in_flight, retries
        self.delivery_timeout_ms, self.retry_backoff_ms = delivery_timeout_ms, retry_backoff_ms
        self.queues: dict[tuple, deque] = {}     # tp → unfinished drained batches, in order
        self.in_flight: dict[tuple, int] = {}    # tp → batches of it in flight
        self.retrying: set[tuple] = set()
        self.retry_at: dict[tuple, int] = {}
        self.first_try_ms: dict[int, int] = {}   # id(batch) → first drain
        self.sent_sequence: dict[int, int] = {}  # id(batch) → base sequence it was sent with
        self.sent_behind: dict[int, bool] = {}   # id(batch) → an earlier batch unfinished then
        self._sent: set[int] = set()             # id(batch) of batches in flight
        self._full: set[tuple] = set()           # partitions with >= max_in_flight queued
        self._finished: set[int] = set()         # id(batch): done, behind an unfinished one
        self._confirmed: set[tuple] = set()      # partitions where a batch of ours landed

    # -- in --------------------------------------------------------------------------------------------
    def add(self, batch, now_ms: int) -> None:
        queue = self.queues.setdefault(batch.tp, deque())
        queue.append(batch)
        if len(queue) >= self.max_in_flight:
            self._full.add(batch.tp)
        self.first_try_ms.setdefault(id(batch), now_ms)

    def full(self) -> set:
        """Partitions holding max_in_flight batches or more (sent or waiting): the
        accumulator keeps their open batch growing instead of cutting more small ones.
        Kept up to date by add/_finish (a scan per round is quadratic at 10,000)."""
        return self._full

    def busy(self):
        """Partitions with a batch in flight or waiting to go (a live view)."""
        return self.queues.keys()

    def pending(self) -> int:
        """Unfinished batches."""
        return sum(len(q) for q in self.queues.values()) - len(self._finished)

    # -- out -------------------------------------------------------------------------------------------
    def sendable(self, now_ms: int) -> list:
        """The batches to send now (marked in flight), in partition and sequence order."""
        out = []
        for tp, queue in self.queues.items():
            if not queue or self.retry_at.get(tp, 0) > now_ms:
                continue
            flying = self.in_flight.get(tp, 0)
            if tp in self.retrying:
                if flying == 0:
                    out.append(queue[0])
                continue
            # one at a time until the leader knows this producer here: it takes an UNKNOWN
            # producer's batch at any sequence, so an overtaken first batch would be
            # written after its successor (then refused as out of order)
            limit = self.max_in_flight if tp in self._confirmed else 1
            if flying >= limit or flying >= len(queue):
                continue
            # only the oldest `limit` unfinished batches: answers come back in any order,
            # so this (not a count of requests) bounds what can be written after an
            # unresolved batch to the leader's 5 remembered ones
            out += [b for b in itertools.islice(queue, limit)
                    if id(b) not in self._sent and id(b) not in self._finished]
        for batch in out:
            self._mark_sent(batch)
        return out

    def _mark_sent(self, batch) -> None:
        self._sent.add(id(batch))
        self.in_flight[batch.tp] = self.in_flight.get(batch.tp, 0) + 1
        self.sent_sequence[id(batch)] = batch.base_sequence
        self.sent_behind[id(batch)] = self.queues[batch.tp][0] is not batch
        self.retry_at.pop(batch.tp, None)

    def unsend(self, batch, now_ms: int) -> None:
        """A batch that could not be sent after all (no leader actor): back off and retry."""
        self._answered(batch)
        self.retry_at[batch.tp] = now_ms + self.retry_backoff_ms

    def _answered(self, batch) -> None:
        self._sent.discard(id(batch))
        self.in_flight[batch.tp] -= 1

    # -- answers ---------------------------------------------------------------------------------------
    def on_answer(self, batch, code: int, now_ms: int) -> Outcome:
        """The leader's answer for one batch (code 0: written; the caller sets base_offset)."""
        self._answered(batch)
        tp, queue = batch.tp, self.queues[batch.tp]
        if code == NONE:
            self._confirmed.add(tp)
            if queue[0] is batch:    # the oldest unfinished one: retries are over
                self.retrying.discard(tp)
            self._finish(batch)
            return Outcome("done")
        expired = now_ms - self.first_try_ms[id(batch)] > self.delivery_timeout_ms
        if code == OUT_OF_ORDER_SEQUENCE and (
                queue[0] is not batch or self.sent_behind.get(id(batch))
                or self.sent_sequence.get(id(batch)) != batch.base_sequence):
            retriable = True     # an earlier batch was unresolved when sent, or we renumbered
        else:
            retriable = code in RESENT
        if retriable and not expired and batch.attempts < self.retries:
            batch.attempts += 1
            self.retrying.add(tp)
            self.retry_at[tp] = now_ms + self.retry_backoff_ms
            return Outcome("retry", code)
        definite = not retriable and code != OUT_OF_ORDER_SEQUENCE
        rewind = self.adjust(tp, batch) if definite else 0
        self._finish(batch)
        return Outcome("failed", code, rewind)

    def _finish(self, batch) -> None:
        """A finished batch leaves its queue once every batch before it has: the window of
        sendable batches stays anchored at the oldest unfinished one."""
        queue = self.queues[batch.tp]
        self._finished.add(id(batch))
        while queue and id(queue[0]) in self._finished:
            self._finished.discard(id(queue.popleft()))
        if len(queue) < self.max_in_flight:
            self._full.discard(batch.tp)
        if not queue:
            del self.queues[batch.tp]
            self.in_flight.pop(batch.tp, None)
            self.retrying.discard(batch.tp)
            self.retry_at.pop(batch.tp, None)
        self.first_try_ms.pop(id(batch), None)
        self.sent_sequence.pop(id(batch), None)
        self.sent_behind.pop(id(batch), None)

    def adjust(self, tp, failed) -> int:
        """The batches AFTER `failed` (not written) in its partition's queue take back its
        sequences: each is renumbered and will be re-encoded; answers how many records
        (0 without a producer id)."""
        if failed.base_sequence is None or failed.base_sequence < 0:
            return 0
        count, later = failed.record_count, False
        for batch in self.queues.get(tp, ()):
            if later and id(batch) not in self._finished:
                batch.base_sequence = (batch.base_sequence - count) & _INT32_MAX
                batch._encoded = None
            later = later or batch is failed
        return count
