"""Fetch from follower (KIP-392) in the replica manager: three brokers replicating by direct
calls (tests/replication_harness.py), no Ray, no sockets.

A follower serves a consumer that carries client metadata (Fetch v11+) from its own log,
below its own high watermark (its own last stable offset for read_committed), with the
leader epoch checks of any fetch; without client metadata, or for a replica's fetch, only
the leader serves. A leader with Kafka's RackAwareReplicaSelector answers a consumer in a
follower's rack with that follower as its preferred read replica, without records, when
the follower is in the ISR and holds the fetch offset (ReplicaManager.
findPreferredReadReplica).
"""

from __future__ import annotations

import pytest

from replicas import records
from replicas.replica_manager import READ_COMMITTED, ClientMetadata
from replicas.replica_selector import RACK_AWARE
from tests.replication_harness import Cluster

pytestmark = pytest.mark.unit

ALL = -1
CONSUMER = -1
NONE, OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER = 0, 1, 6
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
RACKS = {1: "r1", 2: "r2", 3: "r3"}


def batch(n: int = 2, tag: bytes = b"v", pid: int = -1, epoch: int = -1, seq: int = -1,
          transactional: bool = False) -> bytes:
    values = [tag + b"-%d" % i for i in range(n)]
    return bytes(records.build_batch(values, timestamps_ms=1_000, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=seq,
                                     transactional=transactional))


def values_of(data: bytes) -> list[bytes]:
    return [r.value for r in records.decode_records(data)]


def client(rack: str = "r2", listener: str | None = "PLAINTEXT") -> ClientMetadata:
    return ClientMetadata(rack, listener)


@pytest.fixture
def follower_ahead_of_its_hw(tmp_path):
    """Leader 1; follower 2 holds offsets 0-3 but knows the HW only up to 2 (its fetch of
    2-3 came before broker 3 had them); broker 3 holds 0-1."""
    cluster = Cluster(tmp_path, racks=RACKS)
    tp = cluster.create("clicks")
    leader = cluster.brokers[1]
    assert leader.append(tp, batch(2, b"a"), 1, 1000).error == 0
    cluster.replicate()
    assert leader.append(tp, batch(2, b"b"), 1, 1000).error == 0
    cluster.fetch_once(2, tp)
    info = cluster.brokers[2].partition_info(tp)
    assert (info["role"], info["log_end_offset"], info["high_watermark"]) == ("follower", 4, 2)
    return cluster, tp


@pytest.mark.parametrize("offset, error, got", [
    (0, NONE, [b"a-0", b"a-1"]),         # below the follower's HW: up to it, not past
    (1, NONE, [b"a-0", b"a-1"]),         # whole batches, from the one holding the offset
    (2, NONE, []),                       # at its HW
    (3, NONE, []),                       # above its HW, within its log: empty, not an error
    (4, NONE, []),                       # at its log end
    (5, OFFSET_OUT_OF_RANGE, []),        # past its log end
])
def test_a_follower_serves_a_consumer_below_its_own_high_watermark(
        follower_ahead_of_its_hw, offset, error, got):
    cluster, tp = follower_ahead_of_its_hw
    r = cluster.brokers[2].fetch(tp, offset, 1 << 20, client=client())
    assert (r.error, values_of(r.records)) == (error, got)
    assert (r.high_watermark, r.log_end_offset, r.log_start_offset) == (2, 4, 0)
    assert r.preferred_read_replica == -1


@pytest.mark.parametrize("replica_id, with_client, epoch, error", [
    (CONSUMER, False, -1, NOT_LEADER_OR_FOLLOWER),    # Fetch < 11: the leader only
    (CONSUMER, True, 0, NONE),                        # the current leader epoch
    (CONSUMER, True, -1, NONE),                       # none given
    (CONSUMER, True, 1, UNKNOWN_LEADER_EPOCH),        # the client knows a newer epoch
    (3, True, -1, NOT_LEADER_OR_FOLLOWER),            # a replica fetches from the leader only
])
def test_who_a_follower_serves(follower_ahead_of_its_hw, replica_id, with_client, epoch, error):
    cluster, tp = follower_ahead_of_its_hw
    r = cluster.brokers[2].fetch(tp, 0, 1 << 20, replica_id=replica_id,
                                 current_leader_epoch=epoch,
                                 client=client() if with_client else None)
    assert r.error == error


