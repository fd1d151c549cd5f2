"""The classic group's state table (Kafka's GroupMetadata.validPreviousStates), pair by pair."""

import itertools

import pytest

from coordinator.group import GroupMetadata
from coordinator.states import (VALID_PREVIOUS, GroupState as S, InvalidGroupTransition, can_rebalance,
                                is_valid_transition, transition)

pytestmark = pytest.mark.unit

# Kafka's GroupCoordinator.scala, written out independently of the module's table.
ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE), (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    *((s, S.DEAD) for s in S),
}


@pytest.mark.parametrize("current, target", list(itertools.product(S, S)),
                         ids=lambda s: s.value)
def test_every_transition(current, target):
    expected = (current, target) in ALLOWED
    assert is_valid_transition(current, target) == expected
    if expected:
        assert transition("g", current, target) is target
    else:
        with pytest.raises(InvalidGroupTransition) as info:
            transition("g", current, target)
        assert info.value.current is current and info.value.target is target
        assert f"moving to {target.value} state. Instead it is in {current.value} state" in str(info.value)


@pytest.mark.parametrize("current, target", list(itertools.product(S, S)),
                         ids=lambda s: s.value)
def test_the_group_moves_only_along_the_table_and_stamps_the_time(current, target):
    group = GroupMetadata("g", current, now_ms=5)
    if (current, target) in ALLOWED:
        group.transition_to(target, 42)
        assert group.state is target and group.current_state_timestamp == 42
    else:
        with pytest.raises(InvalidGroupTransition):
            group.transition_to(target, 42)
        assert group.state is current and group.current_state_timestamp == 5


def test_the_table_covers_every_state_and_names_are_kafkas():
    assert set(VALID_PREVIOUS) == set(S)
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


@pytest.mark.parametrize("state", list(S), ids=lambda s: s.value)
def test_a_rebalance_starts_only_from_stable_completing_or_empty(state):
    assert can_rebalance(state) == (state in {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY})
