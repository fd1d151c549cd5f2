"""A broker's log directories (replicas/log_dirs.py, the replica manager's "Log directories").

Kafka's KIP-112 rules on one ReplicaManager with two directories: new logs go where the
fewest are; the first I/O error in a directory takes it offline, its partitions answer
KAFKA_STORAGE_ERROR (56) to every request while the other directory serves on; the
failure is reported once with the partitions it took and their waiting produces; a
corrupt batch is never served; a restart with the fault gone brings everything back.
The I/O errors are real ones from the operating system (a partition directory removed
under the log, a checkpoint's temporary name taken by a directory), no patching.
"""

from __future__ import annotations

import shutil

import pytest

from controller.requests import LeaderAndIsrRequest, PartitionLeaderState, StopReplicaPartition, \
    StopReplicaRequest
from replicas import records
from replicas.errors import KafkaStorageError
from replicas.log_dirs import LogDirs
from replicas.replica_manager import (KAFKA_STORAGE_ERROR, BrokerConfig, ProduceDone,
                                      ReplicaManager, TopicPartition)
from tests.replication_harness import FakeClock

pytestmark = pytest.mark.unit

STORAGE = KAFKA_STORAGE_ERROR
SMALL_SEGMENTS = {"segment.bytes": "1024"}


def batch(n: int = 3, tag: bytes = b"v") -> bytes:
    return bytes(records.build_batch([tag + b"-%04d" % i + b"." * 40 for i in range(n)],
                                     timestamps_ms=1_000))


class Broker:
    """One ReplicaManager alone in its ISR (leader of everything), on `dirs`."""

    def __init__(self, tmp_path, dirs=("a", "b")):
        self.tmp, self.names = tmp_path, dirs
        self.failures = []
        self.clock = FakeClock()
        self.epochs: dict[TopicPartition, int] = {}
        self.start()

    def start(self):
        self.rm = ReplicaManager(1, BrokerConfig(str(self.tmp / "home"), log_dirs=tuple(
            str(self.tmp / n) for n in self.names)), self.clock,
            on_log_dir_failure=self.failures.append)
        return self.rm.startup()

    def lead(self, tp: TopicPartition, is_new: bool = True, config=None) -> int:
        epoch = self.epochs[tp] = self.epochs.get(tp, -1) + 1
        state = PartitionLeaderState(tp.topic, tp.partition, 1, 1, epoch, (1,), epoch, (1,),
                                     is_new)
        out = self.rm.handle_leader_and_isr(LeaderAndIsrRequest(100, 1, -1, (state,), ()),
                                            {tp.topic: config or SMALL_SEGMENTS})
        return out.partition_errors[tp]

    def stop(self, tp: TopicPartition) -> int:
        req = StopReplicaRequest(100, 1, -1, (StopReplicaPartition(tp.topic, tp.partition, -1,
                                                                   False),))
        return self.rm.handle_stop_replica(req).partition_errors[tp]

    def dir_of(self, tp) -> str:
        return self.rm.partition_dir(tp).rsplit("/", 1)[1]


@pytest.fixture
def broker(tmp_path):
    return Broker(tmp_path)


def tps(n: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in range(n)]


def test_new_logs_go_to_the_directory_with_the_fewest(broker):
    for tp in tps(5):
        assert broker.lead(tp) == 0
    assert [broker.dir_of(tp) for tp in tps(5)] == ["a", "b", "a", "b", "a"]
    assert [len(d["partitions"]) for d in broker.rm.log_dirs()] == [3, 2]


def test_one_request_spreads_its_new_logs_too(broker):
    assert broker.lead(TopicPartition("u", 0)) == 0          # a holds one already
    states = tuple(PartitionLeaderState("t", p, 1, 1, 0, (1,), 0, (1,), True) for p in range(5))
    out = broker.rm.handle_leader_and_isr(LeaderAndIsrRequest(100, 1, -1, states, ()),
                                          {"t": SMALL_SEGMENTS})
    assert set(out.partition_errors.values()) == {0}
    assert [broker.dir_of(tp) for tp in tps(5)] == ["b", "a", "b", "a", "b"]


