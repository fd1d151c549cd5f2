"""ReplicaManager: three brokers replicating by direct calls (tests/replication_harness.py).

Checks Kafka's broker-side rules (ControllerChannelManager, Partition, ReplicaManager, the
log formats; rayka's chaos invariants): acks=all
completes only after the ISR fetched, consumers never read above the HW, leader change
truncates exactly the unreplicated tail by leader epoch, min ISR, stale controller and
broker epochs, idempotent duplicates and sequence errors, corrupt/oversized batches append
nothing, StopReplica(delete), and restart recovery of logs, HWs and producer state.
"""

from __future__ import annotations

import pytest

from controller.requests import (LeaderAndIsrRequest, PartitionLeaderState,
                                 StopReplicaPartition, StopReplicaRequest)
from replicas import records
from replicas.checkpoints import replication_offset_checkpoint
from replicas.errors import InvalidUpdateVersion, NotLeaderOrFollower, UnknownTopicOrPartition
from replicas.replica_manager import BrokerConfig, ProduceDone, ProposeIsr, ReplicaManager
from tests.replication_harness import Cluster, FakeClock

pytestmark = pytest.mark.unit

ALL = -1


def batch(n: int = 3, tag: bytes = b"v", pid: int = -1, epoch: int = -1, seq: int = -1,
          size: int = 20) -> bytes:
    values = [(tag + b"-%04d" % i).ljust(size, b".") for i in range(n)]
    return bytes(records.build_batch(values, timestamps_ms=1_000, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=seq))


def values_of(data: bytes) -> list[bytes]:
    return [r.value for r in records.decode_records(data)]


@pytest.fixture
def cluster(tmp_path):
    return Cluster(tmp_path)


def info(cluster, b, tp):
    return cluster.brokers[b].partition_info(tp)


# ---------------------------------------------------------------- produce and replicate
def test_acks_all_completes_only_after_every_isr_follower_fetched(cluster):
    tp = cluster.create("clicks", config={"min.insync.replicas": "2"})
    leader = cluster.brokers[1]
    assert info(cluster, 1, tp)["role"] == "leader"
    assert cluster.fetching == {(2, tp): 1, (3, tp): 1}
    result = leader.append(tp, batch(3), ALL, 30_000)
    assert (result.error, result.base_offset, result.last_offset) == (0, 0, 2)
    assert result.pending_id is not None and not cluster.done
    assert cluster.fetch_once(2, tp) and cluster.fetch_once(3, tp)   # both copied it...
    assert not cluster.done and info(cluster, 1, tp)["high_watermark"] == 0
    cluster.fetch_once(2, tp)                   # ...the leader learns from the NEXT fetch offset
    assert not cluster.done and info(cluster, 1, tp)["high_watermark"] == 0
    cluster.fetch_once(3, tp)
    assert cluster.done[(1, result.pending_id)] == ProduceDone(result.pending_id, 0, 0, 2)
    assert info(cluster, 1, tp)["high_watermark"] == 3
    cluster.replicate()                         # followers learn the HW on their next fetch
    assert [info(cluster, b, tp)["high_watermark"] for b in (1, 2, 3)] == [3, 3, 3]
    # the HW is on disk before the call that moved it returned (persist before send)
    on_disk = replication_offset_checkpoint(leader.data_dir).read()
    assert on_disk[("clicks", 0)] == 3


def test_consumers_never_read_above_the_high_watermark(cluster):
    tp = cluster.create("clicks")
    leader = cluster.brokers[1]
    assert leader.append(tp, batch(2, b"a"), 1, 1000).error == 0
    cluster.replicate()
    assert leader.append(tp, batch(2, b"b"), 1, 1000).error == 0   # not replicated yet
    got = leader.fetch(tp, 0, 1 << 20)
    assert got.error == 0 and got.high_watermark == 2 and got.log_end_offset == 4
    assert values_of(got.records) == [b"a-0000".ljust(20, b"."), b"a-0001".ljust(20, b".")]
    above = leader.fetch(tp, 2, 1 << 20)        # between HW and LEO: nothing, no error
    assert (above.error, above.records) == (0, b"")
    assert leader.fetch(tp, 5, 1 << 20).error == 1            # beyond the LEO
    # a follower reads up to the LEO; a consumer on a follower is refused
    assert cluster.brokers[2].fetch(tp, 0, 1 << 20).error == 6
    follower_view = leader.fetch(tp, 2, 1 << 20, replica_id=2, current_leader_epoch=0)
    assert len(values_of(follower_view.records)) == 2
    cluster.replicate()
    assert len(values_of(leader.fetch(tp, 0, 1 << 20).records)) == 4


