"""The controller's journal: a bounded record of what this candidate did while active
(elections, ISR changes, leader epochs, brokers coming and going), for a timeline.

Kafka has no such record (its state-change log is a text log); this one is data, read
incrementally: `entries(after_seq)`.

Rules:
- Pure: no ray, no kazoo, no clock. Every entry's `time_ms` (wall clock, ms) is passed in
  by the caller (the Controller's `wall_clock_ms`).
- Bounded: the newest `max_entries` (default 20,000); older ones drop off the front.
- Every entry is a plain dict: `seq` (consecutive, never reused in this journal's life,
  across terms; starts at `first_seq`), `time_ms`, `kind`, and the kind's fields. Tuples,
  never lists, so an entry handed out is not changed by its reader nor by the journal.
  - "controller": `event` "active" | "resigned", `epoch` (the controller epoch of the
    term), `reason` on resignation when the caller knows it ("moved", "session-expired",
    "shutdown", "error").
  - "broker": `event` ("joined", "left", "controlled-shutdown", "log-dir-failure",
    "replicas-offline"), `broker`, `epoch` (the broker epoch, when known), and the
    event's own fields (`replicas`: how many went offline).
  - "leader": the partition's leader or leader epoch changed: `topic`, `partition`,
    `leader`, `leader_epoch`, `isr`, `zk_version` (the partition epoch),
    `previous_leader`, `previous_leader_epoch`, `previous_isr` (None for a partition first
    seen), and `reason` only when the caller knows it.
  - "isr": the ISR changed, leader and leader epoch did not: `topic`, `partition`,
    `leader`, `leader_epoch`, `zk_version`, `isr`, `previous_isr`, and `reason` when known.
- Partition changes are found by comparison (`observe`): the state is compared with the
  last one recorded for that partition, (leader, leader_epoch, isr); the same state again
  records nothing, whatever its zk_version. `baseline` remembers a state without
  recording it (what a failover loads is the previous controller's doing).
- The per-partition memory holds only partitions that exist: `forget_topic` drops a
  deleted topic's, `forget_partitions` everything (on resignation).
- One writer (the controller's event thread), any number of readers (the actor's threads):
  the entries are guarded by a lock; the per-partition memory is the writer's alone.
- `entries(after_seq, limit)`: copies of the entries with seq > after_seq, oldest first,
  at most `limit`. A reader that fell behind the bound gets the oldest kept: a first seq
  above after_seq + 1 tells it what it lost.
"""

from __future__ import annotations

import threading
from collections import deque
from itertools import islice

DEFAULT_MAX_ENTRIES = 20_000

CONTROLLER = "controller"
BROKER = "broker"
LEADER = "leader"
ISR = "isr"
KINDS = (CONTROLLER, BROKER, LEADER, ISR)


class Journal:
    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, first_seq: int = 1):
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self.max_entries = max_entries
        self._entries: deque[dict] = deque(maxlen=max_entries)
        self._next_seq = first_seq
        self._lock = threading.Lock()
        # topic → partition → (leader, leader_epoch, isr, zk_version) last recorded
        self._last: dict[str, dict[int, tuple]] = {}

    # -- writing -------------------------------------------------------------------------------
    def record(self, time_ms: int, kind: str, **fields) -> dict:
        """Append one entry of `kind` with `fields`; returns it."""
        if kind not in KINDS:
            raise ValueError(f"unknown journal kind {kind!r}")
        with self._lock:
            entry = {"seq": self._next_seq, "time_ms": int(time_ms), "kind": kind, **fields}
            self._next_seq += 1
            self._entries.append(entry)
        return entry

    def controller(self, time_ms: int, event: str, epoch: int, reason: str | None = None
                   ) -> dict:
        fields = {"event": event, "epoch": epoch}
        if reason is not None:
            fields["reason"] = reason
        return self.record(time_ms, CONTROLLER, **fields)

    def broker(self, time_ms: int, event: str, broker: int, epoch: int | None = None,
               **fields) -> dict:
        return self.record(time_ms, BROKER, event=event, broker=broker, epoch=epoch, **fields)

    def observe(self, time_ms: int, topic: str, partition: int, leader: int, leader_epoch: int,
                isr, zk_version: int = -1, reason: str | None = None) -> dict | None:
        """Record the partition's state if it differs from the last one recorded: a "leader"
        entry if the leader or leader epoch changed (or the partition is new to the journal),
        an "isr" entry if only the ISR did. Returns the entry, or None (nothing changed)."""
        isr = tuple(isr)
        parts = self._last.get(topic)
        if parts is None:
            parts = self._last[topic] = {}
        previous = parts.get(partition)
        parts[partition] = (leader, leader_epoch, isr, zk_version)
        if previous is not None and previous[0] == leader and previous[1] == leader_epoch:
            if previous[2] == isr:
                return None
            fields = {"topic": topic, "partition": partition, "leader": leader,
                      "leader_epoch": leader_epoch, "zk_version": zk_version, "isr": isr,
                      "previous_isr": previous[2]}
            kind = ISR
        else:
            fields = {"topic": topic, "partition": partition, "leader": leader,
                      "leader_epoch": leader_epoch, "isr": isr, "zk_version": zk_version,
                      "previous_leader": previous[0] if previous else None,
                      "previous_leader_epoch": previous[1] if previous else None,
                      "previous_isr": previous[2] if previous else None}
            kind = LEADER
        if reason is not None:
            fields["reason"] = reason
        return self.record(time_ms, kind, **fields)

    def baseline(self, topic: str, partition: int, leader: int, leader_epoch: int, isr,
                 zk_version: int = -1) -> None:
        """Remember the partition's state without recording it."""
        self._last.setdefault(topic, {})[partition] = (leader, leader_epoch, tuple(isr),
                                                       zk_version)

    def forget_topic(self, topic: str) -> None:
        self._last.pop(topic, None)

    def forget_partitions(self) -> None:
        self._last.clear()

    def remembered(self, topic: str, partition: int) -> tuple | None:
        """(leader, leader_epoch, isr, zk_version) last recorded for the partition, or None."""
        return self._last.get(topic, {}).get(partition)

    @property
    def partitions_remembered(self) -> int:
        return sum(len(parts) for parts in self._last.values())

    # -- reading -------------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        """The seq of the newest entry (first_seq - 1 while empty)."""
        return self._next_seq - 1

    def entries(self, after_seq: int = 0, limit: int | None = None) -> list[dict]:
        """Copies of the entries with seq > after_seq, oldest first, at most `limit`."""
        with self._lock:
            if not self._entries:
                return []
            first = self._entries[0]["seq"]
            start = max(0, after_seq + 1 - first)
            stop = None if limit is None else start + max(0, limit)
            return [dict(e) for e in islice(self._entries, start, stop)]

    def __len__(self) -> int:
        return len(self._entries)
