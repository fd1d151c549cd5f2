"""Offset lookups on a leader: ListOffsets (Kafka's fetchOffsetForTimestamp) and
OffsetsForLeaderEpoch (KIP-101/279). Pure: reads the log's files, changes nothing.

Rules:
- Checked in Kafka's order: the partition is hosted (else UNKNOWN_TOPIC_OR_PARTITION), the
  current leader epoch fences (FENCED_LEADER_EPOCH 74 older / UNKNOWN_LEADER_EPOCH 75 newer),
  then this replica leads (else NOT_LEADER_OR_FOLLOWER).
- ListOffsets answers nothing at or past the last fetchable offset: the high watermark, or
  the last stable offset for a read_committed consumer (Kafka's Partition.
  fetchOffsetForTimestamp; the caller passes that `bound`). EARLIEST (-2) is the log start
  offset; LATEST (-1) the bound itself; MAX_TIMESTAMP (-3) the offset of the record with
  the largest timestamp below the bound (the first such record); a timestamp t >= 0 the
  first record at or after t whose offset is below the bound, else offset -1 / timestamp -1.
  Records below the log start offset (still on disk after DeleteRecords moved it into a
  segment) are never an answer (Kafka's findOffsetByTimestamp from logStartOffset).
  The leader epoch answered is the epoch of the batch holding that offset (the epoch cache's
  for EARLIEST/LATEST), as KIP-279 wants.
- Timestamp lookups skip whole segments by their max timestamp (kept by the segment), start
  in the segment that can hold the answer where its `.timeindex` says, read batch headers
  from there and decode only the one batch that holds the answer.
"""

from __future__ import annotations

from typing import NamedTuple

from replicas import partition_state as ps
from replicas import records
from replicas.errors import UnknownTopicOrPartition
from replicas.partition_state import NO_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


class OffsetLookup(NamedTuple):
    error: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


def _check(part, current_leader_epoch: int) -> int:
    if part is None:
        return UnknownTopicOrPartition.code
    code = ps.check_leader_epoch(part.state.leader_epoch, current_leader_epoch)
    if code == NONE and not part.state.is_leader:
        code = NOT_LEADER_OR_FOLLOWER
    return code


def offsets_for_leader_epoch(part, current_leader_epoch: int,
                             leader_epoch: int) -> tuple[int, int, int]:
    """(error, epoch, end offset) for an OffsetsForLeaderEpoch request."""
    code = _check(part, current_leader_epoch)
    if code:
        return code, NO_EPOCH, -1
    epoch, end = part.log.epoch_cache.end_offset_for(leader_epoch, part.log.log_end_offset)
    return NONE, epoch, end


def list_offset(part, timestamp: int, current_leader_epoch: int = -1,
                bound: int | None = None) -> OffsetLookup:
    """`bound`: the last fetchable offset (None: the high watermark)."""
    code = _check(part, current_leader_epoch)
    if code:
        return OffsetLookup(code)
    log = part.log
    hw = part.state.high_watermark if bound is None else bound
    if timestamp == EARLIEST:
        start = log.log_start_offset
        return OffsetLookup(NONE, -1, start, log.epoch_cache.epoch_for_offset(start))
    if timestamp == LATEST:
        return OffsetLookup(NONE, -1, hw, log.epoch_cache.epoch_for_offset(max(hw - 1, 0)))
    segments = log.segments
    if timestamp == MAX_TIMESTAMP:               # only the segment(s) holding the maximum
        top = max((s.max_timestamp for s in segments), default=-1)
        segments = [s for s in segments if s.max_timestamp == top]
    else:
        segments = [s for s in segments if s.max_timestamp >= timestamp]
    low = log.log_start_offset
    best = None                                  # (timestamp, header, segment) for MAX_TIMESTAMP
    for segment in segments:
        start = 0 if timestamp == MAX_TIMESTAMP else segment.position_for_timestamp(timestamp)
        for h in segment.headers_from(start):
            if h.base_offset >= hw:
                break
            if h.last_offset < low:
                continue
            if timestamp == MAX_TIMESTAMP:
                if best is None or h.max_timestamp > best[0]:
                    best = (h.max_timestamp, h, segment)
            elif h.max_timestamp >= timestamp:
                found = _first_record(segment, h, lambda ts: ts >= timestamp, low, hw)
                if found is not None:
                    return found
    if best is not None:
        found = _first_record(best[2], best[1], lambda ts: ts == best[0], low, hw)
        if found is not None:
            return found
    return OffsetLookup(NONE, -1, -1, -1)


def _first_record(segment, header, wanted, low: int, hw: int) -> OffsetLookup | None:
    data = segment.read_bytes(header.position, header.size)
    for record in records.decode_records(data):
        if low <= record.offset < hw and wanted(record.timestamp_ms):
            return OffsetLookup(NONE, record.timestamp_ms, record.offset,
                                header.partition_leader_epoch)
    return None
