"""Leader-epoch cache (Kafka's LeaderEpochFileCache) and epoch-based truncation (KIP-101/279).

Rules:
- The cache is an ordered list of (epoch, start_offset): the first offset written in each
  leader epoch. Epochs and start offsets both strictly increase along the list.
- assign(epoch, start): ignored if the latest entry already has this epoch and a start
  offset ≤ start; otherwise every entry with epoch ≥ epoch or start ≥ start is removed
  from the end first, so the list stays monotone (Kafka's maybeTruncateNonMonotonicEntries).
- end_offset_for(requested, log_end_offset) answers an OffsetsForLeaderEpoch request:
  (largest known epoch ≤ requested, start offset of the next higher epoch), or
  (requested, log_end_offset) if requested is the latest epoch, or (-1, -1) if the
  requested epoch is newer than anything known (or nothing is known).
- truncate_from_end(offset) drops entries starting at or after `offset` (log truncation);
  truncate_from_start(offset) drops entries wholly before `offset` and moves the last of
  them up to `offset` (log start moved).
- Truncations and clear() are persisted to `leader-epoch-checkpoint` before the method
  returns. assign() only marks the cache dirty; flush() (called by the log's flush, after
  the segments' fsync and before the recovery point moves) persists it. As Kafka since
  KAFKA-15046: an fsync per new epoch per partition on the append path is what made
  thousands of partitions slow, and a crash before flush() loses nothing, because log
  recovery re-derives the epochs of every batch past the recovery point (Log._load).
- follower_truncation() is the follower's decision on a leader's answer, exactly Kafka's
  AbstractFetcherThread.getOffsetTruncationState: truncate to min(leader end offset,
  own end offset for that epoch, own LEO); if the follower does not know the epoch the
  leader answered with, truncate to its own end for the largest smaller epoch and ask
  again. It never truncates to the high watermark alone (KAFKA-1211).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from replicas.checkpoints import CheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The epoch → start offset list of one partition replica (see the module's rules)."""

    def __init__(self, checkpoint: CheckpointFile[tuple[int, int]] | None = None):
        self._checkpoint = checkpoint
        self._dirty = False
        self._epochs: list[int] = []
        self._starts: list[int] = []
        if checkpoint is not None:
            for epoch, start in checkpoint.read():
                self._assign(epoch, start)

    # -- queries -------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts)]

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which `offset` was written (UNDEFINED_EPOCH if before every entry)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for an OffsetsForLeaderEpoch request, per KIP-279."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            # Older than every epoch we know: everything before our first start is theirs.
            return requested_epoch, self._starts[higher]
        return self._epochs[floor], self._starts[higher]

    # -- changes -------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` began at `start_offset`; True if the cache changed.

        Persisted by the next flush()."""
        changed = self._assign(epoch, start_offset)
        self._dirty |= changed
        return changed

    def flush(self) -> None:
        """Persist assignments made since the last write."""
        if self._dirty:
            self._flush()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before `start_offset`; the last of them now starts there."""
        if not self._starts or self._starts[0] >= start_offset:
            return
        last_before = bisect.bisect_right(self._starts, start_offset) - 1
        epoch = self._epochs[last_before]
        del self._epochs[:last_before + 1], self._starts[:last_before + 1]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._flush()

    def _flush(self) -> None:
        self._dirty = False
        if self._checkpoint is not None:
            self._checkpoint.write(zip(self._epochs, self._starts))


@dataclass(frozen=True, slots=True)
class TruncationDecision:
    """Where a follower truncates, and whether it must ask the leader again."""

    offset: int
    completed: bool


def follower_truncation(cache: LeaderEpochCache, log_end_offset: int,
                        leader_epoch: int, leader_end_offset: int,
                        fetch_offset: int) -> TruncationDecision:
    """Kafka's getOffsetTruncationState on the leader's (epoch, end offset) answer.

    `fetch_offset` is the follower's current fetch position, used only when the leader
    knows no epoch at all (its log is empty of epochs), as Kafka does.
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationDecision(min(fetch_offset, log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationDecision(min(leader_end_offset, log_end_offset), True)
    own_epoch, own_end = cache.end_offset_for(leader_epoch, log_end_offset)
    if own_end == UNDEFINED_EPOCH_OFFSET:
        # We know nothing at or below that epoch: the leader's end bounds us.
        return TruncationDecision(min(leader_end_offset, log_end_offset), True)
    if own_epoch != leader_epoch:
        # We never saw the leader's epoch: cut to the end of our own older epoch, ask again.
        return TruncationDecision(min(own_end, log_end_offset), False)
    return TruncationDecision(min(own_end, leader_end_offset, log_end_offset), True)
