"""ShareHost: the broker's shell around the pure share room (share/): share groups' membership
on their group coordinator, and share sessions and share-partitions on partition leaders.

Rules:
- Membership: a ShareGroupHeartbeat is answered by the broker coordinating the group id
  (the leader of its `__consumer_offsets` partition, as for every group): NOT_COORDINATOR
  or COORDINATOR_LOAD_IN_PROGRESS from the group coordinator's own status, and a group id
  held by a classic or consumer group is refused (share/group.py). Groups whose partition
  this broker no longer leads are forgotten; members of a group whose coordinator moved
  join again (UNKNOWN_MEMBER_ID makes clients rejoin), as its membership is not persisted.
- A group's own configs (share.session.timeout.ms, share.heartbeat.interval.ms,
  share.record.lock.duration.ms, share.auto.offset.reset: coordinator/group_config.py)
  come from the group coordinator's copy of /config/groups, over the broker's defaults;
  a share-partition's first start offset reads share.auto.offset.reset from ZooKeeper
  itself (a client that sets it and then subscribes must not race the copy).
- ShareFetch: the session first (share/sessions.py), then the piggy-backed
  acknowledgements, then the fetch: each session partition this broker leads has a
  share-partition (created at share.auto.offset.reset), is read from its
  `next_fetch_offset()` through the broker's ordinary fetch (long polls park as any fetch
  does, up to max_wait), and the batches read are acquired for the member (up to
  max_records for the whole request). A partition whose window is full (or a renew-only
  request) is not read; when nothing can be read the answer waits max_wait (or until the
  next lock expires). Batches are answered whole (the client keeps the acquired offsets).
- Lock expiry and member session expiry run on the broker's timers, armed at the earliest
  deadline (share/partition.py, share/group.py).
- Closing a share session (epoch -1, or a new epoch-0 session of the same member) releases
  what the member held on that session's partitions; forgetting a partition releases its
  records there.
- Leadership: a share-partition lives on the partition's leader; on losing leadership the
  broker drops it (what was acquired there is acquired again from the new leader once the
  locks the clients hold are gone). Share-partition state is not yet persisted
  (`__share_group_state`): a new leader starts from share.auto.offset.reset.
"""

from __future__ import annotations

import logging
import threading
import time

from actors.completion import Completion
from actors.config_store import read_entity
from coordinator.group_config import (SHARE_AUTO_OFFSET_RESET, SHARE_HEARTBEAT, SHARE_LOCK,
                                      SHARE_SESSION, effective)
from protocol.api import Deferred, FetchAsk, ShareFetchPartition, ShareFetchResult
from replicas.control import CONTROL_FLAG
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError
from replicas.records import iter_headers
from share.group import ShareGroupConfig, ShareGroups, ShareHeartbeatAnswer
from share.partition import ShareConfig, SharePartition, Span
from share.sessions import ShareSessionCache

log = logging.getLogger(__name__)
NO_DEADLINE_S = 3600.0


def clock_ms() -> int:
    return int(time.monotonic() * 1000)


class _Wait(Completion):
    __slots__ = ()