def test_fetch_fencing_and_unknown_partitions(cluster):
    tp = cluster.create("clicks")
    cluster.elect(tp, 1)                        # leader epoch 1
    leader = cluster.brokers[1]
    assert leader.fetch(tp, 0, 100, current_leader_epoch=0).error == 74
    assert leader.fetch(tp, 0, 100, current_leader_epoch=2).error == 75
    assert leader.fetch(tp, 0, 100, current_leader_epoch=1).error == 0
    assert leader.fetch(tp, 0, 100, replica_id=9).error == 6      # not a replica
    assert leader.fetch(("nope", 0), 0, 100).error == 3
    assert leader.append(("nope", 0), batch(), 1, 100).error == 3
    assert leader.append(tp, batch(), 2, 100).error == 21
    assert cluster.brokers[2].append(tp, batch(), 1, 100).error == 6
    assert leader.offsets_for_leader_epoch(tp, 1, 1) == (0, 1, 0)
    assert leader.offsets_for_leader_epoch(tp, 0, 1)[0] == 74
    assert cluster.brokers[2].offsets_for_leader_epoch(tp, 1, 1)[0] == 6


# ---------------------------------------------------------------- leader change
def test_leader_change_truncates_exactly_the_unreplicated_tail(cluster):
    tp = cluster.create("clicks", config={"min.insync.replicas": "2"})
    old = cluster.brokers[1]
    for i in range(3):
        r = old.append(tp, batch(4, b"acked%d" % i), ALL, 30_000)
        cluster.replicate()
        assert cluster.done[(1, r.pending_id)].error == 0
    acked_end = info(cluster, 1, tp)["log_end_offset"]
    unacked = old.append(tp, batch(5, b"lost"), ALL, 30_000)
    tail_bytes = old.log(tp).log_end_offset
    assert unacked.pending_id is not None and tail_bytes == acked_end + 5
    size_before = old.log(tp).size_bytes
    # broker 1 is cut off; 2 is elected in epoch 1 and takes new writes
    cluster.down.add(1)
    cluster.elect(tp, 2, isr=(2, 3), to=(2, 3))
    new = cluster.brokers[2]
    r = new.append(tp, batch(2, b"new"), ALL, 30_000)
    cluster.replicate()
    assert cluster.done[(2, r.pending_id)].error == 0
    # broker 1 comes back and is told it follows 2 now
    cluster.down.discard(1)
    cluster.send_leader_and_isr(tp, to=(1,))
    assert cluster.done[(1, unacked.pending_id)].error == 6      # leadership lost
    assert info(cluster, 1, tp)["role"] == "follower" and info(cluster, 1, tp)["truncation_pending"]
    # first fetch: the leader reports the diverging epoch, broker 1 cuts the tail
    pos = old.follower_fetch_request(tp)
    assert pos == (acked_end + 5, 0, 1)
    answer = new.fetch(tp, pos.fetch_offset, 1 << 20, 1, pos.current_leader_epoch,
                       pos.last_fetched_epoch)
    assert answer.diverging_epoch == (0, acked_end) and answer.records == b""
    result = old.follower_truncate(tp, *answer.diverging_epoch, leader_epoch=1)
    assert result.completed and result.log_end_offset == acked_end
    assert result.removed_bytes == size_before - old.log(tp).size_bytes > 0
    cluster.replicate()
    hw = info(cluster, 2, tp)["high_watermark"]
    assert hw == acked_end + 2
    assert info(cluster, 2, tp)["isr"] == (2, 3, 1)             # rejoined by AlterPartition
    logs = {cluster.log_bytes(b, tp, hw) for b in (1, 2, 3)}
    assert len(logs) == 1
    everything = values_of(logs.pop())
    assert not any(v.startswith(b"lost") for v in everything)
    assert sum(v.startswith(b"acked") for v in everything) == 12
    assert [e.epoch for e in old.log(tp).epoch_cache.entries] == [0, 1]


def test_truncation_by_offsets_for_leader_epoch_repeats_with_an_older_epoch(cluster):
    """Broker 1 holds epochs [0, 2]; the leader knows [0, 1, 3]: ask twice (KIP-279)."""
    tp = cluster.create("clicks")
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    b1.append(tp, batch(2, b"A"), 1, 1000)
    cluster.replicate()
    cluster.down.add(1)
    cluster.elect(tp, 2, isr=(2, 3), to=(2, 3))                  # epoch 1
    b2.append(tp, batch(3, b"B"), 1, 1000)
    cluster.replicate()
    cluster.down = {2, 3}
    cluster.elect(tp, 1, isr=(1,), to=(1,))                       # epoch 2, unclean on 1
    b1.append(tp, batch(4, b"C"), 1, 1000)
    cluster.down = {1}
    cluster.elect(tp, 2, isr=(2, 3), to=(2, 3))                   # epoch 3
    b2.append(tp, batch(1, b"D"), 1, 1000)
    cluster.replicate()
    cluster.down = set()
    cluster.send_leader_and_isr(tp, to=(1,))
    assert [(e.epoch, e.start_offset) for e in b1.log(tp).epoch_cache.entries] == [(0, 0), (2, 2)]
    pos = b1.follower_fetch_request(tp)
    asked = []
    while info(cluster, 1, tp)["truncation_pending"]:
        error, epoch, end = b2.offsets_for_leader_epoch(tp, pos.current_leader_epoch,
                                                        pos.last_fetched_epoch)
        assert error == 0
        asked.append((pos.last_fetched_epoch, epoch, end))
        result = b1.follower_truncate(tp, epoch, end, leader_epoch=pos.current_leader_epoch)
        pos = b1.follower_fetch_request(tp)
        assert result.completed or result.next_epoch == pos.last_fetched_epoch
    assert asked == [(2, 1, 5), (0, 0, 2)]
    assert b1.log(tp).log_end_offset == 2
    cluster.replicate()
    hw = info(cluster, 2, tp)["high_watermark"]
    assert hw == 6 and len({cluster.log_bytes(b, tp, hw) for b in (1, 2, 3)}) == 1


