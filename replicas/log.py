"""The segmented log of one partition replica (Kafka's UnifiedLog + LocalLog + LogLoader).

Rules:
- Lives in `<data_dir>/<topic>-<partition>/`; segments are rolled when the active one
  would exceed `segment_bytes` (or relative offsets would overflow 32 bits).
- Offsets rise: every batch starts where the previous one ended, except across batches the
  cleaner removed from a compacted log (replicas/cleaner.py; followers accept such gaps).
- Leader appends check every record as Kafka's LogValidator does (replicas/
  record_validation.py: a compacted topic's record without a key, a timestamp out of
  message.timestamp.* bounds on `wall_clock_ms`): the batch fails with its record errors
  (KIP-467), nothing appended. A LogAppendTime topic (message.timestamp.type) has each
  batch stamped with `wall_clock_ms` as its MaxTimestamp and timestamp type, CRC sealed
  again (Kafka's LogValidator); followers copy the stamped batches as they are.
- Leader append: validate every batch (header, CRC, size) BEFORE writing anything; with a
  topic codec, rebuild the batches in another codec (replicas/compression.py); then
  assign offsets from the log end offset (LEO) and stamp the leader epoch in the headers,
  record the epoch's start offset in the leader-epoch cache, write. A rejected buffer
  leaves the log untouched.
- Follower append: batches already carry offsets and epochs; they must continue exactly
  at the LEO. Their epochs feed the epoch cache.
- Reads return whole batches starting at the batch holding the requested offset, at
  least one batch, never a batch starting at or beyond `max_offset` (the HW for consumers).
- truncate_to(offset) removes every batch whose last offset ≥ offset, and the epoch
  cache entries beyond the new LEO.
- Retention (`apply_retention`, replicas/retention.py) deletes whole oldest segments, never
  at or past the HW it is given; the log start moves to the first kept segment and the
  epoch cache is truncated from the start. Rolls happen on append only: by size
  (`segment_bytes`), relative offsets, or age (`segment_ms`).
- Open = recovery: segments wholly below the recovery point are trusted; every later byte
  is validated (header, CRC, dense offsets) and the file is cut at the first torn or
  corrupt batch, later segments deleted; the cut is reported in `recovery`. The epochs of
  the validated batches are added to the epoch cache (its appends are persisted only by
  flush, Kafka's LogSegment.recover does the same).
- Flush policy is Kafka's flush.messages / flush.ms (None = leave it to the OS); flush
  advances the recovery point and `flushed_end`. A roll leaves its fsyncs to be done
  outside the broker's lock, as Kafka's roll schedules a "flush-log" task:
  `take_rolled_flush` names the files of the dirty segments below the new one (a
  RolledFlush), anyone fsyncs them (`fsync_files`), and `rolled_flushed` then advances the
  recovery point to the new segment's base, unless the log was truncated meanwhile or a
  segment changed (the recovery point then stays lower: recovery validates more, nothing
  is trusted that was not synced). Time comes from the injected `clock_ms`, never `time`.
- Transaction indexes (`.txnindex`, replicas/txn_index.py; Kafka's LogSegment.recover,
  LocalLog.collectAbortedTransactions): a trusted segment's is loaded and sanity-checked; a
  recovered segment's is emptied. Either is STALE when it may miss entries: a trusted one
  that failed its check, a recovered one holding a control batch. `txn_index_stale_from`
  is then the first such segment's base; the producer state's rebuild rewrites every index
  from there (`rewrite_txn_indexes`), and until then the recovery point never passes it, so
  a crash before the rebuild recovers those segments again. `collect_aborted` searches the
  segment holding the fetch offset and the later ones until an entry's last stable offset
  reaches the upper bound; `append_aborted` writes to the segment holding the marker.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from replicas import records
from replicas.checkpoints import fsync_path, leader_epoch_checkpoint
from replicas.cleaner import (CleanerPolicy, CleanPlan, CleanStats, SegmentView, discard_cleaned,
                              finish_interrupted_swaps, swap_in, swap_in_txn_index)
from replicas.compression import needs_recompression, recompress
from replicas.control import ABORT, COMMIT, control_type, end_txn_marker
from replicas.epoch_cache import LeaderEpochCache
from replicas.errors import CorruptRecord, KafkaStorageError, OffsetOutOfRange
from replicas.open_files import UNBOUNDED, OpenFiles
from replicas.record_validation import TimestampBounds, validate_records
from replicas.retention import RetentionPolicy, plan_retention, time_to_roll
from replicas.segment import Segment
from replicas.txn_index import AbortedTxn

_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30                # Kafka segment.bytes
    index_interval_bytes: int = 4096            # index.interval.bytes
    max_message_bytes: int = 1048588            # max.message.bytes (one batch)
    flush_messages: int | None = None           # flush.messages (None = never forced)
    flush_ms: int | None = None                 # flush.ms
    segment_ms: int = 604_800_000               # segment.ms: roll on append after this age
    retention: RetentionPolicy = RetentionPolicy()   # retention.ms/.bytes, cleanup.policy
    compression: int | None = None              # compression.type's codec; None = producer
    cleaner: CleanerPolicy = CleanerPolicy()     # compaction settings (cleanup.policy etc.)
    timestamps: TimestampBounds = TimestampBounds()   # message.timestamp.*.max.ms
    log_append_time: bool = False               # message.timestamp.type=LogAppendTime


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    record_count: int
    batch_count: int
    max_timestamp_ms: int
    first_sequence: int = -1
    producer_id: int = -1


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    scanned_bytes: int = 0
    truncated_bytes: int = 0
    deleted_segments: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def clean(self) -> bool:
        return self.truncated_bytes == 0 and not self.deleted_segments


@dataclass(frozen=True, slots=True)
class RetentionResult:
    deleted_segments: int
    deleted_bytes: int
    log_start_offset: int
    reasons: dict


@dataclass
class _FlushState:
    messages_since_flush: int = 0
    last_flush_ms: int = 0
    rolled_up_to: int | None = None     # a roll's segments below this are not synced yet
    truncations: int = 0                # how often the log was cut at its end


@dataclass(frozen=True)
class RolledFlush:
    """A roll's fsyncs, to be done outside the broker's lock (module rules)."""
    up_to: int                  # the base offset of the segment the roll started
    segments: tuple             # (Segment, its size then)
    paths: tuple                # their files
    truncations: int


def fsync_files(paths) -> OSError | None:
    """fsync each file by its path (a file gone since, deleted or swapped by the cleaner,
    needs none); the first error met, else None."""
    for path in paths:
        try:
            fsync_path(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return exc
    return None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Log:
    def __init__(self, directory: str | Path, config: LogConfig = LogConfig(),
                 recovery_point: int = 0, clock_ms: Callable[[], int] | None = None,
                 files: OpenFiles = UNBOUNDED, wall_clock_ms: Callable[[], int] | None = None):
        self.dir = Path(directory)
        self._wall_clock_ms = wall_clock_ms
        self._files = files
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self._clock_ms = clock_ms
        self.epoch_cache = LeaderEpochCache(leader_epoch_checkpoint(self.dir))
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._flush = _FlushState(last_flush_ms=clock_ms() if clock_ms else 0)
        self.txn_index_stale_from: int | None = None
        self.recovery = self._load(recovery_point)
        self.log_start_offset = self._segments[0].base_offset
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        self.flush()

    # -- opening ---------------------------------------------------------------------
    def _load(self, recovery_point: int) -> RecoveryReport:
        if not any(name.endswith((".log", ".tmp", ".swap", ".cleaned", "index"))
                   for name in os.listdir(self.dir)):
            self._add_segment(0)                # a new replica: nothing to recover
            return RecoveryReport()
        for stray in self.dir.glob("*.tmp"):
            stray.unlink()
        finish_interrupted_swaps(self.dir)
        bases = sorted(int(m.group(1)) for p in self.dir.iterdir()
                       if (m := _SEGMENT_FILE.match(p.name)))
        for index in [*self.dir.glob("*.index"), *self.dir.glob("*.timeindex"),
                      *self.dir.glob("*.txnindex")]:
            if int(index.stem) not in bases:
                index.unlink()
        if not bases:
            self._add_segment(0)
            return RecoveryReport()
        scanned = truncated = 0
        deleted: list[str] = []
        reason = None
        for i, base in enumerate(bases):
            segment = Segment(self.dir, base, self.config.index_interval_bytes, self._files)
            expected_base = self._segments[-1].next_offset if self._segments else base
            if reason is not None or base < expected_base:
                reason = reason or f"segment {base} does not continue at offset {expected_base}"
                truncated += segment.size
                deleted.append(segment.log_path.name)
                segment.delete()
                continue
            self._segments.append(segment)
            self._bases.append(base)
            trusted = i + 1 < len(bases) and bases[i + 1] <= recovery_point
            if trusted:
                if not segment.load_trusted(bases[i + 1]):
                    self._txn_index_stale(base)
                continue
            size_before = segment.size
            result = segment.recover(self.config.max_message_bytes)
            segment.txn_index.reset()
            if result.control_batches:
                self._txn_index_stale(base)
            for epoch, start in result.epochs:      # assignments the checkpoint may lack
                if epoch > self.epoch_cache.latest_epoch:
                    self.epoch_cache.assign(epoch, start)
            scanned += result.valid_bytes
            if result.error is not None:
                truncated += size_before - result.valid_bytes
                reason = result.error
        return RecoveryReport(scanned, truncated, tuple(deleted), reason)

    def _txn_index_stale(self, base_offset: int) -> None:
        if self.txn_index_stale_from is None or base_offset < self.txn_index_stale_from:
            self.txn_index_stale_from = base_offset

    def _add_segment(self, base_offset: int) -> Segment:
        if self._segments:
            self._segments[-1].on_become_inactive()
        segment = Segment(self.dir, base_offset, self.config.index_interval_bytes, self._files)
        if segment.size:
            raise KafkaStorageError(f"segment {segment.log_path} already holds data")
        segment.next_offset = base_offset
        segment.created_ms = self._clock_ms() if self._clock_ms else None
        self._segments.append(segment)
        self._bases.append(base_offset)
        return segment

    # -- queries ---------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def flushed_end(self) -> int:
        """The log end offset at the last flush: everything below it is on disk."""
        return self._flushed_end

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    # -- appends -----------------------------------------------------------------------
    def _append_time_ms(self) -> int:
        if self._wall_clock_ms is None:         # a log built without one (tests): no append
            raise ValueError("a LogAppendTime topic needs the log's wall clock")
        return int(self._wall_clock_ms())

    def append_as_leader(self, buf, leader_epoch: int,
                         headers: list[records.BatchHeader] | None = None) -> AppendInfo:
        """Validate, assign offsets from the LEO, stamp `leader_epoch`, write. `headers`:
        what records.validate_batches(buf, max.message.bytes) gave the caller, when it
        validated already."""
        if headers is None:
            headers = records.validate_batches(buf, self.config.max_message_bytes)
        validate_records(buf, headers, self.dir.name, self.config.cleaner.compact,
                         self.config.timestamps, self._wall_clock_ms,
                         self.config.log_append_time)
        if needs_recompression(headers, self.config.compression):
            buf = recompress(buf, headers, self.config.compression)
            headers = records.validate_batches(buf, self.config.max_message_bytes)
        data = buf if isinstance(buf, bytearray) else bytearray(buf)
        if self.config.log_append_time:
            headers = records.stamp_log_append_time(data, headers, self._append_time_ms())
        first = self.log_end_offset
        next_offset = records.assign_offsets(data, headers, first, leader_epoch)
        self.epoch_cache.assign(leader_epoch, first)
        self._write(data, headers, first, next_offset)
        return _append_info(headers, first, next_offset)

    def append_as_follower(self, buf, headers: list[records.BatchHeader] | None = None
                           ) -> AppendInfo:
        """Append batches fetched from the leader; they must start exactly at our LEO.
        `headers`: what records.validate_batches(buf, None, require_records=False) gave
        the caller, when it validated already."""
        if headers is None:
            headers = records.validate_batches(buf, None, require_records=False)
        expected = self.log_end_offset
        for header in headers:
            if header.base_offset < expected:
                raise CorruptRecord(f"replicated batch has base offset {header.base_offset}, "
                                    f"log end offset is {expected}")
            expected = header.next_offset
        assign = self.epoch_cache.assign
        for header in headers:
            if header.partition_leader_epoch >= 0:
                assign(header.partition_leader_epoch, header.base_offset)
        first = headers[0].base_offset if headers else self.log_end_offset
        self._write(buf, headers, first, expected, assigned=True)
        return _append_info(headers, first, expected)

    def _write(self, data, headers: list[records.BatchHeader], first: int, next_offset: int,
               assigned: bool = False) -> None:
        active = self._segments[-1]
        if not active.fits(len(data), next_offset, self.config.segment_bytes) or time_to_roll(
                active.size, active.rolling_timestamp, active.created_ms,
                max(h.max_timestamp for h in headers),
                self._clock_ms() if self._clock_ms else None, self.config.segment_ms):
            self._flush.rolled_up_to = first    # synced outside the lock (module rules)
            active = self._add_segment(first)
        active.append(data, headers, first, assigned)
        self._flush.messages_since_flush += next_offset - first
        self.maybe_flush()

    def maybe_flush(self) -> bool:
        """Apply flush.messages / flush.ms; True if it flushed."""
        cfg = self.config
        due = cfg.flush_messages is not None and self._flush.messages_since_flush >= cfg.flush_messages
        if not due and cfg.flush_ms is not None and self._clock_ms is not None:
            due = self._clock_ms() - self._flush.last_flush_ms >= cfg.flush_ms \
                and self._flush.messages_since_flush > 0
        if due:
            self.flush()
        return due

    def take_rolled_flush(self) -> RolledFlush | None:
        """The fsyncs the rolls since the last call left (module rules), or None."""
        up_to, self._flush.rolled_up_to = self._flush.rolled_up_to, None
        if up_to is None:
            return None
        below = [s for s in self._segments if s.base_offset < up_to and s.dirty]
        return RolledFlush(up_to, tuple((s, s.size) for s in below),
                           tuple(p for s in below for p in s.file_paths()),
                           self._flush.truncations)

    def rolled_flushed(self, done: RolledFlush) -> bool:
        """`done`'s files are synced: the recovery point moves to its end if nothing
        changed meanwhile (module rules); whether it moved."""
        if done.truncations != self._flush.truncations:
            return False
        present = {id(s) for s in self._segments}
        if any(id(s) not in present or s.size != size for s, size in done.segments):
            return False
        for s, size in done.segments:
            s.mark_synced()
        self.epoch_cache.flush()
        point = done.up_to if self.txn_index_stale_from is None \
            else min(done.up_to, self.txn_index_stale_from)
        if point <= self._recovery_point:
            return False
        self._recovery_point = point
        self._flushed_end = max(self._flushed_end, done.up_to)
        return True

    def flush(self) -> None:
        """fsync every dirty segment; everything below the LEO is now recoverable."""
        for segment in self._segments:
            segment.flush()
        self.epoch_cache.flush()
        self._flush.rolled_up_to = None
        self._flush.messages_since_flush = 0
        if self._clock_ms is not None:
            self._flush.last_flush_ms = self._clock_ms()
        self._recovery_point = self.log_end_offset if self.txn_index_stale_from is None \
            else min(self.log_end_offset, self.txn_index_stale_from)
        self._flushed_end = self.log_end_offset

    def sync_data(self) -> None:
        """The log's records on disk, nothing else (log.flush.before.ack): every segment
        changed since fdatasynced; the recovery point stays (indexes and the epoch
        checkpoint are not synced), so recovery still validates and rebuilds past it."""
        for segment in self._segments:
            segment.sync_data()
        self._flushed_end = self.log_end_offset

    # -- reads ---------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int = 1 << 20, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `offset` (see module rules)."""
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {end}] "
                                   f"of {self.dir.name}")
        if offset == end or (max_offset is not None and offset >= max_offset):
            return b""
        i = bisect.bisect_right(self._bases, offset) - 1
        for segment in self._segments[i:]:
            data = segment.read(offset, max_bytes, max_offset)
            if data:
                return data
            offset = max(offset, segment.next_offset)
        return b""

    def read_tail(self, offset: int, max_bytes: int = 1 << 20,
                  max_offset: int | None = None) -> bytes | None:
        """`read`'s answer when it is exactly the last append's bytes, kept in memory by the
        active segment (replicas/segment.py: validated before they were written, so neither
        read back nor checked again); None otherwise."""
        if not self._segments or offset < self.log_start_offset:
            return None
        return self._segments[-1].tail_read(offset, max_bytes, max_offset)

    def iter_reads(self, offset: int, max_offset: int | None = None,
                   chunk_bytes: int = 1 << 22):
        """Successive `read`s from `offset` until `max_offset` (or the LEO): whole batches."""
        while True:
            data = self.read(offset, chunk_bytes, max_offset)
            if not data:
                return
            last = None
            for last in records.iter_headers(data):
                pass
            yield data
            offset = last.next_offset

    def segment_for(self, offset: int) -> Segment:
        """The segment that holds (or would hold) `offset`: the last one based at or below it."""
        return self._segments[max(bisect.bisect_right(self._bases, offset) - 1, 0)]

    def headers(self):
        """Every batch header of the log, oldest first, reading headers only; `position` is
        within the header's segment (see `read_marker`)."""
        for segment in self._segments:
            yield from segment.headers_from(0)

    def read_marker(self, header: records.BatchHeader) -> tuple[int, int] | None:
        """(control type, coordinator epoch) of the end-transaction marker `header` (from
        `headers`) names; None for a control batch without records or of another type."""
        raw = self.segment_for(header.base_offset).read_bytes(header.position, header.size)
        if control_type(raw) not in (ABORT, COMMIT):
            return None
        return end_txn_marker(raw)

    # -- transaction indexes ---------------------------------------------------------------
    def append_aborted(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its marker."""
        self.segment_for(txn.last_offset).txn_index.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions over [fetch_offset, upper_bound)."""
        out: list[AbortedTxn] = []
        i = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        for segment in self._segments[i:]:
            found, complete = segment.txn_index.collect_aborted(fetch_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def rewrite_txn_indexes(self, aborted: list[AbortedTxn]) -> None:
        """After the producer state was rebuilt from the whole log: the stale indexes get
        the entries of `aborted` (every aborted transaction, marker order) they hold."""
        stale = self.txn_index_stale_from
        if stale is None:
            return
        by_segment: dict[int, list[AbortedTxn]] = {}
        for txn in aborted:
            by_segment.setdefault(self.segment_for(txn.last_offset).base_offset, []).append(txn)
        first = self.segment_for(stale).base_offset
        for segment in self._segments:
            if segment.base_offset >= first:
                segment.txn_index.replace(by_segment.get(segment.base_offset, []))
        self.txn_index_stale_from = None

    # -- truncation and deletion ---------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset ≥ `offset`; returns bytes removed. The
        epoch cache is ALWAYS cut at the new end (Kafka's UnifiedLog.truncateTo): a replica
        that led an epoch without appending keeps no (epoch, LEO) entry for it."""
        if offset >= self.log_end_offset:
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            return 0
        if offset <= self.log_start_offset:
            return self.truncate_fully_and_start_at(self.log_start_offset)
        removed = 0
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            segment = self._segments.pop()
            self._bases.pop()
            removed += segment.size
            segment.delete()
        removed += self._segments[-1].truncate_to(offset)
        self._flush.truncations += 1
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        self._flushed_end = min(self._flushed_end, self.log_end_offset)
        return removed

    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Drop everything; the log restarts empty at `offset` (a follower out of range)."""
        removed = self.size_bytes
        for segment in self._segments:
            segment.delete()
        self._segments.clear()
        self._bases.clear()
        self._add_segment(offset)
        self.log_start_offset = offset
        self.txn_index_stale_from = None
        self._flush.truncations += 1
        self.epoch_cache.clear()
        self._recovery_point = self._flushed_end = offset
        return removed

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset`, deleting wholly covered segments."""
        if offset <= self.log_start_offset:
            return 0
        if offset > self.log_end_offset:
            raise OffsetOutOfRange(f"cannot delete beyond the log end offset {self.log_end_offset}")
        removed = 0
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            segment = self._segments.pop(0)
            self._bases.pop(0)
            removed += segment.size
            segment.delete()
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        return removed

    def apply_retention(self, high_watermark: int, now_ms: int) -> RetentionResult:
        """One retention check (replicas/retention.py); `now_ms` is wall-clock time, the
        scale of record timestamps."""
        plan = plan_retention(self._segments, self.log_start_offset, self.log_end_offset,
                              min(high_watermark, self.log_end_offset), now_ms,
                              self.config.retention)
        if not plan.count:
            return RetentionResult(0, 0, self.log_start_offset, {})
        if plan.roll_first:
            self._add_segment(self.log_end_offset)
        removed = 0
        for _ in range(plan.count):
            segment = self._segments.pop(0)
            self._bases.pop(0)
            removed += segment.size
            segment.delete()
        if self._segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self._segments[0].base_offset
            self.epoch_cache.truncate_from_start(self.log_start_offset)
        return RetentionResult(plan.count, removed, self.log_start_offset, plan.reasons)

    # -- compaction (replicas/cleaner.py) ------------------------------------------------
    def segment_views(self) -> list[SegmentView]:
        return [SegmentView(s.base_offset, s.next_offset, s.size, s.largest_timestamp,
                            s.rolling_timestamp, s.log_path) for s in self._segments]

    def swap_cleaned(self, plan: CleanPlan, stats: CleanStats) -> bool:
        """Put the cleaned segments in place of theirs; False (the `.cleaned` files dropped,
        nothing changed) if any of them changed meanwhile (deleted, truncated, or active).
        Each segment's cleaned `.txnindex` goes in before its `.log` (replicas/cleaner.py)."""
        by_base = {s.base_offset: i for i, s in enumerate(self._segments[:-1])}
        unchanged = all(v.base_offset in by_base and
                        self._segments[by_base[v.base_offset]].size == v.size
                        for v in plan.segments)
        if not unchanged:
            discard_cleaned(stats)
            return False
        for base, cleaned in stats.cleaned:
            i = by_base[base]
            old = self._segments[i]
            old.close()
            swap_in_txn_index(cleaned, old.txn_index.path)
            swap_in(cleaned, old.log_path)
            new = Segment(self.dir, base, self.config.index_interval_bytes, self._files)
            new.recover()
            if not new.txn_index.load(new.next_offset):
                self._txn_index_stale(base)
            self._segments[i] = new
        return True

    def close(self) -> None:
        self.epoch_cache.flush()
        self._close_segments()

    def close_handlers(self) -> None:
        """Close every descriptor and write nothing (Kafka's closeHandlers, for a log on a
        failed directory); errors are ignored: the directory is abandoned."""
        for segment in self._segments:
            try:
                segment.close()
            except OSError:
                pass

    def _close_segments(self) -> None:
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        self._close_segments()
        shutil.rmtree(self.dir, ignore_errors=True)


def _append_info(headers: list[records.BatchHeader], first: int, next_offset: int) -> AppendInfo:
    return AppendInfo(
        first_offset=first, last_offset=next_offset - 1,
        record_count=sum(h.records_count for h in headers), batch_count=len(headers),
        max_timestamp_ms=max(h.max_timestamp for h in headers),
        first_sequence=headers[0].base_sequence, producer_id=headers[0].producer_id)
