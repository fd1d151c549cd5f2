"""Replica assignment (Kafka's AdminUtils rack-unaware round robin), adding partitions,
topic-name and manual-assignment validation."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.assignment import (MAX_TOPIC_NAME_LENGTH, add_partitions_assignment,
                                   assign_replicas, validate_manual_assignment,
                                   validate_topic_name)
from replicas.errors import (InvalidPartitions, InvalidReplicaAssignment,
                             InvalidReplicationFactor, InvalidTopic, UnknownServerError)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("brokers, partitions, rf, start, start_pid, expected", [
    # Kafka's AdminTest/ReplicaAssignmentTest: 5 brokers, 10 partitions, RF 3, start index 0
    ([0, 1, 2, 3, 4], 10, 3, 0, -1,
     {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
      5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}),
    # the same brokers given unsorted and with other ids: sorted first, ids mapped through
    ([40, 0, 30, 10, 20], 6, 2, 0, -1,
     {0: [0, 10], 1: [10, 20], 2: [20, 30], 3: [30, 40], 4: [40, 0], 5: [0, 20]}),
    # a fixed start index moves both the leaders and the follower shift
    ([0, 1, 2, 3], 4, 2, 1, -1, {0: [1, 3], 1: [2, 0], 2: [3, 1], 3: [0, 2]}),
    # numbering can start later; the shift grows at the first multiple of n met
    ([0, 1, 2], 3, 2, 0, 2, {2: [2, 0], 3: [0, 2], 4: [1, 0]}),
    # one broker, RF 1
    ([7], 3, 1, 0, -1, {0: [7], 1: [7], 2: [7]}),
])
def test_known_assignments(brokers, partitions, rf, start, start_pid, expected):
    assert assign_replicas(brokers, partitions, rf, start_index=start,
                           start_partition_id=start_pid) == expected


def test_javadoc_table_of_adminutils():
    """AdminUtils' javadoc table (5 brokers, p0..p9 led round robin from broker 0):
    rows = replica position, columns = broker, cells = partitions placed there."""
    table = {1: [[0, 5], [1, 6], [2, 7], [3, 8], [4, 9]],
             2: [[4, 8], [0, 9], [1, 5], [2, 6], [3, 7]],
             3: [[3, 7], [4, 8], [0, 9], [1, 5], [2, 6]]}
    result = assign_replicas(range(5), 10, 3, start_index=0)
    for position, per_broker in table.items():
        for broker, parts in enumerate(per_broker):
            assert sorted(p for p, r in result.items() if r[position - 1] == broker) == parts


# Kafka's AddPartitionsTest (brokers 0-3): the exact replica lists of the new partitions.
@pytest.mark.parametrize("existing, new_total, brokers, expected_new", [
    ({0: [2, 3, 0, 1]}, 7, [0, 1, 2, 3],   # testReplicaPlacementAllServers
     {1: [3, 2, 0, 1], 2: [0, 3, 1, 2], 3: [1, 0, 2, 3], 4: [2, 3, 0, 1], 5: [3, 0, 1, 2],
      6: [0, 1, 2, 3]}),
    ({0: [1, 2]}, 3, [0, 1, 2, 3], {1: [2, 0], 2: [3, 1]}),   # ...PartialServers
    ({0: [0, 1]}, 3, [0, 1, 2, 3], {1: [1, 2], 2: [2, 3]}),
    # partition 0's first replica is gone: start at the first broker with a larger id ...
    ({0: [2, 9]}, 2, [0, 1, 5], {1: [0, 1]}),
    # ... or at index 0 if there is none
    ({0: [9, 2]}, 2, [0, 1, 5], {1: [1, 5]}),
    # Kafka restarts the follower shift at the start index: p10 gets shift 1, where a
    # 11-partition topic created at once has shift 2 there ([0, 3, 4])
    (assign_replicas(range(5), 10, 3, start_index=0), 11, range(5), {10: [0, 2, 3]}),
])
def test_add_partitions_matches_kafka(existing, new_total, brokers, expected_new):
    assert add_partitions_assignment(existing, new_total, brokers, random.Random(0)) == expected_new


def test_created_at_once_the_shift_keeps_counting():
    assert assign_replicas(range(5), 11, 3, start_index=0)[10] == [0, 3, 4]


@pytest.mark.parametrize("call, error, message", [
    (lambda: assign_replicas([0, 1], 0, 1, start_index=0), InvalidPartitions,
     "Number of partitions must be larger than 0."),
    (lambda: assign_replicas([0, 1], -3, 1, start_index=0), InvalidPartitions,
     "Number of partitions must be larger than 0."),
    (lambda: assign_replicas([0, 1], 3, 0, start_index=0), InvalidReplicationFactor,
     "Replication factor must be larger than 0."),
    (lambda: assign_replicas([0, 1], 3, 3, start_index=0), InvalidReplicationFactor,
     "Replication factor: 3 larger than available brokers: 2."),
    (lambda: assign_replicas([], 3, 1, start_index=0), InvalidReplicationFactor,
     "Replication factor: 1 larger than available brokers: 0."),
    (lambda: add_partitions_assignment({0: [0], 1: [1]}, 2, [0, 1], topic="t"),
     InvalidPartitions, "The number of partitions for a topic can only be increased. "
     "Topic t currently has 2 partitions, 2 would not be an increase."),
    (lambda: add_partitions_assignment({0: [0], 1: [1]}, 1, [0, 1], topic="t"),
     InvalidPartitions, "The number of partitions for a topic can only be increased. "
     "Topic t currently has 2 partitions, 1 would not be an increase."),
    (lambda: add_partitions_assignment({1: [0, 1]}, 3, [0, 1], topic="new-topic5"),
     UnknownServerError, "Unexpected existing replica assignment for topic 'new-topic5', "
     "partition id 0 is missing. Assignment: {1: [0, 1]}"),
    (lambda: add_partitions_assignment({0: [0, 1, 2]}, 2, [0, 1]), InvalidReplicationFactor,
     "Replication factor: 3 larger than available brokers: 2."),
])
def test_assignment_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error and info.value.message == message


def test_error_codes_are_kafkas():
    assert (InvalidPartitions.code, InvalidReplicationFactor.code,
            InvalidReplicaAssignment.code, InvalidTopic.code) == (37, 38, 39, 17)


def test_random_start_needs_an_injected_rng():
    with pytest.raises(ValueError):
        assign_replicas([0, 1, 2], 3, 2)


@pytest.mark.parametrize("name, reason", [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("a" * 250, f"the length of '{'a' * 250}' is longer than the max allowed length 249"),
    ("has space", "'has space' contains one or more characters other than "
                  "ASCII alphanumerics, '.', '_' and '-'"),
    ("topic/1", "'topic/1' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'"),
    ("tópico", "'tópico' contains one or more characters other than "
               "ASCII alphanumerics, '.', '_' and '-'"),
])
def test_invalid_topic_names(name, reason):
    with pytest.raises(InvalidTopic) as info:
        validate_topic_name(name)
    assert info.value.message == f"Topic name is invalid: {reason}"
    assert info.value.code == 17


@pytest.mark.parametrize("name", ["a", "...", "a.b_c-D9", "_", "x" * MAX_TOPIC_NAME_LENGTH])
def test_valid_topic_names(name):
    assert validate_topic_name(name) is None


@pytest.mark.parametrize("assignment, error, message", [
    ({}, InvalidPartitions, "Number of partitions must be larger than 0."),
    ({0: [1, 2], 1: []}, InvalidReplicaAssignment,
     "Cannot have replication factor of 0 for partition id 1."),
    ({0: [1, 1]}, InvalidReplicaAssignment,
     "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 0."),
    ({0: [1, 2], 1: [2, 9]}, InvalidReplicaAssignment,
     "Some brokers specified for partition id 1 are not available. Specified brokers: 2, 9, "
     "available brokers: 1, 2, 3."),
    ({0: [1, 2], 1: [2]}, InvalidReplicaAssignment,
     "All partitions should have the same number of replicas"),
    ({0: [1], 2: [2]}, InvalidReplicaAssignment,
     "partitions should be a consecutive 0-based integer sequence"),
    ({1: [1], 2: [2]}, InvalidReplicaAssignment,
     "partitions should be a consecutive 0-based integer sequence"),
    ({-1: [1], 0: [2]}, InvalidReplicaAssignment,
     "partitions should be a consecutive 0-based integer sequence"),
])
def test_invalid_manual_assignments(assignment, error, message):
    with pytest.raises(error) as info:
        validate_manual_assignment(assignment, {1, 2, 3})
    assert type(info.value) is error and info.value.message == message


@pytest.mark.parametrize("assignment", [{0: [1]}, {0: [3, 1], 1: [1, 2], 2: [2, 3]},
                                        {1: [1, 2, 3], 0: [3, 2, 1]}])
def test_valid_manual_assignments(assignment):
    assert validate_manual_assignment(assignment, [1, 2, 3]) is None


# --- naive reference, written from the description of Kafka's algorithm ------------------

def ref_assign(brokers, partitions, rf, start, shift0, start_pid=0):
    """Leaders round robin from `start`; the followers of a partition are picked from the
    other brokers in ring order after the leader, skipping `shift` of them (wrapping),
    where the shift is shift0 plus the multiples of n passed (p > 0) so far."""
    b = sorted(brokers)
    n = len(b)
    out = {}
    for p in range(start_pid, start_pid + partitions):
        shift = shift0 + sum(1 for q in range(start_pid, p + 1) if q > 0 and q % n == 0)
        lead = (p + start) % n
        ring = [b[(lead + k) % n] for k in range(1, n)]   # the others, in ring order
        out[p] = [b[lead]] + [ring[(shift + j) % (n - 1)] for j in range(rf - 1)]
    return out


cases = st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True),
    st.integers(1, 40), st.integers(1, n), st.integers(0, 2 * n), st.integers(0, 30)))


@settings(max_examples=300)
@given(cases)
def test_equals_reference_with_fixed_start(case):
    brokers, partitions, rf, start, start_pid = case
    assert assign_replicas(brokers, partitions, rf, start_index=start,
                           start_partition_id=start_pid) == \
        ref_assign(brokers, partitions, rf, start, start, start_pid)


@settings(max_examples=200)
@given(cases, st.integers(0, 2**32))
def test_random_start_is_two_draws_from_the_injected_rng(case, seed):
    brokers, partitions, rf, _, _ = case
    draws = random.Random(seed)
    start, shift = draws.randrange(len(brokers)), draws.randrange(len(brokers))
    result = assign_replicas(brokers, partitions, rf, rng=random.Random(seed))
    assert result == ref_assign(brokers, partitions, rf, start, shift)
    assert result == assign_replicas(brokers, partitions, rf, rng=random.Random(seed))


@settings(max_examples=300)
@given(cases, st.integers(0, 2**32))
def test_balance_properties(case, seed):
    """From partition 0, with n brokers and P partitions:
    - every partition has RF distinct brokers, all from the broker list;
    - each broker leads floor(P/n) or ceil(P/n) partitions (exactly P/n when n divides P);
    - each broker holds between floor(P/n)*RF and ceil(P/n)*RF replicas (exactly P*RF/n
      when n divides P): every run of n partitions places each replica position once on
      every broker, and the last, partial run at most once per position."""
    brokers, partitions, rf, _, _ = case
    n = len(brokers)
    result = assign_replicas(brokers, partitions, rf, rng=random.Random(seed))
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in result.values())
    held = Counter(b for r in result.values() for b in r)
    low, high = partitions // n, -(-partitions // n)
    for b in brokers:
        assert low <= leaders[b] <= high
        assert low * rf <= held[b] <= high * rf
    if partitions % n == 0:
        assert set(leaders.values()) == {partitions // n}
        assert set(held.values()) == {partitions * rf // n}


@settings(max_examples=200)
@given(cases, st.integers(1, 20))
def test_add_partitions_continues_the_numbering(case, extra):
    brokers, partitions, rf, start, _ = case
    n = len(brokers)
    existing = assign_replicas(brokers, partitions, rf, start_index=start % n)
    added = add_partitions_assignment(existing, partitions + extra, brokers)
    assert sorted(added) == list(range(partitions, partitions + extra))
    assert all(len(r) == rf == len(set(r)) for r in added.values())
    # the start index is recovered from partition 0's leader; the shift restarts from it
    assert added == ref_assign(brokers, extra, rf, start % n, start % n, partitions)
    if partitions <= n:   # no shift happened yet: it is the same round robin continued
        whole = assign_replicas(brokers, partitions + extra, rf, start_index=start % n)
        assert added == {p: whole[p] for p in added}
