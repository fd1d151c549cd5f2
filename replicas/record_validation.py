"""Per-record checks of a leader append, with Kafka's record errors (KIP-467): a batch with
invalid records fails whole, and the producer learns which records were at fault.

Rules (Kafka's LogValidator.validateRecord / validateKey / validateTimestamp /
processRecordErrors):
- Batches are checked in order; within a batch every record is checked, by its index in
  the batch (`batch_index`, from 0). The first batch with any bad record fails the append:
  nothing of the buffer is written.
- A compacted topic's record without a key: INVALID_RECORD, "Compacted topic cannot accept
  message without key in topic partition <tp>.".
- A record whose timestamp is not -1, in a topic whose timestamps are CreateTime, outside
  [now - before, now + after]: INVALID_TIMESTAMP, "Timestamp <ts> of
  message with offset <offset> is out of range. The timestamp should be within [lo, hi]".
  `before` is message.timestamp.before.max.ms unless left at its default (2^63-1), then
  message.timestamp.difference.max.ms; `after` likewise (Kafka 3.8's LogConfig). Any other
  record (one without a timestamp, or any record of a LogAppendTime topic) in a batch the
  producer sent with timestamp type LogAppendTime: INVALID_TIMESTAMP ("Producer should
  not set timestamp type to LogAppendTime"). A LogAppendTime topic's batches are stamped
  after these checks (records.stamp_log_append_time).
- The failure (`RecordValidationError`) carries every record error of that batch
  (batch index, message) and the batch's error: INVALID_TIMESTAMP if any record error is
  one, with "One or more records have been rejected due to invalid timestamp"; else
  INVALID_RECORD, "One or more records have been rejected due to <n> record errors in
  total, and only showing the first three errors at most: [RecordError(...), ...]".
- Nothing is decoded when nothing can fail: a topic that is not compacted, has no time
  bounds and gets no LogAppendTime batch costs a look at each batch header only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from aiokafka.record.default_records import DefaultRecordBatch

from replicas import records
from replicas.errors import ErrorCode as E
from replicas.errors import RecordValidationError

LONG_MAX = 2**63 - 1
LOG_APPEND_TIME_FLAG = 0x08        # batch attributes bit 3: the timestamp type
NO_TIMESTAMP = -1

__all__ = ["TimestampBounds", "validate_records"]


@dataclass(frozen=True, slots=True)
class TimestampBounds:
    """How far a record's timestamp may lie before and after the broker's wall clock."""
    before_ms: int = LONG_MAX
    after_ms: int = LONG_MAX

    @classmethod
    def from_configs(cls, difference_ms: int = LONG_MAX, before_ms: int = LONG_MAX,
                     after_ms: int = LONG_MAX) -> "TimestampBounds":
        return cls(before_ms if before_ms != LONG_MAX else difference_ms,
                   after_ms if after_ms != LONG_MAX else difference_ms)

    @property
    def unbounded(self) -> bool:
        return self.before_ms == LONG_MAX and self.after_ms == LONG_MAX


def _record_error(index: int, message: str) -> str:
    return f"RecordError(batchIndex={index}, message='{message}')"


def validate_records(buf, headers: Sequence[records.BatchHeader], where: str, compacted: bool,
                     bounds: TimestampBounds, now_ms: Callable[[], int] | None,
                     topic_log_append_time: bool = False) -> None:
    """Raise RecordValidationError for the first batch of `buf` with a bad record (rules)."""
    create_time = not topic_log_append_time
    timed = create_time and not bounds.unbounded and now_ms is not None
    if not compacted and not timed and not any(h.attributes & LOG_APPEND_TIME_FLAG
                                               for h in headers):
        return
    now = now_ms() if timed else 0
    lo = max(now - bounds.before_ms, -LONG_MAX) if timed else 0
    hi = min(now + bounds.after_ms, LONG_MAX) if timed else 0
    view = memoryview(buf)
    for h in headers:
        log_append_time = bool(h.attributes & LOG_APPEND_TIME_FLAG)
        if not (compacted or timed or log_append_time):
            continue
        errors: list[tuple[int, int, str]] = []           # (index, code, message)
        batch = DefaultRecordBatch(bytes(view[h.position:h.position + h.size]))
        for index, record in enumerate(batch):
            if compacted and record.key is None:
                errors.append((index, E.INVALID_RECORD, f"Compacted topic cannot accept "
                               f"message without key in topic partition {where}."))
            elif create_time and record.timestamp != NO_TIMESTAMP:
                if timed and not lo <= record.timestamp <= hi:
                    errors.append((index, E.INVALID_TIMESTAMP, f"Timestamp {record.timestamp} "
                                   f"of message with offset {record.offset} is out of range. "
                                   f"The timestamp should be within [{lo}, {hi}]"))
            elif log_append_time:
                errors.append((index, E.INVALID_TIMESTAMP, "Invalid timestamp type in message. "
                               "Producer should not set timestamp type to LogAppendTime."))
        if not errors:
            continue
        record_errors = tuple((i, m) for i, _, m in errors)
        if any(code == E.INVALID_TIMESTAMP for _, code, _ in errors):
            raise RecordValidationError(E.INVALID_TIMESTAMP, "One or more records have been "
                                        "rejected due to invalid timestamp", record_errors)
        shown = ", ".join(_record_error(i, m) for i, m in record_errors[:3])
        raise RecordValidationError(
            E.INVALID_RECORD, f"One or more records have been rejected due to "
            f"{len(record_errors)} record errors in total, and only showing the first three "
            f"errors at most: [{shown}]", record_errors)
