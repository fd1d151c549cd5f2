"""log.flush.before.ack (replicas/replica_manager.py): no acks=-1 produce is answered before
every ISR replica fsynced it, with group commit on the leader.

Three replica managers replicating by direct calls (tests/replication_harness.py). Each
time an acks=-1 produce is answered, every ISR replica's flushed end (`Log.flushed_end`,
moved only by an fsync) must already cover it; without the setting the same schedule
answers with nothing flushed (Kafka's default: durability from replication alone).
"""

from __future__ import annotations

import pytest

from replicas import records
from replicas.replica_manager import ProduceDone
from tests.replication_harness import Cluster

pytestmark = pytest.mark.unit


def batch(n: int = 3) -> bytes:
    return bytes(records.build_batch([b"v-%04d" % i for i in range(n)], timestamps_ms=1_000))


def flushed(cluster: Cluster, tp) -> dict[int, int]:
    return {b: rm.log(tp).flushed_end for b, rm in cluster.brokers.items()}


@pytest.mark.parametrize("flush_before_ack", [True, False])
def test_an_acknowledged_produce_is_on_every_isr_replicas_disk(tmp_path, flush_before_ack):
    cluster = Cluster(tmp_path, flush_before_ack=flush_before_ack)
    tp = cluster.create("t", config={"min.insync.replicas": "2"})
    leader = cluster.brokers[1]
    answered_with = []
    for round_ in range(4):
        r = leader.append(tp, batch(3), -1, 30_000)
        assert r.error == 0 and r.pending_id is not None
        for _ in range(4):                       # fetch rounds until the produce is answered
            for b in (2, 3):
                cluster.fetch_once(b, tp)
            if (1, r.pending_id) in cluster.done:
                break
        assert cluster.done[(1, r.pending_id)] == ProduceDone(r.pending_id, 0, r.base_offset,
                                                              r.last_offset)
        answered_with.append((r.last_offset + 1, flushed(cluster, tp)))
    if flush_before_ack:
        assert all(min(on_disk.values()) >= end for end, on_disk in answered_with)
    else:
        # recovery at start flushed the empty logs; nothing appended was fsynced
        assert all(max(on_disk.values()) == 0 for _, on_disk in answered_with)


def test_a_leader_alone_in_its_isr_flushes_before_the_answer(tmp_path):
    cluster = Cluster(tmp_path, flush_before_ack=True)
    tp = cluster.create("t", replicas=(1,))
    r = cluster.brokers[1].append(tp, batch(5), -1, 30_000)
    assert (r.error, r.pending_id) == (0, None)         # answered at once...
    assert cluster.brokers[1].log(tp).flushed_end == 5  # ...after its fsync


def test_a_tick_flushes_a_leader_whose_followers_are_quiet(tmp_path):
    cluster = Cluster(tmp_path, flush_before_ack=True)
    tp = cluster.create("t")
    cluster.replicate()
    r = cluster.brokers[1].append(tp, batch(2), 1, 30_000)
    assert r.error == 0 and cluster.brokers[1].log(tp).flushed_end == 0
    cluster.tick(1)
    assert cluster.brokers[1].log(tp).flushed_end == 2


def test_a_sync_puts_the_records_on_disk_and_leaves_the_recovery_point(tmp_path):
    from replicas.log import Log
    log = Log(tmp_path / "t-0")
    log.append_as_leader(bytearray(batch(4)), 0)
    assert (log.flushed_end, log.recovery_point) == (0, 0)
    log.sync_data()
    # the records are synced; the indexes are not, so recovery must still start at 0
    assert (log.flushed_end, log.recovery_point) == (4, 0)
    log.flush()
    assert (log.flushed_end, log.recovery_point) == (4, 4)