def test_stale_fetch_answers_are_ignored(cluster):
    tp = cluster.create("clicks")
    cluster.brokers[1].append(tp, batch(2), 1, 1000)
    follower = cluster.brokers[2]
    pos = follower.follower_fetch_request(tp)
    answer = cluster.brokers[1].fetch(tp, pos.fetch_offset, 1 << 20, 2, pos.current_leader_epoch,
                                      pos.last_fetched_epoch)
    cluster.elect(tp, 1)                                          # epoch moves on meanwhile
    assert follower.append_as_follower(tp, answer.records, answer.high_watermark,
                                       fetch_offset=pos.fetch_offset,
                                       leader_epoch=pos.current_leader_epoch) == []
    assert follower.log(tp).log_end_offset == 0
    assert follower.follower_truncate(tp, 0, 0, leader_epoch=0).stale


# ---------------------------------------------------------------- ISR and min ISR
def test_min_isr_rejects_acks_all_and_appends_nothing(cluster):
    tp = cluster.create("clicks", config={"min.insync.replicas": "2"})
    leader = cluster.brokers[1]
    cluster.down.update({2, 3})                 # followers stop fetching
    cluster.clock.advance(10_001)
    effects = cluster.tick(1)
    assert effects == [ProposeIsr(tp, (1,), 0, 0)]
    assert info(cluster, 1, tp)["isr"] == (1,)
    leo = leader.log(tp).log_end_offset
    rejected = leader.append(tp, batch(), ALL, 1000)
    assert rejected.error == 19 and leader.log(tp).log_end_offset == leo
    assert leader.append(tp, batch(), 1, 1000).error == 0        # acks=1 still works
    # followers come back and rejoin; acks=all works again
    cluster.down.clear()
    cluster.replicate()
    assert info(cluster, 1, tp)["isr"] == (1, 2, 3)
    ok = leader.append(tp, batch(), ALL, 1000)
    cluster.replicate()
    assert cluster.done[(1, ok.pending_id)].error == 0


def test_pending_produce_times_out_and_isr_answers_are_matched(cluster):
    tp = cluster.create("clicks", config={"min.insync.replicas": "2"})
    leader = cluster.brokers[1]
    pending = leader.append(tp, batch(), ALL, 500)
    cluster.clock.advance(500)
    cluster.tick(1)
    assert cluster.done[(1, pending.pending_id)].error == 7
    # an AlterPartition error drops the proposal; an answer to an old proposal is ignored
    cluster.hold_alter_partition = True
    cluster.down.add(3)
    cluster.replicate()
    cluster.clock.advance(10_001)
    cluster.fetch_once(2, tp)
    cluster.tick(1)
    (b, proposal), = cluster.held
    assert proposal.isr == (1, 2)
    stale = ProposeIsr(tp, (1,), 0, 0)
    assert leader.handle_alter_partition_response(tp, InvalidUpdateVersion("x"), stale) == []
    assert info(cluster, 1, tp)["proposed_isr"] == (1, 2)
    leader.handle_alter_partition_response(tp, InvalidUpdateVersion("x"), proposal)
    assert info(cluster, 1, tp)["proposed_isr"] is None and info(cluster, 1, tp)["isr"] == (1, 2, 3)


