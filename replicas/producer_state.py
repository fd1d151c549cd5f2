"""Producer state of one partition: idempotence, transactions and KIP-890 verification
(Kafka's ProducerStateManager, ProducerAppendInfo, ProducerStateEntry, TxnMetadata,
CompletedTxn, VerificationStateEntry, VerificationGuard).

Rules (Kafka 3.8 storage/.../internals/log/ProducerStateManager.java, ProducerAppendInfo.java,
ProducerStateEntry.java, VerificationGuard.java, VerificationStateEntry.java,
core/.../log/UnifiedLog.scala analyzeAndValidateProducerState):
- State per producer id: its producer epoch, the metadata of its last NUM_BATCHES_TO_RETAIN
  (5) batches (first seq, last seq, first offset, last offset), the coordinator epoch of the
  last end-transaction marker (-1 before any), the first offset of its open transaction
  (None when it has none) and its last timestamp (the max timestamp of its last batch, or
  its last marker's timestamp: Kafka's lastTimestamp, which DescribeProducers answers). Only batches with producer_id >= 0 take part.
- Appends have an origin (Kafka's AppendOrigin): CLIENT (a producer), COORDINATOR (the group
  or transaction coordinator: no duplicate detection, no sequence checks) or REPLICATION (a
  follower's append, a rebuild: no checks at all).
- A leader append (`prepare`) checks each batch in buffer order, as Kafka:
  1. CLIENT only: a duplicate (`findDuplicateBatch`: same epoch AND same (first seq, last
     seq) as a retained batch) answers the append with THAT batch's offsets, nothing written;
  2. a transactional data batch of a producer without an open transaction here at its epoch
     must carry the verification guard this partition handed out for that producer (KIP-890,
     when transaction.partition.verification.enable) → else INVALID_PRODUCER_EPOCH (47) for
     an epoch older than the producer's, INVALID_TXN_STATE (48) otherwise;
  3. an epoch older than the producer's → INVALID_PRODUCER_EPOCH (47);
  4. CLIENT only, sequences: while a verification is pending, a first sequence above the
     lowest one it saw → OUT_OF_ORDER_SEQUENCE_NUMBER (45); a new (higher) epoch must start
     at 0 unless the producer is unknown → 45; same epoch: first seq = last seq + 1 (wrapping
     at 2^31-1) → else 45; an unknown producer may start anywhere (KIP-360);
  5. a NON-transactional batch of a producer with an open transaction → INVALID_TXN_STATE
     (48); a transactional batch of a producer without one opens it at its base offset.
  Nothing changes until `commit` (after the log write succeeded); a rejected buffer leaves
  the state untouched. Committing ends the verification of every producer that wrote a
  transactional batch (Kafka ends it while validating, even when a later batch fails).
- An end-transaction marker (`check_marker` by the leader, then `apply_marker`;
  ProducerAppendInfo.appendEndTxnMarker): marker epoch older than the producer's →
  INVALID_PRODUCER_EPOCH (47); coordinator epoch older than the last marker's →
  TRANSACTION_COORDINATOR_FENCED (52). It closes the producer's open transaction, if any
  (a marker without one completes nothing: no index entry, no LSO change), takes the
  marker's epoch (a new epoch forgets the retained batches) and coordinator epoch, and ends
  the producer's verification. The completed transaction (CompletedTxn) carries its last
  stable offset as Kafka's lastStableOffset(completedTxn): the first offset of the
  earliest open transaction of ANOTHER producer, else the marker's offset + 1; an ABORT
  goes to the `.txnindex` of the segment holding the marker with it.
- First unstable offset (`firstUnstableOffset`): the smallest first offset among open
  transactions and completed ones whose marker is not yet below the high watermark (Kafka's
  unreplicatedTxns, dropped once the HW passes their marker: `first_unstable_offset(hw)`
  drops them lazily, the HW only rises between rebuilds). The LSO is min(that, HW).
- Verification (UnifiedLog.maybeStartTransactionVerification, Kafka 4): an epoch older than
  the producer's → INVALID_PRODUCER_EPOCH; a producer with a transaction open here AT THAT
  EPOCH needs none (None: with transaction.version 2 a new transaction comes with a bumped
  epoch, and must not join the previous one whose marker has not arrived yet); otherwise its entry is created once (a fresh guard, the
  lowest sequence and epoch seen) and returned again to every later call until a
  transactional batch or a marker of that producer is appended, the state is invalidated
  (truncation) or the shell clears the guards (this replica becomes leader or follower; a
  leader re-asserted at a new epoch keeps them): clearing on those two is rayka's (Kafka
  keeps them until producer.id.expiration.ms). A verification started for
  a transaction.version 2 client (`supports_epoch_bump`) survives a marker AT ITS EPOCH (the
  previous transaction's, written with the bumped epoch), and such a client's first batch
  of a producer unknown here must start at sequence 0 (→ OUT_OF_ORDER_SEQUENCE_NUMBER).
- Replication and rebuilds (`update`) apply batches without checks: an older data epoch is
  ignored, a transactional batch opens a transaction when none is open, a marker closes
  one; a control batch without records (a cleaned transaction) changes nothing.
- The state is derived from the log: `rebuild` replays it from its batch headers and the
  one record of each control batch; `loaded` says whether it matches the log now.
- Not modelled: producer-id expiration (producer.id.expiration.ms), snapshots.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from replicas.control import ABORT, COMMIT, CONTROL_FLAG, TRANSACTIONAL_FLAG
from replicas.errors import (InvalidProducerEpoch, InvalidTxnState, OutOfOrderSequenceNumber,
                             TransactionCoordinatorFenced)
from replicas.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF
CLIENT, COORDINATOR, REPLICATION = "client", "coordinator", "replication"   # AppendOrigin
_GUARD_IDS = itertools.count(1)       # unique over the process, as Kafka's AtomicLong


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
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1       # the last batch's max timestamp, or the last marker's

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

    def set_epoch(self, epoch: int) -> None:
        """Kafka's maybeUpdateProducerEpoch: a new epoch forgets the retained batches."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def add(self, epoch: int, batch: BatchMetadata, timestamp: int = -1) -> None:
        self.set_epoch(epoch)
        self.batches.append(batch)
        self.last_timestamp = timestamp


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int          # the marker's offset
    aborted: bool
    last_stable_offset: int   # what the `.txnindex` entry of an ABORT records


