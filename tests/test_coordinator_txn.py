"""Transactional offset commits (KIP-98, KIP-447) in the group coordinator, against Kafka's
rules (GroupCoordinator.scala handleTxnCommitOffsets, GroupMetadataManager.scala storeOffsets,
handleTxnCompletion and doLoadGroupsAndOffsets, GroupMetadata.scala's pending transactional
offsets).

Table-driven: TxnOffsetCommit in every group state and version, the group-status and member
checks, append errors. Then: the transactional Append, pending offsets and require_stable,
COMMIT/ABORT completion, the log-position rule against plain commits, load replays with
markers, unload/reload, completion during a load, expiry and deletion with pending offsets.
No Ray, no sockets: a fake clock and tests/coordinator_sim.py's Driver.
"""

import pytest

from coordinator import messages as m
from coordinator import records as R
from coordinator.config import GroupCoordinatorConfig
from coordinator.group import GroupMetadata, OffsetAndMetadata
from coordinator.states import GroupState as S
from replicas.errors import ErrorCode as E
from tests.coordinator_sim import Driver
from tests.test_coordinator import STATES, in_state, static_group

pytestmark = pytest.mark.unit

GID = "g"
TP, TP1 = ("t", 0), ("t", 1)
PID, OTHER = 1000, 2000


def errors(res) -> list[int]:
    return [p.error for p in res.partitions]


def owned(**config) -> Driver:
    d = Driver(GroupCoordinatorConfig(offsets_topic_num_partitions=1, **config))
    d.load(0)
    return d


def stable(d: Driver, tps=(TP,)) -> list[int]:
    return [p.error for p in d.fetch(GID, tps, require_stable=True).partitions]


# ---------------------------------------------------------------------------------------------
# every group state × the three shapes of a TxnOffsetCommit
TXN_REQUESTS = {  # (driver, follower, generation) → request id
    "v3 member": lambda d, f, g: d.txn_commit(GID, {TP: 5}, member_id=f, generation=g),
    "v3 no member": lambda d, f, g: d.txn_commit(GID, {TP: 5}),
    "v2 member fields": lambda d, f, g: d.txn_commit(GID, {TP: 5}, member_id="ghost",
                                                     generation=g + 7, version=2),
}
U, CNA = E.UNKNOWN_MEMBER_ID, E.COORDINATOR_NOT_AVAILABLE
#              unknown  Empty  Preparing  Completing  Stable  Dead
TXN_TABLE = {
    "v3 member": [U, U, 0, 0, 0, CNA],       # no state check: CompletingRebalance accepted
    "v3 no member": [0, 0, 0, 0, 0, CNA],    # a producer without group metadata: any state
    "v2 member fields": [0, 0, 0, 0, 0, CNA],  # v0-2 carry no member fields: never checked
}


@pytest.mark.parametrize("state", STATES, ids=lambda s: getattr(s, "value", s))
@pytest.mark.parametrize("kind", list(TXN_TABLE))
def test_txn_offset_commit_in_each_state(kind, state):
    d, follower, gen = in_state(state)
    before = d.coord.group(GID)
    deadline = None if before is None else {mid: x.heartbeat_deadline_ms
                                            for mid, x in before.members.items()}
    rid = TXN_REQUESTS[kind](d, follower, gen)
    assert errors(d.answer(rid)) == [TXN_TABLE[kind][STATES.index(state)]]
    group = d.coord.group(GID)
    assert group is not None  # an unknown group is created Empty, whatever the answer
    if state == "unknown":
        assert group.is_(S.EMPTY) and group.protocol_type is None
    if deadline is not None:  # a producer is not a member: no heartbeat
        assert {mid: x.heartbeat_deadline_ms for mid, x in group.members.items()} == deadline


def test_a_group_created_by_a_refused_txn_commit_is_cleaned_up():
    d = owned(offsets_retention_check_interval_ms=1000)
    res = d.answer(d.txn_commit(GID, {TP: 1}, member_id="m", generation=3))
    assert errors(res) == [E.UNKNOWN_MEMBER_ID] and d.coord.group(GID).is_(S.EMPTY)
    appended = len(d.appends)
    d.advance(1000)
    assert d.coord.group(GID) is None and len(d.appends) == appended  # generation 0: no tombstone


