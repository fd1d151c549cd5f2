"""Partition and replica states, and their valid transitions as data (Kafka's
PartitionStateMachine.scala and ReplicaStateMachine.scala).

Rules:
- Each state lists the states it may be ENTERED FROM (Kafka's `validPreviousStates`).
- One helper, `check_transition`, decides; callers never hand-code the rule.
- An invalid transition is logged and ignored (state unchanged), not raised: Kafka's
  state machines do the same (`logInvalidTransition`) so one bad partition cannot stop
  a batch of thousands.
- A partition or replica never seen before is NonExistent.
"""

from __future__ import annotations

import enum
import logging
from typing import Hashable, Mapping, TypeVar

log = logging.getLogger(__name__)


class PartitionState(enum.Enum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


P, R = PartitionState, ReplicaState

PARTITION_VALID_PREVIOUS: Mapping[PartitionState, frozenset[PartitionState]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

REPLICA_VALID_PREVIOUS: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}

S = TypeVar("S", PartitionState, ReplicaState)


def is_valid_transition(current: S, target: S) -> bool:
    table = PARTITION_VALID_PREVIOUS if isinstance(target, PartitionState) else REPLICA_VALID_PREVIOUS
    return current in table[target]


def check_transition(key: Hashable, current: S, target: S) -> bool:
    """True if `key` may move from `current` to `target`; otherwise log it (Kafka's wording)."""
    if is_valid_transition(current, target):
        return True
    log.error("Invalid state transition for %s from %s to %s", key, current.value, target.value)
    return False


def split_valid(states: Mapping, keys, target: S, default: S) -> tuple[list, list]:
    """Partition `keys` into (may enter `target`, may not), reading current states from
    `states` (missing = `default`, i.e. NonExistent). Invalid ones are logged."""
    valid, invalid = [], []
    for key in keys:
        (valid if check_transition(key, states.get(key, default), target) else invalid).append(key)
    return valid, invalid
