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
  come from the group coordinator's copy of /config/groups, over the broker's defaults,
  for membership; a share fetch reads them from ZooKeeper itself when it begins (a client
  that sets share.record.lock.duration.ms or share.isolation.level and then fetches must
  not race the copy: one read of one znode) and, when it acquires, looks at the copy only
  for a turn to read_committed made while it waited.
- ShareFetch: the session first (share/sessions.py), then the piggy-backed
  acknowledgements, then the fetch: each session partition this broker leads has a
  share-partition (created at share.auto.offset.reset), is read from its
  `next_fetch_offset()` through the broker's ordinary fetch (long polls park as any fetch
  does, up to max_wait), and the batches read are acquired for the member (up to
  max_records for the whole request; the lock duration and isolation level as the group's
  configs say at that moment). With share.isolation.level read_committed it reads up to
  the last stable offset and the batches of aborted transactions are archived, never
  delivered (replicas/visible.py), as transaction markers always are; a fetch that began
  read_uncommitted and completes after the group turned read_committed acquires nothing.
  A partition whose window is full (or a renew-only request) is not read; when nothing can be read the answer waits max_wait (or until the
  next lock expires). Batches are answered whole (the client keeps the acquired offsets).
- Lock expiry and member session expiry run on the broker's timers, armed at the earliest
  deadline (share/partition.py, share/group.py).
- Closing a share session (epoch -1) releases what the member held on that session's
  partitions, their last delivery given back. Forgetting a partition, or a new epoch-0
  session of the same member (after a session error), releases nothing (Kafka's
  ShareSession.update): the client may have handed those records to its application and
  may still acknowledge them; released, they would reach another member as first
  deliveries again. Their locks expiring gives them back otherwise.
