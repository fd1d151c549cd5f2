"""Log compaction (Kafka's LogCleaner / LogCleanerManager for cleanup.policy=compact): which
log to clean, what range, which records survive, and the crash-safe rewrite of a segment.

Rules (Kafka's LogCleaner.scala):
- A log has a clean part [log start, first dirty) and a dirty part [first dirty, cleanable
  end); first dirty comes from `cleaner-offset-checkpoint` (at least the log start). The
  cleanable end is a segment boundary: the segments considered are the non-active ones,
  oldest first, wholly below the last stable offset (the HW when no transaction is open:
  Kafka's LogCleanerManager.cleanableOffsets never cleans past the LSO) and, with
  min.compaction.lag.ms, whose largest timestamp is at least that old; the first segment
  failing either stops the range.
- Eligible when dirty bytes / (clean + dirty bytes) > min.cleanable.dirty.ratio (strictly),
  or when the oldest dirty segment's first timestamp is older than max.compaction.lag.ms.
  The dirtiest eligible log is cleaned first.
- Cleaning: a key → last offset map over the dirty part; then every segment of the
  cleanable range is rewritten, in place of itself (same base offset). A record survives
  iff it has a key, no later record of the map has the same key, and it is not an expired
  tombstone. Offsets never change: a batch keeps its base offset, last offset delta, leader
  epoch, producer id/epoch, base sequence and codec, with fewer records; a batch left with
  no record is dropped (the log then has offset gaps, as Kafka's compacted logs do).
- Tombstones (null value) are kept until they lie in a segment whose largest timestamp is at
  or below the delete horizon = the largest timestamp of the last clean segment minus
  delete.retention.ms (Kafka 2.x's rule, in record time instead of file mtimes): a consumer
  that reaches the head within delete.retention.ms sees every delete.
- Crash-safe swap (Kafka's suffixes): a cleaned segment is written to `<base>.log.cleaned`
  and fsynced, renamed to `<base>.log.swap` (complete), then renamed over `<base>.log`; its
  indexes are rebuilt. At load, a `.cleaned` file is deleted (that clean never happened) and
  a `.swap` file completes its rename. A kill at any point loses nothing.
- Transactions (Kafka's CleanedTransactionMetadata): the aborted transactions overlapping
  the cleaned range come from the `.txnindex` files (`CleanPlan.aborted`, read under the
  broker's lock). Walking the batches in offset order, a transactional data batch of a
  producer whose aborted transaction has begun is removed whole, keys or not, and never
  enters the key map; committed transactional data is compacted like any other. An ABORT
  marker is kept, and its `.txnindex` entry written again for the cleaned segment, while
  this pass still saw data of its transaction; a COMMIT marker while it saw data of its
  transaction; otherwise a marker may go, and goes once its segment is past the delete
  horizon (the tombstone rule below, Kafka 2.x's rule for markers, not 3.1's per-batch
  delete-horizon bit). A control batch without records goes as a removable one.
  Simplified: Kafka keeps each producer's LAST batch (empty if need be) to keep its
  sequence and epoch; rayka drops a batch left empty and a removable marker even when it
  is its producer's last (the producer state then forgets that producer or its epoch).
- The cleaned `.txnindex` (`<base>.txnindex.cleaned`, fsynced) replaces the segment's
  BEFORE its `.log` is swapped (none left: the index is removed): it only drops entries of
  transactions no data of which is left in the range, so it is right for the old `.log`
  as for the new one, and a kill between the two renames loses nothing.
- Each replica cleans its own log: replicas agree on every key's final value, not on bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from aiokafka.record.default_records import DefaultRecordBatch

from replicas import records
from replicas.checkpoints import fsync_path
from replicas.compression import rebuild
from replicas.control import ABORT, COMMIT, CONTROL_FLAG, TRANSACTIONAL_FLAG, control_type
from replicas.txn_index import AbortedTxn

LONG_MAX = 2**63 - 1
_LAST_OFFSET_DELTA = 23                # byte position of LastOffsetDelta in a batch


@dataclass(frozen=True, slots=True)
class CleanerPolicy:
    compact: bool = False                        # cleanup.policy includes "compact"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000


@dataclass(frozen=True, slots=True)
class SegmentView:
    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    first_timestamp: int | None
    path: Path


@dataclass(frozen=True, slots=True)
class CleanPlan:
    first_dirty: int
    end: int                                     # cleanable end (a segment boundary)
    segments: tuple[SegmentView, ...]            # the cleanable range, oldest first
    dirty_ratio: float
    delete_horizon_ms: int
    reasons: tuple[str, ...] = ()
    aborted: tuple[AbortedTxn, ...] = ()         # overlapping [first segment, end)


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_dropped: int = 0
    cleaned: list = field(default_factory=list)  # (base offset, path of the .cleaned file)


def plan_cleaning(segments: Sequence[SegmentView], log_start: int, checkpoint: int | None,
                  high_watermark: int, now_ms: int, policy: CleanerPolicy) -> CleanPlan | None:
    """The cleaning this log needs now, or None (see module rules)."""
    if not policy.compact or len(segments) < 2:
        return None
    first_dirty = max(log_start, checkpoint or 0)
    chosen = []
    for i, s in enumerate(segments[:-1]):                       # never the active segment
        upper = segments[i + 1].base_offset
        if upper > high_watermark or (policy.min_compaction_lag_ms > 0 and
                                      s.largest_timestamp > now_ms - policy.min_compaction_lag_ms):
            break
        chosen.append(s)
    if not chosen:
        return None
    end = segments[len(chosen)].base_offset
    uppers = [segments[i + 1].base_offset for i in range(len(chosen))]
    clean = sum(s.size for s, up in zip(chosen, uppers) if up <= first_dirty)
    dirty_segments = [s for s, up in zip(chosen, uppers) if up > first_dirty]
    dirty = sum(s.size for s in dirty_segments)
    if not dirty_segments or dirty == 0:
        return None
    ratio = dirty / (clean + dirty)
    reasons = []
    if ratio > policy.min_cleanable_dirty_ratio:
        reasons.append("dirty ratio")
    oldest = dirty_segments[0].first_timestamp
    if policy.max_compaction_lag_ms < LONG_MAX and oldest is not None and oldest >= 0 \
            and now_ms - oldest > policy.max_compaction_lag_ms:
        reasons.append("max compaction lag")
    if not reasons:
        return None
    clean_segments = [s for s, up in zip(chosen, uppers) if up <= first_dirty]
    horizon = clean_segments[-1].largest_timestamp - policy.delete_retention_ms \
        if clean_segments else -LONG_MAX
    return CleanPlan(first_dirty, end, tuple(chosen), ratio, horizon, tuple(reasons))


# -- reading and writing segments (own descriptors: the broker keeps appending meanwhile) -------
def iter_batches(path: Path, size: int) -> Iterable[tuple[records.BatchHeader, bytes]]:
    """(header, whole batch bytes) of the first `size` bytes of a segment file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        while position + records.HEADER_SIZE <= size:
            header = records.read_header(os.pread(fd, records.HEADER_SIZE, position))
            yield header, os.pread(fd, header.size, position)
            position += header.size
    finally:
        os.close(fd)


