"""The share coordinator (Kafka 4's ShareCoordinatorShard, KIP-932): share-partitions' state
kept in `__share_group_state`, read by a partition's new leader and written by its leader
after every change, pure. Its events, effects and answers are here too.

Rules:
- It owns the `__share_group_state` partitions this broker leads (BeginLoad: loading,
  answered COORDINATOR_LOAD_IN_PROGRESS; LoadPartition: the records replayed, snapshots
  replacing and updates applying, tombstones deleting; UnloadPartition: forgotten); a key
  of a partition it does not own is NOT_COORDINATOR.
- ReadState(key, leader epoch): a leader epoch below the one stored is FENCED_LEADER_EPOCH
  (an old leader); a higher one is recorded (persisted: a snapshot is appended before the
  answer), so the old leader's writes are fenced from then on. A key never written answers
  start offset -1 (uninitialized: the reader starts at share.auto.offset.reset).
- WriteState(key, state epoch, leader epoch, start offset, batches): FENCED_LEADER_EPOCH
  below the stored leader epoch, FENCED_STATE_EPOCH below the stored state epoch;
  otherwise the whole state becomes a snapshot appended to the key's partition, and the
  answer waits for the append (persist before answering; a failed append answers
  COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR and leaves the stored state as it was).
- DeleteState(key) appends the key's tombstones (snapshot and update).
- ReadSummary(group, keys) answers the stored states of those keys (every key of the group
  when keys is None) among the partitions it owns, recording nothing (Kafka's
  ReadShareGroupStateSummary: an admin's read never fences a leader); a key not stored is
  left out; any asked partition still loading is COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from replicas.dispatch import handler_for
from replicas.errors import ErrorCode as E
from share.records import (SNAPSHOT, UPDATE, ShareKey, ShareState, apply_update, decode_key,
                           decode_value, encode_key, encode_snapshot, partition_for)

NOT_STORED = -1


# -- events --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReadState:
    request_id: int
    key: ShareKey
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class WriteState:
    request_id: int
    key: ShareKey
    state: ShareState


@dataclass(frozen=True, slots=True)
class DeleteState:
    request_id: int
    key: ShareKey


@dataclass(frozen=True, slots=True)
class ReadSummary:
    request_id: int
    group_id: str
    keys: tuple[ShareKey, ...] | None = None      # None: every key of the group


@dataclass(frozen=True, slots=True)
class Tick:
    pass


@dataclass(frozen=True, slots=True)
class AppendDone:
    token: int
    error: int = E.NONE


@dataclass(frozen=True, slots=True)
class BeginLoad:
    partition: int


@dataclass(frozen=True, slots=True)
class LoadPartition:
    partition: int
    records: tuple = ()          # (key bytes, value bytes or None), the partition's log in order


@dataclass(frozen=True, slots=True)
class UnloadPartition:
    partition: int


# -- effects and answers -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StateRecord:
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Append:
    partition: int
    records: tuple[StateRecord, ...]
    token: int


@dataclass(frozen=True, slots=True)
class Respond:
    request_id: int
    result: object


@dataclass(frozen=True, slots=True)
class StateAnswer:
    error: int = E.NONE
    state: ShareState | None = None      # None: never written (start at the reset policy)
    summaries: tuple = ()                # ReadSummary: (key, state) of the keys stored


@dataclass
class _Pending:
    request_id: int
    key: ShareKey
    state: ShareState | None            # what the key holds once the append is done


@dataclass
class ShareCoordinator:
    partitions: int = 50                # share.coordinator.state.topic.num.partitions
    clock_ms: Callable[[], int] = lambda: 0
    owned: set = field(default_factory=set)
    loading: set = field(default_factory=set)
    states: dict = field(default_factory=dict)        # ShareKey → ShareState
    _pending: dict = field(default_factory=dict)      # token → _Pending
    _next_token: int = 0
    _out: list = field(default_factory=list)

    def process(self, event) -> list:
        handler = handler_for(self, event)
        if handler is None:
            raise TypeError(f"the share coordinator has no handler for {type(event).__name__}")
        self._out = []
        handler(event)
        out, self._out = self._out, []
        return out

    def partition_for(self, key) -> int:
        return partition_for(key, self.partitions)

    def next_deadline_ms(self) -> int | None:
        return None

    @property
    def owned_partitions(self) -> frozenset:
        return frozenset(self.owned)

    # -- requests ----------------------------------------------------------------------------------
    def _status(self, key: ShareKey) -> int | None:
        p = self.partition_for(key)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return E.NOT_COORDINATOR
        return None

    def process_read_state(self, e: ReadState) -> None:
        error = self._status(e.key)
        if error is not None:
            return self._respond(e.request_id, StateAnswer(error))
        stored = self.states.get(e.key)
        if stored is None:
            return self._respond(e.request_id, StateAnswer())
        if e.leader_epoch < stored.leader_epoch:
            return self._respond(e.request_id, StateAnswer(E.FENCED_LEADER_EPOCH))
        if e.leader_epoch == stored.leader_epoch:
            return self._respond(e.request_id, StateAnswer(state=stored))
        newer = ShareState(stored.state_epoch, e.leader_epoch, stored.start_offset,
                           stored.batches, stored.snapshot_epoch + 1)
        self._write(e.request_id, e.key, newer)

    def process_write_state(self, e: WriteState) -> None:
        error = self._status(e.key)
        if error is not None:
            return self._respond(e.request_id, StateAnswer(error))
        stored = self.states.get(e.key)
        if stored is not None and e.state.leader_epoch < stored.leader_epoch:
            return self._respond(e.request_id, StateAnswer(E.FENCED_LEADER_EPOCH))
        if stored is not None and e.state.state_epoch < stored.state_epoch:
            return self._respond(e.request_id, StateAnswer(E.FENCED_STATE_EPOCH))
        snapshot_epoch = 0 if stored is None else stored.snapshot_epoch + 1
        self._write(e.request_id, e.key, ShareState(
            e.state.state_epoch, e.state.leader_epoch, e.state.start_offset,
            tuple(e.state.batches), snapshot_epoch))

    def process_delete_state(self, e: DeleteState) -> None:
        error = self._status(e.key)
        if error is not None:
            return self._respond(e.request_id, StateAnswer(error))
        self._append(e.request_id, e.key, None, (
            StateRecord(encode_key(e.key, SNAPSHOT), None),
            StateRecord(encode_key(e.key, UPDATE), None)))

    def process_read_summary(self, e: ReadSummary) -> None:
        if e.keys is None:
            if self.loading:
                return self._respond(e.request_id, StateAnswer(E.COORDINATOR_LOAD_IN_PROGRESS))
            found = [(k, s) for k, s in self.states.items() if k.group_id == e.group_id]
        else:
            if any(self.partition_for(k) in self.loading for k in e.keys):
                return self._respond(e.request_id, StateAnswer(E.COORDINATOR_LOAD_IN_PROGRESS))
            found = [(k, self.states[k]) for k in e.keys if k in self.states]
        self._respond(e.request_id, StateAnswer(summaries=tuple(sorted(
            found, key=lambda ks: (ks[0].topic_id, ks[0].partition)))))

    def _write(self, request_id: int, key: ShareKey, state: ShareState) -> None:
        self._append(request_id, key, state, (StateRecord(
            encode_key(key, SNAPSHOT), encode_snapshot(state, self.clock_ms())),))

    def _append(self, request_id, key, state, records) -> None:
        token = self._next_token = self._next_token + 1
        self._pending[token] = _Pending(request_id, key, state)
        self._out.append(Append(self.partition_for(key), tuple(records), token))

    def process_append_done(self, e: AppendDone) -> None:
        pending = self._pending.pop(e.token, None)
        if pending is None:
            return
        if e.error != E.NONE:
            code = E.NOT_COORDINATOR if e.error in (E.NOT_LEADER_OR_FOLLOWER,
                                                    E.NOT_COORDINATOR) \
                else E.COORDINATOR_NOT_AVAILABLE
            return self._respond(pending.request_id, StateAnswer(code))
        if pending.state is None:
            self.states.pop(pending.key, None)
        else:
            self.states[pending.key] = pending.state
        self._respond(pending.request_id, StateAnswer(state=pending.state))

    def process_tick(self, _e: Tick) -> None:
        pass

    # -- load / unload --------------------------------------------------------------------------
    def process_begin_load(self, e: BeginLoad) -> None:
        self.loading.add(e.partition)

    def process_load_partition(self, e: LoadPartition) -> None:
        self.loading.discard(e.partition)
        self.owned.add(e.partition)
        for raw_key, raw_value in e.records:
            kind, key = decode_key(raw_key)
            if raw_value is None:
                self.states.pop(key, None)
                continue
            value = decode_value(kind, raw_value)
            if kind == SNAPSHOT:
                self.states[key] = value
            elif key in self.states:
                self.states[key] = apply_update(self.states[key], value)

    def process_unload_partition(self, e: UnloadPartition) -> None:
        self.loading.discard(e.partition)
        self.owned.discard(e.partition)
        for key in [k for k in self.states if self.partition_for(k) == e.partition]:
            del self.states[key]
        for token in [t for t, p in self._pending.items()
                      if self.partition_for(p.key) == e.partition]:
            self._respond(self._pending.pop(token).request_id, StateAnswer(E.NOT_COORDINATOR))

    def _respond(self, request_id: int, result) -> None:
        self._out.append(Respond(request_id, result))