@dataclass(frozen=True, slots=True)
class VerificationGuard:
    """Names one verification of one producer on one partition (KIP-890)."""
    value: int


@dataclass(slots=True)
class VerificationState:
    guard: VerificationGuard
    lowest_sequence: int | None
    epoch: int | None
    supports_epoch_bump: bool = False

    def update(self, sequence: int | None, epoch: int | None) -> None:
        """Kafka's maybeUpdateLowestSequenceAndEpoch."""
        if sequence is None or epoch is None:
            return
        if self.epoch is None or epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence
        elif epoch == self.epoch and (self.lowest_sequence is None
                                      or sequence < self.lowest_sequence):
            self.lowest_sequence = sequence


@dataclass(frozen=True, slots=True)
class ProducerAppend:
    """What `prepare` decided: a duplicate to answer with, or the changes to commit."""

    duplicate: BatchMetadata | None = None
    # (producer id, epoch, batch, its max timestamp)
    updates: tuple[tuple[int, int, BatchMetadata, int], ...] = ()
    txn_starts: tuple[tuple[int, int], ...] = ()               # (producer id, first offset)
    verified: tuple[int, ...] = ()       # producers whose verification this append ends


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _metadata(header: BatchHeader, first_offset: int) -> BatchMetadata:
    return BatchMetadata(header.base_sequence, header.last_sequence, first_offset,
                         first_offset + header.last_offset_delta)