class CleanedTransactions:
    """Kafka's CleanedTransactionMetadata: the transactions met while walking the cleaned
    range in offset order (see module rules)."""

    def __init__(self, aborted: Iterable[AbortedTxn]):
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._committed: set[int] = set()
        self._aborted: dict[int, list] = {}      # producer id -> [AbortedTxn, last seen offset]
        self.retained: list[AbortedTxn] = []     # entries for the cleaned segment's index

    def _begin_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, [txn, None])

    def on_control(self, header: records.BatchHeader, kind: int | None) -> bool:
        """A marker read; True when it may be removed."""
        self._begin_up_to(header.last_offset)
        if kind is None:
            return True
        if kind == ABORT:
            met = self._aborted.pop(header.producer_id, None)
            if met is not None and met[1] is not None:
                self.retained.append(met[0])
                return False
            return True
        if kind == COMMIT:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        return False

    def on_batch(self, header: records.BatchHeader) -> bool:
        """A data batch read; True when it belongs to an aborted transaction."""
        self._begin_up_to(header.last_offset)
        if not header.attributes & TRANSACTIONAL_FLAG:
            return False
        met = self._aborted.get(header.producer_id)
        if met is not None:
            met[1] = header.last_offset
            return True
        self._committed.add(header.producer_id)
        return False


def build_key_map(plan: CleanPlan, stats: CleanStats) -> dict[bytes, int]:
    """key → last offset over the dirty part [first dirty, end), aborted data left out."""
    latest: dict[bytes, int] = {}
    txns = CleanedTransactions(t for t in plan.aborted if t.last_offset >= plan.first_dirty)
    for s in plan.segments:
        if s.next_offset <= plan.first_dirty and s.base_offset < plan.first_dirty:
            continue
        for header, raw in iter_batches(s.path, s.size):
            stats.bytes_read += len(raw)
            if header.attributes & CONTROL_FLAG:
                txns.on_control(header, control_type(raw))
                continue
            if txns.on_batch(header) or header.last_offset < plan.first_dirty:
                continue
            for r in DefaultRecordBatch(raw):
                if r.key is not None and plan.first_dirty <= r.offset < plan.end:
                    latest[bytes(r.key)] = r.offset
    return latest


