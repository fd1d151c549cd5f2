"""Disk writes taken under the lock and done outside it (replicas/deferred_writes.py).

High-watermark checkpoints (replicas/checkpoints.py generations): a deferred checkpoint is
taken at most once an interval and only when a HW moved; a snapshot older than one written
already never overwrites it; a failed write takes its directory offline at the next tick;
and a real broker writes it without holding its lock, so a produce goes on while the
checkpoint's write is stuck (tests/broker_world.py, a real ZooKeeper, no Ray).

Rolled segments (replicas/log.py): a roll syncs nothing in the append; the synced roll moves
the recovery point to the new segment's base and the recovery-point checkpoint with it, not
when the log was cut meanwhile; a failed fsync takes the directory offline; a real broker's
background thread syncs its rolls."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from controller.requests import (LeaderAndIsrRequest, PartitionLeaderState, StopReplicaPartition,
                                 StopReplicaRequest)
from replicas import records
from replicas.checkpoints import recovery_point_checkpoint, replication_offset_checkpoint
from replicas.log import Log, LogConfig, fsync_files
from replicas.partition_state import ACKS_ALL as ALL
from replicas.replica_manager import BrokerConfig, ReplicaManager
from tests.broker_world import InProcessCluster, running
from tests.replication_harness import FakeClock
from tests.test_replica_manager import batch

TP = ("t", 0)


def leader_of_t0(tmp_path, clock, interval_ms: int = 5_000) -> ReplicaManager:
    """A replica manager leading ("t", 0) alone (RF 1: an append moves the HW at once)."""
    rm = ReplicaManager(1, BrokerConfig(str(tmp_path), hw_checkpoint_interval_ms=interval_ms),
                        clock)
    rm.startup()
    state = PartitionLeaderState("t", 0, 1, 1, 0, (1,), 0, (1,))
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, -1, (state,), ()))
    return rm


def on_disk(tmp_path) -> dict:
    return replication_offset_checkpoint(tmp_path).read()


@pytest.mark.unit
def test_a_deferred_checkpoint_is_due_once_an_interval_after_a_hw_moved(tmp_path):
    clock = FakeClock()
    rm = leader_of_t0(tmp_path, clock)
    assert rm.due_high_watermarks() is None           # nothing moved
    rm.append(TP, batch(), ALL, 100)
    assert rm.due_high_watermarks() is None           # moved, but inside the interval
    rm.tick()
    assert on_disk(tmp_path).get(TP, 0) == 0          # a tick writes none itself
    clock.advance(5_000)
    snapshot = rm.due_high_watermarks()
    assert snapshot is not None and rm.due_high_watermarks() is None   # taken: clean
    assert on_disk(tmp_path).get(TP, 0) == 0          # taken, not yet written
    rm.write_high_watermarks(snapshot)
    assert on_disk(tmp_path)[TP] == 3
    clock.advance(5_000)
    assert rm.due_high_watermarks() is None           # no HW moved since
    rm.close()


@pytest.mark.unit
def test_a_snapshot_taken_before_one_already_written_is_dropped(tmp_path):
    clock = FakeClock()
    rm = leader_of_t0(tmp_path, clock)
    rm.append(TP, batch(), ALL, 100)
    clock.advance(5_000)
    older = rm.due_high_watermarks()                  # HW 3
    rm.append(TP, batch(), ALL, 100)
    rm.checkpoint_high_watermarks()                   # HW 6, written in the lock holder
    assert on_disk(tmp_path)[TP] == 6
    rm.write_high_watermarks(older)                   # the background writer, late
    assert on_disk(tmp_path)[TP] == 6
    rm.close()


def failing_snapshot(tmp_path) -> tuple:
    """(a leader, its due HW snapshot, the snapshot's directory) with the directory's
    checkpoint write raising."""
    clock = FakeClock()
    rm = leader_of_t0(tmp_path, clock)
    rm.append(TP, batch(), ALL, 100)
    clock.advance(5_000)
    snapshot = rm.due_high_watermarks()
    (d, _), = snapshot.files
    d.hw_file = FailingCheckpoint()
    return rm, snapshot, d


@pytest.mark.unit
def test_a_failed_write_takes_its_directory_offline_at_the_next_tick(tmp_path):
    rm, snapshot, _ = failing_snapshot(tmp_path)
    failures = []
    rm._on_log_dir_failure = failures.append
    rm.write_high_watermarks(snapshot)                # beside the manager: reports nothing
    assert failures == [] and rm.dirs.online
    rm.tick()
    assert [f.partitions for f in failures] == [(TP,)]
    assert not rm.dirs.online
    rm.close()


@pytest.mark.unit
def test_a_directory_offline_since_the_snapshot_is_not_written(tmp_path):
    rm, snapshot, d = failing_snapshot(tmp_path)
    rm._fail_dir(d, "taken offline meanwhile")
    rm.write_high_watermarks(snapshot)
    assert rm._hw.failures() == []
    rm.close()


ROLLING = LogConfig(segment_bytes=4096)


def kb_batch(n: int = 1) -> bytes:
    return bytes(records.build_batch([b"x" * 1000] * n, timestamps_ms=1_000))


def rolled_log(tmp_path) -> Log:
    """A log that rolled once: its first segment full, the second holding one batch."""
    log = Log(tmp_path / "t-0", ROLLING)
    while len(log.segments) < 2:
        log.append_as_leader(kb_batch(), 0)
    return log


@pytest.mark.unit
def test_a_roll_syncs_nothing_in_the_append_and_its_flush_moves_the_recovery_point(tmp_path):
    log = rolled_log(tmp_path)
    first, second = log.segments
    assert first.dirty and log.recovery_point == 0      # the append synced nothing
    rolled = log.take_rolled_flush()
    assert rolled.up_to == second.base_offset and log.take_rolled_flush() is None
    assert [s for s, _ in rolled.segments] == [first]
    assert first.log_path in rolled.paths and second.log_path not in rolled.paths
    assert fsync_files(rolled.paths) is None
    assert log.rolled_flushed(rolled)
    assert log.recovery_point == second.base_offset and not first.dirty
    assert log.flushed_end == second.base_offset
    log.close_handlers()


@pytest.mark.unit
def test_a_log_cut_after_the_roll_keeps_its_recovery_point(tmp_path):
    log = rolled_log(tmp_path)
    rolled = log.take_rolled_flush()
    log.truncate_to(1)                                  # a follower truncated meanwhile
    assert fsync_files(rolled.paths) is None            # its files are gone: nothing to sync
    assert not log.rolled_flushed(rolled)
    assert log.recovery_point == 0
    log.close_handlers()


@pytest.mark.unit
def test_the_manager_syncs_rolls_taken_by_ticks_and_checkpoints_the_recovery_point(tmp_path):
    clock = FakeClock()
    rm = ReplicaManager(1, BrokerConfig(str(tmp_path), hw_checkpoint_interval_ms=5_000,
                                        default_topic_config={"segment.bytes": "4096"}),
                        clock)
    rm.startup()
    state = PartitionLeaderState("t", 0, 1, 1, 0, (1,), 0, (1,))
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, -1, (state,), ()))
    while len(rm.log(TP).segments) < 2:
        assert rm.append(TP, kb_batch(), ALL, 100).error == 0
    base = rm.log(TP).segments[1].base_offset
    assert rm.due_segment_flushes() == []               # no tick yet
    rm.tick()
    rolled = rm.due_segment_flushes()
    assert [tp for tp, _, _ in rolled] == [TP] and rm.due_segment_flushes() == []
    assert recovery_point_checkpoint(tmp_path).read().get(TP, 0) == 0
    points = rm.segments_flushed(rm.write_segment_flushes(rolled))
    assert rm.log(TP).recovery_point == base
    assert recovery_point_checkpoint(tmp_path).read().get(TP, 0) == 0   # not under the lock
    rm.write_recovery_points(points)
    assert recovery_point_checkpoint(tmp_path).read()[TP] == base
    rm.close()


def rolled_and_synced(tmp_path, clock=None):
    """A leader of t-0 whose roll was synced: (manager, the recovery checkpoint to write)."""
    rm = leader_of_t0(tmp_path, clock or FakeClock())
    rm.log(TP).config = ROLLING
    while len(rm.log(TP).segments) < 2:
        assert rm.append(TP, kb_batch(), ALL, 100).error == 0
    rm.tick()
    points = rm.segments_flushed(rm.write_segment_flushes(rm.due_segment_flushes()))
    assert points is not None
    return rm, points


@pytest.mark.unit
def test_a_recovery_checkpoint_written_late_never_overwrites_a_newer_one(tmp_path):
    rm, late = rolled_and_synced(tmp_path)
    rm.handle_stop_replica(StopReplicaRequest(0, 1, -1, (StopReplicaPartition("t", 0, -2,
                                                                             True),)))
    assert TP not in recovery_point_checkpoint(tmp_path).read()     # written at once
    rm.write_recovery_points(late)          # taken before the deletion: dropped
    assert TP not in recovery_point_checkpoint(tmp_path).read()
    rm.close()


@pytest.mark.unit
def test_a_failed_recovery_checkpoint_write_takes_its_directory_offline_at_the_next_tick(
        tmp_path):
    failures = []
    rm, points = rolled_and_synced(tmp_path)
    rm._on_log_dir_failure = failures.append
    (d,) = rm.dirs.online
    d.recovery_file = FailingCheckpoint()
    rm.write_recovery_points(points)        # the background thread's write: noted only
    assert failures == [] and rm.dirs.online
    rm.tick()
    assert [f.partitions for f in failures] == [(TP,)] and not rm.dirs.online
    rm.close()


@pytest.mark.unit
def test_a_failed_fsync_of_a_roll_takes_its_directory_offline(tmp_path):
    clock = FakeClock()
    failures = []
    rm = leader_of_t0(tmp_path, clock)
    rm._on_log_dir_failure = failures.append
    rm.log(TP).config = ROLLING
    while len(rm.log(TP).segments) < 2:
        assert rm.append(TP, kb_batch(), ALL, 100).error == 0
    rm.tick()
    (tp, log, rolled), = rm.due_segment_flushes()
    rm.segments_flushed([(tp, log, rolled, OSError(5, "Input/output error"))])
    assert [f.partitions for f in failures] == [(TP,)] and not rm.dirs.online
    rm.close()


class FailingCheckpoint:
    def write(self, offsets, generation=None) -> None:
        raise OSError(5, "Input/output error")


class StuckCheckpoint:
    """A replication-offset-checkpoint whose write blocks until released."""

    def __init__(self, real):
        self.real = real
        self.writing = threading.Event()
        self.release = threading.Event()

    def write(self, offsets, generation=None) -> None:
        self.writing.set()
        assert self.release.wait(60)
        self.real.write(offsets, generation)

    def read(self):
        return self.real.read()


@pytest.fixture
def world(zk_server, tmp_path):
    yield from running(InProcessCluster(zk_server.connect_string, tmp_path,
                                        config={"tick_ms": 20,
                                                "hw_checkpoint_interval_ms": 100}))


@pytest.mark.zk
@pytest.mark.timeout(120)
def test_a_broker_produces_while_its_checkpoint_write_is_stuck(world):
    world.create_topic("hw", 1, 1)
    broker = world.brokers[1]
    (d,) = broker.rm.dirs.online
    stuck = d.hw_file = StuckCheckpoint(d.hw_file)
    producer = Producer({"bootstrap.servers": world.bootstrap_servers(), "acks": "all"})
    try:
        producer.produce("hw", b"first")
        assert producer.flush(30) == 0
        assert stuck.writing.wait(30)                 # the background thread is in write()
        assert broker.lock.acquire(timeout=5)         # ... and holds no lock
        broker.lock.release()
        producer.produce("hw", b"second")
        assert producer.flush(30) == 0                # served meanwhile
        assert broker.rm.log(("hw", 0)).log_end_offset == 2
    finally:
        stuck.release.set()
    world.wait_for(lambda: stuck.real.read().get(("hw", 0)) == 2, 30, "the HW on disk")


@pytest.fixture
def rolling_world(zk_server, tmp_path):
    yield from running(InProcessCluster(zk_server.connect_string, tmp_path,
                                        config={"tick_ms": 20}))


@pytest.mark.zk
@pytest.mark.timeout(120)
def test_a_brokers_background_thread_syncs_its_rolls(rolling_world):
    world = rolling_world
    world.create_topic("rolls", 1, 1, {"segment.bytes": "65536"})
    producer = Producer({"bootstrap.servers": world.bootstrap_servers(), "acks": "all",
                         "linger.ms": 0})
    for i in range(300):
        producer.produce("rolls", b"%04d" % i + b"x" * 996)
        if i % 20 == 19:                  # batches of ~20 KB: a roll comes between two
            assert producer.flush(30) == 0
    log = world.brokers[1].rm.log(("rolls", 0))
    assert len(log.segments) >= 3, (log.config.segment_bytes, log.size_bytes)
    last_base = log.segments[-1].base_offset
    world.wait_for(lambda: log.recovery_point == last_base, 30,
                   "the recovery point at the last roll")
    assert not any(s.dirty for s in log.segments[:-1])


@pytest.mark.unit
def test_a_flush_that_ends_after_close_changes_nothing(tmp_path):
    rm = leader_of_t0(tmp_path, FakeClock())
    rm.log(TP).config = ROLLING
    while len(rm.log(TP).segments) < 2:
        assert rm.append(TP, kb_batch(), ALL, 100).error == 0
    rm.tick()
    synced = rm.write_segment_flushes(rm.due_segment_flushes())
    rm.close()                              # the broker's shutdown, while the fsyncs ran
    point = recovery_point_checkpoint(tmp_path).read()[TP]
    rm.segments_flushed(synced)
    assert recovery_point_checkpoint(tmp_path).read()[TP] == point
