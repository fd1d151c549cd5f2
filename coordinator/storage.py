"""The group coordinator's storage (Kafka's GroupMetadataManager): the cache of groups, the
`__consumer_offsets` partitions this coordinator owns, offsets, and every append.

GroupCoordinator (coordinator/coordinator.py) holds one and validates every request before
it asks anything of it; the storage never answers a request on its own except an offset
commit, whose answer waits for the commit's append.

Rules (GroupMetadataManager.scala, Kafka trunk 1eb7644):
- The cache holds the groups of the partitions in `owned`; `loading` holds the partitions
  being read (BeginLoad until LoadPartition). A group's partition is `partition_for` (Kafka's
  abs(String.hashCode) mod offsets.topic.num.partitions).
- Every write is an `Append(partition, records, token)` effect. The AppendDone of that
  token runs the writer's `on_done(error)` once; unloading the partition first runs its
  `on_lost()` instead, and a later AppendDone for it (an unknown token) is ignored. Writes
  nobody waits for (the empty group record, tombstones) pass neither.
- Storing offsets: metadata longer than offset.metadata.max.bytes (Java String.length, as
  Kafka) → that partition OFFSET_METADATA_TOO_LARGE; the rest is appended (one
  OffsetCommitValue v3 per partition, commit timestamp = now) and staged as pending. The
  cache changes only when AppendDone reports success; a failure is mapped
  (error_codes.commit_append_error) and the staged values dropped. The answer is sent after
  AppendDone (at once when nothing was left to append); an unload answers NOT_COORDINATOR.
- Storing transactional offsets (storeOffsets with a producer id): the same checks, then the
  records go out as ONE transactional Append of (producer id, epoch) and are staged as the
  producer's pending offsets of the group (prepareTxnOffsetCommit; coordinator/txn_offsets.py).
  AppendDone success → still pending, now with the append's position, answer NONE; failure →
  the staged values dropped (failPendingTxnOffsetCommit), the mapped error. `producer_groups`
  is Kafka's openGroupsForProducer: the groups each producer has pending offsets in.
- Transaction completion (handleTxnCompletion): CompleteTxn ends the producer's pending
  offsets in every group of the named partitions (commit: each becomes committed when later
  in the log than the committed one; abort: dropped). A partition still loading gets it
  after its load (Kafka runs both on its one scheduler thread); one not owned ignores it (the
  new owner reads the marker from the log).
- Fetching offsets answers from the cache in every state; unknown offsets are -1 with NONE;
  with require_stable a partition with a commit in flight or a pending transactional offset
  → UNSTABLE_OFFSET_COMMIT (per partition; every=None lists only committed partitions).
- Cleanup (DeleteGroups, offset expiry): the selected offsets are removed and tombstoned; an
  Empty group left without offsets becomes Dead and leaves the cache, with a group tombstone
  when its generation is > 0 (a consumer group's: one per record it has). As in Kafka the tombstones' append is not waited for (Kafka
  writes them with acks=0): a lost tombstone is rewritten by the next cleanup after a reload.
- Loading replays the partition's records in log order (doLoadGroupsAndOffsets): last value
  per key wins, a tombstone deletes the key; a transactional record is pending for its
  producer until a marker of that producer: COMMIT makes each pending offset committed when
  later in the log than the committed one, ABORT drops them; pending ones left at the end
  stay pending (their marker comes as CompleteTxn). Positions are the records' log offsets
  (their index in the replay when none is given). Groups with a record come back Stable
  (members) or Empty; groups with only offsets or pending offsets come back Empty without
  protocol type; each group new to the cache goes to `on_group_loaded`. Undecodable records
  are skipped (Kafka aborts the whole load, losing every group of the partition for one bad
  record). KIP-848 consumer groups (key versions 3-8) come back from their records
  (coordinator/consumer_records.py), members with fresh session deadlines. A partition already owned is not loaded again (the cache is the truth).
- Unloading: every group of the partition goes to `on_group_unloaded`, then leaves the
  cache with its pending transactional offsets (the log has them for the next load); then
  the partition's appends in flight are lost (above).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from coordinator import messages as m
from coordinator import records as rec
from coordinator.config import GroupCoordinatorConfig
from coordinator.consumer_records import (decode_consumer_key, group_records,
                                          is_consumer_key_version, restore)
from coordinator.error_codes import commit_append_error, txn_commit_answer
from coordinator.group import (CommittedOffset, GroupMetadata, OffsetAndMetadata,
                               loaded_position)
from coordinator.states import GroupState
from replicas.errors import ErrorCode as E

log = logging.getLogger(__name__)
G = GroupState


@dataclass(slots=True)
class _InFlight:
    partition: int
    on_done: Callable[[int], None] | None = None
    on_lost: Callable[[], None] | None = None


@dataclass(slots=True)
class _CommitAppend:
    group: GroupMetadata
    request_id: int
    order: tuple                            # every requested (topic, partition), request order
    too_large: frozenset
    offsets: dict = field(default_factory=dict)  # the appended ones
    producer_id: int = -1                   # >= 0: a TxnOffsetCommit's
    version: int = -1                       # the TxnOffsetCommit's version


class GroupMetadataManager:
    def __init__(self, config: GroupCoordinatorConfig, emit: Callable[[object], None]):
        self.config = config
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.producer_groups: dict[int, set[str]] = {}
        self._emit = emit
        self._in_flight: dict[int, _InFlight] = {}
        self._next_token = 1
        self._completions_after_load: dict[int, list[tuple[int, bool]]] = {}

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    # -- appends ----------------------------------------------------------------------------
    def append(self, group_id: str, records, on_done: Callable[[int], None] | None = None,
               on_lost: Callable[[], None] | None = None, producer_id: int = -1,
               producer_epoch: int = -1) -> int:
        """Append `records` to the group's partition (one transactional batch of the producer
        when `producer_id` >= 0); the token of its AppendDone."""
        token, self._next_token = self._next_token, self._next_token + 1
        partition = self.partition_for(group_id)
        self._in_flight[token] = _InFlight(partition, on_done, on_lost)
        self._emit(m.Append(partition, tuple(records), token, producer_id, producer_epoch,
                            producer_id >= 0))
        return token

    def store_group(self, group: GroupMetadata, assignment: dict,
                    on_done: Callable[[int], None] | None = None) -> int:
        """Append the group's record (its members with `assignment`)."""
        value = group.to_record_value(assignment)
        return self.append(group.group_id, [rec.group_metadata_record(group.group_id, value)],
                           on_done)

    def append_done(self, token: int, error: int) -> None:
        pending = self._in_flight.pop(token, None)
        if pending is not None and pending.on_done is not None:
            pending.on_done(error)

    # -- offsets ----------------------------------------------------------------------------
    def store_offsets(self, group: GroupMetadata, e: m.OffsetCommit | m.TxnOffsetCommit,
                      now: int) -> None:
        """Append the commit's offsets (a TxnOffsetCommit's as its producer's transactional
        batch); its answer is sent when the append is done."""
        limit = self.config.offset_metadata_max_bytes
        values: dict = {}
        for o in e.offsets:  # a partition named twice: the last one counts (Kafka's Map)
            values[(o.topic, o.partition)] = OffsetAndMetadata(
                o.offset, o.leader_epoch, "" if o.metadata is None else o.metadata, now)
        too_large = frozenset(tp for tp, v in values.items()
                              if rec.java_length(v.metadata) > limit)
        offsets = {tp: v for tp, v in values.items() if tp not in too_large}
        commit = _CommitAppend(group, e.request_id, tuple(values), too_large, offsets)
        txn = isinstance(e, m.TxnOffsetCommit)
        if txn:
            commit.producer_id, commit.version = e.producer_id, e.version
        if not offsets:
            return self._answer_commit(commit, E.NONE)
        records = [rec.offset_commit_record(group.group_id, t, p, rec.OffsetCommitValue(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp))
            for (t, p), v in offsets.items()]
        # the lambda runs at AppendDone, after `token` is bound
        token = self.append(group.group_id, records,
                            lambda error: self._on_commit_done(commit, token, error),
                            lambda: self._answer_commit(commit, E.NOT_COORDINATOR),
                            e.producer_id if txn else -1, e.producer_epoch if txn else -1)
        if txn:
            self.producer_groups.setdefault(e.producer_id, set()).add(group.group_id)
            group.prepare_txn_offset_commit(e.producer_id, offsets, token)
        else:
            group.prepare_offset_commit(offsets, token)

    def _on_commit_done(self, commit: _CommitAppend, token: int, error: int) -> None:
        group, pid = commit.group, commit.producer_id
        if group.is_(G.DEAD):
            pass  # unloaded or deleted meanwhile: the cache is gone
        elif pid >= 0 and error == E.NONE:
            group.on_txn_offset_commit_append(pid, commit.offsets, token)
        elif pid >= 0:
            group.fail_pending_txn_offset_commit(pid, commit.offsets, token)
            if not group.has_pending_offset_commits_from(pid):
                self._forget_producer_group(pid, group.group_id)
        else:
            for tp, value in commit.offsets.items():
                if error == E.NONE:
                    group.on_offset_commit_append(tp, value, token)
                else:
                    group.fail_pending_offset_write(tp, token)
        self._answer_commit(commit, commit_append_error(error))

    def _answer_commit(self, commit: _CommitAppend, error: int) -> None:
        if commit.producer_id >= 0:
            error = txn_commit_answer(error, commit.version)
        self._emit(m.Respond(commit.request_id, m.OffsetCommitResult(tuple(
            m.CommitPartitionResult(t, p, E.OFFSET_METADATA_TOO_LARGE
                                    if (t, p) in commit.too_large else error)
            for t, p in commit.order))))

    # -- transaction completion -------------------------------------------------------------
    def complete_txn(self, producer_id: int, partitions, committed: bool) -> None:
        """The producer's marker is in these offsets partitions (handleTxnCompletion)."""
        for partition in partitions:
            if partition in self.loading:
                self._completions_after_load.setdefault(partition, []).append(
                    (producer_id, committed))
        wanted = set(partitions) & self.owned
        for gid in sorted(self.producer_groups.get(producer_id, ())):
            if self.partition_for(gid) not in wanted:
                continue
            group = self.groups.get(gid)
            if group is not None and not group.is_(G.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, committed)
            self._forget_producer_group(producer_id, gid)

    def _forget_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.producer_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.producer_groups[producer_id]

    def get_offsets(self, group_id: str, partitions, require_stable: bool
                    ) -> tuple[m.FetchedOffset, ...]:
        """The committed offsets of `partitions` (None: every partition the group has)."""
        group = self.groups.get(group_id)
        if group is None or group.is_(G.DEAD):
            return tuple(m.FetchedOffset(t, p, -1) for t, p in (partitions or ()))
        tps = list(group.offsets) if partitions is None else list(partitions)
        out = []
        for t, p in tps:
            value = group.offset((t, p))
            if require_stable and group.has_pending_offset_commits((t, p)):
                out.append(m.FetchedOffset(t, p, -1, error=E.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                out.append(m.FetchedOffset(t, p, -1))
            else:
                out.append(m.FetchedOffset(t, p, value.offset, value.leader_epoch,
                                           value.metadata))
        return tuple(out)

    def expire_offsets(self, now: int) -> None:
        retention = self.config.offsets_retention_ms
        self.cleanup_group_metadata(list(self.groups.values()),
                                    lambda g: g.remove_expired_offsets(now, retention), now)

    def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                               selector: Callable[[GroupMetadata], dict], now: int,
                               delete_empty: bool = True) -> int:
        """Remove the offsets `selector` picks from each group, and (`delete_empty`) each
        group left Empty without offsets; the number of offsets removed."""
        removed_total = 0
        for group in groups:
            removed = selector(group)
            if delete_empty and group.is_empty and not group.has_offsets():
                group.transition_to(G.DEAD, now)
            gid = group.group_id
            records = [rec.offset_commit_record(gid, t, p, None) for t, p in removed]
            if group.is_(G.DEAD) and self.groups.get(gid) is group:
                del self.groups[gid]
                if group.generation_id > 0:  # generation 0: offsets only, no group record
                    records.append(rec.group_metadata_record(gid, None))
                records += [rec.OffsetsRecord(k, None) for k in group.consumer_records]
                group.consumer, group.consumer_records = None, {}
            if records:
                self.append(gid, records)
            removed_total += len(removed)
        return removed_total

    # -- loading and unloading --------------------------------------------------------------
    def begin_load(self, partition: int) -> None:
        if partition not in self.owned:
            self.loading.add(partition)

    def load_partition(self, partition: int, records, now: int,
                       on_group_loaded: Callable[[GroupMetadata], None]) -> None:
        if partition in self.owned:
            return  # already loaded (Kafka: "Already loading"); the cache is the truth
        offsets, pending, groups, consumers = self._replay(partition, records)
        self.loading.discard(partition)
        self.owned.add(partition)
        by_group: dict = {}
        for (gid, topic, part), committed in offsets.items():
            by_group.setdefault(gid, {})[(topic, part)] = committed
        pending_by_group: dict = {}
        for pid, mine in pending.items():
            for (gid, topic, part), committed in mine.items():
                pending_by_group.setdefault(gid, []).append((pid, (topic, part), committed))
        loaded = [GroupMetadata.from_record(gid, value, now) for gid, value in groups.items()
                  if value is not None]
        restored = {gid: self._restore_consumer(partition, gid, mine, now)
                    for gid, mine in consumers.items()}
        restored = {gid: cg for gid, cg in restored.items() if cg is not None}
        loaded += [GroupMetadata(gid, G.EMPTY, now)
                   for gid in dict.fromkeys(list(by_group) + list(pending_by_group)
                                            + list(restored))
                   if groups.get(gid) is None]
        for group in loaded:
            gid = group.group_id
            if gid in restored:
                group.consumer = restored[gid]
                group.consumer_records = group_records(restored[gid])
            group.offsets.update(by_group.get(gid, {}))
            for pid, tp, committed in pending_by_group.get(gid, ()):
                group.txn_offsets.load(pid, tp, committed.position, committed.value)
            if self.groups.setdefault(gid, group) is group:
                for pid in group.txn_offsets.producers():
                    self.producer_groups.setdefault(pid, set()).add(gid)
                on_group_loaded(group)
        for pid, committed in self._completions_after_load.pop(partition, ()):
            self.complete_txn(pid, (partition,), committed)

    def _restore_consumer(self, partition: int, group_id: str, records, now: int):
        try:
            return restore(group_id, records, self.config.consumer, now)
        except rec.RecordFormatError as exc:
            log.error("skipping consumer group %s of __consumer_offsets-%s, undecodable: %s",
                      group_id, partition, exc)
            return None

    @staticmethod
    def _replay(partition: int, records) -> tuple[dict, dict, dict, dict]:
        """The log's committed offsets {(group, topic, partition): CommittedOffset}, pending
        transactional ones {producer id: {(group, topic, partition): CommittedOffset}},
        group values {group: value or None} and KIP-848 group records {group: [record]}, in
        Kafka's doLoadGroupsAndOffsets order."""
        offsets: dict = {}
        pending: dict = {}
        groups: dict = {}
        consumers: dict = {}
        for index, record in enumerate(records):
            position = loaded_position(record.offset if record.offset >= 0 else index)
            if isinstance(record, rec.TxnMarkerRecord):
                for k, committed in pending.pop(record.producer_id, {}).items():
                    current = offsets.get(k)
                    if record.committed and (current is None
                                             or current.position < committed.position):
                        offsets[k] = committed
                continue
            try:
                key = rec.decode_key(record.key)
                if isinstance(key, rec.OffsetCommitKey):
                    k = (key.group, key.topic, key.partition)
                    target = pending.setdefault(record.producer_id, {}) \
                        if record.transactional else offsets
                    if record.value is None:
                        target.pop(k, None)
                    else:
                        v = rec.decode_offset_commit_value(record.value)
                        target[k] = CommittedOffset(OffsetAndMetadata(
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                            v.expire_timestamp), position)
                elif isinstance(key, rec.GroupMetadataKey):
                    groups[key.group] = None if record.value is None else \
                        rec.decode_group_metadata_value(record.value)
                elif is_consumer_key_version(key.version):
                    group_id = decode_consumer_key(record.key).group
                    consumers.setdefault(group_id, []).append(record)
                else:
                    log.warning("skipping a record with unknown key version %s", key.version)
            except rec.RecordFormatError as exc:
                log.error("skipping an undecodable record of __consumer_offsets-%s: %s",
                          partition, exc)
        return offsets, {pid: mine for pid, mine in pending.items() if mine}, groups, consumers

    def unload_partition(self, partition: int,
                         on_group_unloaded: Callable[[GroupMetadata], None]) -> None:
        self.owned.discard(partition)
        self.loading.discard(partition)
        self._completions_after_load.pop(partition, None)
        gone = set()
        for gid, group in list(self.groups.items()):
            if self.partition_for(gid) != partition:
                continue
            on_group_unloaded(group)
            del self.groups[gid]
            gone.add(gid)
        for pid in list(self.producer_groups):  # Kafka's removeGroupFromAllProducers
            for gid in gone & self.producer_groups[pid]:
                self._forget_producer_group(pid, gid)
        for token, pending in list(self._in_flight.items()):
            if pending.partition == partition:
                del self._in_flight[token]
                if pending.on_lost is not None:
                    pending.on_lost()