def test_log_dirs_ignore_a_directory_named_twice(tmp_path):
    dirs = LogDirs([tmp_path / "x", str(tmp_path / "x") + "/", tmp_path / "y"])
    assert [d.path.name for d in dirs.all] == ["x", "y"]
    with pytest.raises(ValueError):
        LogDirs([])


def fail_dir_a(broker: Broker, tp: TopicPartition) -> None:
    """Remove tp's partition directory: the next segment roll fails with ENOENT."""
    shutil.rmtree(broker.tmp / "a" / f"{tp.topic}-{tp.partition}")


def test_an_io_error_takes_only_its_directory_offline(broker):
    a0, b1, a2, b3 = tps(4)
    for tp in (a0, b1, a2, b3):
        assert broker.lead(tp) == 0
    fail_dir_a(broker, a0)
    results = [broker.rm.append(a0, batch(10), 1, 1000) for _ in range(40)]
    assert results[-1].error == STORAGE and "offline log directory" in results[-1].message
    assert all(r.error in (0, STORAGE) for r in results)
    [failure] = broker.failures
    assert failure.path.endswith("/a") and failure.reason.startswith("ENOENT")
    assert failure.partitions == (a0, a2) and not failure.all_offline
    for tp in (a0, a2):       # every request naming them: Kafka's HostedPartition.Offline
        assert broker.rm.append(tp, batch(), 1, 1000).error == STORAGE
        assert broker.rm.fetch(tp, 0, 1 << 20).error == STORAGE
        assert broker.rm.list_offset(tp, -1).error == STORAGE
        assert broker.rm.offsets_for_leader_epoch(tp, -1, 0)[0] == STORAGE
        assert broker.rm.delete_records(tp, 0)[0] == STORAGE
        assert broker.lead(tp) == STORAGE
        assert broker.stop(tp) == STORAGE
        with pytest.raises(KafkaStorageError):
            broker.rm.partition_info(tp)
    for tp in (b1, b3):       # the other directory serves on
        assert broker.rm.append(tp, batch(), 1, 1000).error == 0
        assert broker.rm.fetch(tp, 0, 1 << 20).error == 0
    dirs = broker.rm.log_dirs()
    assert [(d["online"], d["offline_partitions"]) for d in dirs] == [(False, [a0, a2]),
                                                                      (True, [])]
    assert dirs[0]["error"].startswith("ENOENT") and dirs[1]["partitions"] == [b1, b3]
    assert len(broker.failures) == 1          # reported once


def test_waiting_acks_all_produces_are_answered_with_the_storage_error(tmp_path):
    broker = Broker(tmp_path)
    tp = TopicPartition("t", 0)
    state = PartitionLeaderState("t", 0, 1, 1, 0, (1, 2), 0, (1, 2), True)
    out = broker.rm.handle_leader_and_isr(LeaderAndIsrRequest(100, 1, -1, (state,), ()),
                                          {"t": SMALL_SEGMENTS})
    assert out.partition_errors[tp] == 0 and broker.dir_of(tp) == "a"
    waiting = broker.rm.append(tp, batch(2), -1, 30_000)
    assert waiting.error == 0 and waiting.pending_id is not None
    fail_dir_a(broker, tp)
    while broker.rm.append(tp, batch(10), 1, 1000).error == 0:
        pass
    [failure] = broker.failures
    assert failure.effects == (ProduceDone(waiting.pending_id, STORAGE, 0, 1),)


def test_a_checkpoint_write_failure_takes_its_directory_offline(broker):
    a0, b1 = tps(2)
    assert broker.lead(a0) == 0 and broker.lead(b1) == 0
    (broker.tmp / "b" / "recovery-point-offset-checkpoint.tmp").mkdir()   # EISDIR on write
    broker.rm.flush()
    [failure] = broker.failures
    assert failure.path.endswith("/b") and failure.partitions == (b1,)
    assert failure.reason.startswith("EISDIR")
    assert broker.rm.append(b1, batch(), 1, 1000).error == STORAGE
    assert broker.rm.append(a0, batch(), 1, 1000).error == 0