def filter_batch(raw: bytes, keep) -> bytes:
    """The batch with only the records `keep(record)` accepts; b"" when none is left."""
    batch = DefaultRecordBatch(raw)
    every = list(batch)
    kept = [r for r in every if keep(r)]
    if len(kept) == len(every):
        return raw
    if not kept:
        return b""
    out = rebuild(raw, kept, batch.compression_type)
    out[records.LEADER_EPOCH_OFFSET:records.LEADER_EPOCH_OFFSET + 4] = \
        raw[records.LEADER_EPOCH_OFFSET:records.LEADER_EPOCH_OFFSET + 4]
    out[_LAST_OFFSET_DELTA:_LAST_OFFSET_DELTA + 4] = raw[_LAST_OFFSET_DELTA:_LAST_OFFSET_DELTA + 4]
    records.reseal(out)                                          # the CRC over the new fields
    return bytes(out)


def txn_index_cleaned_path(cleaned_log: Path) -> Path:
    """`<base>.txnindex.cleaned` beside `<base>.log.cleaned`."""
    return cleaned_log.with_name(cleaned_log.name.split(".")[0] + ".txnindex.cleaned")


def clean_segment(s: SegmentView, latest: dict[bytes, int], delete_horizon_ms: int,
                  stats: CleanStats, txns: CleanedTransactions | None = None) -> Path:
    """Write the survivors of segment `s` to `<base>.log.cleaned` and the aborted
    transactions its index keeps to `<base>.txnindex.cleaned` (both fsynced); the first's
    path."""
    retain_tombstones = s.largest_timestamp > delete_horizon_ms
    txns = txns if txns is not None else CleanedTransactions(())
    txns.retained = []

    def keep(r) -> bool:
        ok = r.key is not None and r.offset >= latest.get(bytes(r.key), -1) and \
            (r.value is not None or retain_tombstones)
        if ok:
            stats.records_kept += 1
        else:
            stats.records_dropped += 1
        return ok

    out = bytearray()
    for header, raw in iter_batches(s.path, s.size):
        stats.bytes_read += len(raw)
        if header.attributes & CONTROL_FLAG:
            if txns.on_control(header, control_type(raw)) and not retain_tombstones:
                stats.records_dropped += header.records_count
            else:
                out += raw
        elif txns.on_batch(header):
            stats.records_dropped += header.records_count
        else:
            out += filter_batch(raw, keep)
    cleaned = s.path.with_name(s.path.name + ".cleaned")
    _write_synced(cleaned, out)
    if txns.retained:
        _write_synced(txn_index_cleaned_path(cleaned),
                      b"".join(t.to_bytes() for t in txns.retained))
    stats.bytes_written += len(out)
    return cleaned


def _write_synced(path: Path, data) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def run_clean(plan: CleanPlan) -> CleanStats:
    """Map and rewrite every segment of the plan into `.cleaned` files (the swap is the
    log's, under the broker's lock: Log.swap_cleaned)."""
    stats = CleanStats()
    latest = build_key_map(plan, stats)
    txns = CleanedTransactions(plan.aborted)
    for s in plan.segments:
        stats.cleaned.append((s.base_offset, clean_segment(s, latest, plan.delete_horizon_ms,
                                                           stats, txns)))
    return stats


def discard_cleaned(stats: CleanStats) -> None:
    """Drop the `.cleaned` files of a clean that is not swapped in."""
    for _, cleaned in stats.cleaned:
        cleaned.unlink(missing_ok=True)
        txn_index_cleaned_path(cleaned).unlink(missing_ok=True)


def swap_in_txn_index(cleaned_log: Path, txn_index: Path) -> None:
    """The cleaned `.txnindex` in place of the segment's (or none), before its `.log`."""
    cleaned = txn_index_cleaned_path(cleaned_log)
    if cleaned.exists():
        os.replace(cleaned, txn_index)
    else:
        txn_index.unlink(missing_ok=True)


def swap_in(cleaned: Path, log_path: Path) -> None:
    """`.cleaned` → `.swap` → `.log`, each step durable (see module rules)."""
    swap = log_path.with_name(log_path.name + ".swap")
    os.replace(cleaned, swap)
    fsync_path(log_path.parent)
    os.replace(swap, log_path)
    fsync_path(log_path.parent)


def finish_interrupted_swaps(directory: Path) -> None:
    """At load: drop unfinished cleanings, complete finished ones."""
    changed = False
    for cleaned in [*directory.glob("*.log.cleaned"), *directory.glob("*.txnindex.cleaned")]:
        cleaned.unlink()
        changed = True
    for swap in directory.glob("*.log.swap"):
        os.replace(swap, swap.with_name(swap.name[:-len(".swap")]))
        changed = True
    if changed:                 # a fresh or clean directory costs no fsync
        fsync_path(directory)
