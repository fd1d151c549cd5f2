"""Retention and time-based rolling of one replica's log: which oldest segments go (Kafka's
UnifiedLog.deleteOldSegments / deletableSegments, LocalLog.shouldRoll). Pure: segments in,
a plan out; `Log.apply_retention` carries the plan out.

Rules (Kafka's UnifiedLog.scala, LogConfig):
- Three passes, in this order, each over what the previous left: log-start breached (a
  segment whose NEXT segment starts at or below the log start offset, after DeleteRecords or
  a leader's log start adopted by a follower); then, only when cleanup.policy holds
  `delete`: size breached (`retention.bytes` ≥ 0: delete the oldest while the log stays at
  or above the limit without it), time breached (`retention.ms` ≥ 0: now − the segment's
  largest timestamp > retention.ms).
- Every pass scans from the oldest segment and stops at the first one it may not delete.
  A segment may be deleted only if the high watermark is at or past its upper bound (the
  next segment's base, or the LEO for the last one): the log start never passes the HW.
  The last segment is never deleted when empty.
- If every segment is deletable, the log rolls first (a new empty active segment at the
  LEO) so a log always has one segment; the log start becomes the first kept segment's base.
- Rolling by time (`segment.ms`) happens only on append: the active segment is not empty
  and the new batches' max timestamp minus the segment's first batch timestamp (or, for a
  segment with none, now minus its creation) exceeds segment.ms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

NO_LIMIT = -1


class SegmentLike(Protocol):
    base_offset: int
    size: int

    @property
    def largest_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_ms: int = 604_800_000       # retention.ms; -1: keep forever
    retention_bytes: int = NO_LIMIT       # retention.bytes, per partition; -1: no limit
    delete: bool = True                   # cleanup.policy includes "delete"


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    count: int = 0                                       # oldest segments to delete
    reasons: dict = field(default_factory=dict)          # pass -> segments it deletes
    roll_first: bool = False                             # every segment goes: roll first


def deletable_count(segments: Sequence[SegmentLike], log_end_offset: int,
                    high_watermark: int, predicate: Callable[[SegmentLike, SegmentLike | None], bool]
                    ) -> int:
    """How many of the oldest `segments` one pass deletes (Kafka's deletableSegments)."""
    n = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        if following is None and segment.size == 0:
            break
        upper = following.base_offset if following is not None else log_end_offset
        if high_watermark < upper or not predicate(segment, following):
            break
        n += 1
    return n


def plan_retention(segments: Sequence[SegmentLike], log_start_offset: int, log_end_offset: int,
                   high_watermark: int, now_ms: int, policy: RetentionPolicy) -> RetentionPlan:
    """The segments a retention check deletes, by pass (see module rules)."""
    passes = ["log_start"]
    if policy.delete and policy.retention_bytes >= 0:
        passes.append("size")
    if policy.delete and policy.retention_ms >= 0:
        passes.append("time")
    done, reasons = 0, {}
    for name in passes:
        rest = segments[done:]
        if name == "log_start":
            predicate = lambda s, nxt: nxt is not None and nxt.base_offset <= log_start_offset
        elif name == "size":
            predicate = _size_predicate(rest, policy.retention_bytes)
        else:
            predicate = lambda s, nxt: now_ms - s.largest_timestamp > policy.retention_ms
        n = deletable_count(rest, log_end_offset, high_watermark, predicate)
        if n:
            reasons[name] = n
            done += n
    return RetentionPlan(done, reasons, roll_first=done > 0 and done == len(segments))


def _size_predicate(segments: Sequence[SegmentLike], retention_bytes: int) -> Callable:
    """Kafka's shouldDeleteSegment for retention.bytes: stateful over one scan."""
    over = [sum(s.size for s in segments) - retention_bytes]

    def predicate(segment, _following) -> bool:
        if over[0] - segment.size >= 0:
            over[0] -= segment.size
            return True
        return False
    return predicate


def time_to_roll(active_size: int, rolling_timestamp_ms: int | None, created_ms: int | None,
                 batch_max_timestamp_ms: int, now_ms: int | None, segment_ms: int) -> bool:
    """Kafka's shouldRoll by segment.ms for an append (see module rules); jitter is 0."""
    if active_size == 0:
        return False
    if rolling_timestamp_ms is not None and rolling_timestamp_ms >= 0:
        waited = batch_max_timestamp_ms - rolling_timestamp_ms
    elif now_ms is not None and created_ms is not None:
        waited = now_ms - created_ms
    else:
        return False
    return waited > segment_ms
