"""The transaction coordinator against Kafka 3.8's rules (TransactionCoordinator.scala,
TransactionMetadata.scala, TransactionStateManager.scala, KafkaApis.scala's checks).

Table-driven: the state table pair by pair and each prepare helper in each state; every
request × every transaction state → Kafka's answer; the lookup checks. Then the scenarios:
KIP-360, fencing by a new producer and by the timeout, EndTxn and its markers, failed
appends, load/unload and stale completions, expiry, DescribeTransactions, ListTransactions,
the config. No Ray, no sockets: a fake clock.
"""

import itertools

import pytest

from replicas.errors import ErrorCode as E
from replicas.errors import CoordinatorLoadInProgress
from transactions import messages as m
from transactions import records as R
from transactions.config import LOG_APPEND_RETRY_BACKOFF_MS, TransactionCoordinatorConfig
from transactions.coordinator import TransactionCoordinator
from transactions.error_codes import append_error, for_version
from transactions.metadata import IllegalTransactionState, TransactionMetadata
from transactions.states import (VALID_PREVIOUS, InvalidTransactionTransition,
                                 TransactionState as S, is_valid_transition, transition)
from tests.txn_sim import Driver

pytestmark = pytest.mark.unit

TID = "txn"
TP0, TP1 = ("t", 0), ("t", 1)
N, C, F, M = E.NONE, E.CONCURRENT_TRANSACTIONS, E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING
X, A = E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE


# ---------------------------------------------------------------------------------------------
# the state table (TransactionMetadata.scala; Kafka 4's TransactionState.java lets an abort
# with nothing added start from Empty/Complete*), written out independently of the module's
ALLOWED = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.EMPTY, S.PREPARE_ABORT), (S.COMPLETE_COMMIT, S.PREPARE_ABORT),
    (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_ABORT, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


@pytest.mark.parametrize("current, target", list(itertools.product(S, S)),
                         ids=lambda s: s.state_name)
def test_every_transition(current, target):
    expected = (current, target) in ALLOWED
    assert is_valid_transition(current, target) == expected
    if expected:
        assert transition(TID, current, target) is target
    else:
        with pytest.raises(InvalidTransactionTransition) as info:
            transition(TID, current, target)
        assert (info.value.current, info.value.target) == (current, target)


def test_ids_names_and_expiry_are_kafkas():
    assert [(s.id, s.state_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT,
                                                      S.COMPLETE_ABORT}
    assert S.from_name("PrepareCommit") is S.PREPARE_COMMIT and S.from_name("ongoing") is None
    assert set(VALID_PREVIOUS) == set(S)


def metadata(state: S, epoch: int = 3) -> TransactionMetadata:
    partitions = {TP0} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else set()
    return TransactionMetadata(TID, 7, 7, epoch, -1, 1000, state, partitions, 10, 10)


PREPARES = {  # helper → (its target state, a call)
    "increment epoch": (S.EMPTY, lambda md: md.prepare_increment_producer_epoch(1000, None, 20)),
    "rotate producer id": (S.EMPTY, lambda md: md.prepare_producer_id_rotation(8, 1000, 20, False)),
    "add partitions": (S.ONGOING, lambda md: md.prepare_add_partitions({TP1}, 20)),
    "commit": (S.PREPARE_COMMIT, lambda md: md.prepare_abort_or_commit(S.PREPARE_COMMIT, 20)),
    # at transaction version 2, where an abort may come with nothing added
    "abort": (S.PREPARE_ABORT, lambda md: md.prepare_abort_or_commit(
        S.PREPARE_ABORT, 20, tv=2, no_partition_added=md.state is not S.ONGOING)),
    "complete": (None, lambda md: md.prepare_complete(20)),
    "dead": (S.DEAD, lambda md: md.prepare_dead()),
    "fence": (S.PREPARE_EPOCH_FENCE, lambda md: md.prepare_fence_producer_epoch()),
}
CURRENT = [s for s in S if s not in (S.DEAD, S.PREPARE_EPOCH_FENCE)]


@pytest.mark.parametrize("state", CURRENT, ids=lambda s: s.state_name)
@pytest.mark.parametrize("helper", list(PREPARES))
def test_each_prepare_helper_in_each_state(helper, state):
    target, call = PREPARES[helper]
    if target is None:  # prepare_complete picks Complete* from Prepare*
        target = S.COMPLETE_COMMIT if state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
    md = metadata(state)
    if (state, target) not in ALLOWED or (helper == "rotate producer id" and state is S.ONGOING):
        with pytest.raises((InvalidTransactionTransition, IllegalTransactionState)):
            call(md)
        assert md.pending_state is None
        return
    transit = call(md)
    assert transit.txn_state is target and md.pending_state is target and md.state is state
    with pytest.raises(IllegalTransactionState):  # one pending transition at a time
        call(md)
    if target not in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        md.complete_transition_to(transit)
        assert md.state is target and md.pending_state is None
        assert md.txn_last_update_timestamp_ms == transit.txn_last_update_timestamp_ms


def test_complete_transition_checks_the_transit_like_kafka():
    md = metadata(S.ONGOING)
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, 20)
    md.partitions.add(TP1)  # the partitions changed under the pending transition
    with pytest.raises(IllegalTransactionState):
        md.complete_transition_to(transit)
    with pytest.raises(IllegalTransactionState):
        metadata(S.EMPTY).complete_transition_to(transit)  # nothing pending
    md = metadata(S.EMPTY)
    dead = md.prepare_dead()
    with pytest.raises(IllegalTransactionState):  # Dead ends with a removal, never here
        md.complete_transition_to(dead)


# ---------------------------------------------------------------------------------------------
# every request in every state
def in_state(state):
    """A driver whose TID is in `state`, with the producer's (id, epoch); epoch 1, so an
    older epoch (0) exists, and no last epoch (the bump was asked without ids)."""
    d = Driver()
    d.own(TID)
    if state == "unknown":
        return d, 5000, 1
    d.ready(TID)
    pid, epoch = d.ready(TID)
    assert epoch == 1
    if state is S.EMPTY:
        return d, pid, epoch
    assert d.add(TID, pid, epoch, TP0).error == N
    if state == "pending":  # an append in flight
        d.auto_ack = False
        d.request(m.AddPartitionsToTxn, transactional_id=TID, producer_id=pid,
                  producer_epoch=epoch, partitions=(TP1,))
        return d, pid, epoch
    if state is S.ONGOING:
        return d, pid, epoch
    committed = state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT, "PrepareCommit, nothing pending")
    assert d.end(TID, pid, epoch, committed).error == N
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        d.write_markers()
    elif state == "PrepareCommit, nothing pending":  # its Complete* failed, not retried
        d.auto_ack = False
        d.write_markers()
        d.ack(d.appends[-1].token, E.NOT_LEADER_OR_FOLLOWER)
        d.auto_ack = True
    return d, pid, epoch


