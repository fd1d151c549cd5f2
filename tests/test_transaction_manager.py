"""rayka/client/transaction_manager.py: the transactional producer's states as a table, and
how coordinator answers move them (pure: no Ray)."""

from __future__ import annotations

import itertools

import pytest

from rayka.client.transaction_manager import (ABORTABLE, DONE, FATAL, REDISCOVER, RETRY,
                                              VALID_PREVIOUS, TransactionManager, TxnState,
                                              classify)
from replicas.errors import ErrorCode as E
from replicas.errors import InvalidTxnState, OutOfOrderSequenceNumber, ProducerFenced

pytestmark = pytest.mark.unit
S = TxnState


@pytest.mark.parametrize("source,target", list(itertools.product(S, S)))
def test_every_transition_follows_the_table(source, target):
    tm = TransactionManager("t", 1000)
    tm.state = source
    if source in VALID_PREVIOUS[target]:
        tm.transition(target)
        assert tm.state is target
    else:
        with pytest.raises(InvalidTxnState):
            tm.transition(target)
        assert tm.state is source


@pytest.mark.parametrize("code,kind", [
    (E.NONE, DONE), (E.CONCURRENT_TRANSACTIONS, RETRY), (E.COORDINATOR_LOAD_IN_PROGRESS, RETRY),
    (E.NOT_COORDINATOR, REDISCOVER), (E.COORDINATOR_NOT_AVAILABLE, REDISCOVER),
    (E.PRODUCER_FENCED, FATAL), (E.INVALID_PRODUCER_EPOCH, FATAL),
    (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, FATAL), (E.INVALID_TXN_STATE, ABORTABLE),
    (E.OUT_OF_ORDER_SEQUENCE_NUMBER, ABORTABLE), (E.TOPIC_AUTHORIZATION_FAILED, ABORTABLE)])
def test_answers_are_classified_as_kafkas_client(code, kind):
    assert classify(code) == kind


def test_a_whole_transaction_and_its_failures():
    tm = TransactionManager("t", 1000)
    with pytest.raises(InvalidTxnState):
        tm.transition(S.IN_TRANSACTION)           # begin before init
    tm.transition(S.INITIALIZING)
    tm.initialized(7, 0)
    tm.transition(S.IN_TRANSACTION)
    assert tm.to_add([("a", 0), ("a", 1)]) == [("a", 0), ("a", 1)]
    tm.added([("a", 0)])
    assert tm.to_add([("a", 0), ("a", 1)]) == [("a", 1)] and tm.started
    error = tm.fail(E.OUT_OF_ORDER_SEQUENCE_NUMBER, "produce")
    assert isinstance(error, OutOfOrderSequenceNumber) and tm.state is S.ABORTABLE_ERROR
    with pytest.raises(OutOfOrderSequenceNumber):
        tm.transition(S.COMMITTING)                # only an abort may follow
    tm.transition(S.ABORTING)
    tm.completed()
    assert tm.state is S.READY and not tm.started and tm.needs_epoch_bump   # KIP-360
    tm.transition(S.INITIALIZING)
    tm.initialized(7, 1)
    assert not tm.needs_epoch_bump and tm.producer_epoch == 1
    tm.transition(S.IN_TRANSACTION)
    fenced = tm.fail(E.PRODUCER_FENCED, "EndTxn")
    assert isinstance(fenced, ProducerFenced) and tm.state is S.FATAL_ERROR
    with pytest.raises(ProducerFenced):
        tm.transition(S.ABORTING)                 # fatal for good: close the producer
    with pytest.raises(ProducerFenced):
        tm.require(S.IN_TRANSACTION)
