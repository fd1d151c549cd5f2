"""One transactional id's metadata and its two-step transitions (Kafka 3.8's
TransactionMetadata.scala).

Rules:
- A change is PREPARED, written, then COMPLETED: a `prepare_*` helper checks the transition
  against transactions/states.py's table, sets `pending_state` and returns the target as a
  frozen `TxnTransitMetadata` (what is appended to `__transaction_state`); the metadata itself
  changes only in `complete_transition_to`, once the append succeeded. A failed append clears
  `pending_state` (transactions/storage.py). While a transition is pending no other may be
  prepared: the coordinator answers CONCURRENT_TRANSACTIONS first (prepare raises if it is
  asked anyway, as Kafka's prepareTransitionTo throws).
- The transitions, with their producer id/epoch rules:
  `prepare_increment_producer_epoch` (InitProducerId → Empty): no expected epoch → epoch + 1,
  last epoch -1; expected = current (or no current epoch yet) → epoch + 1, last epoch = the
  current one; expected = last epoch → the same epoch again (a retried bump, KIP-360); any
  other → PRODUCER_FENCED. Raises if the epoch is exhausted (≥ Short.MaxValue - 1).
  `prepare_producer_id_rotation` (exhausted epoch → a new producer id at epoch 0; the last
  epoch is recorded when the client gave its epoch). `prepare_fence_producer_epoch`
  (Ongoing → PrepareEpochFence with epoch + 1, or the same epoch again after a fence whose
  write failed: that epoch was never returned to a client). `prepare_add_partitions`
  (→ Ongoing with the union of the partitions; the start timestamp is set when the
  transaction begins, from Empty/Complete*). `prepare_abort_or_commit` (→ Prepare*).
  `prepare_complete` (Prepare* → Complete*, no partitions left). `prepare_dead` (expiry).
- `complete_transition_to` checks the transit as Kafka does (the pending state matches; an
  epoch may only stay, grow by one or restart at 0 with a new producer id; partitions only
  grow until the end; timeouts and start timestamps stay) and raises
  IllegalTransactionState otherwise. Completing Empty keeps the old start timestamp in memory
  (the log says -1), as Kafka's completeTransitionTo does.
- The log value (`to_log_value`) holds no last producer epoch, so a metadata read back from
  the log has it at -1 (TransactionLog.readTxnRecordValue); v1's tags give the last and next
  producer ids and the client's transaction version (Kafka writes only the last of them).
- Transaction version 2 (KIP-890 part 2; Kafka 4's TransactionMetadata.java), chosen per
  request by the client (`tv`, stored as `client_transaction_version`):
  `prepare_abort_or_commit` bumps the epoch (last epoch = the old one) and names the next
  producer id when the bump exhausts the epoch; `prepare_complete` then moves to that id at
  epoch 0. Aborting with no partitions added (from Empty/Complete*) starts the transaction
  at the abort's time. `complete_transition_to` checks a Prepare* by its last epoch (the
  bump) and an overflowing Complete* by its last producer id. Every transition sets the last
  producer id to the id it left (Kafka's prevProducerId).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replicas.errors import ErrorCode as E
from transactions.records import TransactionLogValue
from transactions.states import OPEN, TransactionState, transition

T = TransactionState
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
SHORT_MAX = 2**15 - 1

TopicPartition = tuple[str, int]


class IllegalTransactionState(Exception):
    """Kafka's IllegalStateException / IllegalArgumentException of TransactionMetadata."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No client may use Short.MaxValue: the coordinator must always be able to fence."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def to_log_value(self) -> TransactionLogValue:
        """TransactionLog.valueToBytes: Empty is written with a null partitions array."""
        if self.txn_state is T.EMPTY and self.partitions:
            raise IllegalTransactionState(f"an Empty transaction with partitions: {self}")
        return log_value(self.producer_id, self.producer_epoch, self.txn_timeout_ms,
                         self.txn_state, self.partitions, self.txn_last_update_timestamp_ms,
                         self.txn_start_timestamp_ms, self.client_transaction_version)