# ---------------------------------------------------------------- controller requests
def test_stale_controller_and_broker_epochs_apply_nothing(cluster):
    tp = cluster.create("clicks")
    cluster.controller_epoch = 3
    cluster.elect(tp, 1)
    rm = cluster.brokers[2]
    assert rm.controller_epoch == 3
    before = rm.partition_info(tp)
    old = PartitionLeaderState("clicks", 0, 2, 2, 9, (1, 2, 3), 9, (1, 2, 3))
    other = PartitionLeaderState("other", 0, 2, 2, 0, (2,), 0, (2,))
    outcome = rm.handle_leader_and_isr(cluster.leader_and_isr([old, other], controller_epoch=2))
    assert outcome.error == 11 and set(outcome.partition_errors.values()) == {11}
    assert not outcome.became_leader and rm.partition_info(tp) == before
    assert ("other", 0) not in rm.partitions() and not (rm.data_dir / "other-0").exists()
    stale_stop = StopReplicaRequest(0, 2, -1, (StopReplicaPartition("clicks", 0, -2, True),))
    assert rm.handle_stop_replica(stale_stop).error == 11 and tp in rm.partitions()
    # stale broker epoch: older than ours → 77; newer is accepted (Kafka's isBrokerEpochStale)
    rm.broker_epoch = 50
    outcome = rm.handle_leader_and_isr(cluster.leader_and_isr([other], broker_epoch=49))
    assert outcome.error == 77 and ("other", 0) not in rm.partitions()
    outcome = rm.handle_leader_and_isr(cluster.leader_and_isr([other], broker_epoch=51))
    assert outcome.error == 0 and outcome.became_leader == [("other", 0)]
    # same leader epoch again → per-partition STALE_CONTROLLER_EPOCH, nothing re-applied
    again = rm.handle_leader_and_isr(cluster.leader_and_isr([cluster.state(tp)]))
    assert again.error == 0 and again.partition_errors == {tp: 11}
    assert not again.became_follower
    # not a replica of it → UNKNOWN_TOPIC_OR_PARTITION
    foreign = PartitionLeaderState("foreign", 0, 3, 1, 0, (1,), 0, (1,))
    assert rm.handle_leader_and_isr(cluster.leader_and_isr([foreign])).partition_errors == \
        {("foreign", 0): 3}


@pytest.mark.parametrize("known", [True, False])
def test_a_partition_not_hosted_here_is_not_leader_if_the_topic_exists(cluster, known):
    """Kafka's getPartitionOrError: NOT_LEADER_OR_FOLLOWER when the metadata cache has the
    partition (the client refreshes and finds its leader), else UNKNOWN_TOPIC_OR_PARTITION."""
    tp = cluster.create("clicks", replicas=(1, 2))
    outsider = cluster.brokers[3]
    if known:
        assert cluster.update_metadata(3) == 0
    code = 6 if known else 3
    assert outsider.append(tp, batch(), 1, 100).error == code
    assert outsider.fetch(tp, 0, 100).error == code
    assert outsider.list_offset(tp, -1).error == code
    assert outsider.offsets_for_leader_epoch(tp, -1, 0)[0] == code
    assert outsider.delete_records(tp, 0)[0] == code


def test_update_metadata_fills_the_cache(cluster):
    tp = cluster.create("clicks")
    rm = cluster.brokers[3]
    assert cluster.update_metadata(3) == 0
    assert rm.metadata.leader(tp) == 1 and sorted(rm.metadata.live_brokers) == [1, 2, 3]
    assert rm.metadata.topics() == ["clicks"]
    cluster.down.add(1)
    assert cluster.update_metadata(3) == 0
    assert rm.metadata.leader(tp) is None                  # leader not live
    cluster.controller_epoch = 0
    assert cluster.update_metadata(3) == 11


def test_stop_replica_delete_removes_the_partition(cluster):
    tp = cluster.create("clicks", config={"min.insync.replicas": "2"})
    leader = cluster.brokers[1]
    pending = leader.append(tp, batch(), ALL, 30_000)
    directory = leader.data_dir / "clicks-0"
    assert directory.is_dir()
    cluster.elect(tp, 1)                                      # epoch 1
    assert cluster.stop_replica(2, tp, delete=False, leader_epoch=0).partition_errors == {tp: 74}
    outcome = cluster.stop_replica(1, tp, delete=True)
    assert outcome.partition_errors == {tp: 0} and outcome.stopped == [tp]
    assert cluster.done[(1, pending.pending_id)].error == 6
    assert not directory.exists() and tp not in leader.partitions()
    assert ("clicks", 0) not in replication_offset_checkpoint(leader.data_dir).read()
    assert leader.append(tp, batch(), 1, 100).error == 3


