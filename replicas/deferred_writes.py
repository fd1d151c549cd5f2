"""The disk writes a broker makes outside its lock: the high-watermark checkpoint
(`replication-offset-checkpoint`, one per log directory), the fsyncs a segment roll
leaves and the recovery-point checkpoint that follows them. Each is taken under the lock
that guards the partitions (a copy of what to write), written without it, and its
outcome, when it has one, handed back under the lock. Their
fsyncs (milliseconds each on a virtual disk, a rolled segment's up to seconds) then stall no
produce or fetch, as Kafka's scheduler thread does them beside the request handlers
(ReplicaManager.checkpointHighWatermarks takes no partition lock; UnifiedLog.roll schedules
a "flush-log" task).

Rules:
- HW checkpoint: a HW change marks it dirty (`dirty`). With `interval_ms` 0 the call that
  moved a HW writes it before it returns (persist before send); with an interval > 0
  (Kafka's replica.high.watermark.checkpoint.interval.ms) `due_high_watermarks` takes it at
  most that often (every partition's HW per directory, numbered: a generation) and
  `write_high_watermarks` writes it, reading nothing else. Writes of one file are
  serialised and a snapshot older than one already written is dropped
  (replicas/checkpoints.py). A directory offline since the snapshot is skipped; one whose
  write failed goes offline at the next tick.
- Rolled segments: each tick takes the rolls of the partitions it looks at
  (replicas/log.py `take_rolled_flush`); `due_segment_flushes` hands them over,
  `write_segment_flushes` fsyncs their files, `segments_flushed` (under the lock) moves
  each log's recovery point (`rolled_flushed`: not if the log changed meanwhile, nor if the
  partition left or moved to another log) or takes the directory of a failed fsync
  offline, and answers the recovery checkpoint to write when a point moved, which
  `write_recovery_points` writes outside the lock.
- Recovery checkpoints (`recovery-point-offset-checkpoint` and
  `log-start-offset-checkpoint`, one pair per directory) are numbered snapshots like the HW
  one, from one counter whoever takes them (the lock holder writes its own at once: a
  deletion, a flush, retention, a corrupt batch), so a snapshot the background thread
  writes late never overwrites a newer one; a directory offline since is skipped, and one
  whose write failed goes offline at the next tick. Every value in a snapshot was on disk
  when it was taken: the file may lag the log, never lead it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping

from replicas.log import fsync_files


@dataclass(frozen=True)
class Snapshot:
    generation: int
    files: tuple        # ((LogDir, what that directory's files get), ...)


class NumberedWrites:
    """Snapshots numbered from one counter, written skipping offline directories; the
    failures kept for the lock holder."""

    def __init__(self):
        self._generation = 0
        # (LogDir, OSError) met by writes since the last look; a deque: the writer's append
        # and the lock holder's popleft are each atomic
        self._failed: deque = deque()

    def _numbered(self, files) -> Snapshot:
        self._generation += 1
        return Snapshot(self._generation, tuple(files))

    def write(self, snapshot: Snapshot, best_effort: bool = False) -> None:
        """Write it; a failure is kept for `failures` (dropped when `best_effort`)."""
        for d, content in snapshot.files:
            if not d.online:        # went offline since the snapshot: nothing more written
                continue
            try:
                self._write_dir(d, content, snapshot.generation)
            except OSError as exc:
                if not best_effort:
                    self._failed.append((d, exc))

    def failures(self) -> list:
        """The (directory, error) pairs of failed writes since the last call."""
        failed = []
        while self._failed:
            failed.append(self._failed.popleft())
        return failed


class HighWatermarkCheckpoints(NumberedWrites):
    def __init__(self, interval_ms: int, clock_ms: Callable[[], int]):
        super().__init__()
        self.interval_ms = interval_ms
        self._clock = clock_ms
        self.dirty = False
        self._last_ms = clock_ms()

    def due(self) -> bool:
        """A deferred checkpoint is to be written now."""
        return self.dirty and self.interval_ms > 0 and \
            self._clock() - self._last_ms >= self.interval_ms

    def take(self, parts_by_dir: Mapping) -> Snapshot:
        """Every partition's HW per directory ({LogDir: [partition]}); marks it clean."""
        self.dirty = False
        self._last_ms = self._clock()
        return self._numbered((d, {p.tp: p.state.high_watermark for p in parts})
                              for d, parts in parts_by_dir.items())

    @staticmethod
    def _write_dir(d, offsets, generation: int) -> None:
        d.hw_file.write(offsets, generation)


