"""Leader election (Kafka's PartitionLeaderElectionAlgorithms + Election new-ISR rules)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.leader_election import (ElectionResult, controlled_shutdown_leader,
                                        elect_controlled_shutdown, elect_offline,
                                        elect_preferred, elect_reassign,
                                        offline_partition_leader, preferred_replica_leader,
                                        reassign_partition_leader)

pytestmark = pytest.mark.unit


def run(strategy, assignment, isr, live, other):
    if strategy == "offline":
        return offline_partition_leader(assignment, isr, live, other)
    if strategy == "reassign":
        return reassign_partition_leader(assignment, isr, live)
    if strategy == "preferred":
        return preferred_replica_leader(assignment, isr, live)
    return controlled_shutdown_leader(assignment, isr, live, other)


# Kafka's PartitionLeaderElectionAlgorithmsTest, all 13 rows.
@pytest.mark.parametrize("strategy, assignment, isr, live, other, leader", [
    ("offline", [2, 4], [2, 4], {4}, False, 4),
    ("offline", [2, 4], [2], {4}, False, None),
    ("offline", [2, 4], [2], {4}, True, 4),
    ("reassign", [2, 4], [2, 4], {4}, None, 4),
    ("reassign", [2, 4], [2], set(), None, None),
    ("reassign", [2, 4], [], {2}, None, None),
    ("preferred", [2, 4], [2, 4], {2, 4}, None, 2),
    ("preferred", [2, 4], [2], set(), None, None),
    ("preferred", [2, 4], [4], {2, 4}, None, None),
    ("preferred", [2, 4], [], set(), None, None),
    ("controlled_shutdown", [2, 4], [2, 4], {2, 4}, {2}, 4),
    ("controlled_shutdown", [2, 4], [2], {2, 4}, {2}, None),
    ("controlled_shutdown", [2, 4], [2, 4], {2, 4}, {2, 4}, None),
])
def test_kafka_election_table(strategy, assignment, isr, live, other, leader):
    assert run(strategy, assignment, isr, live, other) == leader


@pytest.mark.parametrize("elect, args, expected", [
    # the Kafka table's rows again, with the new ISR and the unclean flag
    (elect_offline, ([2, 4], [2, 4], {4}, False), ElectionResult(4, (4,), False)),
    (elect_offline, ([2, 4], [2], {4}, False), ElectionResult(None, (2,), False)),
    (elect_offline, ([2, 4], [2], {4}, True), ElectionResult(4, (4,), True)),
    (elect_reassign, ([2, 4], [2, 4], {4}), ElectionResult(4, (2, 4), False)),
    (elect_reassign, ([2, 4], [2], set()), ElectionResult(None, (2,), False)),
    (elect_preferred, ([2, 4], [4, 2], {2, 4}), ElectionResult(2, (4, 2), False)),
    (elect_preferred, ([2, 4], [4], {2, 4}), ElectionResult(None, (4,), False)),
    (elect_controlled_shutdown, ([2, 4], [2, 4], {2, 4}, {2}),
     ElectionResult(4, (4,), False)),
    (elect_controlled_shutdown, ([2, 4], [2, 4], {2, 4}, {2, 4}),
     ElectionResult(None, (2, 4), False)),
    # §4: controlled shutdown of 5 with replicas [5,6], ISR [5,6] → leader 6, ISR [6]
    (elect_controlled_shutdown, ([5, 6], [5, 6], {5, 6}, {5}),
     ElectionResult(6, (6,), False)),
    # ... and it does not matter whether `live` lists the shutting-down broker
    (elect_controlled_shutdown, ([5, 6], [5, 6], {6}, {5}), ElectionResult(6, (6,), False)),
    # §4 unclean: replicas [6,5], ISR [6], live {5} → leader 5, ISR [5]
    (elect_offline, ([6, 5], [6], {5}, True), ElectionResult(5, (5,), True)),
    (elect_offline, ([6, 5], [6], {5}, False), ElectionResult(None, (6,), False)),
    # a live ISR member exists: never unclean, even when allowed; ISR keeps its own order
    (elect_offline, ([1, 2, 3], [3, 1, 2], {2, 3}, True),
     ElectionResult(2, (3, 2), False)),
    # assignment order decides, not ISR order
    (elect_offline, ([3, 1, 2], [1, 2, 3], {1, 2, 3}, False),
     ElectionResult(3, (1, 2, 3), False)),
    # a set ISR has no order: the result ISR is sorted (this set iterates as 9, 2, 1)
    (elect_offline, ([1, 2, 9], {9, 1, 2}, {9, 1, 2}, False),
     ElectionResult(1, (1, 2, 9), False)),
    (elect_preferred, ([2, 9], frozenset([9, 1, 2]), {2}), ElectionResult(2, (1, 2, 9), False)),
    (elect_reassign, ([7, 8, 9], [1, 8, 9], {1, 9}), ElectionResult(9, (1, 8, 9), False)),
    (elect_preferred, ([], [1], {1}), ElectionResult(None, (1,), False)),
])
def test_election_results(elect, args, expected):
    assert elect(*args) == expected


# --- naive reference, written from Kafka's PartitionLeaderElectionAlgorithms.scala rules ---

def ref_offline(assignment, isr, live, unclean_allowed):
    isr = list(isr)
    for r in assignment:
        if r in live and r in isr:
            return r, [x for x in isr if x in live], False
    if unclean_allowed:
        for r in assignment:
            if r in live:
                return r, [r], True
    return None, isr, False


def ref_reassign(target, isr, live):
    candidates = [r for r in target if r in live and r in isr]
    return (candidates[0] if candidates else None), list(isr), False


def ref_preferred(assignment, isr, live):
    ok = bool(assignment) and assignment[0] in live and assignment[0] in isr
    return (assignment[0] if ok else None), list(isr), False


def ref_controlled(assignment, isr, live, shutting_down):
    candidates = [r for r in assignment if r in live and r in isr and r not in shutting_down]
    if not candidates:
        return None, list(isr), False
    return candidates[0], [x for x in isr if x not in shutting_down], False


def as_tuple(result: ElectionResult):
    return result.leader, list(result.isr), result.unclean


BROKERS = st.integers(0, 7)


@st.composite
def partitions(draw):
    """(assignment, isr ⊆ assignment in some order, live, shutting_down)."""
    assignment = draw(st.lists(BROKERS, min_size=1, max_size=5, unique=True))
    isr = draw(st.permutations(assignment).flatmap(
        lambda perm: st.integers(0, len(perm)).map(lambda k: perm[:k])))
    live = draw(st.sets(BROKERS))
    shutting_down = draw(st.sets(BROKERS))
    return assignment, isr, live, shutting_down


@settings(max_examples=300)
@given(partitions(), st.booleans())
def test_offline_properties(p, unclean_allowed):
    assignment, isr, live, _ = p
    result = elect_offline(assignment, isr, live, unclean_allowed)
    assert as_tuple(result) == ref_offline(assignment, isr, live, unclean_allowed)
    assert result.leader == offline_partition_leader(assignment, isr, live, unclean_allowed)
    assert set(result.isr) <= set(assignment)
    if result.leader is None:
        assert result.isr == tuple(isr) and not result.unclean
        return
    assert result.leader in assignment and result.leader in live
    assert result.leader in result.isr
    assert (result.leader in isr) == (not result.unclean)
    if result.unclean:   # only when allowed and no ISR member is live
        assert unclean_allowed and not set(isr) & live and result.isr == (result.leader,)
    else:
        assert set(result.isr) <= live


@settings(max_examples=300)
@given(partitions(), st.lists(BROKERS, min_size=1, max_size=5, unique=True))
def test_reassign_properties(p, target):
    _, isr, live, _ = p
    result = elect_reassign(target, isr, live)
    assert as_tuple(result) == ref_reassign(target, isr, live)
    assert result.isr == tuple(isr) and not result.unclean
    if result.leader is not None:
        assert result.leader in target and result.leader in live and result.leader in isr


@settings(max_examples=300)
@given(partitions())
def test_preferred_properties(p):
    assignment, isr, live, _ = p
    result = elect_preferred(assignment, isr, live)
    assert as_tuple(result) == ref_preferred(assignment, isr, live)
    assert result.isr == tuple(isr) and not result.unclean
    assert result.leader in (None, assignment[0])
    if result.leader is not None:
        assert result.leader in live and result.leader in result.isr


@settings(max_examples=300)
@given(partitions())
def test_controlled_shutdown_properties(p):
    assignment, isr, live, shutting_down = p
    live_or_leaving = live | shutting_down
    result = elect_controlled_shutdown(assignment, isr, live_or_leaving, shutting_down)
    assert as_tuple(result) == ref_controlled(assignment, isr, live_or_leaving, shutting_down)
    # `live` with or without the shutting-down brokers gives the same answer
    assert result == elect_controlled_shutdown(assignment, isr, live - shutting_down,
                                               shutting_down)
    assert set(result.isr) <= set(assignment) and not result.unclean
    if result.leader is None:
        assert result.isr == tuple(isr)
        return
    assert result.leader in assignment and result.leader in isr
    assert result.leader not in shutting_down and result.leader in result.isr
    assert not set(result.isr) & shutting_down