# ---------------------------------------------------------------- bad input
def test_corrupt_and_oversized_batches_append_nothing(cluster):
    tp = cluster.create("clicks", config={"max.message.bytes": "400"})
    leader = cluster.brokers[1]
    good = batch(2)
    assert leader.append(tp, good, 1, 100).error == 0
    leo, size = leader.log(tp).log_end_offset, leader.log(tp).size_bytes
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    assert leader.append(tp, bytes(corrupt), 1, 100).error == 2
    assert leader.append(tp, batch(2) + bytes(corrupt), 1, 100).error == 2   # all or nothing
    assert leader.append(tp, batch(2)[:40], 1, 100).error == 2
    too_big = batch(30, size=50)
    assert len(too_big) > 400
    result = leader.append(tp, too_big, ALL, 100)
    assert result.error == 10 and "max.message.bytes" in result.message
    # a corrupt idempotent batch is CORRUPT_MESSAGE even if its sequence is also wrong
    bad_seq = bytearray(batch(2, pid=5, epoch=0, seq=7))
    bad_seq[-1] ^= 0xFF
    leader.append(tp, batch(1, pid=5, epoch=0, seq=0), 1, 100)
    leo += 1
    assert leader.append(tp, bytes(bad_seq), 1, 100).error == 2
    assert leader.log(tp).log_end_offset == leo
    assert leader.log(tp).size_bytes > size


# ---------------------------------------------------------------- idempotence
def test_idempotent_duplicate_returns_the_original_offsets(cluster):
    tp = cluster.create("clicks")
    leader = cluster.brokers[1]
    first = leader.append(tp, batch(3, pid=7, epoch=0, seq=0), ALL, 30_000)
    second = leader.append(tp, batch(2, pid=7, epoch=0, seq=3), ALL, 30_000)
    assert (first.base_offset, first.last_offset, second.base_offset) == (0, 2, 3)
    leo = leader.log(tp).log_end_offset
    retry = leader.append(tp, batch(2, pid=7, epoch=0, seq=3), ALL, 30_000)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (3, 4)
    assert retry.pending_id is not None and leader.log(tp).log_end_offset == leo
    cluster.replicate()
    assert cluster.done[(1, retry.pending_id)] == ProduceDone(retry.pending_id, 0, 3, 4)
    # below the HW already: answered at once
    again = leader.append(tp, batch(3, pid=7, epoch=0, seq=0), ALL, 30_000)
    assert again.duplicate and again.pending_id is None and again.error == 0
    assert (again.base_offset, again.last_offset) == (0, 2)
    acks1 = leader.append(tp, batch(3, pid=7, epoch=0, seq=0), 1, 30_000)
    assert acks1.duplicate and acks1.base_offset == 0
    # followers built the same producer state from replication: a duplicate after failover
    cluster.elect(tp, 2)
    dup = cluster.brokers[2].append(tp, batch(2, pid=7, epoch=0, seq=3), 1, 1000)
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (3, 4)


def test_sequence_gaps_and_old_producer_epochs_are_rejected(cluster):
    tp = cluster.create("clicks")
    leader = cluster.brokers[1]
    assert leader.append(tp, batch(2, pid=9, epoch=1, seq=0), 1, 100).error == 0
    leo = leader.log(tp).log_end_offset
    gap = leader.append(tp, batch(2, pid=9, epoch=1, seq=5), 1, 100)
    assert gap.error == 45 and leader.log(tp).log_end_offset == leo
    assert leader.append(tp, batch(2, pid=9, epoch=0, seq=2), 1, 100).error == 47
    assert leader.append(tp, batch(2, pid=9, epoch=2, seq=4), 1, 100).error == 45
    assert leader.log(tp).log_end_offset == leo
    assert leader.append(tp, batch(2, pid=9, epoch=2, seq=0), 1, 100).error == 0   # epoch bump
    assert leader.append(tp, batch(1, pid=9, epoch=2, seq=2), 1, 100).error == 0
    assert leader.append(tp, batch(1, pid=9, epoch=1, seq=2), 1, 100).error == 47
    assert leader.append(tp, batch(1, pid=10, epoch=0, seq=42), 1, 100).error == 0  # unknown pid


# ---------------------------------------------------------------- restart
def test_restart_recovers_logs_high_watermarks_and_producer_state(cluster):
    tp = cluster.create("clicks", config={"min.insync.replicas": "2", "segment.bytes": "300"})
    leader = cluster.brokers[1]
    for seq in range(0, 12, 3):
        r = leader.append(tp, batch(3, b"k%d" % seq, pid=3, epoch=0, seq=seq), ALL, 30_000)
        cluster.replicate()
        assert cluster.done[(1, r.pending_id)].error == 0
    assert len(leader.log(tp).segments) > 1
    hw = info(cluster, 1, tp)["high_watermark"]
    before = cluster.log_bytes(1, tp, hw)
    reports = cluster.restart(1)
    assert set(reports) == {tp} and reports[tp].clean
    rm = cluster.brokers[1]
    assert rm.partitions() == [tp]
    restored = rm.partition_info(tp)
    assert restored["role"] == "inactive" and restored["high_watermark"] == hw
    assert restored["log_end_offset"] == hw and cluster.log_bytes(1, tp, hw) == before
    assert rm.append(tp, batch(), 1, 100).error == 6            # inactive until told
    cluster.elect(tp, 1)
    retry = rm.append(tp, batch(3, b"k9", pid=3, epoch=0, seq=9), ALL, 30_000)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (9, 11)
    assert retry.error == 0 and retry.pending_id is None         # below the restored HW
    nxt = rm.append(tp, batch(1, pid=3, epoch=0, seq=12), ALL, 30_000)
    assert nxt.error == 0 and nxt.base_offset == 12
    assert rm.append(tp, batch(1, pid=3, epoch=0, seq=20), 1, 100).error == 45


