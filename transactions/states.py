"""The eight states of a transactional id and their valid transitions, as data.

Rules (Kafka 3.8's TransactionMetadata.scala, `TransactionState` and `validPreviousStates`,
with Kafka 4's PrepareAbort entered from Empty and Complete* too, KIP-890 part 2):
- Each state keeps Kafka's id (the byte written as TransactionStatus in `__transaction_state`,
  transactions/records.py) and Kafka's name (what DescribeTransactions and ListTransactions
  print): Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3, CompleteCommit 4,
  CompleteAbort 5, Dead 6, PrepareEpochFence 7.
- Each state lists the states it may be ENTERED FROM:
    Empty             <- Empty, CompleteCommit, CompleteAbort
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit     <- Ongoing
    PrepareAbort      <- Ongoing, PrepareEpochFence
    CompleteCommit    <- PrepareCommit
    CompleteAbort     <- PrepareAbort
    Dead              <- Empty, CompleteAbort, CompleteCommit
    PrepareEpochFence <- Ongoing
- A transactional id may expire (transactional.id.expiration.ms) only in Empty,
  CompleteCommit and CompleteAbort (Kafka's `isExpirationAllowed`).
- One helper, `transition`, decides; callers never hand-code the rule. An invalid transition
  RAISES `InvalidTransactionTransition` (Kafka's prepareTransitionTo throws
  IllegalStateException): a coordinator that reaches it has a bug, and going on would
  write a wrong state to the log.
"""

from __future__ import annotations

import enum
from typing import Mapping


class TransactionState(enum.Enum):
    """Kafka's TransactionState: the value is Kafka's id; `state_name` is Kafka's name."""

    state_name: str
    expiration_allowed: bool

    def __new__(cls, state_id: int, state_name: str, expiration_allowed: bool = False):
        member = object.__new__(cls)
        member._value_ = state_id
        member.state_name = state_name
        member.expiration_allowed = expiration_allowed
        return member

    EMPTY = 0, "Empty", True
    ONGOING = 1, "Ongoing"
    PREPARE_COMMIT = 2, "PrepareCommit"
    PREPARE_ABORT = 3, "PrepareAbort"
    COMPLETE_COMMIT = 4, "CompleteCommit", True
    COMPLETE_ABORT = 5, "CompleteAbort", True
    DEAD = 6, "Dead"
    PREPARE_EPOCH_FENCE = 7, "PrepareEpochFence"

    @property
    def id(self) -> int:
        return self.value

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        """Kafka's `fromName`: exact, case-sensitive; None for an unknown name."""
        return _BY_NAME.get(name)

    def __repr__(self) -> str:
        return self.state_name


T = TransactionState
_BY_NAME = {s.state_name: s for s in TransactionState}

VALID_PREVIOUS: Mapping[TransactionState, frozenset[TransactionState]] = {
    T.EMPTY: frozenset({T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}),
    T.ONGOING: frozenset({T.ONGOING, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}),
    T.PREPARE_COMMIT: frozenset({T.ONGOING}),
    # Empty/Complete*: transaction.version 2 lets a client abort with no partitions added
    T.PREPARE_ABORT: frozenset({T.ONGOING, T.PREPARE_EPOCH_FENCE, T.EMPTY, T.COMPLETE_COMMIT,
                                T.COMPLETE_ABORT}),
    T.COMPLETE_COMMIT: frozenset({T.PREPARE_COMMIT}),
    T.COMPLETE_ABORT: frozenset({T.PREPARE_ABORT}),
    T.DEAD: frozenset({T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT}),
    T.PREPARE_EPOCH_FENCE: frozenset({T.ONGOING}),
}

# Prepare* and Ongoing: a transaction is open (Kafka's `hasPendingTransaction`).
OPEN = frozenset({T.ONGOING, T.PREPARE_COMMIT, T.PREPARE_ABORT})
# Never in the cache as a state: Dead is only ever pending, PrepareEpochFence is replaced
# by PrepareAbort before it is written.
NEVER_CURRENT = frozenset({T.DEAD, T.PREPARE_EPOCH_FENCE})


class InvalidTransactionTransition(Exception):
    """Kafka's IllegalStateException from TransactionMetadata.prepareTransitionTo."""

    def __init__(self, transactional_id: str, current: TransactionState,
                 target: TransactionState):
        super().__init__(f"Preparing transaction state transition to {target.state_name} failed "
                         f"since the target state {target.state_name} is not a valid previous "
                         f"state of the current state {current.state_name} "
                         f"(transactional id {transactional_id})")
        self.transactional_id, self.current, self.target = transactional_id, current, target


def is_valid_transition(current: TransactionState, target: TransactionState) -> bool:
    return current in VALID_PREVIOUS[target]


def transition(transactional_id: str, current: TransactionState,
               target: TransactionState) -> TransactionState:
    """`target` if a transaction in `current` may enter it; otherwise raise."""
    if not is_valid_transition(current, target):
        raise InvalidTransactionTransition(transactional_id, current, target)
    return target