def test_a_follower_fences_a_client_with_an_older_leader_epoch(follower_ahead_of_its_hw):
    cluster, tp = follower_ahead_of_its_hw
    cluster.elect(tp, 1)                                 # leader epoch 1 everywhere
    follower = cluster.brokers[2]
    assert follower.fetch(tp, 0, 1 << 20, current_leader_epoch=0,
                          client=client()).error == FENCED_LEADER_EPOCH
    assert follower.fetch(tp, 0, 1 << 20, current_leader_epoch=1, client=client()).error == NONE


def test_a_stopped_replica_serves_no_consumer(follower_ahead_of_its_hw):
    cluster, tp = follower_ahead_of_its_hw
    cluster.stop_replica(2, tp, delete=False)
    assert cluster.brokers[2].fetch(tp, 0, 1 << 20, client=client()).error == \
        NOT_LEADER_OR_FOLLOWER


def test_the_follower_serves_up_to_its_high_watermark_once_it_learns_it(
        follower_ahead_of_its_hw):
    cluster, tp = follower_ahead_of_its_hw
    cluster.replicate()
    r = cluster.brokers[2].fetch(tp, 2, 1 << 20, client=client())
    assert (r.error, values_of(r.records), r.high_watermark) == (NONE, [b"b-0", b"b-1"], 4)


def test_read_committed_on_a_follower_stops_at_its_last_stable_offset(tmp_path):
    """The follower keeps its producer state from the leader's batches: an open
    transaction holds its LSO down, the marker releases it, and the aborted transactions
    of what it returns come with the records."""
    cluster = Cluster(tmp_path, racks=RACKS)
    tp = cluster.create("orders")
    leader = cluster.brokers[1]
    assert leader.append(tp, batch(2, b"plain"), 1, 1000).error == 0
    pid, epoch = 7, 0
    guard = leader.maybe_start_verification(tp, pid, epoch, 0)
    got = leader.append(tp, batch(2, b"txn", pid, epoch, 0, transactional=True), 1, 1000,
                        verification_guard=guard)
    assert got.error == 0, got
    assert leader.append(tp, batch(1, b"late"), 1, 1000).error == 0
    cluster.replicate()
    follower = cluster.brokers[2]
    info = follower.partition_info(tp)
    assert info["high_watermark"] == 5
    r = follower.fetch(tp, 0, 1 << 20, isolation_level=READ_COMMITTED, client=client())
    assert (r.error, r.last_stable_offset, values_of(r.records)) == \
        (NONE, 2, [b"plain-0", b"plain-1"])
    uncommitted = follower.fetch(tp, 0, 1 << 20, client=client())
    assert len(values_of(uncommitted.records)) == 5
    assert leader.append_markers(tp, pid, epoch, committed=False, coordinator_epoch=0,
                                 timeout_ms=1000).error == 0
    cluster.replicate()
    r = follower.fetch(tp, 0, 1 << 20, isolation_level=READ_COMMITTED, client=client())
    assert (r.error, r.last_stable_offset) == (NONE, 6)
    assert r.aborted_transactions == ((pid, 2),)


# -- the leader's preferred read replica ------------------------------------------------------
@pytest.fixture
def rack_aware(tmp_path):
    cluster = Cluster(tmp_path, racks=RACKS, replica_selector_class=RACK_AWARE)
    tp = cluster.create("clicks")
    for b in cluster.broker_ids:
        cluster.update_metadata(b)
    leader = cluster.brokers[1]
    assert leader.append(tp, batch(4, b"a"), 1, 1000).error == 0
    cluster.replicate()
    return cluster, tp


@pytest.mark.parametrize("ask, preferred", [
    (client("r2"), 2),                         # a follower's rack: that follower
    (client("r3"), 3),
    (client("r1"), -1),                        # the leader's rack: the leader reads
    (client(""), -1),                          # no rack given
    (client("r9"), -1),                        # a rack without a replica
    (None, -1),                                # Fetch < 11: no client metadata
    (client("r2", "EXTERNAL"), -1),            # broker 2 has no endpoint on that listener
    (client("r2", None), 2),                   # no listener to match (the native door)
])
def test_the_leader_names_a_preferred_read_replica(rack_aware, ask, preferred):
    cluster, tp = rack_aware
    r = cluster.brokers[1].fetch(tp, 0, 1 << 20, client=ask)
    assert (r.error, r.preferred_read_replica) == (NONE, preferred)
    assert (r.high_watermark, r.log_start_offset, r.log_end_offset, r.last_stable_offset) == \
        (4, 0, 4, 4)
    assert bool(r.records) == (preferred < 0)     # named elsewhere: the read is skipped


