"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, no transactions).

Rules (Kafka's record and log formats; Kafka 3.8 `ProducerStateManager` / `ProducerAppendInfo`):
- State per producer id: its current producer epoch and the metadata of its last
  NUM_BATCHES_TO_RETAIN (5) batches: (first seq, last seq, first offset, last offset).
- Only batches with producer_id >= 0 take part; others are ignored.
- A leader append (`prepare`, origin CLIENT) checks each batch in buffer order:
  1. duplicate (`findDuplicateBatch`): same producer epoch AND same (first seq, last seq)
     as one of the retained batches → the append is answered with THAT batch's offsets and
     nothing is written (the first duplicate found wins, as in Kafka);
  2. producer epoch older than the current one → InvalidProducerEpoch (47);
  3. a new (higher) epoch must start at sequence 0, unless the producer is unknown
     → else OutOfOrderSequenceNumber (45);
  4. same epoch: first seq must be last seq + 1 (with wrap-around at 2^31-1), where "last"
     is the previous batch of this buffer, or the retained state; an unknown producer id
     may start at any sequence (KIP-360: state may have been lost to retention).
  Nothing changes until `commit` is called with the prepared append (after the log write
  succeeded), so a rejected buffer leaves the state untouched.
- Replication and rebuilds (`update`, origin REPLICATION/recovery) apply batch headers
  without checks; a newer epoch resets the retained batches, an older one is ignored.
- The state is derived from the log: it is rebuilt by scanning batch headers (`rebuild`)
  after opening a log and after any truncation removed data; `loaded` says whether the
  in-memory state currently matches the log.
- Not modelled: producer-id expiration (producer.id.expiration.ms), snapshots, transactions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from replicas.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber
from replicas.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()
        self.batches.append(batch)


@dataclass(frozen=True, slots=True)
class ProducerAppend:
    """What `prepare` decided: a duplicate to answer with, or the updates to commit."""

    duplicate: BatchMetadata | None = None
    updates: tuple[tuple[int, int, BatchMetadata], ...] = ()   # (producer id, epoch, batch)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _metadata(header: BatchHeader, first_offset: int) -> BatchMetadata:
    return BatchMetadata(header.base_sequence, header.last_sequence, first_offset,
                         first_offset + header.last_offset_delta)


class ProducerStateManager:
    """Producer id → ProducerEntry for one partition replica."""

    def __init__(self) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        self.loaded = False

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    @property
    def producer_ids(self) -> list[int]:
        return sorted(self._entries)

    # -- leader side ---------------------------------------------------------------------
    def ahead(self, headers: Iterable[BatchHeader]) -> bool:
        """Is the first idempotent batch PAST its producer's next sequence (same epoch, a
        gap of less than 2^30)? Then a request of the same producer that should precede it
        has not been appended yet (Ray's threaded actor may start two calls out of order)
        and the shell may wait briefly for the gap to close before appending."""
        for h in headers:
            if h.producer_id < 0:
                continue
            entry = self._entries.get(h.producer_id)
            if entry is None or not entry.batches or entry.epoch != h.producer_epoch:
                return False
            gap = (h.base_sequence - entry.last_seq - 1) & INT32_MAX
            return 0 < gap < 1 << 30
        return False

    def prepare(self, headers: Sequence[BatchHeader], first_offset: int) -> ProducerAppend:
        """Check a client buffer whose first batch will get `first_offset`; raises on error."""
        working: dict[int, tuple[int, int]] = {}   # producer id -> (epoch, last seq) so far
        updates: list[tuple[int, int, BatchMetadata]] = []
        offset = first_offset
        for header in headers:
            base, offset = offset, offset + header.last_offset_delta + 1
            pid = header.producer_id
            if pid == NO_PRODUCER_ID or pid < 0:
                continue
            current = self._entries.get(pid)
            if current is not None:
                duplicate = current.find_duplicate(header.producer_epoch, header.base_sequence,
                                                   header.last_sequence)
                if duplicate is not None:
                    return ProducerAppend(duplicate=duplicate)
            self._check(pid, header, current, working.get(pid))
            working[pid] = (header.producer_epoch, header.last_sequence)
            updates.append((pid, header.producer_epoch, _metadata(header, base)))
        return ProducerAppend(updates=tuple(updates))

    @staticmethod
    def _check(pid: int, header: BatchHeader, current: ProducerEntry | None,
               so_far: tuple[int, int] | None) -> None:
        current_epoch = current.epoch if current is not None else NO_PRODUCER_EPOCH
        updated_epoch = so_far[0] if so_far is not None else current_epoch
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if epoch < updated_epoch:
            raise InvalidProducerEpoch(
                f"producer {pid}: epoch {epoch} is older than the current epoch {updated_epoch}")
        if epoch != updated_epoch:
            if first_seq != 0 and updated_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumber(
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, got {first_seq}")
            return
        if so_far is not None:
            last_seq = so_far[1]
        elif current is not None and epoch == current.epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceNumber(
                f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow {last_seq}")

    def commit(self, append: ProducerAppend) -> None:
        for pid, epoch, batch in append.updates:
            entry = self._entries.get(pid)
            if entry is None:
                entry = self._entries[pid] = ProducerEntry(pid, epoch)
            entry.add(epoch, batch)

    # -- replication, recovery -------------------------------------------------------------
    def update(self, header: BatchHeader) -> None:
        """Apply one batch as written in the log (its BaseOffset is its real offset)."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._entries.get(pid)
        if entry is None:
            entry = self._entries[pid] = ProducerEntry(pid, header.producer_epoch)
        elif header.producer_epoch < entry.epoch:
            return
        entry.add(header.producer_epoch, _metadata(header, header.base_offset))

    def update_all(self, headers: Iterable[BatchHeader]) -> None:
        for header in headers:
            self.update(header)

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Forget everything and replay the log's batch headers, oldest first."""
        self._entries.clear()
        self.update_all(headers)
        self.loaded = True

    def invalidate(self) -> None:
        """The log changed under us (truncation, new log): rebuild before the next use."""
        self._entries.clear()
        self.loaded = False
