"""High-watermark checkpoints: `replication-offset-checkpoint`, one per log directory.

Rules:
- A HW change marks the checkpoint dirty (`dirty`). With `interval_ms` 0 the call that moved
  a HW writes it before it returns (persist before send); with an interval > 0 (Kafka's
  replica.high.watermark.checkpoint.interval.ms) `due` says at most that often that a
  dirty checkpoint is to be written.
- A checkpoint is taken (`take`, under the lock that guards the partitions: it copies every
  partition's HW per directory and numbers the snapshot, a generation) and then written
  (`write`): writing reads nothing else, so a broker writes the deferred one outside its
  lock. Its fsyncs (milliseconds on a virtual disk) then stall no produce or fetch, as
  Kafka's scheduler thread writes it beside the request handlers
  (ReplicaManager.checkpointHighWatermarks takes no partition lock).
- Writes of one file are serialised and a snapshot older than one already written is
  dropped (replicas/checkpoints.py). A directory offline since the snapshot is skipped; one
  whose write failed is handed back by `failures`, under the lock, to be taken offline.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping


@dataclass(frozen=True)
class Snapshot:
    generation: int
    files: tuple        # ((LogDir, {tp: high watermark}), ...)


class HighWatermarkCheckpoints:
    def __init__(self, interval_ms: int, clock_ms: Callable[[], int]):
        self.interval_ms = interval_ms
        self._clock = clock_ms
        self.dirty = False
        self._last_ms = clock_ms()
        self._generation = 0
        # (LogDir, OSError) met by writes since the last look; a deque: the writer's append
        # and the lock holder's popleft are each atomic
        self._failed: deque = deque()

    def due(self) -> bool:
        """A deferred checkpoint is to be written now."""
        return self.dirty and self.interval_ms > 0 and \
            self._clock() - self._last_ms >= self.interval_ms

    def take(self, parts_by_dir: Mapping) -> Snapshot:
        """Every partition's HW per directory ({LogDir: [partition]}); marks it clean."""
        self._generation += 1
        self.dirty = False
        self._last_ms = self._clock()
        return Snapshot(self._generation, tuple(
            (d, {p.tp: p.state.high_watermark for p in parts})
            for d, parts in parts_by_dir.items()))

    def write(self, snapshot: Snapshot) -> None:
        for d, offsets in snapshot.files:
            if not d.online:        # went offline since the snapshot: nothing more written
                continue
            try:
                d.hw_file.write(offsets, snapshot.generation)
            except OSError as exc:
                self._failed.append((d, exc))

    def failures(self) -> list:
        """The (directory, error) pairs of failed writes since the last call."""
        failed = []
        while self._failed:
            failed.append(self._failed.popleft())
        return failed