STATES = ["unknown", S.EMPTY, S.ONGOING, "pending", S.PREPARE_COMMIT, S.PREPARE_ABORT,
          S.COMPLETE_COMMIT, S.COMPLETE_ABORT, "PrepareCommit, nothing pending"]
STATE_NAMES = {S.PREPARE_COMMIT: "PrepareCommit", S.PREPARE_ABORT: "PrepareAbort"}


def ids(state):
    return getattr(state, "state_name", state)


def _add(d, pid, epoch, *tps, verify=False):
    return d.add(TID, pid, epoch, *tps, verify=verify)


REQUESTS = {  # (driver, producer id, epoch) → result
    "init": lambda d, pid, ep: d.init(TID),
    "init with its ids": lambda d, pid, ep: d.init(TID, pid=pid, epoch=ep),
    "init with an old epoch": lambda d, pid, ep: d.init(TID, pid=pid, epoch=ep - 1),
    "init with another id": lambda d, pid, ep: d.init(TID, pid=pid + 77, epoch=ep),
    "add": lambda d, pid, ep: _add(d, pid, ep, TP0),
    "add, old epoch": lambda d, pid, ep: _add(d, pid, ep - 1, TP0),
    "add, another id": lambda d, pid, ep: _add(d, pid + 77, ep, TP0),
    "add offsets": lambda d, pid, ep: d.add_offsets(TID, pid, ep),
    "verify": lambda d, pid, ep: _add(d, pid, ep, TP0, verify=True),
    "verify, old epoch": lambda d, pid, ep: _add(d, pid, ep - 1, TP0, verify=True),
    "commit": lambda d, pid, ep: d.end(TID, pid, ep, True),
    "abort": lambda d, pid, ep: d.end(TID, pid, ep, False),
    "commit, old epoch": lambda d, pid, ep: d.end(TID, pid, ep - 1, True),
    "describe": lambda d, pid, ep: d.describe(TID)[0],
}
#          unknown  Empty Ongoing pending  PC   PA   CC   CA  PC,nothing pending
TABLE = {
    "init": [N, N, C, C, C, C, N, N, C],
    "init with its ids": [N, N, C, C, C, C, N, N, C],
    "init with an old epoch": [N, F, C, C, C, C, F, F, C],
    "init with another id": [N, F, F, C, C, C, F, F, F],
    "add": [M, N, N, C, C, C, N, N, C],
    # Kafka 4 answers a pending transition first (the producer may already use the id of an
    # epoch overflow that is only pending)
    "add, old epoch": [M, F, F, C, C, C, F, F, F],
    "add, another id": [M, M, M, C, C, C, M, M, M],
    "add offsets": [M, N, N, C, C, C, N, N, C],
    "verify": [M, A, N, N, C, C, A, A, C],
    "verify, old epoch": [M, F, F, F, F, F, F, F, F],
    "commit": [M, X, N, C, C, C, N, X, C],
    "abort": [M, X, N, C, C, C, X, N, X],
    "commit, old epoch": [M, F, F, F, F, F, F, F, F],
    "describe": [E.TRANSACTIONAL_ID_NOT_FOUND, "Empty", "Ongoing", "Ongoing", "PrepareCommit",
                 "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareCommit"],
}


@pytest.mark.parametrize("state", STATES, ids=ids)
@pytest.mark.parametrize("request_kind", list(TABLE))
def test_each_request_in_each_state(request_kind, state):
    d, pid, epoch = in_state(state)
    res = REQUESTS[request_kind](d, pid, epoch)
    expected = TABLE[request_kind][STATES.index(state)]
    if isinstance(res, m.TransactionDescription) and res.error == E.NONE:
        assert res.state == expected
    else:
        assert res.error == expected, res
    if isinstance(res, m.AddPartitionsResult):
        assert set(res.partition_errors.values()) == {expected}


