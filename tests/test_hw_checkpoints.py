"""High-watermark checkpoints taken under the lock and written outside it
(replicas/hw_checkpoints.py, replicas/checkpoints.py generations): a deferred checkpoint is
taken at most once an interval and only when a HW moved; a snapshot older than one written
already never overwrites it; a failed write takes its directory offline at the next tick;
and a real broker writes it without holding its lock, so a produce goes on while the
checkpoint's write is stuck (tests/broker_world.py, a real ZooKeeper, no Ray)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from controller.requests import LeaderAndIsrRequest, PartitionLeaderState
from replicas.checkpoints import replication_offset_checkpoint
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


@pytest.mark.unit
def test_a_failed_write_takes_its_directory_offline_at_the_next_tick(tmp_path):
    clock = FakeClock()
    failures = []
    rm = leader_of_t0(tmp_path, clock)
    rm._on_log_dir_failure = failures.append
    rm.append(TP, batch(), ALL, 100)
    clock.advance(5_000)
    snapshot = rm.due_high_watermarks()
    (d, _), = snapshot.files
    d.hw_file = FailingCheckpoint()
    rm.write_high_watermarks(snapshot)                # beside the manager: reports nothing
    assert failures == [] and rm.dirs.online
    rm.tick()
    assert [f.partitions for f in failures] == [(TP,)]
    assert not rm.dirs.online
    rm.close()


@pytest.mark.unit
def test_a_directory_offline_since_the_snapshot_is_not_written(tmp_path):
    clock = FakeClock()
    rm = leader_of_t0(tmp_path, clock)
    rm.append(TP, batch(), ALL, 100)
    clock.advance(5_000)
    snapshot = rm.due_high_watermarks()
    (d, _), = snapshot.files
    d.hw_file = FailingCheckpoint()       # a write would raise
    rm._fail_dir(d, "taken offline meanwhile")
    rm.write_high_watermarks(snapshot)
    assert rm._hw.failures() == []
    rm.close()


class FailingCheckpoint:
    def write(self, offsets, generation=None) -> bool:
        raise OSError(5, "Input/output error")


class StuckCheckpoint:
    """A replication-offset-checkpoint whose write blocks until released."""

    def __init__(self, real):
        self.real = real
        self.writing = threading.Event()
        self.release = threading.Event()

    def write(self, offsets, generation=None) -> bool:
        self.writing.set()
        assert self.release.wait(60)
        return self.real.write(offsets, generation)

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