def test_restart_cuts_a_torn_tail_and_follower_rejoins(cluster):
    tp = cluster.create("clicks")
    cluster.brokers[1].append(tp, batch(3), 1, 100)
    cluster.replicate()
    cluster.brokers[3].flush()
    segment = sorted((cluster.brokers[3].data_dir / "clicks-0").glob("*.log"))[-1]
    cluster.brokers[3].close()
    with open(segment, "ab") as f:
        f.write(batch(5)[:50])
    reports = cluster.start(3)
    assert reports[tp].truncated_bytes == 50
    cluster.elect(tp, 1)
    cluster.brokers[1].append(tp, batch(2), 1, 100)
    cluster.replicate()
    hw = info(cluster, 1, tp)["high_watermark"]
    assert hw == 5 and len({cluster.log_bytes(b, tp, hw) for b in (1, 2, 3)}) == 1


def test_hw_checkpoint_interval_defers_writes(tmp_path):
    clock = FakeClock()
    rm = ReplicaManager(1, BrokerConfig(str(tmp_path), hw_checkpoint_interval_ms=5_000), clock)
    rm.startup()
    state = PartitionLeaderState("t", 0, 1, 1, 0, (1,), 0, (1,))
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, -1, (state,), ()))
    result = rm.append(("t", 0), batch(), ALL, 100)
    assert result.error == 0 and result.pending_id is None       # RF 1: done at once
    checkpoint = replication_offset_checkpoint(tmp_path)
    assert checkpoint.read().get(("t", 0), 0) == 0
    clock.advance(5_000)
    rm.write_high_watermarks(rm.due_high_watermarks())      # the shell's tick writes it
    assert checkpoint.read()[("t", 0)] == 3
    rm.close()


# ---------------------------------------------------------------- smaller rules
def test_bad_partition_states_and_configs_are_refused_per_partition(cluster):
    rm = cluster.brokers[1]
    bad_isr = PartitionLeaderState("a", 0, 1, 1, 0, (1, 4), 0, (1, 2))
    leader_outside_isr = PartitionLeaderState("b", 0, 1, 1, 0, (2,), 0, (1, 2))
    bad_config = PartitionLeaderState("c", 0, 1, 1, 0, (1,), 0, (1,))
    outcome = rm.handle_leader_and_isr(
        cluster.leader_and_isr([bad_isr, leader_outside_isr, bad_config]),
        {"c": {"min.insync.replicas": "zero"}})
    assert outcome.error == 0
    assert outcome.partition_errors == {("a", 0): 42, ("b", 0): 42, ("c", 0): 40}
    assert rm.partitions() == [] and not any(rm.data_dir.glob("*-0"))
    with pytest.raises(UnknownTopicOrPartition) as unknown:
        rm.follower_fetch_request(("a", 0))
    assert unknown.value.code == 3


def test_follower_side_calls_on_a_leader_raise_not_leader(cluster):
    tp = cluster.create("clicks")
    for call in (lambda: cluster.brokers[1].follower_fetch_request(tp),
                 lambda: cluster.brokers[1].append_as_follower(tp, b"", 0),
                 lambda: cluster.brokers[1].follower_truncate(tp, 0, 0)):
        with pytest.raises(NotLeaderOrFollower) as err:
            call()
        assert err.value.code == 6
    assert cluster.brokers[1].handle_alter_partition_response(("zz", 0), None) == []


def test_a_diverging_epoch_after_truncation_completed_truncates_again(cluster):
    tp = cluster.create("clicks")
    cluster.brokers[1].append(tp, batch(4), 1, 100)
    cluster.replicate()
    follower = cluster.brokers[2]
    assert not follower.partition_info(tp)["truncation_pending"]
    assert follower.partition_info(tp)["high_watermark"] == 4
    result = follower.follower_truncate(tp, 0, 0)        # e.g. a diverging answer (0, 0)
    assert result.completed and result.log_end_offset == 0
    assert follower.partition_info(tp)["high_watermark"] == 0
    assert replication_offset_checkpoint(follower.data_dir).read()[("clicks", 0)] == 0
    cluster.replicate()
    assert follower.log(tp).log_end_offset == 4