LOOKUPS = {
    "init": lambda d, tid: d.init(tid),
    "add": lambda d, tid: d.add(tid, 1000, 0, TP0),
    "verify": lambda d, tid: d.add(tid, 1000, 0, TP0, verify=True),
    "add offsets": lambda d, tid: d.add_offsets(tid, 1000, 0),
    "end": lambda d, tid: d.end(tid, 1000, 0),
    "describe": lambda d, tid: d.describe(tid)[0],
}


@pytest.mark.parametrize("kind", list(LOOKUPS))
@pytest.mark.parametrize("situation, expected", [
    ("empty id", E.INVALID_REQUEST), ("loading", E.COORDINATOR_LOAD_IN_PROGRESS),
    ("not owned", E.NOT_COORDINATOR), ("reloading", E.COORDINATOR_LOAD_IN_PROGRESS)])
def test_every_request_looks_its_id_up_in_kafkas_order(kind, situation, expected):
    d = Driver()
    if situation == "loading":
        d.send(m.BeginLoad(d.partition(TID)))
    elif situation == "reloading":  # an older load is still cached: loading wins
        d.ready(TID)
        d.send(m.BeginLoad(d.partition(TID)))
    res = LOOKUPS[kind](d, "" if situation == "empty id" else TID)
    assert res.error == expected


@pytest.mark.parametrize("kind", ["add", "verify", "add offsets", "end"])
def test_a_null_transactional_id_is_an_invalid_request_except_for_init(kind):
    d = Driver()
    assert LOOKUPS[kind](d, None).error == E.INVALID_REQUEST


# ---------------------------------------------------------------------------------------------
# InitProducerId
@pytest.mark.parametrize("pid, epoch", [(-1, 0), (5, -1)])
def test_init_needs_both_ids_or_neither(pid, epoch):
    d = Driver()
    d.own(TID)
    assert d.init(TID, pid=pid, epoch=epoch) == m.InitProducerIdResult(E.INVALID_REQUEST)


@pytest.mark.parametrize("timeout, ok", [(0, False), (-1, False), (1, True), (900_000, True),
                                         (900_001, False)])
def test_init_checks_the_transaction_timeout(timeout, ok):
    d = Driver()
    d.own(TID)
    res = d.init(TID, timeout=timeout)
    assert res.error == (E.NONE if ok else E.INVALID_TRANSACTION_TIMEOUT)


def test_init_without_a_transactional_id_is_an_idempotent_producer():
    d = Driver()
    assert d.init(None) == m.InitProducerIdResult(E.NONE, 1000, 0)
    assert d.init(None, timeout=0) == m.InitProducerIdResult(E.NONE, 1001, 0)
    assert d.appends == []


def test_a_new_transactional_id_is_written_before_it_is_answered():
    d = Driver(auto_ack=False)
    d.own(TID)
    rid = d.request(m.InitProducerId, transactional_id=TID, transaction_timeout_ms=5000)
    assert d.answer(rid) is None
    md = d.coord.transaction(TID)  # in the cache at once, epoch -1, as Kafka's
    assert (md.producer_id, md.producer_epoch, md.pending_state) == (1000, -1, S.EMPTY)
    assert R.decode_value(d.appends[0].records[0][1]) == R.TransactionLogValue(
        1000, 0, 5000, S.EMPTY.id, None, 0, -1)
    d.ack(d.appends[0].token)
    assert d.answer(rid) == m.InitProducerIdResult(E.NONE, 1000, 0)


def test_a_failed_first_write_keeps_the_producer_id_for_the_retry():
    d = Driver(auto_ack=False)
    d.own(TID)
    rid = d.request(m.InitProducerId, transactional_id=TID, transaction_timeout_ms=5000)
    d.ack(d.appends[0].token, E.NOT_ENOUGH_REPLICAS)
    assert d.answer(rid) == m.InitProducerIdResult(E.COORDINATOR_NOT_AVAILABLE)
    d.auto_ack = True
    assert d.init(TID) == m.InitProducerIdResult(E.NONE, 1000, 0)


def test_a_failing_producer_id_generator_answers_its_error():
    def unavailable():
        raise CoordinatorLoadInProgress("no block of producer ids yet")

    d = Driver()
    d.coord = TransactionCoordinator(1, d.clock, unavailable, d.config)
    d.own(TID)
    assert d.init(TID).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert d.init(None).error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_each_init_bumps_the_epoch_and_fences_the_last_producer():
    d = Driver()
    pid, epoch = d.ready(TID)
    assert d.init(TID) == m.InitProducerIdResult(E.NONE, pid, epoch + 1)
    assert d.add(TID, pid, epoch, TP0).error == E.PRODUCER_FENCED
    assert d.end(TID, pid, epoch).error == E.PRODUCER_FENCED


