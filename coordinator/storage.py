"""The group coordinator's storage side: offsets, admin APIs, loading and unloading.

Rules (GroupCoordinator.scala and GroupMetadataManager.scala, Kafka trunk 1eb7644):
- OffsetCommit: an unknown group with generation < 0 becomes an Empty "simple" group; with
  generation ≥ 0 → ILLEGAL_GENERATION. On a known group: Dead → COORDINATOR_NOT_AVAILABLE;
  generation < 0 on an Empty group → accepted; generation ≥ 0, a member id or an instance id
  → member checks then ILLEGAL_GENERATION; generation < 0 without member on a non-Empty group
  → UNKNOWN_MEMBER_ID. Then by state: Empty stores; Stable and PreparingRebalance re-arm the
  member's session timer (a commit counts as a heartbeat) and store; CompletingRebalance →
  REBALANCE_IN_PROGRESS.
- Storing: metadata longer than offset.metadata.max.bytes (Java String.length, as Kafka) →
  that partition OFFSET_METADATA_TOO_LARGE; the rest is appended (one OffsetCommitValue v3 per
  partition, commit timestamp = now) and staged as pending. The cache changes only when
  AppendDone reports success; a failure is mapped (error_codes.commit_append_error) and the
  staged values dropped. The answer is sent after AppendDone.
- OffsetFetch answers from the cache in every state; unknown offsets are -1 with NONE; with
  require_stable a partition with a commit in flight → UNSTABLE_OFFSET_COMMIT.
- ListGroups: every cached group (filtered by state name, any case); the error is
  COORDINATOR_LOAD_IN_PROGRESS while any partition loads. DescribeGroups: unknown → "Dead"
  with NONE; member metadata and assignments only when Stable.
- DeleteGroups: unknown or Dead → GROUP_ID_NOT_FOUND; Empty → Dead, removed with its offsets
  (tombstones, plus a group tombstone when generation > 0), NONE at once; else NON_EMPTY_GROUP.
  As in Kafka the tombstones' append is not waited for (Kafka writes them with acks=0): a lost
  tombstone is rewritten by the next cleanup after a reload.
- Every offsets.retention.check.interval.ms, expired offsets are removed (group.py states
  which), an Empty group left without offsets becomes Dead and leaves the cache, tombstones
  are appended the same way.
- LoadPartition replays the partition's records: last value per key wins, a tombstone deletes
  the key; groups with a record come back Stable (members) or Empty; groups with only offsets
  come back Empty without protocol type; every member's session timer is armed; a group over
  group.max.size rebalances at once. Undecodable records are skipped (Kafka aborts the whole
  load, losing every group of the partition for one bad record).
- UnloadPartition: every group of the partition becomes Dead and leaves the cache; every
  parked JoinGroup/SyncGroup and every commit waiting for its append is answered
  NOT_COORDINATOR; AppendDone for those appends is then ignored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from coordinator import error_codes as E
from coordinator import messages as m
from coordinator import records as rec
from coordinator.group import CommittedOffset, GroupMetadata, OffsetAndMetadata
from coordinator.states import GroupState

log = logging.getLogger(__name__)
G = GroupState


@dataclass(slots=True)
class _Pending:
    """An append in flight; `done` runs at its AppendDone, `lost` at UnloadPartition."""
    partition: int = -1

    def done(self, coordinator, token: int, error: int) -> None:
        pass  # fire and forget

    def lost(self, coordinator) -> None:
        pass


@dataclass(slots=True)
class _CommitAppend(_Pending):
    group: GroupMetadata = None
    request_id: int = 0
    order: tuple = ()                       # every requested (topic, partition), request order
    too_large: frozenset = frozenset()
    offsets: dict = field(default_factory=dict)  # the appended ones

    def done(self, coordinator, token: int, error: int) -> None:
        coordinator._on_commit_done(self, token, error)

    def lost(self, coordinator) -> None:
        coordinator._answer_commit(self, E.NOT_COORDINATOR)


class StorageMixin:
    # -- OffsetCommit -----------------------------------------------------------------------
    def process_offset_commit(self, e: m.OffsetCommit) -> None:
        error = self._validate_group_status(e.group_id, empty_id_ok=True)
        group = None
        if error is None:
            group = self._groups.get(e.group_id)
            if group is None:
                if e.generation_id < 0:  # a consumer outside group management
                    group = self._groups[e.group_id] = GroupMetadata(e.group_id, G.EMPTY, self._now())
                else:
                    error = E.ILLEGAL_GENERATION
        if error is None:
            error = self._validate_offset_commit(group, e)
        if error is None:
            if group.is_(G.COMPLETING_REBALANCE):
                error = E.REBALANCE_IN_PROGRESS
            elif group.state in (G.STABLE, G.PREPARING_REBALANCE):
                self._schedule_heartbeat(group.get(e.member_id))
        if error is not None:
            tps = dict.fromkeys((o.topic, o.partition) for o in e.offsets)
            return self._respond(e.request_id, m.OffsetCommitResult(tuple(
                m.CommitPartitionResult(t, p, error) for t, p in tps)))
        self._store_offsets(group, e)

    def _validate_offset_commit(self, group: GroupMetadata, e: m.OffsetCommit) -> int | None:
        if group.is_(G.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if e.generation_id < 0 and group.is_(G.EMPTY):
            return None
        if e.generation_id >= 0 or e.member_id != m.UNKNOWN_MEMBER or e.group_instance_id is not None:
            error = self._validate_current_member(group, e.member_id, e.group_instance_id)
            if error is None and e.generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
            return error
        return None if group.is_(G.EMPTY) else E.UNKNOWN_MEMBER_ID

    def _store_offsets(self, group: GroupMetadata, e: m.OffsetCommit) -> None:
        now, limit = self._now(), self.config.offset_metadata_max_bytes
        values: dict = {}
        for o in e.offsets:  # a partition named twice: the last one counts (Kafka's Map)
            values[(o.topic, o.partition)] = OffsetAndMetadata(
                o.offset, o.leader_epoch, "" if o.metadata is None else o.metadata, now)
        too_large = frozenset(tp for tp, v in values.items() if rec.java_length(v.metadata) > limit)
        offsets = {tp: v for tp, v in values.items() if tp not in too_large}
        pending = _CommitAppend(group=group, request_id=e.request_id, order=tuple(values),
                                too_large=too_large, offsets=offsets)
        if not offsets:
            return self._answer_commit(pending, E.NONE)
        records = [rec.offset_commit_record(group.group_id, t, p, rec.OffsetCommitValue(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)) for (t, p), v in offsets.items()]
        token = self._append(group.group_id, records, pending)
        group.prepare_offset_commit(offsets, token)

    def _on_commit_done(self, p: _CommitAppend, token: int, error: int) -> None:
        group = p.group
        if not group.is_(G.DEAD):  # unloaded or deleted meanwhile: the cache is gone
            for tp, value in p.offsets.items():
                if error == E.NONE:
                    group.on_offset_commit_append(tp, value, token)
                else:
                    group.fail_pending_offset_write(tp, token)
        self._answer_commit(p, E.commit_append_error(error))

    def _answer_commit(self, p: _CommitAppend, error: int) -> None:
        self._respond(p.request_id, m.OffsetCommitResult(tuple(
            m.CommitPartitionResult(t, part, E.OFFSET_METADATA_TOO_LARGE if (t, part) in p.too_large
                                    else error) for t, part in p.order)))

    # -- OffsetFetch ------------------------------------------------------------------------
    def process_offset_fetch(self, e: m.OffsetFetch) -> None:
        error = self._validate_group_status(e.group_id, empty_id_ok=True)
        if error is not None:
            return self._respond(e.request_id, m.OffsetFetchResult(error))
        group = self._groups.get(e.group_id)
        if group is None or group.is_(G.DEAD):
            parts = tuple(m.FetchedOffset(t, p, -1) for t, p in (e.partitions or ()))
            return self._respond(e.request_id, m.OffsetFetchResult(E.NONE, parts))
        tps = list(group.offsets) if e.partitions is None else list(e.partitions)
        parts = []
        for t, p in tps:
            value = group.offset((t, p))
            if e.require_stable and (t, p) in group.pending_offset_commits:
                parts.append(m.FetchedOffset(t, p, -1, error=E.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                parts.append(m.FetchedOffset(t, p, -1))
            else:
                parts.append(m.FetchedOffset(t, p, value.offset, value.leader_epoch, value.metadata))
        self._respond(e.request_id, m.OffsetFetchResult(E.NONE, tuple(parts)))

    # -- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------------
    def process_list_groups(self, e: m.ListGroups) -> None:
        wanted = {s.lower() for s in e.states}
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self._loading else E.NONE
        groups = tuple(m.ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                       for g in self._groups.values() if not wanted or g.state.value.lower() in wanted)
        self._respond(e.request_id, m.ListGroupsResult(error, groups))

    def process_describe_groups(self, e: m.DescribeGroups) -> None:
        out = []
        for gid in e.group_ids:
            error = self._validate_group_status(gid, empty_id_ok=True)
            group = None if error is not None else self._groups.get(gid)
            if error is not None:
                out.append(m.DescribedGroup(error, gid, ""))
            elif group is None:
                out.append(m.DescribedGroup(E.NONE, gid, G.DEAD.value))
            else:
                out.append(m.DescribedGroup(
                    E.NONE, gid, group.state.value, group.protocol_type or "",
                    (group.protocol_name or "") if group.is_(G.STABLE) else "", group.described_members()))
        self._respond(e.request_id, m.DescribeGroupsResult(tuple(out)))

    def process_delete_groups(self, e: m.DeleteGroups) -> None:
        results, eligible = {}, []
        for gid in dict.fromkeys(e.group_ids):
            error = self._validate_group_status(gid, empty_id_ok=True)
            group = None if error is not None else self._groups.get(gid)
            if error is not None:
                results[gid] = error
            elif group is None or group.is_(G.DEAD):
                results[gid] = E.GROUP_ID_NOT_FOUND
            elif group.is_(G.EMPTY):
                group.transition_to(G.DEAD, self._now())
                eligible.append(group)
                results[gid] = E.NONE
            else:
                results[gid] = E.NON_EMPTY_GROUP
        self._cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
        self._respond(e.request_id, m.DeleteGroupsResult(tuple(
            m.DeletedGroup(gid, error) for gid, error in results.items())))

    def _expire_offsets(self, now: int) -> None:
        retention = self.config.offsets_retention_ms
        self._cleanup_group_metadata(list(self._groups.values()),
                                     lambda g: g.remove_expired_offsets(now, retention))

    def _cleanup_group_metadata(self, groups, selector) -> int:
        removed_total = 0
        for group in groups:
            removed = selector(group)
            if group.is_(G.EMPTY) and not group.has_offsets():
                group.transition_to(G.DEAD, self._now())
            gid = group.group_id
            records = [rec.offset_commit_record(gid, t, p, None) for t, p in removed]
            if group.is_(G.DEAD) and self._groups.get(gid) is group:
                del self._groups[gid]
                if group.generation_id > 0:  # generation 0: offsets only, no group record
                    records.append(rec.group_metadata_record(gid, None))
            if records:
                self._append(gid, records, _Pending())
            removed_total += len(removed)
        return removed_total

    # -- appends ----------------------------------------------------------------------------
    def process_append_done(self, e: m.AppendDone) -> None:
        pending = self._pending.pop(e.token, None)
        if pending is not None:  # unknown tokens: appends of an unloaded partition
            pending.done(self, e.token, e.error)

    # -- loading and unloading --------------------------------------------------------------
    def process_begin_load(self, e: m.BeginLoad) -> None:
        if e.partition not in self._owned:
            self._loading.add(e.partition)

    def process_load_partition(self, e: m.LoadPartition) -> None:
        if e.partition in self._owned:
            return  # already loaded (Kafka: "Already loading"); the cache is the truth
        offsets: dict = {}
        groups: dict = {}
        for record in e.records:
            try:
                key = rec.decode_key(record.key)
                if isinstance(key, rec.OffsetCommitKey):
                    k = (key.group, key.topic, key.partition)
                    if record.value is None:
                        offsets.pop(k, None)
                    else:
                        offsets[k] = rec.decode_offset_commit_value(record.value)
                elif isinstance(key, rec.GroupMetadataKey):
                    groups[key.group] = None if record.value is None else \
                        rec.decode_group_metadata_value(record.value)
                else:
                    log.warning("skipping a record with unknown key version %s", key.version)
            except rec.RecordFormatError as exc:
                log.error("skipping an undecodable record of __consumer_offsets-%s: %s", e.partition, exc)
        self._loading.discard(e.partition)
        self._owned.add(e.partition)
        now = self._now()
        by_group: dict = {}
        for (gid, topic, part), v in offsets.items():
            by_group.setdefault(gid, {})[(topic, part)] = CommittedOffset(OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp), -1)
        loaded = [GroupMetadata.from_record(gid, value, now) for gid, value in groups.items()
                  if value is not None]
        loaded += [GroupMetadata(gid, G.EMPTY, now) for gid in by_group
                   if groups.get(gid) is None]
        for group in loaded:
            group.offsets.update(by_group.get(group.group_id, {}))
            if self._groups.setdefault(group.group_id, group) is group:
                self._on_group_loaded(group)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group)  # give the members a chance to commit, then shrink
        for member in group.members.values():
            self._schedule_heartbeat(member)

    def process_unload_partition(self, e: m.UnloadPartition) -> None:
        self._owned.discard(e.partition)
        self._loading.discard(e.partition)
        now = self._now()
        for gid, group in list(self._groups.items()):
            if self.partition_for(gid) != e.partition:
                continue
            group.transition_to(G.DEAD, now)
            for member in group.members.values():
                self._invoke_join(member, m.JoinGroupResult(E.NOT_COORDINATOR, member.member_id))
                self._invoke_sync(member, m.SyncGroupResult(E.NOT_COORDINATOR))
                member.heartbeat_deadline_ms = None
            group.join_timer = group.sync_timer = None
            group.pending_sync_members.clear()
            group.pending_members.clear()
            del self._groups[gid]
        for token, pending in list(self._pending.items()):
            if pending.partition == e.partition:
                del self._pending[token]
                pending.lost(self)