class ShareHost:
    def __init__(self, broker, config):
        self.broker, self.config = broker, config
        self._lock = threading.RLock()
        self.groups = ShareGroups(ShareGroupConfig(config.group_share_session_timeout_ms,
                                                   config.group_share_heartbeat_interval_ms,
                                                   config.group_share_max_size))
        self.sessions = ShareSessionCache()
        self.partitions: dict[tuple[str, tuple], SharePartition] = {}
        self._epochs: dict[tuple[str, tuple], int] = {}     # the leader epoch each began in
        self._timer = None
        self._timer_at = None

    # -- configs -------------------------------------------------------------------------------
    def _group_config(self, group_id: str) -> dict[str, str]:
        overrides = self.broker.groups.coordinator.group_configs.get(group_id, {})
        return effective(overrides, self.config.bounds)

    def _fresh_group_config(self, group_id: str) -> dict[str, str]:
        """Read from ZooKeeper itself: a config altered just before the group's first fetch
        has reached the store but maybe not yet this broker's copy."""
        try:
            return effective(read_entity(self.broker.store, f"groups/{group_id}"),
                             self.config.bounds)
        except Exception:                       # ZooKeeper away: this broker's copy
            return self._group_config(group_id)

    def _share_config(self, group_id: str) -> ShareConfig:
        return ShareConfig(int(self._group_config(group_id)[SHARE_LOCK]),
                           self.config.group_share_delivery_count_limit,
                           self.config.group_share_partition_max_record_locks)

    # -- membership ----------------------------------------------------------------------------
    def heartbeat(self, request, topics) -> ShareHeartbeatAnswer:
        status, taken = self.broker.groups.status(request.group_id)
        if request.group_id and status is not None:
            return ShareHeartbeatAnswer(status)
        values = self._group_config(request.group_id)
        config = ShareGroupConfig(int(values[SHARE_SESSION]), int(values[SHARE_HEARTBEAT]),
                                  self.config.group_share_max_size)
        with self._lock:
            self.groups.drop(lambda g: self.broker.groups.status(g)[0] is None)
            answer = self.groups.heartbeat(request, topics, clock_ms(), taken, config)
        self._arm()
        return answer

    def describe(self, group_ids) -> list:
        out = []
        with self._lock:
            for g in group_ids:
                status, _taken = self.broker.groups.status(g)
                d = self.groups.describe(g)
                out.append(d if status is None else type(d)(g, status))
        return out

    def listed(self) -> list[tuple[str, str]]:
        """(group id, state) of the share groups this broker coordinates."""
        with self._lock:
            return [(g, group.state) for g, group in sorted(self.groups.groups.items())
                    if self.broker.groups.status(g)[0] is None]

    def delete(self, group_id: str) -> int:
        with self._lock:
            if group_id not in self.groups.groups:
                return E.GROUP_ID_NOT_FOUND
            code = self.groups.delete(group_id)
            if code == E.NONE:
                for key in [k for k in self.partitions if k[0] == group_id]:
                    del self.partitions[key]
            return code

    def is_share_group(self, group_id: str) -> bool:
        with self._lock:
            return group_id in self.groups.groups

    # -- ShareFetch / ShareAcknowledge ---------------------------------------------------------
    def acknowledge(self, group_id: str, member_id: str, epoch: int, acks: dict) -> tuple:
        """(error, {tp: (error, leader)}, the group's lock duration)."""
        lock_ms = int(self._group_config(group_id)[SHARE_LOCK])
        with self._lock:
            decision = self.sessions.acknowledge(group_id, member_id, epoch)
            if decision.error:
                return decision.error, {}, lock_ms
            out = {tp: self._acknowledge(group_id, member_id, tp, batches)
                   for tp, batches in acks.items()}
            if decision.closing:
                self._close(group_id, member_id)
        self._arm()
        return E.NONE, out, lock_ms

    def fetch(self, group_id, member_id, epoch, asked: dict, forgotten, max_wait_ms,
              min_bytes, max_bytes, max_records, renew_only=False) -> Deferred:
        """`asked`: {tp: acknowledgement batches [(first, last, types)]}."""
        lock_ms = int(self._group_config(group_id)[SHARE_LOCK])
        with self._lock:
            has_acks = any(asked.values())
            decision = self.sessions.fetch(group_id, member_id, epoch, list(asked), forgotten,
                                           has_acks)
            if decision.error:
                return Deferred.done(ShareFetchResult(decision.error))
            for tp in set(decision.replaced) | set(forgotten):
                p = self.partitions.get((group_id, tuple(tp)))
                if p is not None:
                    p.release_member(member_id, undelivered=True)
            answers = {}
            for tp, batches in asked.items():
                if batches:
                    code, leader = self._acknowledge(group_id, member_id, tp, batches)
                    answers[tp] = ShareFetchPartition(ack_error=code, leader=leader)
            if decision.closing:
                self._close(group_id, member_id)
                return Deferred.done(ShareFetchResult(E.NONE, answers, lock_ms))
            session_tps = sorted(decision.session.partitions)
            asks, errors = self._asks(group_id, session_tps, max_bytes, renew_only)
        self._arm()
        for tp, (code, leader) in errors.items():
            answers.setdefault(tp, ShareFetchPartition(leader=leader)).error = code
        if decision.full:
            for tp in session_tps:
                answers.setdefault(tp, ShareFetchPartition())
        if not asks:
            return self._wait(max_wait_ms if not renew_only else 0).then(
                lambda _: ShareFetchResult(E.NONE, answers, lock_ms))
        fetched = self.broker.kafka_api.fetch(-1, max_wait_ms, min_bytes, max_bytes, 0, asks)
        if not isinstance(fetched, Deferred):
            fetched = Deferred.done(fetched)
        acked = frozenset(tp for tp, batches in asked.items() if batches)
        return fetched.then(lambda outcomes: self._acquire(
            group_id, member_id, outcomes, answers, max_records, lock_ms, decision.full, acked))

    # -- helpers -------------------------------------------------------------------------------
    def _partition(self, group_id: str, tp) -> SharePartition:
        """The share-partition of a partition this broker leads (KafkaError otherwise)."""
        tp = tuple(tp)
        with self.broker.lock:
            info = self.broker.rm.partition_info(tp)
            if info["role"] != "leader":
                raise _not_leader(tp)
        key = (group_id, tp)
        p = self.partitions.get(key)
        if p is not None and self._epochs.get(key) != info["leader_epoch"]:
            p = None                    # led again after a while: what it held is stale
        if p is None:
            self._epochs[key] = info["leader_epoch"]
            reset = self._fresh_group_config(group_id)[SHARE_AUTO_OFFSET_RESET]
            p = self.partitions[key] = SharePartition.initial(
                reset, info["log_start_offset"], info["high_watermark"],
                self._share_config(group_id))
        else:
            p.maybe_move_start(info["log_start_offset"])
        return p

    def _leader_of(self, tp) -> tuple[int, int]:
        with self.broker.lock:
            part = self.broker.rm.metadata.partitions.get(tuple(tp))
            return (part.leader, part.leader_epoch) if part is not None else (-1, -1)

    def _acknowledge(self, group_id, member_id, tp, batches) -> tuple[int, tuple]:
        """Kafka's order: the batches' shape, leadership, then a share-partition this broker
        holds (UNKNOWN_TOPIC_OR_PARTITION when it holds none: nothing was acquired here)."""
        if SharePartition.check_batches(batches) is not None:
            return E.INVALID_REQUEST, (-1, -1)
        with self.broker.lock:
            try:
                info = self.broker.rm.partition_info(tuple(tp))
            except KafkaError as exc:
                return exc.code, self._leader_of(tp)
        if info["role"] != "leader":
            return E.NOT_LEADER_OR_FOLLOWER, self._leader_of(tp)
        p = self.partitions.get((group_id, tuple(tp)))
        if p is None or self._epochs.get((group_id, tuple(tp))) != info["leader_epoch"]:
            return E.UNKNOWN_TOPIC_OR_PARTITION, (-1, -1)
        return p.acknowledge(member_id, batches, clock_ms()), (-1, -1)

    def _asks(self, group_id, tps, max_bytes, renew_only):
        asks, errors = [], {}
        for tp in tps:
            try:
                p = self._partition(group_id, tp)
            except KafkaError as exc:
                errors[tuple(tp)] = (exc.code, self._leader_of(tp))
                continue
            with self.broker.lock:
                hw = self.broker.rm.partition_info(tuple(tp))["high_watermark"]
            if not renew_only and p.can_acquire(hw):
                asks.append(FetchAsk(tuple(tp), p.next_fetch_offset(), max_bytes=max_bytes))
        return asks, errors

    def _acquire(self, group_id, member_id, outcomes, answers, max_records, lock_ms, full,
                 acked):
        left = max(max_records, 1)
        now = clock_ms()
        with self._lock:
            for tp, o in outcomes.items():
                a = answers.setdefault(tp, ShareFetchPartition())
                if o.error:
                    a.error, a.leader = o.error, o.leader
                    continue
                p = self.partitions.get((group_id, tp))
                if p is None or left <= 0 or not o.records:
                    continue
                headers = list(iter_headers(o.records))
                spans = [Span(h.base_offset, h.base_offset + h.last_offset_delta,
                              bool(h.attributes & CONTROL_FLAG)) for h in headers]
                got = p.acquire(member_id, spans, left, now)
                if not got:
                    continue
                left -= sum(g.last - g.first + 1 for g in got)
                lo, hi = got[0].first, got[-1].last
                keep = [h for h in headers
                        if h.base_offset <= hi and h.base_offset + h.last_offset_delta >= lo]
                a.records = bytes(o.records[keep[0].position:keep[-1].position
                                            + keep[-1].size]) if keep else b""
                a.acquired = tuple((g.first, g.last, g.delivery_count) for g in got)
        self._arm()
        if not full:                # an incremental session answers what has news only
            answers = {tp: a for tp, a in answers.items()
                       if a.records or a.error or a.ack_error or tp in acked}
        return ShareFetchResult(E.NONE, answers, lock_ms)

    def _close(self, group_id, member_id) -> None:
        session = self.sessions.close(group_id, member_id)
        for tp in (session.partitions if session else ()):
            p = self.partitions.get((group_id, tuple(tp)))
            if p is not None:
                p.release_member(member_id, undelivered=True)

    def _wait(self, wait_ms: int) -> Deferred:
        """Nothing to read: answer after max_wait or the next lock expiry, whichever first."""
        if wait_ms <= 0:
            return Deferred.done(None)
        with self._lock:
            times = [t for p in self.partitions.values()
                     if (t := p.next_deadline_ms()) is not None]
        delay = min([wait_ms] + [max(t - clock_ms(), 0) for t in times]) / 1000
        done = _Wait()
        done.timer = self.broker.timers.add(delay, done.settle)
        return Deferred(lambda: done.wait(delay + 5), done.when_ready)

    # -- timers --------------------------------------------------------------------------------
    def _arm(self) -> None:
        with self._lock:
            times = [t for p in self.partitions.values()
                     if (t := p.next_deadline_ms()) is not None]
            group_deadline = self.groups.next_deadline_ms()
            if group_deadline is not None:
                times.append(group_deadline)
            when = min(times) if times else None
            if when is None or (self._timer_at is not None and self._timer_at <= when):
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = when
            self._timer = self.broker.timers.add(max(when - clock_ms(), 0) / 1000, self._tick)

    def _tick(self) -> None:
        now = clock_ms()
        with self._lock:
            self._timer = self._timer_at = None
            for p in self.partitions.values():
                p.expire_locks(now)
            if self.groups.groups:
                self.groups.expire(now, self.broker.kafka_api.topic_partition_counts())
        self._arm()


def _not_leader(tp) -> KafkaError:
    from replicas.errors import NotLeaderOrFollower
    return NotLeaderOrFollower(f"{tp[0]}-{tp[1]} is not led by this broker")
