"""rayka.client.partitioner: Kafka's murmur2 (checked against Java vectors and kafka-python) and
the sticky partitioner for keyless records."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st
from kafka.partitioner.default import murmur2 as kp_murmur2

from rayka.client.accumulator import RecordAccumulator, estimate_record_bytes
from rayka.client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive
from rayka.client.types import TopicPartition

pytestmark = pytest.mark.unit

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (Java signed ints), plus the empty array.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
}


def java_int(n: int) -> int:
    """kafka-python returns the hash as unsigned 32 bits; Java's int is signed."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


@pytest.mark.parametrize("data,expected", sorted(JAVA_VECTORS.items()))
def test_murmur2_java_vectors(data, expected):
    assert murmur2(data) == expected
    assert java_int(kp_murmur2(data)) == expected  # the reference agrees with Java too


@given(st.binary(max_size=300))
@settings(max_examples=500, deadline=None)
def test_murmur2_matches_kafka_python(data):
    ours = murmur2(data)
    assert -(1 << 31) <= ours < (1 << 31)
    assert ours == java_int(kp_murmur2(data))


@given(st.binary(max_size=64), st.integers(1, 10_000))
@settings(max_examples=300, deadline=None)
def test_partition_for_key_matches_kafka_python_default_partitioner(key, n):
    # kafka-python's DefaultPartitioner: (murmur2(key) & 0x7fffffff) % len(partitions)
    assert partition_for_key(key, n) == (kp_murmur2(key) & 0x7FFFFFFF) % n


def test_to_positive_is_javas_mask_not_abs():
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(5) == 5
    assert partition_for_key(b"foobar", 50) == 16


def test_partition_for_key_rejects_no_partitions():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_partition_for_key_distribution_and_determinism():
    n = 12
    counts = Counter(partition_for_key(b"user-%d" % i, n) for i in range(24_000))
    assert set(counts) == set(range(n))
    assert all(1600 <= c <= 2400 for c in counts.values()), counts  # 2000 expected each
    assert partition_for_key(b"user-7", n) == partition_for_key(b"user-7", n)


def test_sticky_partitioner_sticks_until_new_batch():
    sp = StickyPartitioner(random.Random(1))
    first = sp.partition("t", 8)
    assert all(sp.partition("t", 8) == first for _ in range(100))
    # a stale new-batch notice (prev is not the sticky one) changes nothing
    assert sp.on_new_batch("t", (first + 1) % 8, 8) == first
    second = sp.on_new_batch("t", first, 8)
    assert second != first and 0 <= second < 8
    assert sp.partition("t", 8) == second
    assert sp.partition("other", 8) in range(8)  # per-topic state


def test_sticky_partitioner_uses_available_partitions():
    sp = StickyPartitioner(random.Random(2))
    available = [1, 4, 6]
    current = sp.partition("t", 8, available)
    seen = {current}
    for _ in range(200):
        nxt = sp.on_new_batch("t", current, 8, available)
        assert nxt in available and nxt != current
        seen.add(nxt)
        current = nxt
    assert seen == set(available)
    assert sp.on_new_batch("t", current, 8, [3]) == 3          # only one available
    assert sp.on_new_batch("t", 3, 8, []) in range(8)           # none available: any


def test_sticky_partitioner_with_accumulator_switches_only_on_new_batch():
    # Kafka 2.4+ producer loop: append with abortOnNewBatch, on abort call onNewBatch and
    # append again. Even the very first record aborts (no batch yet), as in Kafka.
    acc = RecordAccumulator(batch_size=1000, linger_ms=10_000, clock_ms=lambda: 0)
    sp = StickyPartitioner(random.Random(3))
    topic, n = "t", 6
    handles, switches = [], 0
    for _ in range(200):
        p = sp.partition(topic, n)
        handle = acc.append(TopicPartition(topic, p), b"x" * 50, abort_on_new_batch=True)
        if handle is None:
            new = sp.on_new_batch(topic, p, n)
            assert new != p
            switches += 1
            handle = acc.append(TopicPartition(topic, new), b"x" * 50)
            assert handle.index == 0  # the switch opened a fresh batch
        handles.append(handle)
    batches = acc.drain(ready_only=False)
    assert switches == len(batches) == len({id(h.batch) for h in handles})
    for prev, cur in zip(handles, handles[1:]):
        # the partition changes exactly when a new batch starts
        same_partition = prev.batch.tp == cur.batch.tp
        assert same_partition == (prev.batch is cur.batch)
        if prev.batch is not cur.batch:
            assert prev.batch.estimated_bytes + estimate_record_bytes(b"x" * 50) > 1000  # full
    assert all(b.estimated_bytes <= 1000 for b in batches)
    assert len({b.tp.partition for b in batches}) > 1
