"""GroupMember: a native consumer's membership in a Kafka consumer group (Kafka's
ConsumerCoordinator / AbstractCoordinator), talking to the group's coordinator broker over
Ray calls (BrokerActor.find_coordinator, BrokerActor.group). The coordinator is the same one
Kafka clients reach over the wire, so native and librdkafka members share a group.

Rules:
- The coordinator is the leader of the group's `__consumer_offsets` partition (any broker
  answers find_coordinator); NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a dead broker
  mean: find it again (after RETRY_BACKOFF_S).
- Joining: JoinGroup (v5 semantics: a first join without a member id gets MEMBER_ID_REQUIRED
  and rejoins with the id it was given; KIP-394), with one protocol per assignor in
  preference order, each carrying this member's subscription (and, for cooperative-sticky,
  its owned partitions and generation). The leader decodes every member's subscription,
  runs the chosen assignor over the partition counts it reads from metadata, and sends the
  assignments in its SyncGroup; followers send none. Errors that mean "rejoin"
  (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID is fatal)
  restart the join, resetting the member id when the coordinator forgot it.
- Eager protocols (range, roundrobin) revoke every owned partition before joining;
  cooperative-sticky revokes only what the new assignment takes away, and rejoins at once
  when it revoked something (the partitions withheld this round come in the next).
- A heartbeat thread sends Heartbeat every heartbeat_interval_ms while the member is in a
  generation; REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION ask the
  consumer's next poll to rejoin (the consumer thread does the join, as Kafka's does).
- Commits carry the generation and member id (a simple group's carry -1 and ""); their
  errors are typed: CommitFailed for a stale generation or an unknown member, RebalanceInProgress
  while the group rebalances.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref

import ray

from coordinator import messages as m
from rayka.client.assignors import (Assignment, Subscription, decode_assignment,
                                    decode_subscription, encode_assignment, encode_subscription,
                                    get_assignor)
from replicas.errors import IllegalGeneration, KafkaError, error_for_code

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS = 16, 15, 14
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27
MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 79, 82
REDISCOVER = {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS}
REJOIN = {ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS}


def _heartbeats(member_ref, stop: threading.Event, interval_s: float) -> None:
    """The heartbeat thread: ends on leave(), when the member is collected, or when this
    process's Ray is shut down (a Ray call then would start a NEW local Ray instance)."""
    while not stop.wait(interval_s):
        member = member_ref()
        if member is None or not ray.is_initialized():
            return
        member.heartbeat_once()
        del member


class CommitFailed(IllegalGeneration):
    """Kafka's CommitFailedException: the group rebalanced; this member's generation is gone
    (its partitions may belong to another member now: nothing was committed)."""


class CoordinatorLink:
    """Requests to a group's coordinator broker, following it when it moves."""

    def __init__(self, cluster, group_id: str):
        self.cluster, self.group_id = cluster, group_id
        self._coordinator = None

    def call(self, event, deadline: float):
        """One coordinator request (a coordinator.messages event): its result."""
        while True:
            actor = self._coordinator or self._find(deadline)
            try:
                result = ray.get(actor.group.remote(event),
                                 timeout=max(1.0, deadline - time.monotonic()))
            except ray.exceptions.GetTimeoutError:
                raise error_for_code(7, f"group {self.group_id}: no answer to "
                                        f"{type(event).__name__}") from None
            except ray.exceptions.RayError:          # the coordinator's broker died or restarts
                result = None
            error = getattr(result, "error", None)
            if result is not None and error not in REDISCOVER:
                return result
            self._coordinator = None
            if time.monotonic() > deadline:
                raise error_for_code(error or COORDINATOR_NOT_AVAILABLE,
                                     f"group {self.group_id}: no coordinator")
            time.sleep(RETRY_BACKOFF_S)          # back off before asking where it moved

    def _find(self, deadline: float):
        while True:
            for broker in self.cluster.broker_actors():
                try:
                    error, node = ray.get(broker.find_coordinator.remote(self.group_id), timeout=10)
                except ray.exceptions.RayError:
                    continue
                if not error and (actor := self.cluster.broker_actor(node)) is not None:
                    self._coordinator = actor
                    return actor
            if time.monotonic() > deadline:
                raise error_for_code(COORDINATOR_NOT_AVAILABLE,
                                     f"group {self.group_id}: no coordinator found")
            time.sleep(RETRY_BACKOFF_S)          # the offsets topic is being created


