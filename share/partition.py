"""One share-partition: a share group's view of one topic partition on its leader (KIP-932,
Kafka's SharePartition), pure.

Rules:
- The window: records from the share-partition start offset (SPSO) up to the end offset
  (SPEO, the next offset never acquired) are in flight, each in one state: AVAILABLE,
  ACQUIRED (by one member, until its acquisition lock expires), ACKNOWLEDGED or ARCHIVED
  (Kafka's RecordState ids 0, 1, 2, 4). Offsets at or above the SPEO are AVAILABLE and have
  never been delivered. The SPSO moves up over every leading ACKNOWLEDGED or ARCHIVED
  record; the window never holds more than `max_in_flight` offsets
  (group.share.partition.max.record.locks): SPEO - SPSO stays at or below it.
- Where it starts: with no persisted state, share.auto.offset.reset decides: `latest` (the
  default) starts at the high watermark, `earliest` at the log start offset. A log start
  that moves past the SPSO (retention, DeleteRecords) drops what lies below it.
- Acquire: a member asks with the log's batches read from `next_fetch_offset()` up to the
  high watermark (their offset spans, and whether each is a control batch). Records are
  taken in offset order: AVAILABLE ones inside the window first, then new ones past the
  SPEO, up to `max_records` and the window's limit. Each acquisition counts one delivery
  and locks the record to the member for the lock duration. Control batches (transaction
  markers) are never delivered: past the SPEO they enter the window ARCHIVED.
- Acknowledge (per batch of offsets, one type for the batch or one per offset): 0 GAP and
  3 REJECT archive, 1 ACCEPT acknowledges, 2 RELEASE makes the record AVAILABLE again
  (ARCHIVED when its delivery count reached the limit), 4 RENEW restarts its lock. Every
  offset must be ACQUIRED by the acknowledging member, else the whole partition's
  acknowledgement is INVALID_RECORD_STATE and nothing changes; batches must have first <=
  last, none may start before the previous one's last offset, types are 0-4, as many as
  offsets (or one), else INVALID_REQUEST (KafkaApis.validateAcknowledgementBatches).
- A lock that expires goes back to AVAILABLE (ARCHIVED at the delivery limit), so a
  record is delivered at most `delivery_limit` times (group.share.delivery.count.limit).
  The records of a member that closes its share session go back with their last delivery
  taken back (Kafka's DeliveryCountOps.DECREASE: the member never saw them processed).
- Acknowledgement batches below the SPSO are already complete and skipped.
- `state_batches()` is what is persisted (Kafka's PersisterStateBatch): the window's
  records as runs of (first, last, state, delivery count), an ACQUIRED record written as
  AVAILABLE (locks do not survive a leader change); `restore` rebuilds from it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from replicas.errors import ErrorCode as E


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
LATEST, EARLIEST = "latest", "earliest"


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class Span:
    """A batch of the log: offsets first..last; a control batch is never delivered."""
    first: int
    last: int
    control: bool = False


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    first: int
    last: int
    state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareConfig:
    lock_duration_ms: int = 30_000
    delivery_limit: int = 5
    max_in_flight: int = 2000


class SharePartition:
    def __init__(self, start_offset: int, config: ShareConfig, state_epoch: int = 0):
        self.start_offset = start_offset            # SPSO
        self.end_offset = start_offset              # SPEO
        self.config = config
        self.state_epoch = state_epoch
        self.records: dict[int, InFlight] = {}      # every offset in [SPSO, SPEO)

    @classmethod
    def initial(cls, reset: str, log_start: int, high_watermark: int, config: ShareConfig
                ) -> "SharePartition":
        return cls(log_start if reset == EARLIEST else high_watermark, config)

    @classmethod
    def restore(cls, start_offset: int, batches, config: ShareConfig,
                state_epoch: int = 0) -> "SharePartition":
        p = cls(start_offset, config, state_epoch)
        for b in batches:
            state = RecordState(b.state)
            if state == RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(b.first, start_offset), b.last + 1):
                p.records[offset] = InFlight(state, b.delivery_count)
                p.end_offset = max(p.end_offset, offset + 1)
        for offset in range(start_offset, p.end_offset):
            p.records.setdefault(offset, InFlight(RecordState.AVAILABLE))
        p._advance()
        return p

    # -- reads ---------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a fetch for this partition reads from: the first AVAILABLE record in the
        window, else the SPEO."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self, high_watermark: int) -> bool:
        window_full = self.end_offset - self.start_offset >= self.config.max_in_flight
        return (self.next_fetch_offset() < self.end_offset
                or (self.end_offset < high_watermark and not window_full))

    def next_deadline_ms(self) -> int | None:
        times = [r.deadline_ms for r in self.records.values()
                 if r.state == RecordState.ACQUIRED]
        return min(times) if times else None

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        r = self.records.get(offset)
        if r is None:
            return ((RecordState.ARCHIVED if offset < self.start_offset
                     else RecordState.AVAILABLE), 0)
        return r.state, r.delivery_count

    def acquired_by(self, member_id: str) -> list[int]:
        return sorted(o for o, r in self.records.items()
                      if r.state == RecordState.ACQUIRED and r.member_id == member_id)

    # -- acquisition ---------------------------------------------------------------------------
    def acquire(self, member_id: str, spans, max_records: int, now_ms: int) -> list[Acquired]:
        taken: list[int] = []
        limit = max(max_records, 1)
        deadline = now_ms + self.config.lock_duration_ms
        for span in spans:
            for offset in range(max(span.first, self.start_offset), span.last + 1):
                if len(taken) >= limit:
                    return self._done(taken)
                if offset >= self.end_offset:
                    if offset - self.start_offset >= self.config.max_in_flight:
                        return self._done(taken)
                    for gap in range(self.end_offset, offset):   # compacted away: never seen
                        self.records[gap] = InFlight(RecordState.ARCHIVED)
                    self.end_offset = offset + 1
                    if span.control:
                        self.records[offset] = InFlight(RecordState.ARCHIVED)
                        continue
                    self.records[offset] = InFlight(RecordState.AVAILABLE)
                r = self.records[offset]
                if r.state != RecordState.AVAILABLE or span.control:
                    continue
                r.state, r.member_id, r.deadline_ms = RecordState.ACQUIRED, member_id, deadline
                r.delivery_count += 1
                taken.append(offset)
        return self._done(taken)

    def _done(self, taken: list[int]) -> list[Acquired]:
        self._advance()
        out: list[Acquired] = []
        for offset in taken:
            count = self.records[offset].delivery_count
            if out and out[-1].last == offset - 1 and out[-1].delivery_count == count:
                out[-1] = Acquired(out[-1].first, offset, count)
            else:
                out.append(Acquired(offset, offset, count))
        return out

    # -- acknowledgement -----------------------------------------------------------------------
    @staticmethod
    def check_batches(batches) -> str | None:
        """Kafka's shape checks on acknowledgement batches (INVALID_REQUEST): None if fine."""
        previous = None
        for first, last, types in batches:
            if first > last:
                return f"First offset {first} is greater than last offset {last}"
            if previous is not None and first < previous:
                return "Acknowledgement batches are not in order or overlap"
            if len(types) not in (1, last - first + 1):
                return "Acknowledge types do not match the batch's offsets"
            if any(not 0 <= t <= max(AckType) for t in types):
                return f"Unknown acknowledge type in {list(types)}"
            previous = last
        return None

    def acknowledge(self, member_id: str, batches, now_ms: int) -> int:
        """batches: (first, last, types) with types one per offset or one for all. An error
        code for the partition; nothing changes unless every offset may be acknowledged."""
        if self.check_batches(batches) is not None:
            return E.INVALID_REQUEST
        changes = []
        for first, last, types in batches:
            for i, offset in enumerate(range(first, last + 1)):
                if offset < self.start_offset:          # already complete: nothing to do
                    continue
                r = self.records.get(offset)
                if r is None or r.state != RecordState.ACQUIRED or r.member_id != member_id:
                    return E.INVALID_RECORD_STATE
                changes.append((r, AckType(types[i] if len(types) > 1 else types[0])))
        for r, kind in changes:
            if kind == AckType.RENEW:
                r.deadline_ms = now_ms + self.config.lock_duration_ms
            elif kind == AckType.ACCEPT:
                self._settle(r, RecordState.ACKNOWLEDGED)
            elif kind == AckType.RELEASE:
                self._release(r)
            else:
                self._settle(r, RecordState.ARCHIVED)
        self._advance()
        return E.NONE

    # -- locks, members, the log ---------------------------------------------------------------
    def expire_locks(self, now_ms: int) -> int:
        """Records whose lock has expired go back (or are archived at the limit)."""
        expired = [r for r in self.records.values()
                   if r.state == RecordState.ACQUIRED and r.deadline_ms <= now_ms]
        for r in expired:
            self._release(r)
        self._advance()
        return len(expired)

    def release_member(self, member_id: str, undelivered: bool = False) -> int:
        """The member's records go back; `undelivered` (its share session closed) takes
        back their last delivery too, as Kafka's DeliveryCountOps.DECREASE."""
        mine = [r for r in self.records.values()
                if r.state == RecordState.ACQUIRED and r.member_id == member_id]
        for r in mine:
            if undelivered:
                r.delivery_count = max(r.delivery_count - 1, 0)
            self._release(r)
        self._advance()
        return len(mine)

    def maybe_move_start(self, log_start: int) -> None:
        """A log start past the SPSO (retention, DeleteRecords): what lies below is gone."""
        if log_start <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start, self.end_offset)):
            self.records.pop(offset, None)
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)
        self._advance()

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: the window starts over at `offset`, empty."""
        self.records.clear()
        self.start_offset = self.end_offset = offset

    def checkpoint(self) -> tuple:
        """What `rollback` puts back (an acknowledgement whose state could not be written
        is undone: Kafka's SharePartition rolls back a failed persist)."""
        return (self.start_offset, self.end_offset,
                {o: InFlight(r.state, r.delivery_count, r.member_id, r.deadline_ms)
                 for o, r in self.records.items()})

    def rollback(self, checkpoint: tuple) -> None:
        self.start_offset, self.end_offset, records = checkpoint
        self.records = {o: InFlight(r.state, r.delivery_count, r.member_id, r.deadline_ms)
                        for o, r in records.items()}

    def state_batches(self) -> list[StateBatch]:
        out: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            r = self.records[offset]
            state = RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state
            if (out and out[-1].last == offset - 1 and out[-1].state == state
                    and out[-1].delivery_count == r.delivery_count):
                out[-1] = StateBatch(out[-1].first, offset, state, r.delivery_count)
            else:
                out.append(StateBatch(offset, offset, int(state), r.delivery_count))
        return out

    # -- helpers -------------------------------------------------------------------------------
    def _settle(self, r: InFlight, state: RecordState) -> None:
        r.state, r.member_id, r.deadline_ms = state, None, 0

    def _release(self, r: InFlight) -> None:
        self._settle(r, RecordState.ARCHIVED if r.delivery_count >= self.config.delivery_limit
                     else RecordState.AVAILABLE)

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and \
                self.records[self.start_offset].state in TERMINAL:
            del self.records[self.start_offset]
            self.start_offset += 1
