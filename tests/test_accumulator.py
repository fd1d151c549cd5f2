"""rayka.client.accumulator: batching by size/linger with a fake clock, idempotent sequence
numbers, retries, and batches that decode and validate with the broker's codec."""

import pickle

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record import MemoryRecords

from rayka.client.accumulator import RecordAccumulator, estimate_record_bytes
from rayka.client.types import (BrokerInfo, ConsumerRecord, ControllerInfo, PartitionInfo,
                                RecordMetadata, TopicPartition)
from replicas import records

pytestmark = pytest.mark.unit

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class FakeClock:
    def __init__(self, now=1_000):
        self.now = now

    def __call__(self):
        return self.now


def make(batch_size=1000, linger_ms=10, producer_id=7, producer_epoch=2, clock=None):
    clock = clock or FakeClock()
    return RecordAccumulator(batch_size, linger_ms, clock, producer_id, producer_epoch), clock


def test_linger_readiness():
    acc, clock = make(linger_ms=10)
    acc.append(T0, b"a")
    assert acc.drain() == []
    assert acc.next_ready_ms() == 1_010
    clock.now += 9
    assert acc.drain() == []
    clock.now += 1
    (batch,) = acc.drain()
    assert batch.values == [b"a"] and batch.created_ms == 1_000
    assert acc.drain() == [] and acc.pending_batches() == 0 and acc.next_ready_ms() is None


def test_linger_zero_is_ready_at_once():
    acc, _ = make(linger_ms=0)
    acc.append(T0, b"a")
    assert len(acc.drain()) == 1


def test_size_readiness_and_older_batches_are_ready():
    acc, clock = make(batch_size=300, linger_ms=60_000)
    per = estimate_record_bytes(b"x" * 20)
    fit = (300 - records.HEADER_SIZE) // per
    handles = [acc.append(T0, b"x" * 20) for _ in range(fit + 1)]
    assert handles[fit].index == 0 and handles[fit].batch is not handles[0].batch
    (first,) = acc.drain()  # not full by estimate, but a newer batch is behind it
    assert first.record_count == fit and first.estimated_bytes + per > 300
    assert acc.drain() == []  # the second is young and small
    # exactly full: ready without linger
    acc2, _ = make(batch_size=records.HEADER_SIZE + 2 * per, linger_ms=60_000)
    acc2.append(T0, b"x" * 20)
    assert acc2.drain() == []
    acc2.append(T0, b"x" * 20)
    (full,) = acc2.drain()
    assert full.record_count == 2
    assert acc.drain(ready_only=False)[0].record_count == 1  # flush takes the rest


def test_oversized_record_gets_its_own_batch():
    acc, _ = make(batch_size=200, linger_ms=60_000)
    acc.append(T0, b"small")
    big = acc.append(T0, b"y" * 500)
    assert big.index == 0 and big.batch.record_count == 1
    assert [b.record_count for b in acc.drain()] == [1, 1]


def test_abort_on_new_batch():
    acc, _ = make(batch_size=200)
    assert acc.append(T0, b"a", abort_on_new_batch=True) is None
    assert acc.pending_batches() == 0
    h = acc.append(T0, b"a")
    assert acc.append(T0, b"b", abort_on_new_batch=True).batch is h.batch
    assert acc.append(T0, b"z" * 300, abort_on_new_batch=True) is None


def test_sequences_dense_per_partition_across_batches():
    acc, clock = make(batch_size=250, linger_ms=5)
    drained = []
    for round_ in range(5):
        for i in range(7):
            acc.append(T0, b"v%d" % i * 3)
        for i in range(round_ + 1):
            acc.append(T1, b"w%d" % i)
        clock.now += 5
        drained += acc.drain()  # sent: sequences are assigned now
    per_tp = {}
    for batch in drained:
        per_tp.setdefault(batch.tp, []).append(batch)
    for tp, batches in per_tp.items():
        expected = 0
        for batch in batches:
            assert batch.base_sequence == expected
            assert batch.last_sequence == expected + batch.record_count - 1
            (header,) = records.validate_batches(batch.build())
            assert (header.producer_id, header.producer_epoch) == (7, 2)
            assert header.base_sequence == expected
            assert header.last_sequence == batch.last_sequence
            expected += batch.record_count
        assert acc.next_sequence(tp) == expected
    assert len(per_tp[T0]) > 5  # several batches per round on T0
    assert acc.next_sequence(T0) == 35 and acc.next_sequence(T1) == 15