- Leadership: a share-partition lives on the partition's leader, for one topic id and one
  leader epoch (a re-created topic, or a partition led again later, starts over); while
  the broker does not know the topic's id yet (a topic just made), or its state cannot be
  read yet (the share coordinator away or loading), a fetch reads nothing from it and
  answers it without an error (Kafka keeps such a fetch waiting while its persister
  retries; Java's client takes those codes in a ShareFetch as fatal).
- Persistence (share/coordinator.py through actors/share_state_host.py, on this broker or
  the one leading the key's `__share_group_state` partition, BrokerActor.share_state): a
  share-partition's first use reads its state (else starts at share.auto.offset.reset and
  writes that); every acknowledgement is written before it is answered (not written: rolled
  back, answered COORDINATOR_NOT_AVAILABLE or NOT_LEADER_OR_FOLLOWER); releases and lock
  expiries are written, their failures only logged (the next write carries them).
- Threads: fetches, acknowledgements and lock expiries run on ONE worker thread, in the
  order they arrived (a client's acknowledgements before the fetch that closes its session),
  never on the network loop: a state write waits for followers the loop serves. Membership
  (heartbeats, describe, list) runs where it is called, under a lock of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from concurrent.futures import ThreadPoolExecutor

from actors.completion import Completion
from actors.config_store import read_entity
from actors.share_offsets import ShareOffsets
from actors.share_state_host import STATE_TOPIC
from coordinator.group_config import (SHARE_AUTO_OFFSET_RESET, SHARE_HEARTBEAT,
                                      SHARE_ISOLATION, SHARE_LOCK, SHARE_SESSION, duration_ms,
                                      effective)
from protocol.api import Deferred, FetchAsk, ShareFetchPartition, ShareFetchResult
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, LeaderNotAvailable
from replicas.records import iter_headers
from replicas.visible import visible_headers
from share.group import ShareGroupConfig, ShareGroups, ShareHeartbeatAnswer
from share import coordinator as sc
from share.partition import EARLIEST, AckType, ShareConfig, SharePartition, Span
from share.records import ShareKey, ShareState
from share.sessions import ShareSessionCache

log = logging.getLogger(__name__)
CALL_TIMEOUT_S = 60.0
# one thread: requests are handled in the order they arrived (a client's acknowledgements
# before the epoch -1 fetch that closes its session, as Kafka handles a connection's
# requests one after the other)
POOL_THREADS = 1
# what a state read or write's error means to the partition (SharePartition.fetchPersisterError)
PERSIST_ERRORS = {E.NOT_COORDINATOR: E.COORDINATOR_NOT_AVAILABLE,
                  E.COORDINATOR_LOAD_IN_PROGRESS: E.COORDINATOR_NOT_AVAILABLE,
                  E.COORDINATOR_NOT_AVAILABLE: E.COORDINATOR_NOT_AVAILABLE,
                  E.FENCED_LEADER_EPOCH: E.NOT_LEADER_OR_FOLLOWER,
                  E.FENCED_STATE_EPOCH: E.NOT_LEADER_OR_FOLLOWER}


# a share-partition that cannot start YET (its topic's id not here, its state's coordinator
# away or loading): Kafka keeps the fetch waiting while the persister retries; clients treat
# these codes in a ShareFetch partition as fatal (Java's ShareFetchCollector throws)
STARTING = frozenset({E.LEADER_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE})


def clock_ms() -> int:
    return int(time.monotonic() * 1000)


class _Wait(Completion):
    __slots__ = ()


class _Later(Completion):
    """A value (or an exception) computed on the share host's pool."""
    __slots__ = ("value", "error")

    def __init__(self):
        super().__init__()
        self.value = self.error = None

    def put(self, value=None, error=None) -> None:
        def store():
            self.value, self.error = value, error
        self.settle(store)

    def result(self):
        self.wait(CALL_TIMEOUT_S)
        if self.error is not None:
            raise self.error
        return self.value


class ShareHost:
    def __init__(self, broker, config):
        self.broker, self.config = broker, config
        self._lock = threading.RLock()          # sessions and share-partitions: pool threads
        self._members = threading.Lock()        # share groups' membership: any thread
        self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="share")
        self.groups = ShareGroups(ShareGroupConfig(config.group_share_session_timeout_ms,
                                                   config.group_share_heartbeat_interval_ms,
                                                   config.group_share_max_size))
        self.sessions = ShareSessionCache()
        self.partitions: dict[tuple[str, tuple], SharePartition] = {}
        # the (topic id, leader epoch) each began in: a topic re-created, or led again after a
        # while, starts over
        self._began: dict[tuple[str, tuple], tuple] = {}
        self._timer = self._timer_at = None                 # lock expiry
        self._group_timer = self._group_timer_at = None     # member session expiry
        self.offsets = ShareOffsets(self)

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
        with self._members:
            self.groups.drop(lambda g: self.broker.groups.status(g)[0] is None)
            answer = self.groups.heartbeat(request, topics, clock_ms(), taken, config)
        self._arm_groups()
        if answer.error == E.NONE:
            self.broker.share_states.ensure_topic()     # its share-partitions' states go there
        return answer

    def describe(self, group_ids) -> list:
        out = []
        with self._members:
            for g in group_ids:
                status, _taken = self.broker.groups.status(g)
                d = self.groups.describe(g)
                out.append(d if status is None else type(d)(g, status))
        return out

    def listed(self) -> list[tuple[str, str]]:
        """(group id, state) of the share groups this broker coordinates."""
        with self._members:
            return [(g, group.state) for g, group in sorted(self.groups.groups.items())
                    if self.broker.groups.status(g)[0] is None]

    def delete(self, group_id: str) -> int:
        with self._members:
            if group_id not in self.groups.groups:
                return E.GROUP_ID_NOT_FOUND
            code = self.groups.delete(group_id)
        if code == E.NONE:
            self._pool.submit(self._forget_group, group_id)
            self.offsets.forget_group(group_id)
        return code

    def _forget_group(self, group_id: str) -> None:
        with self._lock:
            for key in [k for k in self.partitions if k[0] == group_id]:
                del self.partitions[key]

    def has_members(self, group_id: str) -> bool:
        with self._members:
            group = self.groups.groups.get(group_id)
            return bool(group is not None and group.members)

    def is_share_group(self, group_id: str) -> bool:
        with self._members:
            return group_id in self.groups.groups

    # -- ShareFetch / ShareAcknowledge ---------------------------------------------------------
    def acknowledge(self, group_id: str, member_id: str, epoch: int, acks: dict) -> Deferred:
        """A Deferred of (error, {tp: (error, leader)}, the group's lock duration)."""
        return self.in_pool(self._acknowledge_now, group_id, member_id, epoch, acks)

    def fetch(self, group_id, member_id, epoch, asked: dict, forgotten, max_wait_ms,
              min_bytes, max_bytes, max_records, renew_only=False) -> Deferred:
        """`asked`: {tp: acknowledgement batches [(first, last, types)]}; a Deferred of
        ShareFetchResult."""
        return self.in_pool(self._fetch_now, group_id, member_id, epoch, asked, forgotten,
                             max_wait_ms, min_bytes, max_bytes, max_records, renew_only)

    def in_pool(self, fn, *args, pool=None) -> Deferred:
        """fn(*args) on the share worker thread (or `pool`): it may wait on state reads and
        writes, never on the network loop, which serves the followers those writes wait
        for; a Deferred fn returns is followed, its value computed on the pool too."""
        pool = pool or self._pool
        later = _Later()

        def follow(inner: Deferred) -> None:
            try:
                later.put(inner.result())
            except Exception as exc:
                later.put(error=exc)

        def run() -> None:
            try:
                got = fn(*args)
            except Exception as exc:
                later.put(error=exc)
                return
            if not isinstance(got, Deferred):
                later.put(got)
            elif not got.when_ready(lambda: pool.submit(follow, got)):
                follow(got)
        pool.submit(run)
        return Deferred(later.result, later.when_ready)

    def _acknowledge_now(self, group_id: str, member_id: str, epoch: int, acks: dict) -> tuple:
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

    def _fetch_now(self, group_id, member_id, epoch, asked: dict, forgotten, max_wait_ms,
                   min_bytes, max_bytes, max_records, renew_only) -> Deferred:
        config = self._fresh_group_config(group_id)
        lock_ms = int(config[SHARE_LOCK])
        committed = config[SHARE_ISOLATION] == "read_committed"
        with self._lock:
            has_acks = any(asked.values())
            decision = self.sessions.fetch(group_id, member_id, epoch, list(asked), forgotten,
                                           has_acks)
            if decision.error:
                return Deferred.done(ShareFetchResult(decision.error))
            # A forgotten partition's records stay the member's own until acknowledged or
            # their locks expire (Kafka's ShareSession.update forgets, releases nothing): the
            # client may have handed them to its application already.
            answers = {}
            for tp, batches in asked.items():
                if batches:
                    code, leader = self._acknowledge(group_id, member_id, tp, batches)
                    answers[tp] = ShareFetchPartition(ack_error=code, leader=leader)
            if decision.closing:
                self._close(group_id, member_id)
                return Deferred.done(ShareFetchResult(E.NONE, answers, lock_ms))
            session_tps = sorted(decision.session.partitions)
            asks, errors = self._asks(group_id, session_tps, max_bytes, renew_only, committed)
        self._arm()
        for tp, (code, leader) in errors.items():
            answers.setdefault(tp, ShareFetchPartition(leader=leader)).error = code
        if decision.full:
            for tp in session_tps:
                answers.setdefault(tp, ShareFetchPartition())
        if not asks:
            return self._wait(max_wait_ms if not renew_only else 0).then(
                lambda _: ShareFetchResult(E.NONE, answers, lock_ms))
        fetched = self.broker.kafka_api.fetch(-1, max_wait_ms, min_bytes, max_bytes,
                                              int(committed), asks)
        if not isinstance(fetched, Deferred):
            fetched = Deferred.done(fetched)
        acked = frozenset(tp for tp, batches in asked.items() if batches)
        return fetched.then(lambda outcomes: self._acquire(
            group_id, member_id, outcomes, answers, max_records, lock_ms, decision.full, acked,
            committed))

    def reset_offsets(self, group_id: str, targets: dict) -> Deferred:
        """AlterShareGroupOffsets / DeleteShareGroupOffsets on the partitions this broker
        leads: {tp: new SPSO, or None to delete the state}; a Deferred of {tp: error}."""
        return self.in_pool(self._reset_now, group_id, targets)

    def _reset_now(self, group_id: str, targets: dict) -> dict:
        out = {}
        with self._lock:
            for tp, offset in targets.items():
                tp = tuple(tp)
                try:
                    if offset is None:
                        out[tp] = self._delete_state(group_id, tp)
                        continue
                    p = self._partition(group_id, tp)
                    before = p.checkpoint()
                    p.reset_to(offset)
                    out[tp] = persist_code(self._persist(group_id, tp, p))
                    if out[tp]:
                        p.rollback(before)
                except KafkaError as exc:
                    out[tp] = exc.code
        return out

    def _delete_state(self, group_id: str, tp) -> int:
        with self.broker.lock:
            info = self.broker.rm.partition_info(tp)
            topic_id = self.broker.rm.metadata.topic_id(tp[0])
        if info["role"] != "leader":
            return E.NOT_LEADER_OR_FOLLOWER
        if topic_id is None:       # a topic just made: its id has not reached this broker
            return E.LEADER_NOT_AVAILABLE
        self.partitions.pop((group_id, tp), None)
        self._began.pop((group_id, tp), None)
        key = ShareKey(group_id, topic_id, tp[1])
        return persist_code(self._state_call(key, lambda rid: sc.DeleteState(rid, key)).error)

    # -- helpers -------------------------------------------------------------------------------
    def _partition(self, group_id: str, tp) -> SharePartition:
        """The share-partition of a partition this broker leads (KafkaError otherwise)."""
        tp = tuple(tp)
        with self.broker.lock:
            info = self.broker.rm.partition_info(tp)
            if info["role"] != "leader":
                raise _not_leader(tp)
            began = (self.broker.rm.metadata.topic_id(tp[0]), info["leader_epoch"])
        if began[0] is None:       # a topic just made: its id has not reached this broker
            raise LeaderNotAvailable(f"{tp[0]}-{tp[1]}: the topic's id is not known yet")
        key = (group_id, tp)
        p = self.partitions.get(key)
        if p is not None and self._began.get(key) != began:
            log.info("share-partition %s %s: held for %s, now %s: read again", group_id, tp,
                     self._began.get(key), began)
            p = None                    # what it held belongs to another topic or term
        if p is None:
            p = self._load(group_id, tp, began, info)
        else:
            p.maybe_move_start(info["log_start_offset"])
        return p

    def _load(self, group_id: str, tp, began: tuple, info: dict) -> SharePartition:
        """A share-partition this broker starts leading: its state read from the share
        coordinator (the new leader epoch recorded there fences the old leader's writes),
        else started at share.auto.offset.reset and written at once, so a later leader
        starts where this one did."""
        key = (group_id, tp)
        share_key = ShareKey(group_id, began[0], tp[1])
        answer = self._state_call(share_key, lambda rid: sc.ReadState(rid, share_key,
                                                                      began[1]))
        if answer.error:
            raise _persist_error(answer.error)
        config = self._share_config(group_id)
        if answer.state is not None:
            p = SharePartition.restore(answer.state.start_offset, answer.state.batches, config,
                                       answer.state.state_epoch)
            p.maybe_move_start(info["log_start_offset"])
        else:
            reset = self._fresh_group_config(group_id)[SHARE_AUTO_OFFSET_RESET]
            p = SharePartition(self._start_offset(tp, reset, info), config)
        self._began[key] = began
        self.partitions[key] = p
        if answer.state is None:
            error = self._persist(group_id, tp, p)
            if error:
                del self.partitions[key]
                raise _persist_error(error)
        return p

    def _state_call(self, key: ShareKey, make_event):
        """A share coordinator request, to this broker's own or the one leading the key's
        `__share_group_state` partition (StateAnswer; COORDINATOR_NOT_AVAILABLE while the
        topic has no leader for it)."""
        host = self.broker.share_states
        if not host.ensure_topic():
            return sc.StateAnswer(E.COORDINATOR_NOT_AVAILABLE)
        return self.state_call_at(self.state_leader(host.partition_for(key)), make_event)

    def state_leader(self, partition: int) -> int:
        """The broker leading that `__share_group_state` partition (-1: none known)."""
        with self.broker.lock:
            part = self.broker.rm.metadata.partitions.get((STATE_TOPIC, partition))
            return part.leader if part is not None else -1

    def state_call_at(self, leader: int, make_event):
        """A share coordinator request to the broker `leader` (this one's own host, or
        BrokerActor.share_state there): its StateAnswer; COORDINATOR_NOT_AVAILABLE without a
        leader or when that broker is away or slow (ask again later)."""
        try:
            if leader == self.broker.id:
                return self.broker.share_states.call(make_event).result()
            if leader < 0:
                return sc.StateAnswer(E.COORDINATOR_NOT_AVAILABLE)
            return self.broker.host.call_broker(leader, "share_state", make_event(0))
        except Exception as exc:
            log.info("share state request via broker %s: %s", leader, exc)
            return sc.StateAnswer(E.COORDINATOR_NOT_AVAILABLE)

    def _persist(self, group_id: str, tp, p: SharePartition) -> int:
        """Write the share-partition's state (WriteShareGroupState); the error, 0 once
        written."""
        topic_id, leader_epoch = self._began[(group_id, tuple(tp))]
        key = ShareKey(group_id, topic_id, tp[1])
        state = ShareState(p.state_epoch, leader_epoch, p.start_offset,
                           tuple(p.state_batches()))
        return self._state_call(key, lambda rid: sc.WriteState(rid, key, state)).error

    def _start_offset(self, tp, reset: str, info: dict) -> int:
        """share.auto.offset.reset: the log start (earliest), the high watermark (latest),
        or the first offset at or after now minus a duration (by_duration:, else latest)."""
        if reset == EARLIEST:
            return info["log_start_offset"]
        back_ms = duration_ms(reset)
        if back_ms is not None:
            with self.broker.lock:
                found = self.broker.rm.list_offset(tp, int(time.time() * 1000) - back_ms)
            if not found.error and found.offset >= 0:
                return found.offset
        return info["high_watermark"]

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
            began = (self.broker.rm.metadata.topic_id(tp[0]), info["leader_epoch"])
        if info["role"] != "leader":
            return E.NOT_LEADER_OR_FOLLOWER, self._leader_of(tp)
        p = self.partitions.get((group_id, tuple(tp)))
        if p is None or self._began.get((group_id, tuple(tp))) != began:
            return E.UNKNOWN_TOPIC_OR_PARTITION, (-1, -1)
        before = p.checkpoint()
        code = p.acknowledge(member_id, batches, clock_ms())
        renew_only = all(t == AckType.RENEW for _f, _l, types in batches for t in types)
        if code == E.NONE and not renew_only:
            code = persist_code(self._persist(group_id, tuple(tp), p))
            if code:                       # not written: as if it had not happened
                p.rollback(before)
        return code, (-1, -1)

    def _asks(self, group_id, tps, max_bytes, renew_only, committed):
        asks, errors = [], {}
        for tp in tps:
            try:
                p = self._partition(group_id, tp)
            except KafkaError as exc:
                if exc.code in STARTING:        # read nothing yet, as Kafka's purgatory does
                    log.debug("share-partition %s %s not started: %s", group_id, tp, exc)
                    continue
                errors[tuple(tp)] = (exc.code, self._leader_of(tp))
                continue
            with self.broker.lock:
                info = self.broker.rm.partition_info(tuple(tp))
            end = info["high_watermark"]
            if committed and info["last_stable_offset"] is not None:
                end = info["last_stable_offset"]
            if not renew_only and p.can_acquire(end):
                asks.append(FetchAsk(tuple(tp), p.next_fetch_offset(), max_bytes=max_bytes))
        return asks, errors

    def _acquire(self, group_id, member_id, outcomes, answers, max_records, lock_ms, full,
                 acked, committed):
        left = max(max_records, 1)
        now = clock_ms()
        # turned read_committed while this fetch waited (the watched copy has it by now; the
        # fresh read at the fetch's start gave `committed` and `lock_ms`): read again
        if not committed and self._group_config(group_id)[SHARE_ISOLATION] == "read_committed":
            left = 0
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
                seen = {h.base_offset for h in visible_headers(
                    o.records, o.aborted_transactions or () if committed else None, headers)}
                spans = [Span(h.base_offset, h.base_offset + h.last_offset_delta,
                              h.base_offset not in seen) for h in headers]
                if p.config.lock_duration_ms != lock_ms:
                    p.config = replace(p.config, lock_duration_ms=lock_ms)
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
            if p is not None and p.release_member(member_id, undelivered=True):
                self._persist(group_id, tuple(tp), p)

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
        """The lock-expiry timer at the earliest lock deadline (pool threads, under _lock)."""
        with self._lock:
            times = [t for p in self.partitions.values()
                     if (t := p.next_deadline_ms()) is not None]
            when = min(times) if times else None
            if when is None or (self._timer_at is not None and self._timer_at <= when):
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = when
            self._timer = self.broker.timers.add(max(when - clock_ms(), 0) / 1000,
                                                 lambda: self._pool.submit(self._expire_locks))

    def _expire_locks(self) -> None:
        now = clock_ms()
        with self._lock:
            self._timer = self._timer_at = None
            for (group_id, tp), p in list(self.partitions.items()):
                if p.expire_locks(now):
                    self._persist(group_id, tp, p)      # a failed write is retried by the next
        self._arm()

    def _arm_groups(self) -> None:
        with self._members:
            when = self.groups.next_deadline_ms()
            if when is None or (self._group_timer_at is not None
                                and self._group_timer_at <= when):
                return
            if self._group_timer is not None:
                self._group_timer.cancel()
            self._group_timer_at = when
            self._group_timer = self.broker.timers.add(max(when - clock_ms(), 0) / 1000,
                                                       self._expire_members)

    def _expire_members(self) -> None:
        with self._members:
            self._group_timer = self._group_timer_at = None
            if self.groups.groups:
                self.groups.expire(clock_ms(), self.broker.kafka_api.topic_partition_counts())
        self._arm_groups()

    def stop(self) -> None:
        self.offsets.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)


def persist_code(error: int) -> int:
    """What a state read or write's error means to the partition's client (0 for none)."""
    return PERSIST_ERRORS.get(error, E.UNKNOWN_SERVER_ERROR) if error else E.NONE


def _persist_error(code: int) -> KafkaError:
    from replicas.errors import error_for_code
    return error_for_code(persist_code(code),
                          f"share-partition state: {E(code).name}")


def _not_leader(tp) -> KafkaError:
    from replicas.errors import NotLeaderOrFollower
    return NotLeaderOrFollower(f"{tp[0]}-{tp[1]} is not led by this broker")
