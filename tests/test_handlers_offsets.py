"""Where a partition's log starts and ends, and the producer ids that write it, through
protocol/handlers/ (over tests/handler_wire.py): DeleteRecords' low watermarks, ListOffsets by
timestamp (v0 is test_protocol_legacy's), OffsetForLeaderEpoch's end offsets and fencing, and
InitProducerId for idempotent and transactional producers."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.producer import InitProducerIdRequest

from protocol.api import Deferred
from tests.handler_wire import ask, cluster, send, versions
from tests.protocol_samples import RESPONSES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("version", versions(21))
def test_delete_records_answers_each_partition_its_low_watermark_or_error(version):
    from kafka.protocol.admin import DeleteRecordsRequest
    fake = cluster()
    for p in range(3):
        fake.append(("orders", p), b"batch", count=6)           # HW 6: the log end
    t = DeleteRecordsRequest.DeleteRecordsTopic
    dp = t.DeleteRecordsPartition
    resp = ask(fake, DeleteRecordsRequest[version](timeout_ms=1500, topics=[
        t(name="orders", partitions=[dp(partition_index=0, offset=3), dp(partition_index=1, offset=-1),
                                     dp(partition_index=2, offset=7)]),
        t(name="audit", partitions=[dp(partition_index=5, offset=0)])]))
    (call,) = fake.calls_of("delete_records")
    assert call["timeout_ms"] == 1500
    rows = [(t.name, p.partition_index, p.error_code, p.low_watermark)
            for t in resp.topics for p in t.partitions]
    assert rows == [("orders", 0, 0, 3), ("orders", 1, 0, 6), ("orders", 2, 1, -1),
                    ("audit", 5, 3, -1)]


class FollowersBehind:
    """A broker (the fake's answers) whose DeleteRecords waits for its followers' log starts:
    its answer is a Deferred, settled when `release()` is called."""

    def __init__(self, fake):
        self._fake, self.waiting = fake, []

    def __getattr__(self, name):
        return getattr(self._fake, name)

    def delete_records(self, asks, timeout_ms):
        got = self._fake.delete_records(asks, timeout_ms)
        callbacks: list = []
        self.waiting.append(callbacks)
        return Deferred(lambda: got, callbacks.append)

    def release(self) -> None:
        for callbacks in self.waiting:
            for callback in callbacks:
                callback()


def test_delete_records_answered_when_the_brokers_deferred_answer_is_ready():
    from kafka.protocol.admin import DeleteRecordsRequest
    fake = FollowersBehind(cluster())
    fake.append(("orders", 0), b"batch", count=6)
    t = DeleteRecordsRequest.DeleteRecordsTopic
    request = DeleteRecordsRequest[2](timeout_ms=1500, topics=[
        t(name="orders", partitions=[t.DeleteRecordsPartition(partition_index=0, offset=4)])])
    _, out = send(fake, request, "PLAINTEXT", 7, None)
    assert isinstance(out, Deferred) and fake.waiting
    released = []
    out.when_ready(lambda: released.append(True))
    assert released == []                         # no answer before the followers are there
    fake.release()
    assert released == [True]
    resp = RESPONSES[21].decode(out.result()[4:], version=2, header=True)
    assert [(p.error_code, p.low_watermark) for t in resp.topics for p in t.partitions] == \
        [(0, 4)]


@pytest.mark.parametrize("version", versions(2, 1))      # v0: test_protocol_legacy
def test_list_offsets_by_timestamp_and_version(version):
    fake = cluster()
    for p in range(3):
        tp = ("orders", p)
        for ts, count in ((1000, 2), (2000, 3), (3000, 1)):   # 0-1, 2-4, 5
            fake.append(tp, b"batch", count=count, timestamp=ts)
        fake.partition(tp).epochs = [(2, 0), (4, 2)]
    fake.partition(("orders", 1)).log_start = 1
    t = ListOffsetsRequest.ListOffsetsTopic
    lp = t.ListOffsetsPartition
    resp = ask(fake, ListOffsetsRequest[version](replica_id=-1, isolation_level=1, topics=[
        t(name="orders", partitions=[lp(partition_index=0, timestamp=-1, current_leader_epoch=4),
                                     lp(partition_index=1, timestamp=-2),
                                     lp(partition_index=2, timestamp=1500)]),
        t(name="audit", partitions=[lp(partition_index=0, timestamp=-1,
                                       current_leader_epoch=3)])]))
    (call,) = fake.calls_of("list_offsets")
    assert call["isolation_level"] == (1 if version >= 2 else 0)
    epoch = (lambda e: e) if version >= 4 else (lambda e: -1)
    assert call["asks"] == [(("orders", 0), -1, epoch(4)), (("orders", 1), -2, -1),
                            (("orders", 2), 1500, -1), (("audit", 0), -1, epoch(3))]
    rows = [(t.name, p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
            for t in resp.topics for p in t.partitions]
    assert rows == [("orders", 0, 0, -1, 6, epoch(4)),
                    ("orders", 1, 0, -1, 1, epoch(2)),
                    ("orders", 2, 0, 2000, 2, epoch(4)),
                    # audit is at epoch 0: a client at epoch 3 is ahead (UNKNOWN_LEADER_EPOCH)
                    ("audit", 0, 75, -1, -1, -1) if version >= 4 else ("audit", 0, 0, -1, 0, -1)]


@pytest.mark.parametrize("version", versions(23))
def test_offset_for_leader_epoch_answers_end_offsets(version):
    fake = cluster()
    for p in range(3):
        tp = ("orders", p)
        fake.append(tp, b"batch", count=25)
        fake.partition(tp).epochs = [(1, 0), (3, 10), (4, 20)]
    t = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    lp = t.OffsetForLeaderPartition
    resp = ask(fake, OffsetForLeaderEpochRequest[version](replica_id=-1, topics=[
        t(topic="orders", partitions=[lp(partition=0, current_leader_epoch=4, leader_epoch=2),
                                      lp(partition=1, current_leader_epoch=-1, leader_epoch=0),
                                      lp(partition=2, current_leader_epoch=3, leader_epoch=4)]),
        t(topic="audit", partitions=[lp(partition=5, current_leader_epoch=-1,
                                        leader_epoch=0)])]))
    current = (lambda e: e) if version >= 2 else (lambda e: -1)    # v0-1 carry no fencing
    epoch = (lambda e: e) if version >= 1 else (lambda e: -1)      # v0 answers no epoch
    assert fake.calls_of("offsets_for_leader_epoch")[0]["asks"] == [
        (("orders", 0), current(4), 2), (("orders", 1), -1, 0), (("orders", 2), current(3), 4),
        (("audit", 5), -1, 0)]
    assert [(t.topic, p.partition, p.error_code, p.leader_epoch, p.end_offset)
            for t in resp.topics for p in t.partitions] == [
        ("orders", 0, 0, epoch(1), 10),   # epoch 2 unknown: epoch 1, which ended at 10
        ("orders", 1, 0, -1, -1),         # before the first epoch
        ("orders", 2, 74, -1, -1) if version >= 2 else   # client's epoch 3 < 4: fenced
        ("orders", 2, 0, epoch(4), 25),
        ("audit", 5, 3, -1, -1)]


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id_returns_the_brokers_producer(version):
    fake = cluster()
    first = ask(fake, InitProducerIdRequest[version](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert (first.error_code, first.producer_id, first.producer_epoch) == (0, 1000, 0)
    again = ask(fake, InitProducerIdRequest[version](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=1000,
        producer_epoch=0))
    # v3+ carries the producer to bump (KIP-360); before, every call is a new producer.
    expected = (0, 1000, 1) if version >= 3 else (0, 1001, 0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == expected
    assert fake.calls_of("init_producer_id") == [
        {"transactional_id": None, "producer_id": -1, "producer_epoch": -1},
        {"transactional_id": None, "producer_id": 1000 if version >= 3 else -1,
         "producer_epoch": 0 if version >= 3 else -1}]


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id_with_a_transactional_id_goes_to_the_transaction_coordinator(version):
    fake = cluster()
    ask_init = lambda: ask(fake, InitProducerIdRequest[version](  # noqa: E731
        transactional_id="tx-1", transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1))
    resp = ask_init()                    # its __transaction_state partition is not ours
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (16, -1, -1)
    fake.own_txns()
    first, second = ask_init(), ask_init()
    assert (first.error_code, first.producer_epoch) == (0, 0) and first.producer_id >= 0
    assert (second.error_code, second.producer_id, second.producer_epoch) == (
        0, first.producer_id, 1)                     # the same id, fenced by a new epoch
    assert fake.calls_of("init_producer_id") == []
    assert [type(c["event"]).__name__ for c in fake.calls_of("txn_call")] == \
        ["InitProducerId"] * 3


@pytest.mark.parametrize("version", versions(26))
def test_end_txn_v5_answers_the_bumped_epoch_of_the_next_transaction(version):
    """KIP-890 part 2: EndTxn v5 comes from a transaction.version 2 client, whose epoch the
    coordinator bumps at every transaction's end and sends back; older versions keep it."""
    from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest
    fake = cluster()
    fake.own_txns()
    init = ask(fake, InitProducerIdRequest[4](
        transactional_id="tx-1", transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1))
    pid, epoch = init.producer_id, init.producer_epoch
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    added = ask(fake, AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id="tx-1", v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[topic(name="orders", partitions=[0])]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0
    ended = ask(fake, EndTxnRequest[version](transactional_id="tx-1", producer_id=pid,
                                             producer_epoch=epoch, committed=True))
    assert ended.error_code == 0
    if version >= 5:
        assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + 1)
