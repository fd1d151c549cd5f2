"""Transactions on the ReplicaManager (replicas/replica_manager.py, producer_log.py): three
brokers replicating by direct calls (tests/replication_harness.py).

Kafka's log side of transactions: KIP-890 verification guards, WriteTxnMarkers on the
leader (acks=all semantics, its errors), the last stable offset against the HW,
read_committed fetches and ListOffsets, followers writing the same `.txnindex` bytes,
truncation, recovery from a kill (torn tail, missing or torn `.txnindex`), retention, and
a read_committed consumer (a small copy of the Kafka client's filter) that must see exactly
the committed records whatever the interleaving."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicas import control, records
from replicas.checkpoints import recovery_point_checkpoint
from replicas.errors import NotLeaderOrFollower, UnknownTopicOrPartition
from replicas.replica_manager import READ_COMMITTED, FetchResult, ProduceDone
from tests.replication_harness import Cluster

pytestmark = pytest.mark.unit

ALL = -1
PID, EPOCH = 4000, 0


class Producer:
    """A transactional producer as the shell drives the leader: needs_verification, then
    maybe_start_verification (before the coordinator would be asked), then the append."""

    def __init__(self, cluster: Cluster, tp, pid: int = PID, epoch: int = EPOCH):
        self.cluster, self.tp, self.pid, self.epoch, self.seq = cluster, tp, pid, epoch, 0

    def leader(self):
        return self.cluster.brokers[self.cluster.leadership[self.tp].leader]

    def batch(self, n: int, tag: bytes, transactional: bool = True) -> bytes:
        return bytes(records.build_batch([tag + b"-%d" % (self.seq + i) for i in range(n)],
                                         timestamps_ms=1_000, producer_id=self.pid,
                                         producer_epoch=self.epoch, base_sequence=self.seq,
                                         transactional=transactional))

    def send(self, n: int = 2, tag: bytes = b"t", transactional: bool = True, acks: int = 1,
             guard="verify"):
        buf = self.batch(n, tag, transactional)
        rm = self.leader()
        if guard == "verify":
            asked = rm.needs_verification(self.tp, buf)
            guard = rm.maybe_start_verification(self.tp, *asked, self.seq) if asked else None
        result = rm.append(self.tp, buf, acks, 30_000, verification_guard=guard)
        if result.error == 0 and not result.duplicate:
            self.seq += n
        return result

    def end(self, commit: bool, coordinator_epoch: int = 0, epoch: int | None = None):
        result = self.leader().append_markers(self.tp, self.pid, self.epoch if epoch is None
                                              else epoch, commit, coordinator_epoch, 30_000,
                                              timestamp_ms=2_000)
        return result


def txn_files(rm, tp) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(rm.log(tp).dir.glob("*.txnindex"))}


def info(cluster, b, tp):
    return cluster.brokers[b].partition_info(tp)


@pytest.fixture
def cluster(tmp_path):
    return Cluster(tmp_path)


# ---------------------------------------------------------------- the leader's story
def test_a_transaction_from_verification_to_read_committed(cluster):
    tp = cluster.create("orders", config={"segment.bytes": "400"})
    leader, p = cluster.brokers[1], Producer(cluster, tp)
    assert leader.append(tp, bytes(records.build_batch([b"plain"], timestamps_ms=1)), 1,
                         1000).error == 0
    assert p.send(2, b"a").error == 0                        # offsets 1-2: the transaction
    cluster.replicate()
    assert info(cluster, 1, tp)["high_watermark"] == 3
    assert leader.last_stable_offset(tp) == info(cluster, 1, tp)["last_stable_offset"] == 1
    committed = leader.fetch(tp, 0, 1 << 20, isolation_level=READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (3, 1)
    assert [r.value for r in records.decode_records(committed.records)] == [b"plain"]
    assert committed.aborted_transactions == ()
    uncommitted = leader.fetch(tp, 0, 1 << 20)
    assert len(records.decode_records(uncommitted.records)) == 3
    assert uncommitted.last_stable_offset == 1 and uncommitted.aborted_transactions is None
    assert not leader.fetch_ready(tp, 1, isolation_level=READ_COMMITTED)
    assert leader.fetch_ready(tp, 1)
    assert leader.list_offset(tp, -1, isolation_level=READ_COMMITTED).offset == 1
    assert leader.list_offset(tp, -1).offset == 3
    assert leader.list_offset(tp, 1, isolation_level=READ_COMMITTED).offset == 0
    assert leader.list_offset(tp, 1_000, isolation_level=READ_COMMITTED).offset == -1
    assert leader.list_offset(tp, 1_000).offset == 1
    # the ABORT: answered like an acks=all produce once the HW passes the marker
    marker = p.end(commit=False)
    assert (marker.error, marker.base_offset) == (0, 3) and marker.pending_id is not None
    assert leader.last_stable_offset(tp) == 1                # marker not below the HW yet
    cluster.replicate()
    assert cluster.done[(1, marker.pending_id)] == ProduceDone(marker.pending_id, 0, 3, 3)
    assert leader.last_stable_offset(tp) == 4 == info(cluster, 1, tp)["high_watermark"]
    got = leader.fetch(tp, 0, 1 << 20, isolation_level=READ_COMMITTED)
    assert got.aborted_transactions == ((PID, 1),) and got.last_stable_offset == 4
    assert leader.fetch_ready(tp, 1, isolation_level=READ_COMMITTED)
    quiet = FetchResult(0, b"", *leader.leader_marks(tp, isolation_level=READ_COMMITTED))
    assert (quiet.high_watermark, quiet.last_stable_offset, quiet.aborted_transactions,
            quiet.diverging_epoch) == (4, 4, (), None)
    assert FetchResult(0, b"", *leader.leader_marks(tp)).aborted_transactions is None
    # every replica wrote the same `.txnindex` bytes: one AbortedTxn, LSO = marker + 1
    entry = (0).to_bytes(2, "big") + b"".join(x.to_bytes(8, "big") for x in (PID, 1, 3, 4))
    assert txn_files(leader, tp) == txn_files(cluster.brokers[2], tp) == \
        txn_files(cluster.brokers[3], tp) and entry in txn_files(leader, tp).values()
    assert [info(cluster, b, tp)["last_stable_offset"] for b in (1, 2, 3)] == [4, 4, 4]


def test_verification_guards(cluster):
    tp = cluster.create("orders")
    leader, p = cluster.brokers[1], Producer(cluster, tp)
    assert p.send(1, guard=None).error == 48                 # no guard, nothing open
    buf = p.batch(1, b"x")
    assert leader.needs_verification(tp, buf) == (PID, EPOCH)
    assert leader.needs_verification(tp, p.batch(1, b"x", transactional=False)) is None
    with pytest.raises(NotLeaderOrFollower):
        cluster.brokers[2].maybe_start_verification(tp, PID, EPOCH, 0)
    with pytest.raises(UnknownTopicOrPartition):
        leader.maybe_start_verification(("nope", 0), PID, EPOCH, 0)
    guard = leader.maybe_start_verification(tp, PID, EPOCH, 0)
    assert leader.maybe_start_verification(tp, PID, EPOCH, 0) == guard     # the same until used
    cluster.elect(tp, 1)           # the same leader at a new epoch keeps it, as Kafka does
    assert leader.maybe_start_verification(tp, PID, EPOCH, 0) == guard
    cluster.elect(tp, 2)
    cluster.elect(tp, 1)                                     # a leadership that moved ends it
    assert leader.append(tp, buf, 1, 1000, verification_guard=guard).error == 48
    guard = leader.maybe_start_verification(tp, PID, EPOCH, 0)
    assert leader.append(tp, buf, 1, 1000, verification_guard=guard).error == 0
    p.seq = 1
    assert leader.maybe_start_verification(tp, PID, EPOCH, 1) is None      # open: no need
    assert p.send(1, guard=None).error == 0
    assert p.send(1, transactional=False).error == 48        # idempotent inside a transaction
    assert p.end(commit=True).error == 0
    assert p.send(1, guard=guard).error == 48                # the old guard is spent
    control_batch = bytes(control.end_txn_marker_batch(PID, EPOCH, control.COMMIT, 0, 5))
    assert leader.append(tp, control_batch, 1, 1000).error == 87     # clients never write them


def test_write_txn_markers_errors(cluster):
    tp = cluster.create("orders", config={"min.insync.replicas": "2"})
    p = Producer(cluster, tp, epoch=3)
    assert p.send(1).error == 0
    assert cluster.brokers[2].append_markers(tp, PID, 3, True, 0, 1000).error == 6
    assert cluster.brokers[1].append_markers(("nope", 0), PID, 3, True, 0, 1000).error == 3
    elsewhere = cluster.create("elsewhere", replicas=(1, 2))
    cluster.update_metadata(3)                   # broker 3 knows it but holds no replica:
    assert cluster.brokers[3].append(elsewhere, p.batch(1, b"x"), 1, 1000).error == 6
    assert cluster.brokers[3].append_markers(elsewhere, PID, 3, True, 0, 1000).error == 3
    assert p.end(commit=False, epoch=2).error == 47           # an older producer epoch
    assert p.end(commit=False, coordinator_epoch=7).error == 0
    assert p.end(commit=True, coordinator_epoch=6).error == 52          # a fenced coordinator
    assert p.end(commit=True, coordinator_epoch=7).error == 0           # nothing open: a no-op
    cluster.replicate()
    assert cluster.brokers[1].append(tp, bytes(records.build_batch([b"x"], timestamps_ms=1)),
                                     1, 1000).error == 0
    cluster.clock.advance(60_000)                            # followers fall out of the ISR
    cluster.tick(1)
    assert info(cluster, 1, tp)["isr"] == (1,)
    assert p.end(commit=True, coordinator_epoch=7).error == 19


# ---------------------------------------------------------------- replicas and failures
def test_a_new_leader_truncates_the_unreplicated_marker_and_rebuilds(cluster):
    tp = cluster.create("orders")
    p = Producer(cluster, tp)
    assert p.send(2, b"a").error == 0 and p.end(commit=False).error == 0
    assert p.send(2, b"b").error == 0
    cluster.replicate()                                       # 0-1 aborted at 2, 3-4 open
    old = cluster.brokers[1]
    assert p.end(commit=False).error == 0                    # marker at 5: never replicated
    assert len(old.log(tp).collect_aborted(0, 10)) == 2
    cluster.down.add(1)
    cluster.elect(tp, 2, isr=(2, 3), to=(2, 3))
    cluster.down.discard(1)
    cluster.send_leader_and_isr(tp, to=(1,))                 # 1 follows: truncates marker 5
    cluster.replicate()
    assert [t.last_offset for t in old.log(tp).collect_aborted(0, 10)] == [2]
    assert txn_files(old, tp) == txn_files(cluster.brokers[2], tp)
    # the truncation invalidated the follower's producer state: not rebuilt until asked
    assert info(cluster, 1, tp)["last_stable_offset"] is None
    assert old.last_stable_offset(tp) == 3 == cluster.brokers[2].last_stable_offset(tp)
    assert info(cluster, 1, tp)["last_stable_offset"] == 3   # producer 4000's txn from 3 open


def test_recovery_rebuilds_torn_and_missing_txn_indexes(cluster):
    tp = cluster.create("orders", config={"segment.bytes": "300"})
    p = Producer(cluster, tp)
    for round_ in range(4):
        assert p.send(2, b"r%d" % round_).error == 0
        assert p.end(commit=round_ % 2 == 1).error == 0
        cluster.replicate()
    leader = cluster.brokers[1]
    want = txn_files(leader, tp)
    assert len(want) == 2
    log_dir = leader.log(tp).dir
    cluster.kill(1)
    (log_dir / sorted(want)[0]).unlink()                      # missing
    last = sorted(want)[1]
    (log_dir / last).write_bytes((log_dir / last).read_bytes()[:20])      # torn
    active = sorted(log_dir.glob("*.log"))[-1]
    with open(active, "ab") as f:                             # a torn batch at the tail
        f.write(b"\x00" * 30)
    cluster.revive(1)
    again = cluster.brokers[1]
    log = again.log(tp)
    assert log.recovery.truncated_bytes == 30
    # segments past the recovery point are recovered; a stale `.txnindex` keeps the recovery
    # point at it until the producer state is rebuilt
    stale = log.txn_index_stale_from
    assert stale is not None and log.recovery_point == stale
    assert recovery_point_checkpoint(again.data_dir).read()[tp] == stale
    cluster.kill(1)                                           # again, before any rebuild
    cluster.revive(1)
    again = cluster.brokers[1]
    cluster.elect(tp, 1)                                      # leading rebuilds the state
    assert again.log(tp).txn_index_stale_from is None
    assert txn_files(again, tp) == want
    assert again.last_stable_offset(tp) == again.partition_info(tp)["high_watermark"]


def test_a_torn_index_of_a_trusted_segment_is_rebuilt(cluster):
    tp = cluster.create("orders", config={"segment.bytes": "300"})
    p = Producer(cluster, tp)
    for _ in range(3):
        assert p.send(2).error == 0 and p.end(commit=False).error == 0
        cluster.replicate()
    leader = cluster.brokers[1]
    want = txn_files(leader, tp)
    leader.flush()                                            # every segment trusted
    first = leader.log(tp).dir / sorted(want)[0]
    first.write_bytes(first.read_bytes() + b"\x01")
    cluster.restart(1)
    log = cluster.brokers[1].log(tp)
    assert log.txn_index_stale_from == int(first.name.split(".")[0])
    cluster.elect(tp, 1)
    assert txn_files(cluster.brokers[1], tp) == want


def test_retention_deletes_indexes_and_is_bounded_by_the_hw_only(cluster):
    tp = cluster.create("orders", config={"segment.bytes": "300", "retention.bytes": "0"})
    p = Producer(cluster, tp)
    assert p.send(2).error == 0 and p.end(commit=False).error == 0
    assert p.send(3).error == 0                               # open from offset 3
    leader = cluster.brokers[1]
    for _ in range(4):
        assert leader.append(tp, bytes(records.build_batch([b"x" * 60] * 2, timestamps_ms=1)),
                             1, 1000).error == 0
    cluster.replicate()
    assert leader.last_stable_offset(tp) == 3
    results = leader.apply_retention(10_000)
    start = leader.log(tp).log_start_offset
    assert results and start > 3                              # Kafka 3.8: not held by the LSO
    assert txn_files(leader, tp) == {}                        # gone with their segments
    assert leader.last_stable_offset(tp) == start             # clamped at the log start


def test_stop_replica_delete_removes_the_indexes(cluster):
    tp = cluster.create("orders")
    p = Producer(cluster, tp)
    assert p.send(1).error == 0 and p.end(commit=False).error == 0
    cluster.replicate()
    log_dir = cluster.brokers[2].log(tp).dir
    assert list(log_dir.glob("*.txnindex"))
    cluster.stop_replica(2, tp, delete=True)
    assert not log_dir.exists()


# ---------------------------------------------------------------- the read_committed consumer
def read_committed(batches: bytes, aborted) -> list[tuple[int, bytes]]:
    """Kafka's consumer (CompletedFetch, READ_COMMITTED) over one fetch answer."""
    pending = [(first, pid) for pid, first in aborted]
    heapq.heapify(pending)
    aborted_pids: set[int] = set()
    out = []
    for h in records.iter_headers(batches):
        raw = batches[h.position:h.position + h.size]
        while pending and pending[0][0] <= h.last_offset:
            aborted_pids.add(heapq.heappop(pending)[1])
        if h.attributes & control.CONTROL_FLAG:
            if control.control_type(raw) == control.ABORT:
                aborted_pids.discard(h.producer_id)
            continue
        if h.attributes & control.TRANSACTIONAL_FLAG and h.producer_id in aborted_pids:
            continue
        out.extend((r.offset, r.value) for r in records.decode_records(raw))
    return out