def log_value(producer_id: int, producer_epoch: int, timeout_ms: int, state: TransactionState,
              partitions, last_update_ms: int, start_ms: int,
              client_transaction_version: int = 0) -> TransactionLogValue:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = None if state is T.EMPTY else tuple((t, tuple(ps)) for t, ps in by_topic.items())
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, state.id, parts,
                               last_update_ms, start_ms, client_transaction_version)


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = NO_TIMESTAMP
    txn_last_update_timestamp_ms: int = NO_TIMESTAMP
    pending_state: TransactionState | None = None
    # the last fence's write failed: its epoch was never returned, so the next fence reuses it
    has_failed_epoch_fence: bool = False
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @classmethod
    def from_log_value(cls, transactional_id: str, v: TransactionLogValue
                       ) -> "TransactionMetadata":
        """TransactionLog.readTxnRecordValue; raises ValueError for an unknown state id."""
        state = TransactionState(v.transaction_status)
        partitions = set() if state is T.EMPTY else {
            (topic, p) for topic, ids in (v.transaction_partitions or ()) for p in ids}
        return cls(transactional_id, v.producer_id, v.previous_producer_id, v.producer_epoch,
                   NO_PRODUCER_EPOCH, v.transaction_timeout_ms, state, partitions,
                   v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                   next_producer_id=v.next_producer_id,
                   client_transaction_version=v.client_transaction_version)

    def to_log_value(self) -> TransactionLogValue:
        """What the log would hold for the metadata as it is now."""
        return log_value(self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
                         self.partitions, self.txn_last_update_timestamp_ms,
                         self.txn_start_timestamp_ms, self.client_transaction_version)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # -- prepare ----------------------------------------------------------------------------
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransactionState("cannot fence producer with epoch equal to "
                                          "Short.MaxValue since this would overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(T.PREPARE_EPOCH_FENCE, self.producer_id, bumped,
                                           NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                                           frozenset(self.partitions),
                                           self.txn_start_timestamp_ms,
                                           self.txn_last_update_timestamp_ms)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int,
                                         expected_producer_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | int:
        """The Empty transit, or the error code PRODUCER_FENCED."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionState(
                f"cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH \
                or expected_producer_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return E.PRODUCER_FENCED
        return self._prepare_transition_to(T.EMPTY, self.producer_id, epoch, last_epoch,
                                           new_txn_timeout_ms, frozenset(), NO_TIMESTAMP, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int,
                                     now_ms: int, record_last_epoch: bool) -> TxnTransitMetadata:
        if self.state in OPEN:
            raise IllegalTransactionState("cannot rotate producer ids while a transaction is "
                                          "still pending")
        return self._prepare_transition_to(
            T.EMPTY, new_producer_id, 0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms, frozenset(), NO_TIMESTAMP, now_ms)

    def prepare_add_partitions(self, added, now_ms: int, tv: int = 0) -> TxnTransitMetadata:
        begins = self.state in (T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT)
        return self._prepare_transition_to(
            T.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.txn_timeout_ms, frozenset(self.partitions) | frozenset(added),
            now_ms if begins else self.txn_start_timestamp_ms, now_ms, tv=tv)

    def prepare_abort_or_commit(self, new_state: TransactionState, now_ms: int, tv: int = 0,
                                next_producer_id: int = NO_PRODUCER_ID,
                                no_partition_added: bool = False) -> TxnTransitMetadata:
        if tv >= 2:        # the epoch is bumped at the end of every transaction
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare_transition_to(new_state, self.producer_id, epoch, last_epoch,
                                           self.txn_timeout_ms, frozenset(self.partitions),
                                           now_ms if no_partition_added
                                           else self.txn_start_timestamp_ms, now_ms,
                                           next_producer_id=next_producer_id, tv=tv)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        new_state = T.COMPLETE_COMMIT if self.state is T.PREPARE_COMMIT else T.COMPLETE_ABORT
        # the Prepare* record is durable: the fence it carried is no longer a failed one
        self.has_failed_epoch_fence = False
        producer_id, epoch = self.producer_id, self.producer_epoch
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0    # the bump exhausted the epoch
        return self._prepare_transition_to(new_state, producer_id, epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(), self.txn_start_timestamp_ms, now_ms,
                                           next_producer_id=NO_PRODUCER_ID)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare_transition_to(T.DEAD, self.producer_id, self.producer_epoch,
                                           self.last_producer_epoch, self.txn_timeout_ms,
                                           frozenset(), self.txn_start_timestamp_ms,
                                           self.txn_last_update_timestamp_ms)

    def _prepare_transition_to(self, new_state: TransactionState, new_producer_id: int,
                               new_epoch: int, new_last_epoch: int, new_timeout_ms: int,
                               new_partitions: frozenset, new_start_ms: int,
                               update_ms: int, next_producer_id: int | None = None,
                               tv: int | None = None) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionState(
                f"preparing transaction state transition to {new_state.state_name} while it "
                f"already has a pending state {self.pending_state.state_name}")
        if new_producer_id < 0:
            raise IllegalTransactionState(f"illegal new producer id {new_producer_id}")
        if new_state is not T.DEAD and new_epoch < 0:
            raise IllegalTransactionState(f"illegal new producer epoch {new_epoch}")
        transition(self.transactional_id, self.state, new_state)
        self.pending_state = new_state
        return TxnTransitMetadata(
            new_producer_id, self.producer_id, new_epoch, new_last_epoch, new_timeout_ms,
            new_state, new_partitions, new_start_ms, update_ms,
            self.next_producer_id if next_producer_id is None else next_producer_id,
            self.client_transaction_version if tv is None else tv)

    # -- complete ---------------------------------------------------------------------------
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransactionState(f"{self.transactional_id} completing a transition "
                                          "while it has no pending state")
        if to_state is not t.txn_state:
            self._fail(t)
        same_producer = t.producer_epoch == self.producer_epoch \
            and t.producer_id == self.producer_id
        tv2 = t.client_transaction_version >= 2
        if to_state is T.EMPTY:
            bump = t.producer_epoch == self.producer_epoch + 1 \
                or (t.producer_epoch == 0 and t.producer_id != self.producer_id)
            if (self.producer_epoch != t.producer_epoch and not bump) or t.partitions \
                    or t.txn_start_timestamp_ms != NO_TIMESTAMP:
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.last_producer_id = t.last_producer_id
        elif to_state is T.ONGOING:
            if not same_producer or not self.partitions <= t.partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t)
            self.txn_start_timestamp_ms = t.txn_start_timestamp_ms
            self.partitions |= t.partitions
        elif to_state in (T.PREPARE_ABORT, T.PREPARE_COMMIT):
            valid = (t.last_producer_epoch == self.producer_epoch
                     and t.producer_id == self.producer_id) if tv2 else same_producer
            empty_abort = to_state is T.PREPARE_ABORT and tv2 \
                and self.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT)
            if not valid or self.partitions != t.partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms \
                    or not (empty_abort
                            or self.txn_start_timestamp_ms == t.txn_start_timestamp_ms):
                self._fail(t)
            self.txn_start_timestamp_ms = t.txn_start_timestamp_ms
        elif to_state in (T.COMPLETE_ABORT, T.COMPLETE_COMMIT):
            overflow = tv2 and t.producer_epoch == 0
            valid = (t.last_producer_epoch == self.last_producer_epoch
                     and t.last_producer_id == self.producer_id) if overflow else same_producer
            if not valid or self.txn_timeout_ms != t.txn_timeout_ms \
                    or t.txn_start_timestamp_ms == NO_TIMESTAMP:
                self._fail(t)
            self.txn_start_timestamp_ms = t.txn_start_timestamp_ms
            self.partitions.clear()
        else:
            # PrepareEpochFence is replaced by PrepareAbort before anything is written; a
            # Dead transition ends with the removal from the cache, never here
            self._fail(t)
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.next_producer_id = t.next_producer_id
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp_ms = t.txn_last_update_timestamp_ms
        self.pending_state = None
        self.state = to_state

    def _fail(self, t: TxnTransitMetadata):
        raise IllegalTransactionState(f"{self} failed transition to {t} due to unexpected "
                                      "metadata")
