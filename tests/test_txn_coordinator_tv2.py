"""Transaction version 2 (KIP-890 part 2) in the pure transaction coordinator: the epoch
bumped by every EndTxn v5, retries recognised by the bump, aborts with nothing added, the
epoch overflow onto a new producer id, the coordinator's own aborts at the finalized version,
and the log value v1 that carries the client's version (Kafka 4's TransactionCoordinator,
TransactionMetadata)."""

from __future__ import annotations

import pytest

from replicas.errors import ErrorCode as E
from tests.txn_sim import Driver
from transactions import messages as m
from transactions import records as R
from transactions.metadata import SHORT_MAX
from transactions.states import TransactionState as S

pytestmark = pytest.mark.unit

TID = "txn"
TP0, TP1 = ("t", 0), ("t", 1)
V2_ADD, V2_END = 4, 5          # the versions a transaction.version 2 client's requests carry


def ongoing_v2(d: Driver, *partitions) -> tuple[int, int]:
    pid, epoch = d.ready(TID)
    assert d.add(TID, pid, epoch, *(partitions or (TP0,)), version=V2_ADD).error == E.NONE
    return pid, epoch


def test_every_commit_bumps_the_epoch_and_answers_it():
    d = Driver()
    pid, epoch = ongoing_v2(d)
    assert d.end(TID, pid, epoch, True, version=V2_END) == m.EndTxnResult(E.NONE, pid, epoch + 1)
    # the markers carry the bumped epoch, so the partition sees the next transaction's
    # batches (at that epoch) as a new transaction
    assert d.markers[-1] == m.WriteMarkers(TID, pid, epoch + 1, True, 0, (TP0,))
    d.write_markers()
    md = d.coord.transaction(TID)
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == \
        (S.COMPLETE_COMMIT, epoch + 1, epoch)
    # the next transaction at the new epoch; the old epoch is fenced
    assert d.add(TID, pid, epoch, TP1, version=V2_ADD).error == E.PRODUCER_FENCED
    assert d.add(TID, pid, epoch + 1, TP1, version=V2_ADD).error == E.NONE
    assert d.end(TID, pid, epoch + 1, False, version=V2_END) == \
        m.EndTxnResult(E.NONE, pid, epoch + 2)
    assert d.markers[-1] == m.WriteMarkers(TID, pid, epoch + 2, False, 0, (TP1,))


def test_a_retried_end_is_recognised_by_the_bump():
    d = Driver()
    pid, epoch = ongoing_v2(d)
    d.end(TID, pid, epoch, True, version=V2_END)
    # while the markers are out: the same commit again is a retry, still in progress
    assert d.end(TID, pid, epoch, True, version=V2_END).error == E.CONCURRENT_TRANSACTIONS
    d.write_markers()
    assert d.end(TID, pid, epoch, True, version=V2_END) == m.EndTxnResult(E.NONE, pid, epoch + 1)
    assert d.end(TID, pid, epoch, False, version=V2_END).error == E.INVALID_TXN_STATE
    assert d.end(TID, pid, epoch - 1, True, version=V2_END).error == E.PRODUCER_FENCED
    # at the new epoch a commit with nothing in it is refused, an abort is written empty
    assert d.end(TID, pid, epoch + 1, True, version=V2_END).error == E.INVALID_TXN_STATE


@pytest.mark.parametrize("after", ["Empty", "CompleteCommit", "CompleteAbort"])
def test_an_abort_with_nothing_added_is_an_empty_transaction(after):
    d = Driver()
    pid, epoch = d.ready(TID)
    if after != "Empty":
        d.add(TID, pid, epoch, TP0, version=V2_ADD)
        d.end(TID, pid, epoch, after == "CompleteCommit", version=V2_END)
        d.write_markers()
        epoch += 1
    d.clock.now += 7
    markers = len(d.markers)
    assert d.end(TID, pid, epoch, False, version=V2_END) == m.EndTxnResult(E.NONE, pid, epoch + 1)
    assert len(d.markers) == markers               # no partition: no marker to write
    md = d.coord.transaction(TID)
    assert (md.state, md.producer_epoch, md.partitions) == (S.COMPLETE_ABORT, epoch + 1, set())
    assert md.txn_start_timestamp_ms == d.clock.now
    logged = [R.decode_value(v) for _, _, v in d.written][-2:]
    assert [(v.transaction_status, v.producer_epoch) for v in logged] == \
        [(S.PREPARE_ABORT.id, epoch + 1), (S.COMPLETE_ABORT.id, epoch + 1)]