ACTIONS = ["txn"] * 5 + ["end"] * 3 + ["plain", "replicate", "replicate"]
action = st.sampled_from(ACTIONS).flatmap(lambda kind: {
    "txn": st.tuples(st.just(kind), st.integers(0, 2), st.integers(1, 3)),
    "end": st.tuples(st.just(kind), st.integers(0, 2), st.booleans()),
    "plain": st.tuples(st.just(kind), st.integers(1, 2)),
    "replicate": st.tuples(st.just(kind), st.integers(1, 3)),
}[kind])


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(action, min_size=10, max_size=60), st.integers(60, 400), st.booleans(),
       st.one_of(st.none(), st.tuples(st.booleans(), st.booleans(), st.booleans())))
def test_a_read_committed_consumer_sees_exactly_the_committed_records(
        tmp_path_factory, actions, max_bytes, settle, finish):
    """`finish`: how the transactions still open at the end complete (None: they stay open)."""
    cluster = Cluster(tmp_path_factory.mktemp("rc"))
    tp = cluster.create("orders", config={"segment.bytes": "500"})
    producers = [Producer(cluster, tp, pid=100 + i) for i in range(3)]
    leader = cluster.brokers[1]
    written: dict[int, tuple[int | None, bytes]] = {}        # offset -> (pid or None, value)
    outcome: dict[tuple[int, int], bool] = {}                # (pid, first offset) -> committed
    open_txn: dict[int, int] = {}
    for act in actions:
        if act[0] == "txn":
            p = producers[act[1]]
            r = p.send(act[2], b"p%d" % p.pid)
            assert r.error == 0
            open_txn.setdefault(p.pid, r.base_offset)
            for o in range(r.base_offset, r.last_offset + 1):
                written[o] = (p.pid, b"p%d-%d" % (p.pid, p.seq - act[2] + o - r.base_offset))
        elif act[0] == "end":
            p = producers[act[1]]
            assert p.end(commit=act[2]).error == 0
            if p.pid in open_txn:
                outcome[(p.pid, open_txn.pop(p.pid))] = act[2]
        elif act[0] == "plain":
            r = leader.append(tp, bytes(records.build_batch([b"plain"] * act[1],
                                                            timestamps_ms=1)), 1, 1000)
            for o in range(r.base_offset, r.last_offset + 1):
                written[o] = (None, b"plain")
        else:
            for _ in range(act[1]):
                for b in (2, 3):
                    cluster.fetch_once(b, tp)
    for i, commit in enumerate(finish or ()):
        assert producers[i].end(commit=commit).error == 0
        if producers[i].pid in open_txn:
            outcome[(producers[i].pid, open_txn.pop(producers[i].pid))] = commit
    if settle:
        cluster.replicate()
    lso = leader.last_stable_offset(tp)
    assert lso <= info(cluster, 1, tp)["high_watermark"]
    got, offset = [], 0
    while offset < lso:
        answer = leader.fetch(tp, offset, max_bytes, isolation_level=READ_COMMITTED)
        assert answer.error == 0 and answer.last_stable_offset == lso and answer.records
        got += read_committed(answer.records, answer.aborted_transactions)
        offset = list(records.iter_headers(answer.records))[-1].next_offset
    assert offset == lso                                     # batches never cross the LSO

    def txn_of(pid, o):
        return max(first for (p, first) in outcome if p == pid and first <= o)

    want = [(o, v) for o, (pid, v) in sorted(written.items()) if o < lso and (
        pid is None or outcome[(pid, txn_of(pid, o))])]
    assert got == want


def test_a_follower_describes_the_producers_it_replicated(cluster):
    """kafka-transactions.sh find-hanging asks one broker about every partition it hosts:
    Kafka answers from any local log (Partition.activeProducerState), a follower's too."""
    tp = cluster.create("described")
    p = Producer(cluster, tp)
    assert p.send(3, b"open").error == 0
    cluster.replicate()
    leader = cluster.leadership[tp].leader
    answers = {b: cluster.brokers[b].describe_producers(tp) for b in (1, 2, 3)}
    # last sequence 2, last timestamp the batch's (1000), no marker yet, txn from offset 0
    assert answers[leader] == (0, [(PID, EPOCH, 2, 1_000, -1, 0)])
    assert all(a == answers[leader] for a in answers.values())
    assert cluster.brokers[1].describe_producers(("absent", 0))[0] == \
        UnknownTopicOrPartition.code