def test_flush_ms_is_applied_by_tick(cluster):
    tp = cluster.create("clicks", config={"flush.ms": "100"})
    leader = cluster.brokers[1]
    leader.append(tp, batch(), 1, 100)
    assert leader.log(tp).recovery_point == 0
    cluster.clock.advance(100)
    cluster.tick(1)
    assert leader.log(tp).recovery_point == 3
    from replicas.checkpoints import recovery_point_checkpoint
    assert recovery_point_checkpoint(leader.data_dir).read()[("clicks", 0)] == 3


def test_update_metadata_drops_partitions_being_deleted(cluster):
    tp = cluster.create("clicks")
    cluster.update_metadata(2)
    assert cluster.brokers[2].metadata.partitions_of("clicks") == [0]
    cluster.leadership[tp].leader = -2
    cluster.update_metadata(2)
    assert cluster.brokers[2].metadata.topics() == []


def test_close_is_idempotent_and_keeps_the_checkpoints(cluster):
    tp = cluster.create("clicks")
    cluster.brokers[1].append(tp, batch(), 1, 100)
    cluster.replicate()
    rm = cluster.brokers[1]
    rm.close()
    rm.close()
    assert replication_offset_checkpoint(rm.data_dir).read() == {("clicks", 0): 3}


def test_a_leader_that_appended_nothing_does_not_diverge_forever(cluster):
    """Kafka's UnifiedLog.truncateTo always cuts the epoch cache at the LEO: a broker that
    led epoch 1 without appending holds (1, LEO) and must drop it once it follows."""
    tp = cluster.create("clicks")
    cluster.brokers[1].append(tp, batch(3), 1, 100)
    cluster.replicate()
    cluster.elect(tp, 3, to=(3,))                 # only broker 3 hears of epoch 1
    assert [e.epoch for e in cluster.brokers[3].log(tp).epoch_cache.entries] == [0, 1]
    cluster.elect(tp, 2)                          # epoch 2, led by 2, which never saw 1
    cluster.brokers[2].append(tp, batch(2), 1, 100)
    cluster.replicate()
    assert cluster.brokers[3].log(tp).log_end_offset == 5
    assert [e.epoch for e in cluster.brokers[3].log(tp).epoch_cache.entries] == [0, 2]


# ---------------------------------------------------------------- retention across replicas
RETAIN_2K = {"segment.bytes": "1000", "retention.bytes": "2000"}


def test_followers_adopt_the_leaders_log_start_never_past_their_hw(cluster):
    tp = cluster.create("clicks", config=RETAIN_2K)
    leader = cluster.brokers[1]
    for i in range(40):
        assert leader.append(tp, batch(3, b"r%d" % i), 1, 1000).error == 0
    cluster.replicate()
    configs = {"clicks": RETAIN_2K}
    deleted = leader.apply_retention(now_ms=0, topic_configs=configs)
    start = leader.log(tp).log_start_offset
    assert deleted[tp].deleted_segments > 0 and start > 0
    assert leader.log(tp).size_bytes <= 3000
    assert leader.fetch(tp, 0, 1 << 20).error == 1                 # a consumer below the start
    assert leader.fetch(tp, start, 1 << 20).error == 0
    cluster.brokers[2].log(tp)                                     # followers still hold it all
    assert cluster.brokers[2].log(tp).log_start_offset == 0
    assert leader.append(tp, batch(1, b"more"), 1, 1000).error == 0
    cluster.replicate()                                            # fetch answers carry the start
    assert [cluster.brokers[b].log(tp).log_start_offset for b in (2, 3)] == [start, start]
    assert all(cluster.brokers[b].fetch(tp, 0, 1, replica_id=-1).error in (1, 6) for b in (2, 3))


def test_a_follower_behind_the_leaders_log_start_restarts_empty_at_it(cluster):
    tp = cluster.create("clicks", config=RETAIN_2K)
    leader = cluster.brokers[1]
    cluster.down.add(3)                                            # broker 3 stops fetching
    cluster.clock.advance(10_001)
    cluster.replicate()                                            # broker 2 is caught up now
    cluster.tick(1)                                                # 3 leaves the ISR
    assert info(cluster, 1, tp)["isr"] == (1, 2)
    for i in range(40):
        assert leader.append(tp, batch(3, b"r%d" % i), 1, 1000).error == 0
    cluster.replicate()
    leader.apply_retention(now_ms=0, topic_configs={"clicks": RETAIN_2K})
    start, end = leader.log(tp).log_start_offset, leader.log(tp).log_end_offset
    assert start > 0 and cluster.brokers[3].log(tp).log_end_offset < start
    cluster.down.discard(3)
    cluster.replicate()
    follower = cluster.brokers[3].log(tp)
    assert (follower.log_start_offset, follower.log_end_offset) == (start, end)
    assert cluster.log_bytes(3, tp, end) == cluster.log_bytes(1, tp, end)
    assert info(cluster, 3, tp)["high_watermark"] == end
    assert info(cluster, 1, tp)["isr"] == (1, 2, 3)                # caught up: back in the ISR