def test_no_producer_id_means_no_sequence():
    acc, _ = make(linger_ms=0, producer_id=-1, producer_epoch=-1)
    acc.append(T0, b"a")
    (batch,) = acc.drain()
    assert batch.base_sequence == records.NO_SEQUENCE == batch.last_sequence
    (header,) = records.validate_batches(batch.build())
    assert (header.producer_id, header.base_sequence) == (-1, -1)


def test_sequence_wraps_like_kafka():
    acc, _ = make(linger_ms=0)
    acc._next_sequence[T0] = 2**31 - 2
    for _ in range(3):
        acc.append(T0, b"a")
    (batch,) = acc.drain()
    assert batch.base_sequence == 2**31 - 2 and batch.last_sequence == 0
    assert acc.next_sequence(T0) == 1


def test_reenqueue_keeps_sequences_and_order():
    acc, clock = make(batch_size=200, linger_ms=0)
    first = [acc.append(T0, b"a%d" % i) for i in range(3)]
    a = acc.drain()[0]
    for i in range(2):
        acc.append(T0, b"b%d" % i)
    b = acc.drain()[0]
    assert (a.base_sequence, b.base_sequence) == (0, 3)
    a_bytes = bytes(a.build())
    a.fail(TimeoutError("t"))
    acc.reenqueue(b)  # retries come back in their original order, whatever the call order
    acc.reenqueue(a)
    acc.append(T0, b"c")  # goes to a new batch behind the retries
    acc2 = acc.drain()
    assert acc2[:2] == [a, b] and acc2[2].values == [b"c"]
    assert (a.base_sequence, b.base_sequence, acc2[2].base_sequence) == (0, 3, 5)
    assert a.attempts == 1 and bytes(a.build()) == a_bytes  # identical retry
    assert not a.done and not first[0].done
    assert acc.next_sequence(T0) == 6


def test_encoded_is_built_once_and_equals_build():
    acc, _ = make(batch_size=200, linger_ms=0)
    acc.append(T0, b"x", key=b"k")
    batch = acc.drain()[0]
    data = batch.encoded()
    assert isinstance(data, bytes) and data == bytes(batch.build())
    assert batch.encoded() is data               # a retry resends the very same bytes
    header = records.validate_batches(data)[0]
    assert (header.producer_id, header.base_sequence) == (7, 0)


def test_reenqueued_batch_is_ready_despite_linger_and_takes_no_appends():
    acc, clock = make(linger_ms=1_000)
    acc.append(T0, b"a")
    (batch,) = acc.drain(ready_only=False)
    acc.reenqueue(batch)
    h = acc.append(T0, b"b")
    assert h.batch is not batch
    assert acc.drain() == [batch]
    with pytest.raises(ValueError):
        acc.reenqueue(h.batch)  # never drained


def test_handles_resolve_when_batch_completes():
    acc, _ = make(linger_ms=0)
    handles = [acc.append(T1, b"v%d" % i) for i in range(3)]
    with pytest.raises(RuntimeError):
        handles[0].metadata()
    (batch,) = acc.drain()
    batch.complete(40)
    assert [h.metadata() for h in handles] == [RecordMetadata("t", 1, 40 + i) for i in range(3)]
    batch.fail(KeyError("boom"))
    with pytest.raises(KeyError):
        handles[1].metadata()


def test_timestamps_default_to_clock():
    acc, clock = make(linger_ms=0)
    acc.append(T0, b"a")
    clock.now = 5_000
    acc.append(T0, b"b")
    acc.append(T0, b"c", timestamp_ms=42)
    (batch,) = acc.drain()
    assert batch.timestamps_ms == [1_000, 5_000, 42]


record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=120)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))),
             max_size=3),
    st.one_of(st.none(), st.integers(0, 2**41)),
)


@given(st.lists(record_st, min_size=1, max_size=40), st.integers(100, 2000))
@settings(max_examples=100, deadline=None)
def test_built_batches_decode_to_what_was_appended(recs, batch_size):
    clock = FakeClock(123_456)
    acc = RecordAccumulator(batch_size, 0, clock, producer_id=9, producer_epoch=0)
    for key, value, headers, ts in recs:
        acc.append(T0, value, key=key, headers=headers, timestamp_ms=ts)
    batches = acc.drain()
    buf = bytearray()
    for batch in batches:
        built = batch.build()
        assert len(built) <= batch.estimated_bytes  # the estimate is an upper bound
        assert batch.record_count == 1 or batch.estimated_bytes <= batch_size
        buf += built
    headers = records.validate_batches(buf)
    assert [h.base_sequence for h in headers] == [b.base_sequence for b in batches]
    decoded = records.decode_records(buf)
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in decoded] == [
        (k, v, tuple(h), 123_456 if ts is None else ts) for k, v, h, ts in recs]
    # and an independent parser agrees
    parsed = MemoryRecords(bytes(buf))
    kp = []
    while parsed.has_next():
        batch = parsed.next_batch()
        assert batch.validate_crc()
        kp += [(r.key, r.value) for r in batch]
    assert kp == [(k, v) for k, v, _, _ in recs]