class ProducerStateManager:
    """Producer id → ProducerEntry for one partition replica, plus its transactions."""

    def __init__(self, verification_enabled: bool = True) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}                       # first offset -> producer id
        self._unreplicated: dict[int, tuple[int, int]] = {}      # first -> (producer, marker)
        self._verifications: dict[int, VerificationState] = {}
        self.verification_enabled = verification_enabled
        self.loaded = False

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    @property
    def producer_ids(self) -> list[int]:
        return sorted(self._entries)

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Open transactions: first offset → producer id, oldest first."""
        return dict(sorted(self._ongoing.items()))

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None
                                ) -> bool:
        """An open transaction (at `producer_epoch`, when given)."""
        entry = self._entries.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None \
            and (producer_epoch is None or entry.epoch == producer_epoch)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Kafka's firstUnstableOffset after onHighWatermarkUpdated(high_watermark)."""
        if self._unreplicated:
            passed = [f for f, (_, last) in self._unreplicated.items() if last < high_watermark]
            for first in passed:
                del self._unreplicated[first]
        if not self._ongoing and not self._unreplicated:
            return None
        return min(itertools.chain(self._ongoing, self._unreplicated))

    # -- verification (KIP-890) ------------------------------------------------------------
    def maybe_start_verification(self, producer_id: int, producer_epoch: int | None = None,
                                 base_sequence: int | None = None,
                                 supports_epoch_bump: bool = False) -> VerificationGuard | None:
        entry = self._entries.get(producer_id)
        if entry is not None and producer_epoch is not None and producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(f"producer {producer_id}: epoch {producer_epoch} is "
                                       f"older than the current epoch {entry.epoch}")
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return None
        state = self._verifications.get(producer_id)
        if state is None:
            state = self._verifications[producer_id] = VerificationState(
                VerificationGuard(next(_GUARD_IDS)), base_sequence, producer_epoch,
                supports_epoch_bump)
        state.update(base_sequence, producer_epoch)
        return state.guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        state = self._verifications.get(producer_id)
        return None if state is None else state.guard

    def clear_verifications(self) -> None:
        self._verifications.clear()

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

    def prepare(self, headers: Sequence[BatchHeader], first_offset: int, origin: str = CLIENT,
                guard: VerificationGuard | None = None) -> ProducerAppend:
        """Check data batches whose first will get `first_offset` (see module rules);
        raises the typed Kafka error of the first check that fails."""
        working: dict[int, list] = {}     # producer id -> [epoch, last seq, txn first offset]
        updates: list[tuple[int, int, BatchMetadata, int]] = []
        starts: list[tuple[int, int]] = []
        verified: list[int] = []
        offset = first_offset
        for header in headers:
            base, offset = offset, offset + header.last_offset_delta + 1
            pid = header.producer_id
            if pid == NO_PRODUCER_ID or pid < 0:
                continue
            current = self._entries.get(pid)
            if origin == CLIENT and current is not None:
                duplicate = current.find_duplicate(header.producer_epoch, header.base_sequence,
                                                   header.last_sequence)
                if duplicate is not None:
                    return ProducerAppend(duplicate=duplicate)
            transactional = bool(header.attributes & TRANSACTIONAL_FLAG)
            if transactional and origin != REPLICATION and self.verification_enabled \
                    and not self.has_ongoing_transaction(pid, header.producer_epoch) \
                    and not self._verified(pid, guard):
                if current is not None and header.producer_epoch < current.epoch:
                    raise InvalidProducerEpoch(   # a stale epoch first (Kafka 4)
                        f"producer {pid}: epoch {header.producer_epoch} is older than the "
                        f"current epoch {current.epoch}")
                held = self._verifications.get(pid)
                raise InvalidTxnState(
                    f"producer {pid}: record was not part of an ongoing transaction (no valid "
                    f"verification guard: {guard.value if guard else None} given, "
                    f"{held.guard.value if held else None} held at epoch "
                    f"{held.epoch if held else None}; batch epoch {header.producer_epoch}, "
                    f"producer epoch {current.epoch if current else None}, transaction here "
                    f"{'open' if current and current.current_txn_first_offset is not None else 'not open'})")
            so_far = working.get(pid)
            self._check(pid, header, current, None if so_far is None else so_far[:2],
                        origin, self._verifications.get(pid))
            txn_first = so_far[2] if so_far is not None else (
                current.current_txn_first_offset if current is not None else None)
            if txn_first is not None and not transactional:
                raise InvalidTxnState(f"producer {pid}: expected a transactional write at "
                                      f"offset {base}: its transaction from {txn_first} is open")
            if txn_first is None and transactional:
                txn_first = base
                starts.append((pid, base))
            if transactional and pid not in verified:
                verified.append(pid)
            working[pid] = [header.producer_epoch, header.last_sequence, txn_first]
            updates.append((pid, header.producer_epoch, _metadata(header, base),
                            header.max_timestamp))
        return ProducerAppend(updates=tuple(updates), txn_starts=tuple(starts),
                              verified=tuple(verified))

    def _verified(self, pid: int, guard: VerificationGuard | None) -> bool:
        """Kafka's VerificationGuard.verify: the guard handed out for this producer."""
        state = self._verifications.get(pid)
        return guard is not None and state is not None and state.guard == guard

    @staticmethod
    def _check(pid: int, header: BatchHeader, current: ProducerEntry | None,
               so_far: list | None, origin: str = CLIENT,
               verification: VerificationState | None = None) -> None:
        current_epoch = current.epoch if current is not None else NO_PRODUCER_EPOCH
        updated_epoch = so_far[0] if so_far is not None else current_epoch
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if epoch < updated_epoch:
            raise InvalidProducerEpoch(
                f"producer {pid}: epoch {epoch} is older than the current epoch {updated_epoch}")
        if origin != CLIENT:
            return
        if verification is not None and verification.supports_epoch_bump \
                and first_seq != 0 and (current is None or not current.batches):
            raise OutOfOrderSequenceNumber(
                f"producer {pid}: sequence {first_seq}, expected 0 for a transaction version 2 "
                "producer with no state here")
        if verification is not None and verification.lowest_sequence is not None \
                and first_seq > verification.lowest_sequence:
            raise OutOfOrderSequenceNumber(
                f"producer {pid}: sequence {first_seq} is above {verification.lowest_sequence}, "
                "the earliest seen while its transaction is verified")
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
        for pid, epoch, batch, timestamp in append.updates:
            entry = self._entries.get(pid)
            if entry is None:
                entry = self._entries[pid] = ProducerEntry(pid, epoch)
            entry.add(epoch, batch, timestamp)
        for pid, first in append.txn_starts:
            self._start_txn(self._entries[pid], first)
        for pid in append.verified:
            self._verifications.pop(pid, None)

    def _start_txn(self, entry: ProducerEntry, first_offset: int) -> None:
        entry.current_txn_first_offset = first_offset
        self._ongoing[first_offset] = entry.producer_id

    # -- end-transaction markers ---------------------------------------------------------
    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """A coordinator's marker, before it is written (see module rules); raises."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {producer_id}: marker epoch {producer_epoch} is older than the "
                f"current epoch {entry.epoch}")
        if entry.coordinator_epoch > coordinator_epoch:
            raise TransactionCoordinatorFenced(
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} (zombie) is "
                f"older than {entry.coordinator_epoch} (current)")

    def apply_marker(self, producer_id: int, producer_epoch: int, control_type: int,
                     coordinator_epoch: int, offset: int,
                     timestamp: int = -1) -> CompletedTxn | None:
        """A marker written at `offset`: the transaction it completed, if one was open."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = ProducerEntry(producer_id, producer_epoch)
        completed = None
        first = entry.current_txn_first_offset
        if first is not None and control_type in (ABORT, COMMIT):
            others = [f for f, pid in self._ongoing.items() if pid != producer_id]
            completed = CompletedTxn(producer_id, first, offset, control_type == ABORT,
                                     min(others) if others else offset + 1)
            self._ongoing.pop(first, None)
            self._unreplicated[first] = (producer_id, offset)
        entry.set_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        entry.last_timestamp = timestamp
        state = self._verifications.get(producer_id)
        if state is None or not state.supports_epoch_bump or state.epoch != producer_epoch:
            # a version 2 client's next transaction, verified at the marker's (bumped)
            # epoch, goes on being verified (UnifiedLog.updateProducers)
            self._verifications.pop(producer_id, None)
        return completed

    # -- replication, recovery -------------------------------------------------------------
    def update(self, header: BatchHeader, marker: tuple[int, int] | None = None
               ) -> CompletedTxn | None:
        """Apply one batch as written in the log (its BaseOffset is its real offset);
        `marker` = (control type, coordinator epoch) of a control batch, None if it has no
        record. Returns the transaction a marker completed."""
        pid = header.producer_id
        if pid < 0:
            return None
        if header.attributes & CONTROL_FLAG:
            if marker is None:
                return None
            return self.apply_marker(pid, header.producer_epoch, marker[0], marker[1],
                                     header.base_offset, header.max_timestamp)
        entry = self._entries.get(pid)
        if entry is None:
            entry = self._entries[pid] = ProducerEntry(pid, header.producer_epoch)
        elif header.producer_epoch < entry.epoch:
            return None
        entry.add(header.producer_epoch, _metadata(header, header.base_offset),
                  header.max_timestamp)
        if header.attributes & TRANSACTIONAL_FLAG:
            self._verifications.pop(pid, None)
            if entry.current_txn_first_offset is None:
                self._start_txn(entry, header.base_offset)
        return None

    def update_all(self, headers: Iterable[BatchHeader]) -> None:
        """Data batches only (a control batch here is taken as one without records)."""
        for header in headers:
            self.update(header)

    def rebuild(self, headers: Iterable[BatchHeader],
                marker_of: Callable[[BatchHeader], tuple[int, int] | None] | None = None
                ) -> list[CompletedTxn]:
        """Forget everything and replay the log's batches, oldest first; `marker_of` reads a
        control batch's (type, coordinator epoch). Returns the completed transactions."""
        self._reset()
        completed = []
        for header in headers:
            marker = marker_of(header) if marker_of is not None and \
                header.attributes & CONTROL_FLAG and header.producer_id >= 0 else None
            txn = self.update(header, marker)
            if txn is not None:
                completed.append(txn)
        self.loaded = True
        return completed

    def _reset(self) -> None:
        self._entries.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def invalidate(self) -> None:
        """The log changed under us (truncation, new log): rebuild before the next use.
        Pending verifications end too."""
        self._reset()
        self._verifications.clear()
        self.loaded = False