@pytest.mark.parametrize("case, expected", [
    ("fenced", E.FENCED_INSTANCE_ID), ("unknown instance", E.UNKNOWN_MEMBER_ID),
    ("unknown member", E.UNKNOWN_MEMBER_ID), ("old generation", E.ILLEGAL_GENERATION),
    ("newer generation", E.ILLEGAL_GENERATION), ("fine", E.NONE)])
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_kip_447_member_checks_from_v3(case, expected, version):
    d = Driver()
    leader, follower = static_group(d)
    mid, gen, inst = {
        "fenced": (leader, 0, "s1"),           # s1 is mapped to another member: checked first
        "unknown instance": (follower, 1, "nope"),
        "unknown member": ("stranger", 0, None),
        "old generation": (follower, 0, "s1"),
        "newer generation": (follower, 2, None),
        "fine": (follower, 1, "s1"),
    }[case]
    rid = d.txn_commit(GID, {TP: 4}, member_id=mid, generation=gen, instance=inst,
                       version=version)
    assert errors(d.answer(rid)) == [expected if version >= 3 else E.NONE]


# ---------------------------------------------------------------------------------------------
# the group status comes first
@pytest.mark.parametrize("version, loading_answer", [
    (0, E.COORDINATOR_NOT_AVAILABLE), (1, E.COORDINATOR_NOT_AVAILABLE),  # KAFKA-7296
    (2, E.COORDINATOR_LOAD_IN_PROGRESS), (3, E.COORDINATOR_LOAD_IN_PROGRESS),
    (4, E.COORDINATOR_LOAD_IN_PROGRESS)])
def test_group_status_errors(version, loading_answer):
    d = Driver(GroupCoordinatorConfig(offsets_topic_num_partitions=2))
    assert errors(d.answer(d.txn_commit(GID, {TP: 1, TP1: 2}, version=version))) == \
        [E.NOT_COORDINATOR] * 2
    d.send(m.BeginLoad(d.partition(GID)))
    assert errors(d.answer(d.txn_commit(GID, {TP: 1}, version=version))) == [loading_answer]
    d.load(d.partition(GID))
    d.load(d.partition(""))
    # unlike OffsetCommit, TxnOffsetCommit has no backward-compatible empty group id
    assert errors(d.answer(d.txn_commit("", {TP: 1}, version=version))) == [E.INVALID_GROUP_ID]
    assert d.coord.group("") is None and not d.appends


# ---------------------------------------------------------------------------------------------
def test_the_append_is_one_transactional_batch_and_the_offsets_stay_pending():
    d = owned()
    d.auto_ack = False
    rid = d.txn_commit(GID, {TP: 7, TP1: 8}, producer_id=PID, epoch=3)
    (append,) = d.appends
    assert (append.partition, append.producer_id, append.producer_epoch, append.transactional) == \
        (0, PID, 3, True)
    assert [R.decode_key(r.key) for r in append.records] == \
        [R.OffsetCommitKey(GID, "t", 0), R.OffsetCommitKey(GID, "t", 1)]
    assert [R.decode_offset_commit_value(r.value).offset for r in append.records] == [7, 8]
    assert d.answer(rid) is None and stable(d, (TP, TP1)) == [E.UNSTABLE_OFFSET_COMMIT] * 2
    d.ack(append.token)
    assert errors(d.answer(rid)) == [E.NONE, E.NONE]
    assert d.committed(GID, TP) == -1 and d.fetch(GID).partitions == ()  # not visible
    assert stable(d, (TP, TP1, ("t", 2))) == [E.UNSTABLE_OFFSET_COMMIT] * 2 + [E.NONE]
    d.commit(GID, {TP: 1})
    d.ack(d.appends[-1].token)
    assert d.appends[-1].producer_id == -1 and not d.appends[-1].transactional  # plain: no pid
    # per partition: the committed value is there, still unstable under require_stable
    assert d.committed(GID, TP) == 1 and stable(d, (TP,)) == [E.UNSTABLE_OFFSET_COMMIT]
    assert d.fetch(GID).partitions == (m.FetchedOffset("t", 0, 1),)  # committed ones only