class RecoveryCheckpoints(NumberedWrites):
    def take(self, parts_by_dir: Mapping) -> Snapshot:
        """Per directory ({LogDir: [partition]}) every log's recovery point, and the log
        starts that lie inside a first segment (replicas/checkpoints.py)."""
        return self._numbered(
            (d, ({p.tp: p.log.recovery_point for p in parts},
                 {p.tp: p.log.log_start_offset for p in parts
                  if p.log.log_start_offset > p.log.segments[0].base_offset}))
            for d, parts in parts_by_dir.items())

    @staticmethod
    def _write_dir(d, content, generation: int) -> None:
        points, starts = content
        d.recovery_file.write(points, generation)
        d.log_start_file.write(starts, generation)


class DeferredWrites:
    """The replica manager's side of it (a mixin: `_hw`, `_recovery`, `_rolled`, `_closed`,
    `_partitions`, `_by_dir`, `_fail_dir`, `_storage_error` are the manager's)."""

    def due_high_watermarks(self) -> Snapshot | None:
        """The deferred HW checkpoint if one is due, taken now; the caller writes it with
        `write_high_watermarks` outside its lock."""
        if self._closed or not self._hw.due():
            return None
        return self._hw.take(self._by_dir())

    def write_high_watermarks(self, snapshot: Snapshot) -> None:
        """Write a taken checkpoint; may run beside this manager's other calls."""
        self._hw.write(snapshot)

    def _fail_written_dirs(self) -> None:
        """Directories whose checkpoint writes failed since the last look go offline."""
        for d, exc in self._hw.failures() + self._recovery.failures():
            self._fail_dir(d, exc)

    def _write_now(self, writes: NumberedWrites) -> None:
        """Every directory's checkpoint of `writes` taken and written now (under the lock),
        a failed directory offline at once; nothing once closed (never overwrite the files
        of a closed manager with nothing)."""
        if self._closed:
            return
        writes.write(writes.take(self._by_dir()))
        self._fail_written_dirs()

    def checkpoint_high_watermarks(self) -> None:
        self._write_now(self._hw)

    def _write_recovery_points(self) -> None:
        self._write_now(self._recovery)

    def write_recovery_points(self, snapshot: Snapshot) -> None:
        """Write a recovery checkpoint `segments_flushed` took; may run beside this
        manager's other calls."""
        self._recovery.write(snapshot)

    def due_segment_flushes(self) -> list:
        """The rolls the ticks took since the last call: [(tp, log, RolledFlush)]."""
        rolled, self._rolled = self._rolled, []
        return rolled

    @staticmethod
    def write_segment_flushes(rolled: list) -> list:
        """fsync each roll's files (no lock needed): [(tp, log, RolledFlush, error or None)]."""
        return [(tp, log, flush, fsync_files(flush.paths)) for tp, log, flush in rolled]

    def segments_flushed(self, results: list) -> Snapshot | None:
        """Under the lock: the recovery points of the synced rolls, or their directories
        offline; the recovery checkpoint to write (`write_recovery_points`) if a point
        moved."""
        if self._closed:        # close() flushed every log: nothing left to move
            return None
        moved = False
        for tp, log, flush, error in results:
            part = self._partitions.get(tp)
            if part is None or part.log is not log:
                continue
            if error is not None:
                self._storage_error(part, error)
            elif log.rolled_flushed(flush):
                moved = True
        return self._recovery.take(self._by_dir()) if moved else None
