"""The five states of a classic consumer group and their valid transitions, as data.

Rules (Kafka's GroupMetadata.scala, `validPreviousStates`):
- Each state lists the states it may be ENTERED FROM:
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Empty               <- PreparingRebalance
    Dead                <- Stable, PreparingRebalance, CompletingRebalance, Empty, Dead
- One helper, `transition`, decides; callers never hand-code the rule.
- An invalid transition RAISES `InvalidGroupTransition` (Kafka's `assertValidTransition`
  throws IllegalStateException): unlike the controller's partition states, a group that
  reaches a wrong state is a coordinator bug, and going on would corrupt the group.
- A rebalance may start only from the states PreparingRebalance may be entered from
  (`can_rebalance`, Kafka's `canRebalance`).
"""

from __future__ import annotations

import enum
from typing import Mapping


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


G = GroupState

VALID_PREVIOUS: Mapping[GroupState, frozenset[GroupState]] = {
    G.PREPARING_REBALANCE: frozenset({G.STABLE, G.COMPLETING_REBALANCE, G.EMPTY}),
    G.COMPLETING_REBALANCE: frozenset({G.PREPARING_REBALANCE}),
    G.STABLE: frozenset({G.COMPLETING_REBALANCE}),
    G.DEAD: frozenset({G.STABLE, G.PREPARING_REBALANCE, G.COMPLETING_REBALANCE, G.EMPTY, G.DEAD}),
    G.EMPTY: frozenset({G.PREPARING_REBALANCE}),
}


class InvalidGroupTransition(Exception):
    """Kafka's IllegalStateException from GroupMetadata.assertValidTransition."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState):
        allowed = ",".join(s.value for s in sorted(VALID_PREVIOUS[target], key=lambda s: s.value))
        super().__init__(f"Group {group_id} should be in the {allowed} states before moving to "
                         f"{target.value} state. Instead it is in {current.value} state")
        self.group_id, self.current, self.target = group_id, current, target


def is_valid_transition(current: GroupState, target: GroupState) -> bool:
    return current in VALID_PREVIOUS[target]


def transition(group_id: str, current: GroupState, target: GroupState) -> GroupState:
    """`target` if a group in `current` may enter it; otherwise raise InvalidGroupTransition."""
    if not is_valid_transition(current, target):
        raise InvalidGroupTransition(group_id, current, target)
    return target


def can_rebalance(state: GroupState) -> bool:
    return is_valid_transition(state, G.PREPARING_REBALANCE)