def test_metadata_too_large_fails_only_its_partition_and_alone_appends_nothing():
    d = owned()
    rid = d.request(m.TxnOffsetCommit, transactional_id="tx", group_id=GID, producer_id=PID,
                    producer_epoch=0, offsets=(m.CommitOffset("t", 0, 1, metadata="x" * 4097),
                                               m.CommitOffset("t", 1, 2, metadata=None)))
    assert errors(d.answer(rid)) == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert [R.decode_key(r.key).partition for r in d.appends[-1].records] == [1]
    appended = len(d.appends)
    rid = d.txn_commit(GID, {TP: 1}, metadata="y" * 5000)
    assert errors(d.answer(rid)) == [E.OFFSET_METADATA_TOO_LARGE] and len(d.appends) == appended


@pytest.mark.parametrize("append_error, answer, v1_answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR, E.NOT_COORDINATOR),
    (E.RECORD_LIST_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE, E.INVALID_COMMIT_OFFSET_SIZE),
    (E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE),
    (E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH, E.INVALID_PRODUCER_EPOCH),
    (E.PRODUCER_FENCED, E.PRODUCER_FENCED, E.PRODUCER_FENCED),
    (E.INVALID_TXN_STATE, E.INVALID_TXN_STATE, E.INVALID_TXN_STATE),
    (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT),
])
@pytest.mark.parametrize("version", [1, 3])
def test_a_failed_append_drops_the_pending_offsets(append_error, answer, v1_answer, version):
    d = owned()
    d.auto_ack = False
    rid = d.txn_commit(GID, {TP: 2, TP1: 3}, version=version)
    d.ack(d.appends[-1].token, append_error)
    assert errors(d.answer(rid)) == [answer if version >= 2 else v1_answer] * 2
    assert stable(d, (TP, TP1)) == [E.NONE, E.NONE] and not d.coord.group(GID).txn_offsets
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == -1


def test_unload_answers_an_append_in_flight_not_coordinator():
    d = owned()
    d.auto_ack = False
    rid = d.txn_commit(GID, {TP: 2})
    token = d.appends[-1].token
    d.unload(0)
    assert errors(d.answer(rid)) == [E.NOT_COORDINATOR]
    d.ack(token)  # ignored: no second answer
    d.load(0)     # the record did land: pending again, from the log
    assert stable(d) == [E.UNSTABLE_OFFSET_COMMIT]


# ---------------------------------------------------------------------------------------------
# the marker: CompleteTxn
@pytest.mark.parametrize("committed", [True, False])
def test_complete_txn_commits_or_aborts_the_producers_pending_offsets(committed):
    d = owned()
    d.commit(GID, {TP: 1})
    d.txn_commit(GID, {TP: 5, TP1: 6}, producer_id=PID)
    d.txn_commit(GID, {TP: 9}, producer_id=OTHER)
    d.marker(PID, (0,), committed)
    expected = (5, 6) if committed else (1, -1)
    assert (d.committed(GID, TP), d.committed(GID, TP1)) == expected
    assert stable(d, (TP, TP1)) == [E.UNSTABLE_OFFSET_COMMIT, E.NONE]  # OTHER still open
    d.marker(OTHER, (0,), committed=True)
    assert d.committed(GID, TP) == 9 and stable(d, (TP, TP1)) == [E.NONE, E.NONE]


def test_complete_txn_of_other_partitions_or_other_producers_changes_nothing():
    d = Driver(GroupCoordinatorConfig(offsets_topic_num_partitions=4))
    d.own(GID, "a")
    mine = d.partition(GID)
    assert d.partition("a") != mine
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    d.txn_commit("a", {TP: 6}, producer_id=PID)
    d.send(m.CompleteTxn(PID, (d.partition("a"),), True))
    d.send(m.CompleteTxn(OTHER, (mine,), True))
    assert d.committed(GID, TP) == -1 and d.committed("a", TP) == 6
    assert stable(d) == [E.UNSTABLE_OFFSET_COMMIT]
    d.send(m.CompleteTxn(PID, (mine,), True))
    assert d.committed(GID, TP) == 5


