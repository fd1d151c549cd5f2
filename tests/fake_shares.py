"""The share-group part of tests/fake_broker_api.py's FakeBrokerApi (a mixin: it uses the
fake's topics, clock, recorded calls and partition errors).

Rules:
- `share_heartbeat` / `share_describe` drive a REAL pure share.group.ShareGroups on the fake
  clock (a classic or consumer group of `coordinator` holds its id).
- `share_fetch` / `share_acknowledge` drive a REAL share.sessions.ShareSessionCache and one
  share.partition.SharePartition per (group, partition), started at `share_reset`
  ("earliest"), reading the fake's logs at once (no long poll).
- `share_offsets` answers DescribeShareGroupOffsets / Alter / Delete with share/offsets.py's
  own planning over those share-partitions as the stored states (leader epoch 0; an alter
  or delete of a group with members is NON_EMPTY_GROUP).
"""

from __future__ import annotations

from protocol.api import Deferred, FetchAsk, ShareFetchPartition, ShareFetchResult
from replicas.errors import ErrorCode as E
from replicas.records import iter_headers
from share import offsets as so
from share.group import ShareGroupConfig, ShareGroups
from share.partition import ShareConfig, SharePartition, Span
from share.records import ShareState
from share.sessions import ShareSessionCache

NONE = 0


class FakeShares:
    def __init__(self):
        self.share_groups = ShareGroups(ShareGroupConfig())
        self.share_sessions = ShareSessionCache()
        self.share_partitions: dict = {}           # (group, tp) -> SharePartition
        self.share_reset = "earliest"              # share.auto.offset.reset of every group

    def share_heartbeat(self, request, topics):
        self._record("share_heartbeat", request=request, topics=topics)
        return self.share_groups.heartbeat(request, topics, self.clock_ms,
                                           self.coordinator.group(request.group_id) is not None)

    def share_describe(self, group_ids) -> list:
        group_ids = list(group_ids)
        self._record("share_describe", group_ids=group_ids)
        return [self.share_groups.describe(g) for g in group_ids]

    def _share_partition(self, group_id, tp):
        key = (group_id, tuple(tp))
        if key not in self.share_partitions:
            part = self.partition(tp)
            self.share_partitions[key] = SharePartition.initial(
                self.share_reset, part.log_start, part.high_watermark, ShareConfig())
        return self.share_partitions[key]

    def share_fetch(self, group_id, member_id, epoch, asked, forgotten, max_wait_ms, min_bytes,
                    max_bytes, max_records, renew_only) -> Deferred:
        asked, forgotten = dict(asked), list(forgotten)
        self._record("share_fetch", group_id=group_id, member_id=member_id, epoch=epoch,
                     asked=asked, forgotten=forgotten, max_wait_ms=max_wait_ms,
                     min_bytes=min_bytes, max_bytes=max_bytes, max_records=max_records,
                     renew_only=renew_only)
        decision = self.share_sessions.fetch(group_id, member_id, epoch, list(asked), forgotten,
                                             any(asked.values()))
        if decision.error:
            return Deferred.done(ShareFetchResult(decision.error))
        out = {}
        for tp, batches in asked.items():
            if batches:
                code = self._partition_error(tp) or self._share_partition(
                    group_id, tp).acknowledge(member_id, batches, self.clock_ms)
                out[tp] = ShareFetchPartition(ack_error=code)
        if decision.closing:
            self.share_sessions.close(group_id, member_id)
            return Deferred.done(ShareFetchResult(NONE, out, 30_000))
        left = max_records
        for tp in sorted(decision.session.partitions):
            a = out.setdefault(tp, ShareFetchPartition())
            error = self._partition_error(tp)
            if error:
                part = self.topics.get(tp[0], {}).get(tp[1])
                a.error = error
                a.leader = (part.leader, part.leader_epoch) if part else (-1, -1)
                continue
            p = self._share_partition(group_id, tp)
            if renew_only or left <= 0:
                continue
            o = self._fetch_one(FetchAsk(tp, p.next_fetch_offset(), max_bytes=max_bytes), -1)
            spans = [Span(h.base_offset, h.base_offset + h.last_offset_delta)
                     for h in iter_headers(o.records)]
            got = p.acquire(member_id, spans, left, self.clock_ms)
            if got:
                left -= sum(g.last - g.first + 1 for g in got)
                a.records = o.records
                a.acquired = tuple((g.first, g.last, g.delivery_count) for g in got)
        return Deferred.done(ShareFetchResult(NONE, out, 30_000))

    def share_acknowledge(self, group_id, member_id, epoch, acks):
        acks = dict(acks)
        self._record("share_acknowledge", group_id=group_id, member_id=member_id, epoch=epoch,
                     acks=acks)
        decision = self.share_sessions.acknowledge(group_id, member_id, epoch)
        if decision.error:
            return Deferred.done((decision.error, {}, 30_000))
        out = {}
        for tp, batches in acks.items():
            error = self._partition_error(tp)
            out[tp] = (error, (-1, -1)) if error else (self._share_partition(
                group_id, tp).acknowledge(member_id, batches, self.clock_ms), (-1, -1))
        if decision.closing:
            self.share_sessions.close(group_id, member_id)
        return Deferred.done((NONE, out, 30_000))

    def share_offsets(self, request):
        self._record("share_offsets", request=request)
        g = request.group_id
        group = self.share_groups.groups.get(g)
        if not isinstance(request, so.DescribeOffsets) and group is not None and group.members:
            return Deferred.done(so.OffsetsAnswer(E.NON_EMPTY_GROUP, "The group is not empty."))
        topics = self.topic_partition_counts()
        stored = {tp: ShareState(0, 0, p.start_offset, tuple(p.state_batches()))
                  for (group_id, tp), p in self.share_partitions.items() if group_id == g}
        if isinstance(request, so.DescribeOffsets):
            hwms = {tp: self.partition(tp).high_watermark for tp in stored}
            return Deferred.done(so.OffsetsAnswer(topics=so.describe(request.topics, topics,
                                                                     stored, hwms)))
        if isinstance(request, so.AlterOffsets):
            targets, errors = so.plan_alter(request.offsets, topics)
            for tp, offset in targets.items():
                self._share_partition(g, tp).reset_to(offset)
            return Deferred.done(so.OffsetsAnswer(topics=tuple(
                so.TopicOffsets(t, topics[t][0] if t in topics else None, tuple(
                    so.PartitionOffset(p, error=errors.get((t, p), E.NONE),
                                       message=so.MESSAGES.get(errors.get((t, p))))
                    for p in parts)) for t, parts in request.offsets.items())))
        targets, refused = so.plan_delete(list(request.topics), topics, {t for t, _p in stored})
        for tp in targets:
            self.share_partitions.pop((g, tp), None)
        refused_by = {o.topic: o for o in refused}
        return Deferred.done(so.OffsetsAnswer(outcomes=tuple(
            refused_by.get(t) or so.TopicOutcome(t, topics[t][0]) for t in request.topics)))