# -- KIP-360 -----------------------------------------------------------------------------------
def test_kip360_a_producer_bumps_its_own_epoch_and_may_retry_the_bump():
    d = Driver()
    pid, epoch = d.ready(TID)
    assert d.init(TID, pid=pid, epoch=epoch) == m.InitProducerIdResult(E.NONE, pid, epoch + 1)
    md = d.coord.transaction(TID)
    assert (md.producer_epoch, md.last_producer_epoch) == (epoch + 1, epoch)
    # the answer was lost: the same request again gets the same epoch, nothing bumped
    assert d.init(TID, pid=pid, epoch=epoch) == m.InitProducerIdResult(E.NONE, pid, epoch + 1)
    assert d.init(TID, pid=pid, epoch=epoch + 1) == m.InitProducerIdResult(E.NONE, pid, epoch + 2)
    assert d.init(TID, pid=pid, epoch=epoch).error == E.PRODUCER_FENCED


def test_kip360_a_new_producer_clears_the_last_epoch_so_the_old_retry_is_fenced():
    d = Driver()
    pid, epoch = d.ready(TID)
    assert d.init(TID, pid=pid, epoch=epoch).producer_epoch == epoch + 1
    assert d.init(TID).producer_epoch == epoch + 2                 # another producer
    assert d.coord.transaction(TID).last_producer_epoch == -1
    assert d.init(TID, pid=pid, epoch=epoch).error == E.PRODUCER_FENCED
    assert d.init(TID, pid=pid, epoch=epoch + 1).error == E.PRODUCER_FENCED


def test_kip360_after_a_reload_the_last_epoch_is_gone():
    """Kafka 3.8's log value has no last epoch: a retried bump across a coordinator move is
    fenced (TransactionMetadata.scala says so)."""
    d = Driver()
    pid, epoch = d.ready(TID)
    d.init(TID, pid=pid, epoch=epoch)
    d.unload(d.partition(TID))
    d.load(d.partition(TID))
    assert d.init(TID, pid=pid, epoch=epoch).error == E.PRODUCER_FENCED


def exhausted(d: Driver, epoch: int = 2**15 - 2) -> int:
    """TID loaded from a log holding producer 77, Empty at `epoch`; its producer id."""
    value = R.TransactionLogValue(77, epoch, 60_000, S.EMPTY.id, None, 0, -1)
    d.logs[d.partition(TID)].append(R.transaction_record(TID, value))
    d.own(TID)
    return 77


def test_an_exhausted_epoch_rotates_the_producer_id():
    d = Driver()
    exhausted(d)
    assert d.init(TID) == m.InitProducerIdResult(E.NONE, 1000, 0)
    md = d.coord.transaction(TID)
    assert (md.last_producer_id, md.last_producer_epoch) == (77, -1)


def test_kip360_an_exhausted_epoch_rotates_and_the_retry_is_recognised():
    d = Driver()
    exhausted(d)
    assert d.init(TID, pid=77, epoch=2**15 - 2) == m.InitProducerIdResult(E.NONE, 1000, 0)
    md = d.coord.transaction(TID)
    assert (md.last_producer_id, md.last_producer_epoch) == (77, 2**15 - 2)
    # the answer was lost: the old ids are still recognised, the new id is answered again
    assert d.init(TID, pid=77, epoch=2**15 - 2) == m.InitProducerIdResult(E.NONE, 1000, 0)


def test_the_last_usable_epoch_is_handed_out_then_rotated():
    d = Driver()
    exhausted(d, epoch=2**15 - 3)
    assert d.init(TID) == m.InitProducerIdResult(E.NONE, 77, 2**15 - 2)
    assert d.init(TID) == m.InitProducerIdResult(E.NONE, 1000, 0)


def test_kip360_a_stale_epoch_on_an_exhausted_producer_is_a_server_error():
    """Kafka's prepareIncrementProducerEpoch throws there; its request handler answers
    UNKNOWN_SERVER_ERROR."""
    d = Driver()
    exhausted(d)
    assert d.init(TID, pid=77, epoch=5).error == E.UNKNOWN_SERVER_ERROR
    assert d.coord.transaction(TID).pending_state is None


# -- old clients ---------------------------------------------------------------------------------
@pytest.mark.parametrize("request_kind, version, expected", [
    ("init", 3, E.INVALID_PRODUCER_EPOCH), ("init", 4, E.PRODUCER_FENCED),
    ("end", 1, E.INVALID_PRODUCER_EPOCH), ("end", 2, E.PRODUCER_FENCED),
    ("add", 1, E.INVALID_PRODUCER_EPOCH), ("add", 2, E.PRODUCER_FENCED),
    ("offsets", 1, E.INVALID_PRODUCER_EPOCH), ("offsets", 2, E.PRODUCER_FENCED),
])
def test_old_clients_get_invalid_producer_epoch_instead_of_fenced(request_kind, version,
                                                                   expected):
    d = Driver()
    pid, epoch = d.ready(TID)
    d.init(TID)
    res = {"init": lambda: d.init(TID, pid=pid, epoch=epoch, version=version),
           "end": lambda: d.end(TID, pid, epoch, version=version),
           "add": lambda: d.add(TID, pid, epoch, TP0, version=version),
           "offsets": lambda: d.add_offsets(TID, pid, epoch, version=version)}[request_kind]()
    assert res.error == expected
    assert for_version("AddPartitionsToTxn", 0, E.CONCURRENT_TRANSACTIONS) == C