def test_one_marker_completes_every_group_of_the_partition_and_a_new_transaction_follows():
    d = owned()
    d.txn_commit("a", {TP: 1}, producer_id=PID)
    d.txn_commit("b", {TP: 2}, producer_id=PID)
    d.marker(PID, (0,), committed=False)
    assert d.committed("a", TP) == d.committed("b", TP) == -1
    d.txn_commit("a", {TP: 3}, producer_id=PID)  # the next transaction of the producer
    assert d.fetch("a", (TP,), require_stable=True).partitions[0].error == E.UNSTABLE_OFFSET_COMMIT
    assert d.fetch("b", (TP,), require_stable=True).partitions[0].error == E.NONE
    d.marker(PID, (0,), committed=True)
    assert d.committed("a", TP) == 3 and d.committed("b", TP) == -1


# ---------------------------------------------------------------------------------------------
# the log-position rule (CommitRecordMetadataAndOffset.olderThan)
@pytest.mark.parametrize("order, expected", [
    (("txn", "plain"), 2),   # the plain commit is later in the log: it stays
    (("plain", "txn"), 1),   # the transactional offset is later: the COMMIT makes it current
])
def test_a_committed_transaction_and_a_plain_commit_keep_the_later_in_the_log(order, expected):
    d = owned()
    for kind in order:
        if kind == "txn":
            d.txn_commit(GID, {TP: 1}, producer_id=PID)
        else:
            d.commit(GID, {TP: 2})
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == expected
    d.unload(0)
    d.load(0)  # the log replays to the same answer
    assert d.committed(GID, TP) == expected


def test_a_plain_commit_acknowledged_after_the_marker_but_appended_before_loses():
    d = owned()
    d.auto_ack = False
    d.commit(GID, {TP: 2})
    plain = d.appends[-1].token
    d.txn_commit(GID, {TP: 1}, producer_id=PID)
    d.ack(d.appends[-1].token)
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == 1
    d.ack(plain)  # earlier in the log than the transactional offset
    assert d.committed(GID, TP) == 1


def test_a_transactional_offset_appended_before_a_loaded_commit_loses():
    d = owned()
    d.auto_ack = False
    d.txn_commit(GID, {TP: 1}, producer_id=PID)
    d.ack(d.appends[-1].token)
    d.commit(GID, {TP: 2})
    token = d.appends[-1].token
    d.unload(0)
    d.ack(token)  # acknowledged too late for the cache, but in the log
    d.load(0)
    assert d.committed(GID, TP) == 2 and stable(d) == [E.UNSTABLE_OFFSET_COMMIT]
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == 2


def test_a_failed_retry_does_not_drop_an_acknowledged_transactional_offset():
    d = owned()
    d.auto_ack = False
    d.txn_commit(GID, {TP: 1}, producer_id=PID)
    first = d.appends[-1].token
    d.txn_commit(GID, {TP: 2}, producer_id=PID)
    second = d.appends[-1].token
    d.ack(second)
    d.ack(first)  # acknowledged last, but earlier in the log: 2 stays the producer's
    d.txn_commit(GID, {TP: 3}, producer_id=PID)
    d.ack(d.appends[-1].token, E.NOT_ENOUGH_REPLICAS)
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == 2


@pytest.mark.parametrize("committed, outcome, expected", [
    (True, E.NONE, 4), (True, E.NOT_ENOUGH_REPLICAS, -1), (False, E.NONE, -1)])
def test_an_append_in_flight_at_the_marker_is_resolved_by_it(committed, outcome, expected):
    d = owned()
    d.auto_ack = False
    rid = d.txn_commit(GID, {TP: 4}, producer_id=PID)
    token = d.appends[-1].token
    d.marker(PID, (0,), committed)
    # a commit now waits for the append: the partition stays unstable until it lands
    assert stable(d) == [E.UNSTABLE_OFFSET_COMMIT if committed else E.NONE]
    d.ack(token, outcome)
    answer = E.NONE if outcome == E.NONE else E.COORDINATOR_NOT_AVAILABLE
    assert errors(d.answer(rid)) == [answer]
    assert d.committed(GID, TP) == expected and stable(d) == [E.NONE]
    assert d.coord.group(GID).has_offsets() == (expected != -1)