def test_a_replica_unknown_here_is_not_created_while_a_directory_is_offline(broker):
    a0, b1, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    assert broker.lead(a0) == 0 and broker.lead(b1) == 0
    fail_dir_a(broker, a0)
    while broker.rm.append(a0, batch(10), 1, 1000).error == 0:
        pass
    # its log may be on the failed directory: only a new replica is created (on b)
    assert broker.lead(c, is_new=False) == STORAGE
    assert broker.lead(c, is_new=True) == 0 and broker.dir_of(c) == "b"


def test_every_directory_offline(tmp_path):
    broker = Broker(tmp_path, dirs=("a",))
    tp = TopicPartition("t", 0)
    assert broker.lead(tp) == 0
    fail_dir_a(broker, tp)
    while broker.rm.append(tp, batch(10), 1, 1000).error == 0:
        pass
    assert broker.failures[0].all_offline
    assert broker.lead(TopicPartition("u", 0), is_new=True) == STORAGE


def test_a_directory_that_cannot_be_opened_starts_offline(tmp_path):
    (tmp_path / "a").write_text("not a directory")
    broker = Broker(tmp_path)
    [failure] = broker.failures
    assert failure.path.endswith("/a") and failure.partitions == ()
    assert [d["online"] for d in broker.rm.log_dirs()] == [False, True]
    assert broker.lead(TopicPartition("t", 0), is_new=True) == 0
    assert broker.dir_of(TopicPartition("t", 0)) == "b"


def test_a_corrupt_batch_is_never_served_and_recovery_cuts_it(broker):
    tp = TopicPartition("t", 0)
    assert broker.lead(tp, config={"segment.bytes": "1048576"}) == 0
    for i in range(3):
        assert broker.rm.append(tp, batch(2, b"%d" % i), 1, 1000).error == 0
    broker.rm.flush()                           # all three batches below the recovery point
    first = broker.rm.fetch(tp, 0, 1 << 20)
    assert first.error == 0 and len(list(records.iter_headers(first.records))) == 3
    second_batch = list(records.iter_headers(first.records))[1]
    segment = broker.tmp / "a" / "t-0" / ("0" * 20 + ".log")
    data = bytearray(segment.read_bytes())
    data[second_batch.position + 70] ^= 0xFF    # a flipped bit inside the 2nd batch's records
    segment.write_bytes(bytes(data))
    got = broker.rm.fetch(tp, 0, 1 << 20)
    assert got.error == STORAGE and got.records == b""
    [failure] = broker.failures
    assert failure.reason.startswith("CorruptRecord") and failure.partitions == (tp,)
    broker.rm.close()
    reports = broker.start()                    # the corruption is still there, the rest too
    assert reports[tp].truncated_bytes > 0
    assert broker.rm.partition_info(tp)["log_end_offset"] == 2   # cut at the bad batch


def test_a_restart_with_the_fault_gone_brings_the_directory_back(broker):
    a0, b1 = tps(2)
    for tp in (a0, b1):
        assert broker.lead(tp) == 0
        assert broker.rm.append(tp, batch(2), 1, 1000).error == 0
    broker.rm.flush()
    (broker.tmp / "a" / "replication-offset-checkpoint.tmp").mkdir()
    broker.rm.flush()
    assert broker.rm.append(a0, batch(), 1, 1000).error == STORAGE
    (broker.tmp / "a" / "replication-offset-checkpoint.tmp").rmdir()
    broker.rm.close()
    broker.start()
    assert [d["online"] for d in broker.rm.log_dirs()] == [True, True]
    assert broker.rm.partition_info(a0)["log_end_offset"] == 2
    assert broker.lead(a0) == 0 and broker.rm.append(a0, batch(), 1, 1000).error == 0