# ---------------------------------------------------------------------------------------------
# AddPartitionsToTxn, AddOffsetsToTxn, verification
def test_adding_partitions_starts_the_transaction_and_stamps_its_start():
    d = Driver(now=1_000)
    pid, epoch = d.ready(TID)
    d.clock.now = 5_000
    assert d.add(TID, pid, epoch, TP0) == m.AddPartitionsResult(N, {TP0: N})
    d.clock.now = 6_000
    assert d.add(TID, pid, epoch, TP0, TP1) == m.AddPartitionsResult(N, {TP0: N, TP1: N})
    md = d.coord.transaction(TID)
    assert (md.state, md.partitions, md.txn_start_timestamp_ms,
            md.txn_last_update_timestamp_ms) == (S.ONGOING, {TP0, TP1}, 5_000, 6_000)
    appends = len(d.appends)
    assert d.add(TID, pid, epoch, TP1).error == N     # already in: answered at once
    assert len(d.appends) == appends


def test_add_offsets_adds_the_groups_offsets_partition():
    d = Driver(TransactionCoordinatorConfig(offsets_topic_num_partitions=7))
    pid, epoch = d.ready(TID)
    assert d.add_offsets(TID, pid, epoch, group="console-consumer-12345").error == N
    expected = R.partition_for("console-consumer-12345", 7)
    assert d.coord.transaction(TID).partitions == {("__consumer_offsets", expected)}


def test_verification_answers_partition_by_partition_and_writes_nothing():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    appends = len(d.appends)
    res = d.add(TID, pid, epoch, TP0, TP1, verify=True)
    assert res == m.AddPartitionsResult(E.NONE, {TP0: N, TP1: A})
    assert d.add(TID, pid, epoch, TP1, verify=True) == m.AddPartitionsResult(A, {TP1: A})
    assert len(d.appends) == appends and d.coord.transaction(TID).partitions == {TP0}


# ---------------------------------------------------------------------------------------------
# EndTxn, markers, completion
def test_commit_is_written_answered_then_marked_then_completed():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP1, TP0)
    d.auto_ack = False
    rid = d.request(m.EndTxn, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                    committed=True)
    assert d.answer(rid) is None and d.markers == []             # persist before answering
    assert d.coord.transaction(TID).pending_state is S.PREPARE_COMMIT
    effects = d.ack(d.appends[-1].token)
    wm = m.WriteMarkers(TID, pid, epoch, True, 0, (TP0, TP1))
    assert [type(e) for e in effects] == [m.Respond, m.WriteMarkers]
    assert effects[0].result == m.EndTxnResult(N) and effects[1] == wm
    md = d.coord.transaction(TID)
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    d.write_markers()
    assert R.decode_value(d.appends[-1].records[0][1]).transaction_status == S.COMPLETE_COMMIT.id
    d.ack(d.appends[-1].token)
    assert (md.state, md.pending_state, md.partitions) == (S.COMPLETE_COMMIT, None, set())
    assert d.end(TID, pid, epoch, True).error == N                # a retry
    assert d.end(TID, pid, epoch, False).error == X


def test_a_transaction_without_partitions_completes_without_markers():
    d = Driver()
    pid, epoch = d.ready(TID)
    d.call(m.AddPartitionsToTxn, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
           partitions=())
    assert d.coord.transaction(TID).state is S.ONGOING
    assert d.end(TID, pid, epoch, False).error == N
    assert d.markers == [] and d.coord.transaction(TID).state is S.COMPLETE_ABORT


@pytest.mark.parametrize("append_code, answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR), (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.INVALID_REQUIRED_ACKS, E.INVALID_REQUIRED_ACKS),
])
@pytest.mark.parametrize("request_kind", ["init", "add", "end"])
def test_a_failed_append_rolls_the_transition_back_and_answers_the_mapped_error(
        request_kind, append_code, answer):
    assert append_error(append_code) == answer
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0) if request_kind == "end" else d.ready(TID)
    before = d.coord.transaction(TID).to_log_value()
    d.auto_ack = False
    rid = {"init": lambda: d.request(m.InitProducerId, transactional_id=TID,
                                     transaction_timeout_ms=5000),
           "add": lambda: d.request(m.AddPartitionsToTxn, transactional_id=TID,
                                    producer_id=pid, producer_epoch=epoch, partitions=(TP1,)),
           "end": lambda: d.request(m.EndTxn, transactional_id=TID, producer_id=pid,
                                    producer_epoch=epoch, committed=True)}[request_kind]()
    d.ack(d.appends[-1].token, append_code)
    assert d.answer(rid).error == answer
    md = d.coord.transaction(TID)
    assert md.pending_state is None and md.to_log_value() == before and d.markers == []


def test_the_completion_is_retried_after_coordinator_not_available():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    d.end(TID, pid, epoch)
    d.auto_ack = False
    d.write_markers()
    d.ack(d.appends[-1].token, E.NOT_ENOUGH_REPLICAS)
    md = d.coord.transaction(TID)
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert d.coord.next_deadline_ms() == d.clock.now + LOG_APPEND_RETRY_BACKOFF_MS
    appends = len(d.appends)
    d.advance(LOG_APPEND_RETRY_BACKOFF_MS - 1)
    assert len(d.appends) == appends
    d.advance(1)
    assert len(d.appends) == appends + 1
    d.ack(d.appends[-1].token)
    assert (md.state, md.pending_state) == (S.COMPLETE_COMMIT, None)