# ---------------------------------------------------------------------------------------------
# loading: transactional records and markers, in log order
def log_of(*items) -> tuple:
    """("plain", v) / ("txn", pid, v) / ("commit"|"abort", pid) → records with log offsets."""
    out = []
    for item in items:
        if item[0] in ("commit", "abort"):
            out.append(R.TxnMarkerRecord(item[1], item[0] == "commit", len(out)))
        else:
            pid = item[1] if item[0] == "txn" else -1
            r = R.offset_commit_record(GID, "t", 0, R.OffsetCommitValue(item[-1]))
            out.append(R.OffsetsRecord(r.key, r.value, pid, item[0] == "txn", len(out)))
    return tuple(out)


@pytest.mark.parametrize("log, committed, unstable", [
    (log_of(("txn", PID, 5), ("commit", PID)), 5, False),
    (log_of(("plain", 1), ("txn", PID, 5), ("abort", PID)), 1, False),
    (log_of(("plain", 1), ("txn", PID, 5)), 1, True),                     # no marker yet
    (log_of(("txn", PID, 5), ("commit", OTHER)), -1, True),               # not its marker
    (log_of(("txn", PID, 5), ("plain", 2), ("commit", PID)), 2, False),   # the plain one later
    (log_of(("plain", 2), ("txn", PID, 5), ("commit", PID)), 5, False),
    (log_of(("txn", PID, 5), ("commit", PID), ("txn", PID, 6), ("abort", PID)), 5, False),
    (log_of(("txn", PID, 5), ("txn", OTHER, 7), ("commit", OTHER), ("commit", PID)), 7, False),
])
def test_load_replays_transactional_records_and_markers(log, committed, unstable):
    d = Driver(GroupCoordinatorConfig(offsets_topic_num_partitions=1))
    d.send(m.LoadPartition(0, log))
    group = d.coord.group(GID)
    assert group.is_(S.EMPTY) and group.protocol_type is None  # offsets only: a simple group
    assert d.committed(GID, TP) == committed
    assert stable(d) == [E.UNSTABLE_OFFSET_COMMIT if unstable else E.NONE]
    if unstable:  # the marker left to come arrives as CompleteTxn
        d.send(m.CompleteTxn(PID, (0,), True))
        assert d.committed(GID, TP) == 5 and stable(d) == [E.NONE]


def test_load_keeps_old_callers_records_without_producer_or_offset():
    records = (R.offset_commit_record(GID, "t", 0, R.OffsetCommitValue(1)),
               R.offset_commit_record(GID, "t", 0, R.OffsetCommitValue(2)))
    assert records[0] == R.OffsetsRecord(records[0].key, records[0].value, -1, False, -1)
    d = Driver(GroupCoordinatorConfig(offsets_topic_num_partitions=1))
    d.send(m.LoadPartition(0, records))
    assert d.committed(GID, TP) == 2


def test_unload_drops_pending_offsets_and_reload_restores_the_same_state():
    d = owned()
    d.commit(GID, {TP: 1})
    d.txn_commit(GID, {TP: 2, TP1: 3}, producer_id=PID)        # committed below
    d.txn_commit(GID, {("t", 2): 4}, producer_id=OTHER)        # aborted below
    d.marker(PID, (0,), committed=True)
    d.marker(OTHER, (0,), committed=False)
    d.txn_commit(GID, {TP: 5, ("t", 3): 6}, producer_id=PID)   # left open
    d.txn_commit("simple", {TP: 7}, producer_id=OTHER)         # a group with pending only
    tps = (TP, TP1, ("t", 2), ("t", 3))

    def state():
        return [(gid, d.fetch(gid, tps), d.fetch(gid, tps, require_stable=True))
                for gid in (GID, "simple")]

    before = state()
    assert [p.offset for p in before[0][1].partitions] == [2, 3, -1, -1]
    d.unload(0)
    assert d.coord.group(GID) is None and d.coord.group("simple") is None
    d.send(m.CompleteTxn(PID, (0,), True))  # not owned: ignored (no marker in this log)
    d.load(0)
    assert state() == before
    assert d.coord.group("simple").is_(S.EMPTY)
    d.marker(PID, (0,), committed=True)
    d.marker(OTHER, (0,), committed=False)
    assert [d.committed(GID, tp) for tp in tps] == [5, 3, -1, 6]
    assert d.committed("simple", TP) == -1