def test_append_many_cuts_sealed_batches():
    acc, clock = make(batch_size=500, linger_ms=60_000)
    open_handle = acc.append(T0, b"first")
    values = [b"v%03d" % i * 5 for i in range(100)]
    keys = [b"k%d" % i for i in range(100)]
    batches = acc.append_many(T0, values, keys)
    assert len(batches) > 5
    assert all(b.estimated_bytes <= 500 and b.sealed for b in batches)
    drained = acc.drain()  # all ready: sealed, no linger wait
    assert drained == [open_handle.batch] + batches
    expected = 0
    for b in drained:
        assert b.base_sequence == expected
        expected += b.record_count
    buf = b"".join(bytes(b.build()) for b in batches)
    records.validate_batches(buf)
    decoded = records.decode_records(buf)
    assert [(r.key, r.value, r.timestamp_ms) for r in decoded] == [
        (k, v, 1_000) for k, v in zip(keys, values)]
    big = acc.append_many(T1, [b"x" * 600, b"y", b"z" * 600])
    assert [b.record_count for b in big] == [1, 1, 1]
    with pytest.raises(ValueError):
        acc.append_many(T1, [b"a"], [b"k1", b"k2"])


def test_public_types_are_small_picklable_tuples():
    values = [RecordMetadata("t", 0, 1), ConsumerRecord("t", 0, 1, b"k", None, 5, (("h", b"x"),)),
              PartitionInfo(0, 1, 3, (1, 2), (1,)), BrokerInfo(1, "node-a", True),
              ControllerInfo(1, 4), TopicPartition("t", 2)]
    for value in values:
        assert pickle.loads(pickle.dumps(value)) == value
        assert isinstance(value, tuple) and not hasattr(value, "__dict__")
    assert ConsumerRecord("t", 0, 1, None, b"v", 5).headers == ()


def test_record_timestamps_come_from_the_wall_clock_not_the_linger_clock():
    acc = RecordAccumulator(1 << 20, 5, lambda: 42, wall_clock_ms=lambda: 1_795_262_400_000)
    acc.append(("t", 0), b"a")
    bulk = acc.append_many(("t", 1), [b"b", b"c"])
    batches = acc.drain(ready_only=False)
    assert {ts for b in batches for ts in b.timestamps_ms} == {1_795_262_400_000}
    assert bulk[0].created_ms == 42


def naive_cuts(values, keys, batch_size):
    """The bulk cut rule one record at a time: a new batch when the next record would take
    the estimate past batch_size (a batch always takes its first record)."""
    cuts, size = [], 0
    for i, value in enumerate(values):
        key = keys[i] if keys else None
        n = estimate_record_bytes(value, key)
        if not cuts or size + n > batch_size:
            cuts.append([])
            size = records.HEADER_SIZE
        cuts[-1].append(i)
        size += n
    return cuts


@settings(max_examples=200, deadline=None)
@given(st.integers(50, 3000),
       st.lists(st.one_of(st.none(), st.binary(max_size=200)), max_size=60),
       st.booleans(), st.data())
def test_bulk_cuts_match_the_one_record_at_a_time_rule(batch_size, values, keyed, data):
    keys = data.draw(st.lists(st.one_of(st.none(), st.binary(max_size=20)),
                              min_size=len(values), max_size=len(values))) if keyed else None
    acc = RecordAccumulator(batch_size, 5, FakeClock(), wall_clock_ms=lambda: 7)
    batches = acc.append_many(T0, values, keys)
    cuts = naive_cuts(values, keys, batch_size)
    assert [len(b.values) for b in batches] == [len(c) for c in cuts]
    assert [v for b in batches for v in b.values] == values
    assert [k for b in batches for k in b.keys] == (keys or [None] * len(values))
    assert all(b.sealed and b.timestamps_ms == [7] * len(b.values) for b in batches)
    for batch, cut in zip(batches, cuts):
        assert batch.estimated_bytes == records.HEADER_SIZE + sum(
            estimate_record_bytes(values[i], keys[i] if keys else None) for i in cut)