def test_a_completion_lost_to_not_coordinator_waits_for_the_next_load():
    d, pid, epoch = in_state("PrepareCommit, nothing pending")
    md = d.coord.transaction(TID)
    assert (md.state, md.pending_state) == (S.PREPARE_COMMIT, None)
    d.advance(10 * LOG_APPEND_RETRY_BACKOFF_MS)
    assert md.state is S.PREPARE_COMMIT
    p = d.partition(TID)
    d.unload(p)
    d.load(p)
    assert d.markers[-1] == m.WriteMarkers(TID, pid, epoch, True, d.epochs[p], (TP0,))
    d.write_markers()
    assert d.coord.transaction(TID).state is S.COMPLETE_COMMIT


def test_markers_of_another_transaction_or_an_older_epoch_are_ignored():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    d.end(TID, pid, epoch, committed=True)
    wm = d.pending_markers[0]
    appends = len(d.appends)
    for stale in (m.MarkersWritten(TID, pid, epoch, True, wm.coordinator_epoch - 1),
                  m.MarkersWritten(TID, pid, epoch, False, wm.coordinator_epoch),
                  m.MarkersWritten(TID, pid, epoch + 1, True, wm.coordinator_epoch),
                  m.MarkersWritten(TID, pid + 1, epoch, True, wm.coordinator_epoch),
                  m.MarkersWritten("other", pid, epoch, True, wm.coordinator_epoch)):
        assert d.send(stale) == []
    assert len(d.appends) == appends
    d.write_markers()
    assert d.coord.transaction(TID).state is S.COMPLETE_COMMIT
    assert d.send(m.MarkersWritten(TID, pid, epoch, True, wm.coordinator_epoch)) == []


# ---------------------------------------------------------------------------------------------
# fencing: a new producer, and the timeout
def test_a_new_producer_fences_and_aborts_the_ongoing_transaction():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    res = d.init(TID)
    assert res == m.InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
    assert d.markers[-1] == m.WriteMarkers(TID, pid, epoch + 1, False, 0, (TP0,))
    assert d.add(TID, pid, epoch, TP1).error == E.CONCURRENT_TRANSACTIONS  # Complete* pending
    assert d.end(TID, pid, epoch, True).error == E.PRODUCER_FENCED
    assert d.init(TID).error == E.CONCURRENT_TRANSACTIONS         # markers still out
    d.write_markers()
    assert d.add(TID, pid, epoch, TP1).error == E.PRODUCER_FENCED
    assert d.init(TID) == m.InitProducerIdResult(E.NONE, pid, epoch + 2)
    logged = [R.decode_value(v) for _, _, v in d.written]
    assert [(v.transaction_status, v.producer_epoch) for v in logged][-3:] == [
        (S.PREPARE_ABORT.id, epoch + 1), (S.COMPLETE_ABORT.id, epoch + 1), (S.EMPTY.id, epoch + 2)]


def test_a_failed_fence_keeps_its_epoch_for_the_next_one():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    d.auto_ack = False
    rid = d.request(m.InitProducerId, transactional_id=TID, transaction_timeout_ms=5000)
    d.ack(d.appends[-1].token, E.NOT_ENOUGH_REPLICAS)
    assert d.answer(rid).error == E.COORDINATOR_NOT_AVAILABLE
    md = d.coord.transaction(TID)
    assert (md.state, md.producer_epoch, md.has_failed_epoch_fence) == (S.ONGOING, epoch + 1, True)
    assert d.add(TID, pid, epoch, TP1).error == E.PRODUCER_FENCED   # fenced in memory
    d.auto_ack = True
    assert d.init(TID).error == E.CONCURRENT_TRANSACTIONS
    assert d.markers[-1].producer_epoch == epoch + 1                 # not bumped twice
    d.write_markers()
    assert md.has_failed_epoch_fence is False


@pytest.mark.parametrize("late_ms, aborted", [(0, False), (1, True)])
def test_a_timed_out_transaction_is_fenced_and_aborted(late_ms, aborted):
    cfg = TransactionCoordinatorConfig(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=1_000)
    d = Driver(cfg)
    pid, epoch = d.ongoing(TID, TP0, timeout=5_000)      # started at 0
    d.clock.now = 5_000 + late_ms - 1_000
    d.advance(1_000)                   # a check at 5000 (+ late): aborts if start + timeout < now
    md = d.coord.transaction(TID)
    if not aborted:
        assert md.state is S.ONGOING and d.markers == []
        return
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert d.markers == [m.WriteMarkers(TID, pid, epoch + 1, False, 0, (TP0,))]
    d.write_markers()
    assert md.state is S.COMPLETE_ABORT
    assert d.end(TID, pid, epoch, True).error == E.PRODUCER_FENCED
    assert d.add(TID, pid, epoch, TP0).error == E.PRODUCER_FENCED


