"""ListOffsets v0: the offsets a log had before a time, as Kafka answered them before v1.

Rules (Kafka 3.8's UnifiedLog.legacyFetchOffsetsBefore and
Partition.legacyFetchOffsetsForTimestamp):
- The candidates are one (offset, time) per segment: the larger of its base offset and the
  log start offset, and the segment file's last-modified time; plus (log end offset, now)
  when the active segment holds any bytes.
- LATEST (-1) starts from the last candidate, EARLIEST (-2) from the first, any other
  timestamp from the last candidate whose time is at or before it (none: no offsets).
  From there up to `max_num_offsets` candidates are taken going back, and answered in
  descending offset order.
- A consumer (replica id -1) never sees an offset above the high watermark: if any is
  above, the answer is the high watermark followed by the offsets not above it.
- Pure: the caller reads the segments' times and passes the clock.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["offsets_before", "LATEST", "EARLIEST"]

LATEST, EARLIEST = -1, -2


def offsets_before(segments: Sequence[tuple[int, int]], active_size: int, log_start: int,
                   log_end: int, high_watermark: int, now_ms: int, timestamp: int,
                   max_num_offsets: int, from_consumer: bool) -> tuple[int, ...]:
    """`segments`: (base offset, last-modified ms) oldest first; `active_size`: the bytes
    of the last one."""
    candidates = [(max(base, log_start), mtime) for base, mtime in segments]
    if active_size > 0:
        candidates.append((log_end, now_ms))
    if not candidates:
        return ()
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, start + 1)
    offsets = sorted((candidates[start - j][0] for j in range(max(count, 0))), reverse=True)
    if from_consumer and any(o > high_watermark for o in offsets):
        offsets = [high_watermark] + [o for o in offsets if o <= high_watermark]
    return tuple(offsets)
