"""TransactionManager: a transactional producer's side of Kafka's transactions, pure (no Ray,
no clock): its state, what the current transaction holds, and which coordinator answers
mean what (Kafka 3.8's clients/.../producer/internals/TransactionManager.java).

Rules:
- States and their valid previous states are data (`VALID_PREVIOUS`); `transition(to)`
  rejects the rest with InvalidTxnState (a caller's misuse: begin twice, commit without a
  transaction, send before init_transactions).
- UNINITIALIZED → INITIALIZING (init_transactions) → READY (the coordinator's producer id
  and epoch) → IN_TRANSACTION (begin_transaction) → COMMITTING / ABORTING → READY.
  An error inside a transaction makes it ABORTABLE_ERROR (only abort_transaction may
  follow); a fencing error makes it FATAL_ERROR for good (the producer must be closed).
- Partitions join the transaction before their first batch is sent (`to_add` names the
  partitions a batch needs that are not in yet; `added` records the coordinator's yes);
  a group's offsets join through AddOffsetsToTxn.
- Answers (`classify`): NONE; retriable (CONCURRENT_TRANSACTIONS,
  COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, UNKNOWN_SERVER_ERROR
  while a coordinator restarts: try again after a back-off); find the coordinator again
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE); fatal (PRODUCER_FENCED,
  INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING,
  TRANSACTION_COORDINATOR_FENCED, CLUSTER_AUTHORIZATION_FAILED); anything else abortable.
- KIP-360: a transaction that failed on OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID
  is aborted, then the producer bumps its epoch (InitProducerId with its current id and
  epoch) and its sequences start again at 0 (`needs_epoch_bump`).
"""

from __future__ import annotations

import enum

from replicas.errors import ErrorCode as E
from replicas.errors import InvalidTxnState, KafkaError, error_for_code


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.READY, S.ABORTING}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING, S.ABORTING}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING: frozenset({S.IN_TRANSACTION}),
    S.ABORTING: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(S),
}

RETRY = "retry"
REDISCOVER = "rediscover"
FATAL = "fatal"
ABORTABLE = "abortable"
DONE = "done"

RETRIABLE = {E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.REQUEST_TIMED_OUT,
             E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.UNKNOWN_SERVER_ERROR}
FIND_AGAIN = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE}
FATAL_CODES = {E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH,
               E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.INVALID_PRODUCER_ID_MAPPING,
               E.TRANSACTION_COORDINATOR_FENCED, E.CLUSTER_AUTHORIZATION_FAILED}
EPOCH_BUMP_CODES = {E.OUT_OF_ORDER_SEQUENCE_NUMBER, E.UNKNOWN_PRODUCER_ID}


def classify(code: int) -> str:
    if code == E.NONE:
        return DONE
    if code in RETRIABLE:
        return RETRY
    if code in FIND_AGAIN:
        return REDISCOVER
    if code in FATAL_CODES:
        return FATAL
    return ABORTABLE


class TransactionManager:
    def __init__(self, transactional_id: str, transaction_timeout_ms: int):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = S.UNINITIALIZED
        self.producer_id, self.producer_epoch = -1, -1
        self.partitions: set[tuple[str, int]] = set()
        self.error: KafkaError | None = None
        self.needs_epoch_bump = False
        self.offsets_added = False            # AddOffsetsToTxn answered in this transaction

    # -- states ----------------------------------------------------------------------------------
    def transition(self, to: TxnState) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            if self.state is S.FATAL_ERROR and self.error is not None:
                raise self.error
            if self.state is S.ABORTABLE_ERROR and self.error is not None and to is S.COMMITTING:
                raise self.error
            raise InvalidTxnState(f"transactional producer {self.transactional_id!r}: "
                                  f"cannot go from {self.state.value} to {to.value}")
        self.state = to

    def require(self, *states: TxnState) -> None:
        if self.state not in states:
            if self.state in (S.FATAL_ERROR, S.ABORTABLE_ERROR) and self.error is not None:
                raise self.error
            raise InvalidTxnState(f"transactional producer {self.transactional_id!r} is "
                                  f"{self.state.value}, not {' or '.join(s.value for s in states)}")

    # -- the coordinator's answers ---------------------------------------------------------------
    def initialized(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.needs_epoch_bump = False
        self.partitions.clear()
        self.offsets_added = False
        self.transition(S.READY)

    def to_add(self, partitions) -> list[tuple[str, int]]:
        """The partitions (of batches about to be sent) not in the transaction yet."""
        return sorted({tuple(tp) for tp in partitions} - self.partitions)

    def added(self, partitions) -> None:
        self.partitions.update(tuple(tp) for tp in partitions)

    @property
    def started(self) -> bool:
        """The coordinator knows of this transaction (a partition or a group joined it): its
        end needs an EndTxn (Kafka's transactionStarted)."""
        return bool(self.partitions) or self.offsets_added

    def completed(self) -> None:
        """The coordinator wrote the transaction's end (EndTxn answered NONE)."""
        self.partitions.clear()
        self.offsets_added = False
        self.error = None
        self.transition(S.READY)

    def fail(self, code: int, what: str) -> KafkaError:
        """A request of the transaction failed for good with `code`: the state moves to
        ABORTABLE_ERROR or FATAL_ERROR; the typed error (also kept in `error`)."""
        error = error_for_code(code, f"transactional producer {self.transactional_id!r}: "
                                     f"{what}: {E(code).name}")
        if code in EPOCH_BUMP_CODES:
            self.needs_epoch_bump = True
        if classify(code) == FATAL:
            self.error = error
            self.state = S.FATAL_ERROR
        elif self.state in (S.IN_TRANSACTION, S.COMMITTING, S.ABORTABLE_ERROR):
            self.error = error
            self.state = S.ABORTABLE_ERROR
        return error

    @property
    def in_transaction(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.COMMITTING, S.ABORTING, S.ABORTABLE_ERROR)
