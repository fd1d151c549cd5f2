"""Valid-previous-state tables of Kafka's partition and replica state machines."""

import itertools
import logging

import pytest

from controller.states import (PARTITION_VALID_PREVIOUS, REPLICA_VALID_PREVIOUS, PartitionState as P,
                               ReplicaState as R, check_transition, is_valid_transition,
                               split_valid)

pytestmark = pytest.mark.unit

# Kafka's PartitionStateMachine.scala and ReplicaStateMachine.scala, written out
# independently of the module's tables.
PARTITION_ALLOWED = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE), (P.ONLINE, P.ONLINE), (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE), (P.ONLINE, P.OFFLINE), (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}
REPLICA_ALLOWED = {
    (R.NON_EXISTENT, R.NEW),
    *((s, R.ONLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    *((s, R.OFFLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE), (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


@pytest.mark.parametrize("current, target", list(itertools.product(P, P)))
def test_every_partition_transition(current, target):
    assert is_valid_transition(current, target) == ((current, target) in PARTITION_ALLOWED)


@pytest.mark.parametrize("current, target", list(itertools.product(R, R)))
def test_every_replica_transition(current, target):
    assert is_valid_transition(current, target) == ((current, target) in REPLICA_ALLOWED)


def test_tables_cover_every_state():
    assert set(PARTITION_VALID_PREVIOUS) == set(P)
    assert set(REPLICA_VALID_PREVIOUS) == set(R)


def test_invalid_transitions_are_logged_and_split_out(caplog):
    states = {("t", 0): P.ONLINE, ("t", 1): P.OFFLINE}
    with caplog.at_level(logging.ERROR, logger="controller.states"):
        valid, invalid = split_valid(states, [("t", 0), ("t", 1), ("t", 2)], P.NON_EXISTENT,
                                     P.NON_EXISTENT)
    assert valid == [("t", 1)] and invalid == [("t", 0), ("t", 2)]
    assert "Invalid state transition for ('t', 0) from OnlinePartition to NonExistentPartition" \
        in caplog.text
    assert check_transition("x", R.ONLINE, R.DELETION_STARTED) is False