def test_the_timeout_check_runs_only_every_interval_and_skips_pending_transitions():
    cfg = TransactionCoordinatorConfig(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=10_000)
    d = Driver(cfg)
    pid, epoch = d.ongoing(TID, TP0, timeout=1_000)
    assert d.coord.next_deadline_ms() == 10_000
    d.advance(9_999)
    assert d.coord.transaction(TID).state is S.ONGOING
    d.auto_ack = False
    d.request(m.AddPartitionsToTxn, transactional_id=TID, producer_id=pid,
              producer_epoch=epoch, partitions=(TP1,))
    d.advance(1)                                          # due, but a transition is pending
    assert d.coord.transaction(TID).state is S.ONGOING and d.markers == []
    assert d.coord.next_deadline_ms() == 20_000
    d.ack(d.appends[-1].token)
    d.auto_ack = True
    d.advance(10_000)
    assert d.coord.transaction(TID).state is S.PREPARE_ABORT


def test_a_failed_timeout_abort_is_tried_again_with_the_same_epoch():
    cfg = TransactionCoordinatorConfig(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=1_000)
    d = Driver(cfg)
    pid, epoch = d.ongoing(TID, TP0, timeout=500)
    d.auto_ack = False
    d.advance(1_000)
    d.ack(d.appends[-1].token, E.NOT_LEADER_OR_FOLLOWER)
    md = d.coord.transaction(TID)
    assert (md.state, md.producer_epoch, md.pending_state) == (S.ONGOING, epoch + 1, None)
    d.auto_ack = True
    d.advance(1_000)
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)


# ---------------------------------------------------------------------------------------------
# loading and unloading
def test_load_replays_the_log_last_value_wins_and_tombstones_delete():
    d = Driver()
    p = d.partition(TID)
    other = next(t for t in (f"x{i}" for i in range(1000)) if d.partition(t) == p)
    ongoing = R.TransactionLogValue(5, 2, 9_000, S.ONGOING.id, (("t", (0, 1)),), 40, 30)
    d.logs[p] += [R.transaction_record(TID, R.TransactionLogValue(5, 1, 9_000, 0, None, 20, -1)),
                  R.transaction_record(other, ongoing),
                  R.transaction_record(TID, ongoing),
                  (b"\x00\x09junk", b""),                        # unknown key version
                  (R.encode_key("bad"), b"\x00\x07"),            # undecodable value
                  R.transaction_record(other, None)]
    d.load(p, epoch=4)
    assert d.coord.transaction(other) is None
    md = d.coord.transaction(TID)
    assert (md.producer_id, md.producer_epoch, md.state, md.partitions,
            md.txn_start_timestamp_ms) == (5, 2, S.ONGOING, {TP0, TP1}, 30)
    assert d.coord.owned_partitions == {p} and d.coord.coordinator_epoch(p) == 4
    assert d.markers == []


@pytest.mark.parametrize("state, committed", [(S.PREPARE_COMMIT, True),
                                              (S.PREPARE_ABORT, False)])
def test_load_sends_the_markers_of_a_prepared_transaction_again(state, committed):
    d = Driver()
    p = d.partition(TID)
    d.logs[p].append(R.transaction_record(
        TID, R.TransactionLogValue(5, 2, 9_000, state.id, (("t", (1, 0)),), 40, 30)))
    d.load(p, epoch=7)
    assert d.markers == [m.WriteMarkers(TID, 5, 2, committed, 7, (TP0, TP1))]
    md = d.coord.transaction(TID)
    assert md.pending_state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    assert d.end(TID, 5, 2, committed).error == E.CONCURRENT_TRANSACTIONS
    d.write_markers()
    assert md.state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)


def test_unload_answers_what_waits_and_ignores_what_comes_later():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    d.auto_ack = False
    p = d.partition(TID)
    rid = d.request(m.EndTxn, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                    committed=True)
    token = d.appends[-1].token
    d.unload(p)
    assert d.answer(rid) == m.EndTxnResult(E.NOT_COORDINATOR)
    assert d.coord.owned_partitions == frozenset() and d.coord.transaction(TID) is None
    assert d.ack(token) == []                                     # stale AppendDone
    assert d.send(m.AppendDone(12345)) == []                      # unknown token
    assert d.end(TID, pid, epoch).error == E.NOT_COORDINATOR
    d.load(p)                                                     # the PrepareCommit was written
    assert d.markers[-1] == m.WriteMarkers(TID, pid, epoch, True, d.epochs[p], (TP0,))


def test_a_reload_at_a_newer_epoch_replaces_the_old_one_and_a_stale_one_is_ignored():
    d = Driver()
    pid, epoch = d.ongoing(TID, TP0)
    p = d.partition(TID)
    d.end(TID, pid, epoch)                                        # markers out at epoch 0
    old = d.pending_markers.pop()
    d.load(p, epoch=3)                                            # re-elected: epoch 3
    assert d.markers[-1].coordinator_epoch == 3
    assert d.send(m.MarkersWritten(TID, pid, epoch, True, old.coordinator_epoch)) == []
    assert d.load(p, epoch=3) == [] and d.load(p, epoch=2) == []  # stale loads
    assert d.send(m.UnloadPartition(p, 2)) == []                  # a stale unload
    assert d.coord.owned_partitions == {p}
    d.write_markers()
    assert d.coord.transaction(TID).state is S.COMPLETE_COMMIT
    d.send(m.UnloadPartition(p, -1))                              # no epoch: always
    assert d.coord.owned_partitions == frozenset()


def test_list_transactions_while_loading():
    d = Driver()
    d.send(m.BeginLoad(3))
    assert d.call(m.ListTransactions) == m.ListTransactionsResult(E.COORDINATOR_LOAD_IN_PROGRESS)
    assert d.coord.loading_partitions == {3}
    d.load(3)
    assert d.call(m.ListTransactions).error == E.NONE