def test_the_bump_that_exhausts_the_epoch_moves_to_a_new_producer_id():
    d = Driver()
    pid, epoch = ongoing_v2(d)
    md = d.coord.transaction(TID)
    md.producer_epoch = SHORT_MAX - 1          # many transactions later
    old = SHORT_MAX - 1
    result = d.end(TID, pid, old, True, version=V2_END)
    assert result.error == E.NONE and result.producer_id != pid and result.producer_epoch == 0
    # the markers close the transaction under the old id at the last epoch
    assert d.markers[-1] == m.WriteMarkers(TID, pid, SHORT_MAX, True, 0, (TP0,))
    d.write_markers()
    md = d.coord.transaction(TID)
    assert (md.producer_id, md.producer_epoch, md.last_producer_id) == \
        (result.producer_id, 0, pid)
    # the client's retry with the old id and epoch gets the new pair again
    assert d.end(TID, pid, old, True, version=V2_END) == result
    assert d.add(TID, result.producer_id, 0, TP1, version=V2_ADD).error == E.NONE


def test_adding_for_the_next_transaction_waits_for_the_markers():
    d = Driver()
    pid, epoch = ongoing_v2(d)
    d.end(TID, pid, epoch, True, version=V2_END)
    # a partition leader adds a partition for the next transaction (Produce v12) before
    # the previous one's markers are written: retriable
    assert d.add(TID, pid, epoch + 1, TP1, version=5).error == E.CONCURRENT_TRANSACTIONS
    d.write_markers()
    assert d.add(TID, pid, epoch + 1, TP1, version=5).error == E.NONE
    assert d.coord.transaction(TID).client_transaction_version == 2


def test_a_version_1_client_keeps_its_epoch():
    d = Driver()
    pid, epoch = d.ready(TID)
    d.add(TID, pid, epoch, TP0)
    assert d.end(TID, pid, epoch, True) == m.EndTxnResult(E.NONE)
    assert d.markers[-1].producer_epoch == epoch
    d.write_markers()
    assert d.coord.transaction(TID).producer_epoch == epoch


@pytest.mark.parametrize("level", [0, 2])
def test_the_coordinators_own_abort_follows_the_finalized_version(level):
    d = Driver()
    d.send(m.FinalizedTransactionVersion(level))
    pid, epoch = ongoing_v2(d)
    d.advance(TIMEOUT_PAST)
    wm = d.markers[-1]
    assert (wm.producer_id, wm.producer_epoch, wm.committed) == (pid, epoch + 1, False)
    d.write_markers()
    md = d.coord.transaction(TID)
    assert md.state is S.COMPLETE_ABORT
    # version 2 bumps from the current epoch and remembers it; version 0 forgets it
    assert md.last_producer_epoch == (epoch if level == 2 else -1)
    # the fenced producer's commit looks like a retry of a completed abort: refused
    assert d.end(TID, pid, epoch, True, version=V2_END).error == E.INVALID_TXN_STATE
    assert d.add(TID, pid, epoch, TP1, version=V2_ADD).error == E.PRODUCER_FENCED


TIMEOUT_PAST = 60_000 + 20_000


@pytest.mark.parametrize("level, version", [(0, 0), (1, 1), (2, 1)])
def test_the_log_value_version_follows_the_finalized_version(level, version):
    d = Driver()
    d.send(m.FinalizedTransactionVersion(level))
    pid, epoch = ongoing_v2(d)
    raw = d.written[-1][2]
    assert int.from_bytes(raw[:2], "big") == version
    value = R.decode_value(raw)
    assert value.client_transaction_version == (2 if version else 0)


def test_a_reloaded_coordinator_completes_a_version_2_commit():
    d = Driver()
    d.send(m.FinalizedTransactionVersion(2))
    pid, epoch = ongoing_v2(d)
    d.end(TID, pid, epoch, True, version=V2_END)
    p = d.partition(TID)
    d.unload(p)
    d.load(p)
    md = d.coord.transaction(TID)
    assert (md.state, md.producer_epoch, md.client_transaction_version) == \
        (S.PREPARE_COMMIT, epoch + 1, 2)
    assert d.markers[-1].producer_epoch == epoch + 1
    d.write_markers(d.markers[-1])
    assert d.coord.transaction(TID).state is S.COMPLETE_COMMIT
    assert d.end(TID, pid, epoch, True, version=V2_END) == m.EndTxnResult(E.NONE, pid, epoch + 1)


def test_value_v1_round_trips_its_tagged_fields():
    v = R.TransactionLogValue(7, 3, 1000, S.ONGOING.id, (("t", (0, 1)),), 5, 4,
                              client_transaction_version=2, previous_producer_id=6,
                              next_producer_id=8, next_producer_epoch=0)
    assert R.decode_value(R.encode_value(v, 1)) == v
    plain = R.TransactionLogValue(7, 3, 1000, S.ONGOING.id, (("t", (0, 1)),), 5, 4)
    assert R.encode_value(plain, 1).endswith(b"\x00")       # defaults are not written
    assert R.decode_value(R.encode_value(plain, 0)) == plain