class GroupMember:
    def __init__(self, cluster, group_id: str, *, assignors=("range", "cooperative-sticky"),
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3_000,
                 rebalance_timeout_ms: int = 300_000, group_instance_id: str | None = None,
                 client_id: str = "rayka", join_timeout_s: float = 600.0):
        self.cluster, self.group_id = cluster, group_id
        self.assignors = [get_assignor(name) for name in assignors]
        self.session_timeout_ms, self.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.group_instance_id, self.client_id = group_instance_id, client_id
        self.join_timeout_s = join_timeout_s
        self.member_id, self.generation, self.protocol = "", -1, None
        self.topics: list[str] = []
        self.owned: set[tuple] = set()
        self.needs_join = True
        self.link = CoordinatorLink(cluster, group_id)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # The thread holds the member weakly: a consumer dropped without close() is collected
        # and its heartbeats stop (the session timeout then removes it from the group).
        self._heartbeats = threading.Thread(target=_heartbeats, daemon=True,
                                            args=(weakref.ref(self), self._stop,
                                                  self.heartbeat_interval_s),
                                            name=f"heartbeat-{group_id}")
        self._heartbeats.start()

    def _call(self, event, deadline: float):
        return self.link.call(event, deadline)

    # -- joining ------------------------------------------------------------------------------------
    def join(self, topics, partitions_per_topic) -> tuple[set, set]:
        """Run join + sync until this member has an assignment: (revoked, assigned) relative
        to what it owned. `partitions_per_topic(topics)` → {topic: count} (the leader's view)."""
        self.topics = sorted(set(topics))
        deadline = time.monotonic() + self.join_timeout_s
        revoked_total: set = set()
        if self.protocol is not None and not self._cooperative():
            revoked_total, self.owned = set(self.owned), set()    # eager: give everything back
        while True:
            result = self._call(m.JoinGroup(
                0, self.group_id, self.member_id, self.session_timeout_ms,
                self.rebalance_timeout_ms, "consumer", self._protocols(), self.group_instance_id,
                self.client_id, "", 5), deadline)
            if result.error == MEMBER_ID_REQUIRED:
                self.member_id = result.member_id
                continue
            if result.error == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if result.error in REJOIN:
                continue
            if result.error:
                raise error_for_code(result.error, f"join group {self.group_id}")
            with self._lock:
                self.member_id, self.generation = result.member_id, result.generation_id
                self.protocol = result.protocol_name
            assignments = ()
            if result.leader == result.member_id:
                assignments = self._assign(result.members, partitions_per_topic)
            sync = self._call(m.SyncGroup(0, self.group_id, result.generation_id, self.member_id,
                                          self.group_instance_id, "consumer",
                                          result.protocol_name, assignments), deadline)
            if sync.error in REJOIN:
                if sync.error == UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                continue
            if sync.error:
                raise error_for_code(sync.error, f"sync group {self.group_id}")
            assigned = set(decode_assignment(sync.assignment).partitions) if sync.assignment else set()
            assigned = {tuple(tp) for tp in assigned}
            revoked = self.owned - assigned
            added = assigned - self.owned
            revoked_total |= revoked
            self.owned = assigned
            if revoked and self._cooperative():
                continue            # cooperative: revoke first, the next round hands them over
            with self._lock:
                self.needs_join = False
            return revoked_total, added

    def _cooperative(self) -> bool:
        return self.protocol == "cooperative-sticky"

    def _protocols(self) -> tuple:
        out = []
        for a in self.assignors:
            sticky = a.name == "cooperative-sticky"
            sub = Subscription(tuple(self.topics),
                               owned_partitions=tuple(sorted(self.owned)) if sticky else (),
                               generation=self.generation if sticky and self.generation >= 0 else None,
                               group_instance_id=self.group_instance_id)
            out.append((a.name, encode_subscription(sub)))
        return tuple(out)

    def _assign(self, members, partitions_per_topic) -> tuple:
        assignor = get_assignor(self.protocol)
        subs = {x.member_id: decode_subscription(x.metadata, x.group_instance_id) for x in members}
        topics = sorted({t for s in subs.values() for t in s.topics})
        counts = partitions_per_topic(topics)
        plan: dict[str, Assignment] = assignor.assign(subs, counts)
        return tuple((member, encode_assignment(plan.get(member, Assignment())))
                     for member in subs)

    # -- heartbeats ---------------------------------------------------------------------------------
    def heartbeat_once(self) -> None:
        with self._lock:
            if self.needs_join or self.generation < 0 or not self.member_id:
                return
            event = m.Heartbeat(0, self.group_id, self.generation, self.member_id,
                                self.group_instance_id)
        try:
            result = self._call(event, time.monotonic() + self.heartbeat_interval_s * 3)
        except KafkaError as exc:
            log.info("group %s heartbeat: %s", self.group_id, exc)
            return
        if result.error in REJOIN or result.error == FENCED_INSTANCE_ID:
            with self._lock:
                self.needs_join = True
                if result.error == UNKNOWN_MEMBER_ID:
                    self.member_id = ""

    # -- offsets ------------------------------------------------------------------------------------
    def commit(self, offsets: dict, *, simple: bool = False) -> None:
        """offsets {tp: next offset to read}; `simple`: no generation (a manual assignment)."""
        if not offsets:
            return
        with self._lock:
            generation, member = (-1, "") if simple else (self.generation, self.member_id)
        result = self._call(m.OffsetCommit(0, self.group_id, tuple(
            m.CommitOffset(tp[0], tp[1], o) for tp, o in sorted(offsets.items())),
            generation, member, None if simple else self.group_instance_id),
            time.monotonic() + 60)
        failed = [p for p in result.partitions if p.error]
        if not failed:
            return
        code = failed[0].error
        if code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            with self._lock:
                self.needs_join = True
            raise CommitFailed(f"group {self.group_id} rebalanced: commit of generation "
                               f"{generation} refused ({code})")
        raise error_for_code(code, f"commit to group {self.group_id}: "
                                   f"{[(p.topic, p.partition) for p in failed]}")

    def committed(self, partitions=None) -> dict[tuple, int]:
        """{tp: committed offset} (partitions without a committed offset are absent)."""
        asked = None if partitions is None else tuple(tuple(tp) for tp in partitions)
        result = self._call(m.OffsetFetch(0, self.group_id, asked), time.monotonic() + 60)
        if result.error:
            raise error_for_code(result.error, f"offsets of group {self.group_id}")
        return {(p.topic, p.partition): p.offset for p in result.partitions
                if p.offset >= 0 and not p.error}

    def leave(self) -> None:
        self._stop.set()
        with self._lock:
            member, self.member_id, self.generation = self.member_id, "", -1
        if member:
            try:
                self._call(m.LeaveGroup(0, self.group_id, (m.LeaveMember(member, self.group_instance_id),)),
                           time.monotonic() + 10)
            except KafkaError as exc:       # the coordinator is gone: the session expires it
                log.info("group %s leave: %s", self.group_id, exc)
        self.owned = set()