def test_no_selector_no_preferred_read_replica(tmp_path):
    cluster = Cluster(tmp_path, racks=RACKS)
    tp = cluster.create("clicks")
    for b in cluster.broker_ids:
        cluster.update_metadata(b)
    r = cluster.brokers[1].fetch(tp, 0, 1 << 20, client=client("r2"))
    assert (r.error, r.preferred_read_replica) == (NONE, -1)


def test_only_isr_followers_holding_the_offset_are_candidates(rack_aware):
    cluster, tp = rack_aware
    leader = cluster.brokers[1]
    # offset 6 is past every log: nobody holds it, the leader answers out of range
    assert (leader.fetch(tp, 6, 1 << 20, client=client("r2")).error,
            leader.fetch(tp, 6, 1 << 20, client=client("r2")).preferred_read_replica) == \
        (OFFSET_OUT_OF_RANGE, -1)
    # broker 2 falls behind: offsets it lacks are the leader's to serve
    cluster.down.add(2)
    assert leader.append(tp, batch(2, b"b"), 1, 1000).error == 0
    cluster.replicate()                                  # broker 3 catches up
    assert leader.fetch(tp, 5, 1 << 20, client=client("r2")).preferred_read_replica == -1
    assert leader.fetch(tp, 5, 1 << 20, client=client("r3")).preferred_read_replica == 3
    assert leader.fetch(tp, 2, 1 << 20, client=client("r2")).preferred_read_replica == 2
    # out of the ISR: never a candidate, whatever it holds
    cluster.clock.advance(cluster.lag_ms + 1)
    cluster.tick(1)
    assert 2 not in cluster.leadership[tp].isr
    assert leader.fetch(tp, 2, 1 << 20, client=client("r2")).preferred_read_replica == -1


def test_a_follower_below_its_log_start_is_no_candidate(rack_aware):
    """The leader knows each follower's log start from its fetches (Replica.logStartOffset)."""
    cluster, tp = rack_aware
    follower = cluster.brokers[2]
    assert follower.partition_info(tp)["log_start_offset"] == 0
    follower.log(tp).delete_records_before(2)        # as its own retention would
    cluster.fetch_once(2, tp)
    leader = cluster.brokers[1]
    assert leader.fetch(tp, 1, 1 << 20, client=client("r2")).preferred_read_replica == -1
    assert leader.fetch(tp, 2, 1 << 20, client=client("r2")).preferred_read_replica == 2


def test_fencing_comes_before_the_preferred_read_replica(rack_aware):
    cluster, tp = rack_aware
    cluster.elect(tp, 1)
    r = cluster.brokers[1].fetch(tp, 0, 1 << 20, current_leader_epoch=0, client=client("r2"))
    assert (r.error, r.preferred_read_replica) == (FENCED_LEADER_EPOCH, -1)


def test_the_preferred_follower_serves_what_the_leader_sent_there(rack_aware):
    cluster, tp = rack_aware
    first = cluster.brokers[1].fetch(tp, 0, 1 << 20, client=client("r2"))
    assert first.preferred_read_replica == 2
    # the follower is not the leader: it never sends the client on, it reads
    r = cluster.brokers[first.preferred_read_replica].fetch(tp, 0, 1 << 20, client=client("r2"))
    assert (r.error, r.preferred_read_replica, len(values_of(r.records))) == (NONE, -1, 4)


# -- what a parked fetch asks -----------------------------------------------------------------
def test_fetch_ready_and_marks_on_a_follower(follower_ahead_of_its_hw):
    cluster, tp = follower_ahead_of_its_hw
    follower = cluster.brokers[2]
    assert follower.fetch_ready(tp, 2)                    # no client metadata: an error to tell
    assert not follower.fetch_ready(tp, 2, client=client())   # at its HW: nothing yet
    assert follower.fetch_ready(tp, 1, client=client())
    assert follower.fetch_ready(tp, 9, client=client())   # out of range: an error to tell
    assert follower.leader_marks(tp) is None
    marks = follower.leader_marks(tp, client=client(), fetch_offset=2)
    assert (marks.high_watermark, marks.log_end_offset) == (2, 4)
    cluster.replicate()
    assert follower.fetch_ready(tp, 2, client=client())   # the HW moved past it


def test_marks_are_withheld_where_a_read_would_name_a_preferred_replica(rack_aware):
    cluster, tp = rack_aware
    leader = cluster.brokers[1]
    assert leader.leader_marks(tp, client=client("r2"), fetch_offset=4) is None
    assert leader.leader_marks(tp, client=client("r1"), fetch_offset=4) is not None
    assert leader.leader_marks(tp) is not None