def test_apply_retention_takes_altered_topic_configs(cluster):
    tp = cluster.create("clicks", config={"segment.bytes": "1000"})
    leader = cluster.brokers[1]
    for i in range(20):
        leader.append(tp, batch(3, b"r%d" % i), 1, 1000)
    cluster.replicate()
    assert leader.apply_retention(now_ms=0, topic_configs={"clicks": {"segment.bytes": "1000"}}) == {}
    altered = {"clicks": {"segment.bytes": "1000", "retention.ms": "1000"}}
    deleted = leader.apply_retention(now_ms=10_000, topic_configs=altered)   # records at 1000
    assert deleted[tp].reasons == {"time": deleted[tp].deleted_segments}
    assert leader.log(tp).size_bytes == 0 and leader.log(tp).log_start_offset == 60


def test_delete_records_moves_the_start_survives_a_restart_and_reaches_followers(cluster):
    tp = cluster.create("clicks", config={"segment.bytes": "1000"})
    leader = cluster.brokers[1]
    for i in range(20):
        leader.append(tp, batch(3, b"r%d" % i), 1, 1000)
    cluster.replicate()
    assert leader.delete_records(tp, 31) == (0, 31, 31)      # inside a segment
    assert leader.log(tp).segments[0].base_offset < 31
    cluster.restart(1)
    leader = cluster.brokers[1]
    cluster.send_leader_and_isr(tp)
    assert leader.log(tp).log_start_offset == 31              # log-start-offset-checkpoint
    assert leader.fetch(tp, 30, 1 << 20).error == 1
    assert leader.delete_records(tp, 10) == (0, 31, 10)       # never moves back
    assert leader.delete_records(tp, 61) == (1, -1, -1)       # past the HW (60)
    assert leader.delete_records(tp, -1) == (0, 60, 60)       # -1: up to the HW
    assert leader.delete_records(tp, -5) == (1, -1, -1)
    assert cluster.brokers[2].delete_records(tp, 40) == (6, -1, -1)
    assert leader.delete_records(("nope", 0), 1) == (3, -1, -1)
    leader.append(tp, batch(1, b"x"), 1, 1000)
    cluster.replicate()
    assert [cluster.brokers[b].log(tp).log_start_offset for b in (1, 2, 3)] == [60, 60, 60]


def test_the_low_watermark_is_the_lowest_log_start_of_the_live_replicas(cluster):
    """Kafka's lowWatermarkIfLeader: the leader's log start, lowered by each follower whose
    broker is live (UpdateMetadata) to the log start its last fetch carried (-1 before
    any); a follower adopts the leader's start from a fetch answer and reports it in the
    next fetch."""
    tp = cluster.create("clicks")
    leader = cluster.brokers[1]
    for i in range(10):
        leader.append(tp, batch(2, b"r%d" % i), ALL, 1000)
    cluster.replicate()
    assert leader.low_watermark(tp) == (0, 0)
    assert leader.delete_records(tp, 8) == (0, 8, 8)       # no live broker known yet
    cluster.update_metadata(1)                             # 1, 2 and 3 live
    assert leader.low_watermark(tp) == (0, 0)              # the followers' last fetches said 0
    cluster.fetch_once(2, tp)                              # follower 2 adopts 8 from the answer
    assert leader.low_watermark(tp) == (0, 0)
    cluster.fetch_once(2, tp)                              # ... and says so in its next fetch
    cluster.fetch_once(2, tp)
    assert leader.low_watermark(tp) == (0, 0)              # broker 3 still at 0
    cluster.fetch_once(3, tp)
    cluster.fetch_once(3, tp)
    assert leader.low_watermark(tp) == (0, 8)
    assert leader.delete_records(tp, 12) == (0, 8, 12)     # the followers lag again
    cluster.kill(3)                                        # broker 3 leaves the live set
    cluster.update_metadata(1)
    cluster.fetch_once(2, tp)
    cluster.fetch_once(2, tp)
    assert leader.low_watermark(tp) == (0, 12)
    cluster.elect(tp, 2, isr=(2,), to=(1, 2))
    assert leader.low_watermark(tp) == (6, -1)             # not the leader any more
    assert leader.low_watermark(("nope", 0)) == (3, -1)


def test_delete_records_refused_on_compacted_and_internal_topics(cluster):
    tp = cluster.create("changelog", config={"cleanup.policy": "compact"})
    leader = cluster.brokers[1]
    leader.append(tp, batch(2), 1, 1000)
    cluster.replicate()
    assert leader.delete_records(tp, 1) == (44, -1, -1)        # POLICY_VIOLATION
    offsets = cluster.create("__consumer_offsets")
    cluster.brokers[1].append(offsets, batch(2), 1, 1000)
    cluster.replicate()
    assert cluster.brokers[1].delete_records(offsets, 1) == (17, -1, -1)
