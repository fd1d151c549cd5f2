"""Kafka's producer partitioning, bit-for-bit (pure: no Ray, no clock).

Rules:
- Keyed records: `partition_for_key(key, n) = to_positive(murmur2(key)) % n`, exactly
  Kafka's BuiltInPartitioner.partitionForKey, so a key lands on the same partition as
  with the Java client (and kafka-python). `murmur2` is Utils.murmur2: seed 0x9747b28c,
  32-bit wrapping arithmetic, Java `>>>` shifts; it returns a SIGNED Java int.
- `to_positive(n) = n & 0x7fffffff` (Utils.toPositive; not abs(): abs(MIN_INT) < 0 in Java).
- Records without a key: the sticky partitioner (KIP-480, StickyPartitionCache): every
  keyless record of a topic goes to the same partition until the producer has to open a
  new batch for it (the previous one was sent or is full), then `on_new_batch` picks
  another partition at random among the AVAILABLE ones (those with a live leader),
  never the previous one when there is a choice; with no available partition it picks
  at random among all of them. `available=None` means every partition is available.
  The randomness comes from an injected `random.Random`.
"""

from __future__ import annotations

import random
from typing import Sequence

SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def _to_int32(n: int) -> int:
    n &= _MASK
    return n - 0x100000000 if n & 0x80000000 else n


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 of `data`, as the signed 32-bit int Java returns."""
    length = len(data)
    h = (SEED ^ length) & _MASK
    length4 = length & ~3
    for i in range(0, length4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length & 3
    if extra == 3:
        h ^= data[length4 + 2] << 16
    if extra >= 2:
        h ^= data[length4 + 1] << 8
    if extra >= 1:
        h ^= data[length4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return _to_int32(h)


def to_positive(n: int) -> int:
    """Utils.toPositive: clear the sign bit (works on signed or unsigned 32-bit values)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: the partition of a keyed record."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Per-topic sticky partition for keyless records (Kafka's StickyPartitionCache).

    Use with RecordAccumulator.append(..., abort_on_new_batch=True): when it returns
    None (the record would open a new batch), call `on_new_batch(topic, prev, ...)` and
    append again to `partition(topic, ...)` without aborting.
    """

    def __init__(self, rng: random.Random):
        self._rng = rng
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int,
                  available: Sequence[int] | None = None) -> int:
        """The topic's current sticky partition, choosing one on first use."""
        current = self._sticky.get(topic)
        if current is not None and current < num_partitions:
            return current
        return self._choose(topic, None, num_partitions, available)

    def on_new_batch(self, topic: str, prev_partition: int, num_partitions: int,
                     available: Sequence[int] | None = None) -> int:
        """Switch away from `prev_partition` if it is still the sticky one; returns the
        sticky partition (unchanged when another caller already switched it)."""
        current = self._sticky.get(topic)
        if current is not None and current != prev_partition and current < num_partitions:
            return current
        return self._choose(topic, current, num_partitions, available)

    def _choose(self, topic: str, old: int | None, num_partitions: int,
                available: Sequence[int] | None) -> int:
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        if available is None:
            pool = list(range(num_partitions))
        else:
            pool = sorted({p for p in available if 0 <= p < num_partitions})
        if not pool:
            new = self._rng.randrange(num_partitions)
        elif len(pool) == 1:
            new = pool[0]
        else:
            new = old
            while new is None or new == old:
                new = pool[self._rng.randrange(len(pool))]
        self._sticky[topic] = new
        return new