# ---------------------------------------------------------------------------------------------
# transactional id expiry
EXPIRY = TransactionCoordinatorConfig(
    transactional_id_expiration_ms=100_000,
    transaction_remove_expired_transaction_cleanup_interval_ms=10_000,
    transaction_abort_timed_out_transaction_cleanup_interval_ms=10_000_000)


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT,
                                   S.PREPARE_COMMIT])
def test_idle_transactional_ids_expire_in_empty_and_complete_states_only(state):
    d = Driver(EXPIRY)
    pid, epoch = d.ready(TID)
    if state is not S.EMPTY:
        d.add(TID, pid, epoch, TP0)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.PREPARE_COMMIT):
        d.end(TID, pid, epoch, state is not S.COMPLETE_ABORT)
        if state is not S.PREPARE_COMMIT:
            d.write_markers()
    d.advance(90_000)
    assert d.coord.transaction(TID) is not None
    d.advance(10_000)                                             # idle 100000 ms at 100000
    expires = state.expiration_allowed
    assert (d.coord.transaction(TID) is None) == expires
    if expires:
        assert d.written[-1][1:] == (R.encode_key(TID), None)
        assert d.add(TID, pid, epoch, TP0).error == E.INVALID_PRODUCER_ID_MAPPING
        assert d.init(TID) == m.InitProducerIdResult(E.NONE, pid + 1, 0)


def test_a_failed_tombstone_keeps_the_transactional_id():
    d = Driver(EXPIRY)
    pid, epoch = d.ready(TID)
    d.auto_ack = False
    d.advance(100_000)
    md = d.coord.transaction(TID)
    assert md.pending_state is S.DEAD
    assert d.describe(TID)[0].state == "Empty"
    assert d.init(TID).error == E.CONCURRENT_TRANSACTIONS        # expiry is a transition
    d.ack(d.appends[-1].token, E.NOT_ENOUGH_REPLICAS)
    assert d.coord.transaction(TID) is md and md.pending_state is None


# ---------------------------------------------------------------------------------------------
# DescribeTransactions, ListTransactions
def test_describe_shows_kafkas_fields():
    d = Driver(now=100)
    pid, epoch = d.ongoing(TID, TP1, TP0, timeout=7_000)
    assert d.describe(TID, "") == (
        m.TransactionDescription(E.NONE, TID, "Ongoing", 7_000, 100, pid, epoch, (TP0, TP1)),
        m.TransactionDescription(E.INVALID_REQUEST, ""))


def test_list_filters_by_state_producer_and_duration():
    d = Driver()
    tids = ["a1", "b2", "c3"]
    d.own(*tids)
    pa, ea = d.ongoing("a1", TP0)
    d.clock.now = 5_000
    pb, eb = d.ongoing("b2", TP0)
    pc, ec = d.ready("c3")

    def listed(**kw):
        res = d.call(m.ListTransactions, **kw)
        assert res.error == E.NONE
        return res.unknown_state_filters, {t.transactional_id for t in res.transactions}

    d.clock.now = 10_000
    assert listed() == ((), {"a1", "b2", "c3"})
    assert listed(state_filters=("Ongoing", "Nope", "ongoing")) == (("Nope", "ongoing"),
                                                                    {"a1", "b2"})
    assert listed(producer_id_filters=(pb, pc)) == ((), {"b2", "c3"})
    assert listed(duration_filter_ms=5_000) == ((), {"a1", "c3"})  # c3 never started (-1)
    assert listed(duration_filter_ms=10_001) == ((), set())
    res = d.call(m.ListTransactions, producer_id_filters=(pa,))
    assert res.transactions == (m.ListedTransaction("a1", pa, "Ongoing"),)


# ---------------------------------------------------------------------------------------------
# config and the deadline
def test_config_has_kafkas_names_and_defaults():
    cfg = TransactionCoordinatorConfig()
    assert (cfg.transaction_max_timeout_ms, cfg.transactional_id_expiration_ms,
            cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
            cfg.transaction_state_log_num_partitions, cfg.offsets_topic_num_partitions) == \
        (900_000, 604_800_000, 10_000, 3_600_000, 50, 50)
    assert cfg.transaction_remove_expired_transactional_id_cleanup_interval_ms == 3_600_000
    got = TransactionCoordinatorConfig.from_properties({
        "transaction.max.timeout.ms": "60000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": 5})
    assert (got.transaction_max_timeout_ms,
            got.transaction_remove_expired_transaction_cleanup_interval_ms) == (60_000, 5)
    with pytest.raises(ValueError):
        TransactionCoordinatorConfig.from_properties({"transaction.max.timeout": 1})
    with pytest.raises(ValueError):
        TransactionCoordinatorConfig(transaction_state_log_num_partitions=0)
    assert cfg.topic_configs()["cleanup.policy"] == "compact"


def test_next_deadline_is_the_first_periodic_job():
    d = Driver(now=1_000)
    assert d.coord.next_deadline_ms() == 11_000
    d.advance(10_000)
    assert d.coord.next_deadline_ms() == 21_000


def test_an_unknown_event_is_a_bug():
    with pytest.raises(TypeError):
        Driver().coord.process(object())
