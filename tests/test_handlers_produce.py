"""Produce through protocol/handlers/ (over tests/handler_wire.py): each partition's outcome,
acks=0 (never answered; a failed one closes the connection), KIP-467's record errors, null
records, zstd from v7, and transactional records with and without a transactional id.
Table-driven over every served version where a rule depends on the version."""

from __future__ import annotations

import pytest

from protocol.connection import Connection
from protocol.errors import ProtocolError
from replicas.errors import KafkaStorageError
from replicas.records import build_batch
from tests.handler_wire import ask, cluster, produce_request, send, versions

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_names_each_bad_record_from_v8(version):
    """KIP-467: a compacted topic's keyless records fail their batch; v8+ say which."""
    fake = cluster()
    fake.add_topic("keyed", 1, configs={"cleanup.policy": "compact"})
    batch = build_batch([b"a", b"b", b"c"], keys=[b"k", None, None], timestamps_ms=1)
    resp = ask(fake, produce_request(version, {"keyed": [(0, bytes(batch))],
                                               "audit": [(0, bytes(batch))]}))
    keyed, audit = (t.partition_responses[0] for t in resp.responses)
    assert (keyed.error_code, audit.error_code) == (87, 0)
    assert fake.partition(("keyed", 0)).batches == []
    if version >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in keyed.record_errors] == [
            (i, "Compacted topic cannot accept message without key in topic partition "
                "keyed-0.") for i in (1, 2)]
        assert keyed.error_message.startswith("One or more records have been rejected due "
                                              "to 2 record errors in total")
        assert audit.record_errors == [] and audit.error_message is None


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_acks_0_is_answered_with_no_bytes(version):
    fake = cluster()
    conn = Connection()
    request, out = send(fake, produce_request(version, {"audit": [(0, b"fire")]}, acks=0),
                        conn=conn)
    assert not request.expects_response
    assert out is None and conn.responses_sent == 0
    assert fake.calls_of("produce") == [
        {"acks": 0, "timeout_ms": 1500, "partitions": [(("audit", 0), b"fire")]}]
    assert [b.data for b in fake.partition(("audit", 0)).batches] == [b"fire"]


@pytest.mark.parametrize("version", versions(0, 3))
def test_a_failed_acks_0_produce_closes_the_connection_instead_of_answering(version):
    # Kafka never answers acks=0 (the producer reads no response): on a whole-request error
    # it closes the connection. Bytes here would be read as the answer to the NEXT request.
    fake = cluster()
    fake.raises["produce"] = KafkaStorageError("disk gone")
    conn = Connection()
    with pytest.raises(ProtocolError, match="acks=0"):
        send(fake, produce_request(version, {"audit": [(0, b"fire")]}, acks=0), conn=conn)
    assert len(fake.calls_of("produce")) == 1 and conn.responses_sent == 0


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_maps_each_partitions_outcome(version):
    fake = cluster()
    fake.partition(("audit", 0)).log_start = 100
    fake.append(("audit", 0), b"older", count=5)               # offsets 100..104
    fake.partition(("orders", 0)).leader = 1
    fake.errors[("orders", 2)] = 19                           # NOT_ENOUGH_REPLICAS
    fake.partition(("orders", 1)).leader = 2                  # not us: NOT_LEADER (6)
    resp = ask(fake, produce_request(version, {
        "audit": [(0, b"batch-a")],
        "orders": [(0, b"batch-0"), (1, b"batch-1"), (2, b"batch-2")],
        "ghost": [(0, b"batch-g")]}))
    assert fake.calls_of("produce")[0]["partitions"] == [
        (("audit", 0), b"batch-a"), (("orders", 0), b"batch-0"), (("orders", 1), b"batch-1"),
        (("orders", 2), b"batch-2"), (("ghost", 0), b"batch-g")]
    rows = [(t.name, p.index, p.error_code, p.base_offset, p.log_start_offset,
             p.error_message) for t in resp.responses for p in t.partition_responses]
    start = (lambda n: n) if version >= 5 else (lambda n: -1)
    msg = (lambda code, tp: f"error {code} for {tp}") if version >= 8 else (lambda *_: None)
    assert rows == [
        ("audit", 0, 0, 105, start(100), None),
        ("orders", 0, 0, 0, start(0), None),
        ("orders", 1, 6, -1, start(-1), msg(6, ("orders", 1))),
        ("orders", 2, 19, -1, start(-1), msg(19, ("orders", 2))),
        ("ghost", 0, 3, -1, start(-1), msg(3, ("ghost", 0)))]
    assert all(p.log_append_time_ms == -1 for t in resp.responses
               for p in t.partition_responses)


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_null_records_fail_that_partition_only(version):
    fake = cluster()
    resp = ask(fake, produce_request(version, {"orders": [(0, b"x")], "audit": [(0, None)]}))
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in resp.responses] == [("orders", [(0, 0, 0)]), ("audit", [(0, 87, -1)])]
    assert fake.calls_of("produce")[0]["partitions"] == [(("orders", 0), b"x")]
    assert fake.partition(("audit", 0)).batches == []


@pytest.mark.parametrize("version", versions(0))
def test_zstd_needs_produce_v7(version):
    from replicas.records import build_batch
    zstd = bytes(build_batch([b"z" * 50] * 4, timestamps_ms=1, compression_type=4))
    fake = cluster()
    resp = ask(fake, produce_request(version, {"orders": [(0, zstd)]}))
    (code,) = [p.error_code for t in resp.responses for p in t.partition_responses]
    assert code == (76 if version < 7 else 0)                 # UNSUPPORTED_COMPRESSION_TYPE
    assert len(fake.calls_of("produce")) == (0 if version < 7 else 1)


@pytest.mark.parametrize("version", versions(0, 3))
def test_produce_with_a_transactional_id_reaches_the_broker_with_it(version):
    fake = cluster()
    txn = bytes(build_batch([b"x"], timestamps_ms=1, producer_id=7, producer_epoch=0,
                            base_sequence=0, transactional=True))
    resp = ask(fake, produce_request(version, {"orders": [(0, txn)]}, transactional_id="tx-1"))
    assert [(t.name, p.index, p.error_code) for t in resp.responses
            for p in t.partition_responses] == [("orders", 0, 0)]
    assert fake.calls_of("produce")[0]["transactional_id"] == "tx-1"
    # v12 (transaction.version 2): the leader adds the partition for the client
    assert fake.calls_of("produce")[0].get("add_partitions", False) == (version >= 12)


@pytest.mark.parametrize("version", versions(0))
def test_transactional_records_without_a_transactional_id_are_refused_everywhere(version):
    """KafkaApis: only a named transactional id can be authorised to write them (53)."""
    fake = cluster()
    txn = bytes(build_batch([b"x"], timestamps_ms=1, producer_id=7, producer_epoch=0,
                            base_sequence=0, transactional=True))
    resp = ask(fake, produce_request(version, {"orders": [(0, txn), (1, b"y")]}))
    assert {(t.name, p.index, p.error_code) for t in resp.responses
            for p in t.partition_responses} == {("orders", 0, 53), ("orders", 1, 53)}
    assert fake.calls_of("produce") == []