def test_a_marker_told_while_the_partition_loads_is_applied_after_the_load():
    d = owned()
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    d.unload(0)
    d.send(m.BeginLoad(0))
    read = tuple(d.logs[0])              # the load reads the log before the marker lands
    d.marker(PID, (0,), committed=True)  # CompleteTxn while loading: Kafka's one scheduler thread
    d.send(m.LoadPartition(0, read))
    assert d.committed(GID, TP) == 5 and stable(d) == [E.NONE]


def test_a_marker_the_load_already_read_is_not_applied_twice():
    d = owned()
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    d.unload(0)
    d.send(m.BeginLoad(0))
    d.marker(PID, (0,), committed=True)
    d.load(0)                            # read after the marker
    assert d.committed(GID, TP) == 5
    d.unload(0)
    d.load(0)
    assert d.committed(GID, TP) == 5


# ---------------------------------------------------------------------------------------------
# expiry and deletion (GroupMetadata.removeExpiredOffsets, cleanupGroupMetadata, DeleteGroups)
def test_an_empty_group_with_only_pending_offsets_is_kept_until_they_end():
    d = owned(offsets_retention_check_interval_ms=1000)
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    for _ in range(3):
        d.advance(1000)
    assert d.coord.group(GID) is not None  # hasOffsets counts pending transactional offsets
    d.marker(PID, (0,), committed=False)
    d.advance(1000)
    assert d.coord.group(GID) is None


def test_a_pending_transactional_offset_does_not_spare_the_committed_one_from_expiry():
    d = owned(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    d.commit(GID, {TP: 1})
    d.clock.now += 60_000
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    d.advance(10_000)
    assert d.committed(GID, TP) == -1  # expired: only plain commits in flight spare it
    assert d.appends[-1].records == (R.offset_commit_record(GID, "t", 0, None),)
    assert d.coord.group(GID) is not None
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == 5


def test_deleting_an_empty_group_drops_its_pending_offsets_as_kafka_does():
    d = owned()
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    res = d.call(m.DeleteGroups, group_ids=(GID,))
    assert res.groups[0].error == E.NONE and d.coord.group(GID) is None  # not NON_EMPTY_GROUP
    d.marker(PID, (0,), committed=True)
    assert d.committed(GID, TP) == -1
    # Kafka writes no tombstone for an offset that was only pending: a reload replays the
    # committed transaction and the group is back
    d.unload(0)
    d.load(0)
    assert d.committed(GID, TP) == 5


def test_deleting_a_group_drops_an_append_in_flight_and_a_new_group_starts_clean():
    d = owned()
    d.auto_ack = False
    d.txn_commit(GID, {TP: 5}, producer_id=PID)
    token = d.appends[-1].token
    assert d.call(m.DeleteGroups, group_ids=(GID,)).groups[0].error == E.NONE
    d.txn_commit(GID, {TP1: 6}, producer_id=PID)  # the producer's transaction goes on
    d.ack(token)
    d.ack(d.appends[-1].token)
    d.marker(PID, (0,), committed=True)
    assert (d.committed(GID, TP), d.committed(GID, TP1)) == (-1, 6)


def test_removing_a_partitions_offsets_drops_its_pending_ones_of_every_producer():
    """GroupMetadata.removeOffsets (OffsetDelete, DeleteGroups): pending transactional offsets
    of the partition go too, acknowledged, in flight or resolved; other partitions stay."""
    group = GroupMetadata(GID)
    v = OffsetAndMetadata(1)
    group.prepare_txn_offset_commit(PID, {TP: v, TP1: v}, 1)
    group.on_txn_offset_commit_append(PID, {TP: v, TP1: v}, 1)
    group.prepare_txn_offset_commit(OTHER, {TP: v}, 2)
    group.complete_pending_txn_offset_commit(OTHER, True)   # token 2 resolved while in flight
    assert group.has_pending_offset_commits(TP) and group.has_pending_offset_commits(TP1)
    group.remove_offsets([TP])
    assert not group.has_pending_offset_commits(TP) and group.has_pending_offset_commits(TP1)
    group.on_txn_offset_commit_append(OTHER, {TP: v}, 2)
    assert group.offset(TP) is None
