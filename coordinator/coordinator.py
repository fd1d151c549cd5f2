"""Kafka's classic group coordinator as a pure state machine: `process(event) -> [effect]`.

Rules (Kafka's GroupCoordinator.scala, trunk 1eb7644):
- Events, results and effects: messages.py. The cache of groups, the owned partitions,
  offsets and appends: storage.py (Kafka's GroupMetadataManager). Group and member data:
  group.py.
- Checks on every request, in Kafka's order: INVALID_GROUP_ID (empty id; allowed for
  OffsetCommit/OffsetFetch/DescribeGroups/DeleteGroups), COORDINATOR_LOAD_IN_PROGRESS (the
  group's offsets partition is loading), NOT_COORDINATOR (this coordinator does not own it:
  it owns the partitions it was told to load), then on the group: Dead →
  COORDINATOR_NOT_AVAILABLE, instance id mapped to another member → FENCED_INSTANCE_ID,
  unknown member → UNKNOWN_MEMBER_ID, generation ≠ current → ILLEGAL_GENERATION. A loading
  coordinator answers Heartbeat NONE and SyncGroup REBALANCE_IN_PROGRESS (old clients do not
  know the loading error).
- JoinGroup: session timeout outside [group.min, group.max] → INVALID_SESSION_TIMEOUT; only
  member id "" creates a group (else UNKNOWN_MEMBER_ID); group.max.size →
  GROUP_MAX_SIZE_REACHED; protocol type and ≥ 1 protocol common to all members, else
  INCONSISTENT_GROUP_PROTOCOL; new ids are clientId (static: instance id) + "-" + UUID; v4+
  dynamic members get their id with MEMBER_ID_REQUIRED and rejoin with it (KIP-394); a static
  member (KIP-345) replaces its old id, without a rebalance when Stable and the selected
  protocol stays (the new id is appended first; a failed append reverts it). The call is
  PARKED until the join phase completes (below). In CompletingRebalance a member
  rejoining with the same protocols gets the current answer again; in Stable a follower with
  the same protocols gets the current generation, the leader or changed protocols rebalance.
- Per state: Heartbeat Empty UNKNOWN_MEMBER_ID / PreparingRebalance REBALANCE_IN_PROGRESS /
  CompletingRebalance and Stable NONE (all three re-arm the session timer); SyncGroup Empty
  UNKNOWN_MEMBER_ID / PreparingRebalance REBALANCE_IN_PROGRESS / CompletingRebalance PARKED
  (the leader's assignment, b"" for members it left out, is appended; success → Stable and
  every parked sync answered; failure → all get the mapped error and a rebalance starts) /
  Stable the stored assignment.
- LeaveGroup is batched, each member answered on its own (UNKNOWN_MEMBER_ID,
  FENCED_INSTANCE_ID); member id "" with an instance id removes that static member.
- OffsetCommit: an unknown group with generation < 0 becomes an Empty "simple" group; with
  generation ≥ 0 → ILLEGAL_GENERATION. On a known group: Dead → COORDINATOR_NOT_AVAILABLE;
  generation < 0 on an Empty group → accepted; generation ≥ 0, a member id or an instance id
  → member checks then ILLEGAL_GENERATION; generation < 0 without member on a non-Empty group
  → UNKNOWN_MEMBER_ID. Then by state: Empty stores; Stable and PreparingRebalance re-arm the
  member's session timer (a commit counts as a heartbeat) and store; CompletingRebalance →
  REBALANCE_IN_PROGRESS. Storing and answering: storage.py.
- TxnOffsetCommit (KIP-98; handleTxnCommitOffsets, doTxnCommitOffsets): "" → INVALID_GROUP_ID,
  then the group status; an unknown group is created Empty whatever the generation (and is
  cleaned up later if nothing is stored). Then validateOffsetCommit with isTransactional:
  Dead → COORDINATOR_NOT_AVAILABLE; generation < 0 on an Empty group → accepted; generation
  ≥ 0, a member id or an instance id (v3+, KIP-447; v0-2 carry none) → FENCED_INSTANCE_ID /
  UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION as above; otherwise accepted in ANY state (older
  producers know no member). No state check and no heartbeat: a producer is not a member.
  Stored as the producer's pending offsets (storage.py, txn_offsets.py). v0/v1 answers read
  COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS (error_codes.py). Left to the
  API layer and the shell (KafkaApis.handleTxnOffsetCommitRequest): the TRANSACTIONAL_ID and
  GROUP authorization, unknown or unauthorized topics, and KIP-890 verification, which comes
  BEFORE this event (its error answered through error_codes.commit_append_error).
- CompleteTxn (onTransactionCompleted → handleTxnCompletion): storage.py. No answer.
- ListGroups: every cached group (filtered by state name, any case); the error is
  COORDINATOR_LOAD_IN_PROGRESS while any partition loads. DescribeGroups: unknown → "Dead"
  with NONE; member metadata and assignments only when Stable.
- DeleteGroups: unknown or Dead → GROUP_ID_NOT_FOUND; Empty → Dead, removed with its offsets
  (storage.py's cleanup), NONE at once; else NON_EMPTY_GROUP.
- OffsetDelete (handleDeleteOffsets): "" → INVALID_GROUP_ID, then the group status;
  unknown or Dead → GROUP_ID_NOT_FOUND; Empty → every partition's offset removed
  (tombstones, storage.py's cleanup: a classic group left without offsets goes too, as
  Kafka 3.8's; a KIP-848 group stays, as Kafka 4's); a non-empty "consumer" group → the partitions of
  topics a member subscribes to are GROUP_SUBSCRIBED_TO_TOPIC (all of them when the
  subscriptions are unknown), the others removed; any other non-empty group
  NON_EMPTY_GROUP. Answered at once.
- LoadPartition: every member of a loaded group gets its session timer armed; a group over
  group.max.size rebalances at once. UnloadPartition: every group of the partition becomes
  Dead; every parked JoinGroup/SyncGroup is answered NOT_COORDINATOR, and so is every commit
  waiting for its append (storage.py).
Rebalances (DelayedJoin/InitialDelayedJoin/DelayedSync/DelayedHeartbeat):
- A rebalance starts only from Empty, Stable or CompletingRebalance (`can_rebalance`); from
  CompletingRebalance every parked SyncGroup first gets REBALANCE_IN_PROGRESS.
- The join phase ends when every member has a parked JoinGroup and no pending (KIP-394)
  member is left, or at the rebalance timeout (the largest of the members' rebalance
  timeouts). From Empty it is Kafka's InitialDelayedJoin instead: it never ends early; at
  group.initial.rebalance.delay.ms it re-arms itself (delay = min(configured delay,
  remaining), remaining -= previous delay) as long as new members joined a generation-0 group
  meanwhile and time remains, the total bounded by the rebalance timeout.
- Join completion: dynamic members without a parked JoinGroup are removed; if no member
  rejoined but static ones remain, wait one more rebalance timeout; otherwise generation + 1
  and the protocol is selected; no members → Empty and an empty group record is appended
  (its outcome is only logged, as in Kafka); else CompletingRebalance: every parked JoinGroup
  is answered (only the leader gets the members' metadata), every member's session timer is
  armed and the sync phase starts: members that have not sent SyncGroup within the rebalance
  timeout are removed and a new rebalance starts.
- Session timers (DelayedHeartbeat): at its deadline a member is removed unless it is
  satisfied (group.py: not new and with a parked call); removal answers its parked calls,
  then Stable/CompletingRebalance rebalance and PreparingRebalance re-checks completion.
  Arming a timer for a member that is satisfied right now arms nothing (Kafka completes that
  delayed heartbeat at once). Pending members expire after their session timeout.
- Tick fires every due timer in deadline order, each timer at most once per Tick (a timer
  re-armed to a deadline that already passed waits for the next Tick), then the offset
  retention check when its interval passed. Equal deadlines (Kafka's timing wheel has no
  order): join phase, sync phase, sessions, pending members.
Decisions where Kafka leaves a gap (each with its reason):
- A parked JoinGroup/SyncGroup superseded by a newer one from the same member is answered
  REBALANCE_IN_PROGRESS at once (Kafka drops it; here every request gets exactly one answer,
  and that error makes a client rejoin).
- A member removed while a SyncGroup is parked (LeaveGroup during CompletingRebalance) gets
  UNKNOWN_MEMBER_ID for it (Kafka drops it, for the same reason).
- A static member's store that finishes after the group left Stable is ignored: its parked
  JoinGroup is answered by the rebalance (Kafka answers it with the old generation and the
  member then misses the rebalance). The revert restores the member's OLD protocols (as
  Kafka's Java rewrite; the Scala coordinator re-reads them after the update). A successful
  replacement re-arms the member's session timer when it answers (in Kafka the timer armed
  at the replacement is spent while the JoinGroup waits, so a client dying right after its
  answer would never expire).
"""

from __future__ import annotations

import functools
import uuid as _uuid
from dataclasses import dataclass
from typing import Callable

from coordinator import messages as m
from coordinator.error_codes import group_append_error, txn_commit_answer
from coordinator.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupCoordinatorConfig
from coordinator.consumer_requests import CONSUMER_GROUP_TYPE, ConsumerGroupRequests
from coordinator.group import (CONSUMER_PROTOCOL_TYPE, GroupMetadata, JoinTimer, MemberMetadata,
                               SyncTimer)
from coordinator.states import GroupState
from coordinator.storage import GroupMetadataManager
from replicas.dispatch import handler_for
from replicas.errors import ErrorCode as E

G = GroupState


@dataclass(slots=True)
class _SyncStore:
    """The leader's assignment being appended."""
    group: GroupMetadata = None
    generation: int = 0
    assignment: dict = None


@dataclass(slots=True)
class _StaticStore:
    """A static member's new id being appended, and what to restore if that fails."""
    group: GroupMetadata = None
    member: MemberMetadata = None
    request_id: int = 0
    instance_id: str = ""
    old_id: str = ""
    new_id: str = ""
    old_protocols: tuple = ()
    old_rebalance_ms: int = 0
    old_session_ms: int = 0
    current_leader: str = ""
    skip_assignment: bool = False


class GroupCoordinator(ConsumerGroupRequests):
    def __init__(self, broker_id: int, clock_ms: Callable[[], int],
                 config: GroupCoordinatorConfig | None = None, *,
                 new_uuid: Callable[[], _uuid.UUID] = _uuid.uuid4):
        self.broker_id = broker_id
        self.config = config or GroupCoordinatorConfig()
        self._clock = clock_ms
        self._new_uuid = new_uuid  # injected so a seeded run hands out the same member ids
        self._storage = GroupMetadataManager(self.config, self._emit)
        self._next_retention_check = (clock_ms()
                                      + self.config.offsets_retention_check_interval_ms)
        self._out: list = []
        self.group_configs: dict[str, dict[str, str]] = {}    # group → its own configs

    # -- the one entry point ----------------------------------------------------------------
    def process(self, event) -> list:
        handler = handler_for(self, event)
        if handler is None:
            raise TypeError(f"the group coordinator has no handler for {type(event).__name__}")
        self._out = []
        handler(event)
        out, self._out = self._out, []
        return out

    # -- read-only views --------------------------------------------------------------------
    def group(self, group_id: str) -> GroupMetadata | None:
        return self._storage.groups.get(group_id)

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return dict(self._storage.groups)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._storage.owned)

    def partition_for(self, group_id: str) -> int:
        return self._storage.partition_for(group_id)

    def group_status(self, group_id: str) -> int | None:
        """NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or INVALID_GROUP_ID for requests
        about `group_id` on this coordinator; None when it may answer them."""
        return self._validate_group_status(group_id)

    def next_deadline_ms(self) -> int | None:
        """When the next Tick has something to do (None: nothing scheduled)."""
        times = [self._next_retention_check] + [t[0] for t in self._timers(None)]
        return min(times)

    # -- plumbing ---------------------------------------------------------------------------
    def _now(self) -> int:
        return self._clock()

    def _emit(self, effect) -> None:
        self._out.append(effect)

    def _respond(self, request_id, result) -> None:
        self._out.append(m.Respond(request_id, result))

    def _validate_group_status(self, group_id: str | None, empty_id_ok: bool = False
                               ) -> int | None:
        if group_id is None or (group_id == "" and not empty_id_ok):
            return E.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self._storage.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._storage.owned:
            return E.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, instance_id: str | None):
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
        return None if group.has(member_id) else E.UNKNOWN_MEMBER_ID

    @classmethod
    def _validate_generation_member(cls, group: GroupMetadata, e) -> int | None:
        """SyncGroup's and Heartbeat's first checks, in Kafka's order: the group is alive,
        the member (static or dynamic) is current, the generation is the group's."""
        if group.is_(G.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = cls._validate_current_member(group, e.member_id, e.group_instance_id)
        if error is None and e.generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        return error

    # -- JoinGroup --------------------------------------------------------------------------
    def process_join_group(self, e: m.JoinGroup) -> None:
        error = self._validate_group_status(e.group_id)
        if error is not None:
            return self._respond(e.request_id, m.JoinGroupResult(error, e.member_id))
        cfg = self.config
        if not (cfg.group_min_session_timeout_ms <= e.session_timeout_ms
                <= cfg.group_max_session_timeout_ms):
            return self._respond(e.request_id,
                                 m.JoinGroupResult(E.INVALID_SESSION_TIMEOUT, e.member_id))
        unknown = e.member_id == m.UNKNOWN_MEMBER
        group = self._storage.groups.get(e.group_id)
        if group is not None and group.consumer is not None:
            if group.consumer.members:       # classic members in a consumer group: not served
                return self._respond(e.request_id, m.JoinGroupResult(
                    E.INCONSISTENT_GROUP_PROTOCOL, e.member_id))
            self._convert_to_classic(group)
        if group is None:
            if not unknown:
                return self._respond(e.request_id,
                                     m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, e.member_id))
            group = GroupMetadata(e.group_id, G.EMPTY, self._now())
            self._storage.groups[e.group_id] = group
        if not self._accept_joining_member(group, e.member_id):
            self._drop_member(group, e.member_id)
            self._respond(e.request_id,
                          m.JoinGroupResult(E.GROUP_MAX_SIZE_REACHED, m.UNKNOWN_MEMBER))
        elif unknown:
            self._do_new_member_join(group, e)
        else:
            self._do_current_member_join(group, e)
        if group.is_(G.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (G.EMPTY, G.DEAD):
            return True
        if group.is_(G.PREPARING_REBALANCE):
            # awaiting members, not the size: the size may exceed a lowered limit
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or \
                group.num_awaiting_join() < limit
        return group.has(member_id) or group.size < limit

    def _do_new_member_join(self, group: GroupMetadata, e: m.JoinGroup) -> None:
        if group.is_(G.DEAD):
            return self._respond(e.request_id, m.JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE, ""))
        if not group.supports_protocols(e.protocol_type, (n for n, _ in e.protocols)):
            return self._respond(e.request_id, m.JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, ""))
        new_id = group.generate_member_id(e.client_id, e.group_instance_id, self._new_uuid())
        if e.group_instance_id is not None:
            old_id = group.current_static_member_id(e.group_instance_id)
            if old_id is not None:
                self._update_static_member_and_rebalance(group, old_id, new_id, e)
            else:
                self._add_member_and_rebalance(group, new_id, e)
        elif e.version >= 4:
            group.pending_members[new_id] = self._now() + e.session_timeout_ms
            self._respond(e.request_id, m.JoinGroupResult(E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, e)

    def _do_current_member_join(self, group: GroupMetadata, e: m.JoinGroup) -> None:
        rid, mid = e.request_id, e.member_id
        if group.is_(G.DEAD):
            return self._respond(rid, m.JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE, mid))
        if not group.supports_protocols(e.protocol_type, (n for n, _ in e.protocols)):
            return self._respond(rid, m.JoinGroupResult(E.INCONSISTENT_GROUP_PROTOCOL, mid))
        if group.is_pending_member(mid):
            if e.group_instance_id is not None:  # Kafka: IllegalStateException → unknown error
                return self._respond(rid, m.JoinGroupResult(E.UNKNOWN_SERVER_ERROR, mid))
            return self._add_member_and_rebalance(group, mid, e)
        error = self._validate_current_member(group, mid, e.group_instance_id)
        if error is not None:
            return self._respond(rid, m.JoinGroupResult(error, mid))
        member = group.get(mid)
        if group.is_(G.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, e)
        elif group.is_(G.COMPLETING_REBALANCE):
            if member.matches(e.protocols):  # a lost JoinGroup answer: same answer again
                self._respond(rid, self._join_result(group, mid))
            else:
                self._update_member_and_rebalance(group, member, e)
        elif group.is_(G.STABLE):
            # the leader rejoining forces a rebalance (its way to react to topic changes)
            if group.is_leader(mid) or not member.matches(e.protocols):
                self._update_member_and_rebalance(group, member, e)
            else:
                self._respond(rid, m.JoinGroupResult(E.NONE, mid, group.generation_id,
                                                     group.protocol_type, group.protocol_name,
                                                     group.leader_or_empty()))
        else:
            self._respond(rid, m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, mid))

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     e: m.JoinGroup) -> None:
        superseded = group.update_member(member, e.protocols, e.rebalance_timeout_ms,
                                         e.session_timeout_ms, e.request_id)
        if superseded is not None:
            self._respond(superseded, m.JoinGroupResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        self._maybe_prepare_rebalance(group)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, e: m.JoinGroup
                                  ) -> None:
        member = MemberMetadata(member_id, e.group_instance_id, e.client_id, e.client_host,
                                e.rebalance_timeout_ms, e.session_timeout_ms, e.protocol_type,
                                tuple((n, bytes(d)) for n, d in e.protocols), is_new=True)
        if group.is_(G.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay re-arm
        group.add(member, e.request_id)
        # a parked join mutes the client: expire it if the join phase never ends
        self._schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group)

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_id: str, new_id: str,
                                            e: m.JoinGroup) -> None:
        current_leader = group.leader_or_empty()
        member, fenced_join, fenced_sync = group.replace_static_member(e.group_instance_id,
                                                                       old_id, new_id)
        if fenced_join is not None:
            self._respond(fenced_join, m.JoinGroupResult(E.FENCED_INSTANCE_ID, old_id))
        if fenced_sync is not None:
            self._respond(fenced_sync, m.SyncGroupResult(E.FENCED_INSTANCE_ID))
        self._schedule_heartbeat(member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, e.protocols, e.rebalance_timeout_ms, e.session_timeout_ms,
                            e.request_id)
        if group.is_(G.STABLE):
            if group.protocol_name == group.select_protocol():
                # persist the new member id; no rebalance
                assignment = {x.member_id: x.assignment for x in group.members.values()}
                store = _StaticStore(
                    group=group, member=member, request_id=e.request_id,
                    instance_id=e.group_instance_id, old_id=old_id, new_id=new_id,
                    old_protocols=old[0], old_rebalance_ms=old[1], old_session_ms=old[2],
                    current_leader=current_leader, skip_assignment=e.version >= 9)
                self._storage.store_group(group, assignment,
                                          functools.partial(self._on_static_store_done, store))
            else:
                self._maybe_prepare_rebalance(group)
        elif group.is_(G.COMPLETING_REBALANCE):
            # the leader may already be assigning to the old id: start over
            self._prepare_rebalance(group)

    def _on_static_store_done(self, p: _StaticStore, error: int) -> None:
        group, member = p.group, p.member
        if not group.is_(G.STABLE) or member.awaiting_join != p.request_id \
                or group.members.get(p.new_id) is not member:
            return
        if error != E.NONE:
            group.update_member(member, p.old_protocols, p.old_rebalance_ms, p.old_session_ms, None)
            group.replace_static_member(p.instance_id, p.new_id, p.old_id)
            self._schedule_heartbeat(member)
            self._respond(p.request_id, m.JoinGroupResult(
                group_append_error(error), m.UNKNOWN_MEMBER, group.generation_id,
                group.protocol_type, group.protocol_name, p.current_leader))
        else:
            if p.skip_assignment:
                # v9+: the static leader learns it leads but keeps the current assignment
                is_leader = group.is_leader(p.new_id)
                self._invoke_join(member, self._join_result(group, p.new_id, skip=is_leader))
            else:
                # the old leader id makes a restarted leader act as a follower: no new assignment
                self._invoke_join(member, m.JoinGroupResult(
                    E.NONE, p.new_id, group.generation_id, group.protocol_type, group.protocol_name,
                    p.current_leader))
            self._schedule_heartbeat(member)  # decision: Kafka arms no timer here (see above)

    # -- SyncGroup --------------------------------------------------------------------------
    def process_sync_group(self, e: m.SyncGroup) -> None:
        error = self._validate_group_status(e.group_id)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            error = E.REBALANCE_IN_PROGRESS  # the rebalance state is lost: rejoin
        if error is None:
            group = self._storage.groups.get(e.group_id)
            error = E.UNKNOWN_MEMBER_ID if group is None else self._sync(group, e)
        if error is not None:
            self._respond(e.request_id, m.SyncGroupResult(error))

    def _sync(self, group: GroupMetadata, e: m.SyncGroup) -> int | None:
        error = self._validate_generation_member(group, e)
        if error is not None:
            return error
        if (e.protocol_type is not None and e.protocol_type != group.protocol_type) or \
                (e.protocol_name is not None and e.protocol_name != group.protocol_name):
            return E.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(G.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if group.is_(G.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        member = group.get(e.member_id)
        if group.is_(G.COMPLETING_REBALANCE):
            if member.awaiting_sync is not None:
                self._respond(member.awaiting_sync, m.SyncGroupResult(E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = e.request_id
            group.pending_sync_members.discard(e.member_id)
            self._try_complete_pending_sync(group)
            if group.is_leader(e.member_id):
                assignment = {mid: bytes(a) for mid, a in e.assignments}
                for mid in group.members:
                    assignment.setdefault(mid, b"")
                store = _SyncStore(group=group, generation=group.generation_id,
                                   assignment=assignment)
                self._storage.store_group(group, assignment,
                                          functools.partial(self._on_sync_store_done, store))
            return None
        group.pending_sync_members.discard(e.member_id)  # Stable: the stored assignment
        self._try_complete_pending_sync(group)
        self._respond(e.request_id, m.SyncGroupResult(E.NONE, group.protocol_type,
                                                      group.protocol_name, member.assignment))
        self._schedule_heartbeat(member)
        return None

    def _on_sync_store_done(self, p: _SyncStore, error: int) -> None:
        group = p.group
        # another member may have joined meanwhile: only the same CompletingRebalance counts
        if not group.is_(G.COMPLETING_REBALANCE) or group.generation_id != p.generation:
            return
        if error != E.NONE:
            self._reset_and_propagate_assignment_error(group, group_append_error(error))
            self._maybe_prepare_rebalance(group)
        else:
            for member in group.members.values():
                member.assignment = p.assignment[member.member_id]
            self._propagate_assignment(group, E.NONE)
            group.transition_to(G.STABLE, self._now())

    # -- Heartbeat --------------------------------------------------------------------------
    def process_heartbeat(self, e: m.Heartbeat) -> None:
        error = self._validate_group_status(e.group_id)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            error = E.NONE  # the group is loading: answer blindly
        if error is None:
            group = self._storage.groups.get(e.group_id)
            error = E.UNKNOWN_MEMBER_ID if group is None else self._heartbeat(group, e)
        self._respond(e.request_id, m.HeartbeatResult(error))

    def _heartbeat(self, group: GroupMetadata, e: m.Heartbeat) -> int:
        error = self._validate_generation_member(group, e)
        if error is not None:
            return error
        if group.is_(G.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group.get(e.member_id))
        return E.REBALANCE_IN_PROGRESS if group.is_(G.PREPARING_REBALANCE) else E.NONE

    # -- LeaveGroup -------------------------------------------------------------------------
    def process_leave_group(self, e: m.LeaveGroup) -> None:
        error = self._validate_group_status(e.group_id)
        if error is not None:
            return self._respond(e.request_id, m.LeaveGroupResult(error))
        group = self._storage.groups.get(e.group_id)
        if group is None:
            return self._respond(e.request_id, m.LeaveGroupResult(E.NONE, tuple(
                m.LeaveMemberResult(x.member_id, x.group_instance_id, E.UNKNOWN_MEMBER_ID)
                for x in e.members)))
        if group.is_(G.DEAD):
            return self._respond(e.request_id, m.LeaveGroupResult(E.COORDINATOR_NOT_AVAILABLE))
        results = []
        for x in e.members:
            if x.member_id == m.UNKNOWN_MEMBER:
                # administrative removal by group.instance.id
                current = None if x.group_instance_id is None else \
                    group.current_static_member_id(x.group_instance_id)
                if current is None:
                    error = E.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(group, group.get(current))
                    error = E.NONE
            elif group.is_pending_member(x.member_id):
                self._remove_pending_member(group, x.member_id)
                error = E.NONE
            else:
                error = self._validate_current_member(group, x.member_id, x.group_instance_id)
                if error is None:
                    self._remove_member_and_update_group(group, group.get(x.member_id))
                    error = E.NONE
            results.append(m.LeaveMemberResult(x.member_id, x.group_instance_id, error))
        self._respond(e.request_id, m.LeaveGroupResult(E.NONE, tuple(results)))

    # -- OffsetCommit, OffsetFetch ----------------------------------------------------------
    def process_offset_commit(self, e: m.OffsetCommit) -> None:
        error = self._validate_group_status(e.group_id, empty_id_ok=True)
        group = None
        if error is None:
            group = self._storage.groups.get(e.group_id)
            if group is None:
                if e.generation_id < 0:  # a consumer outside group management
                    group = GroupMetadata(e.group_id, G.EMPTY, self._now())
                    self._storage.groups[e.group_id] = group
                else:
                    error = E.ILLEGAL_GENERATION
        if error is None:
            error = self._validate_offset_commit(group, e.generation_id, e.member_id,
                                                 e.group_instance_id, version=e.version)
        if error is None:
            if group.is_(G.COMPLETING_REBALANCE):
                error = E.REBALANCE_IN_PROGRESS
            elif group.state in (G.STABLE, G.PREPARING_REBALANCE):
                self._schedule_heartbeat(group.get(e.member_id))
        if error is not None:
            tps = dict.fromkeys((o.topic, o.partition) for o in e.offsets)
            return self._respond(e.request_id, m.OffsetCommitResult(tuple(
                m.CommitPartitionResult(t, p, error) for t, p in tps)))
        self._storage.store_offsets(group, e, self._now())

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                instance_id: str | None, transactional: bool = False,
                                version: int = 9) -> int | None:
        if group.is_(G.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            return self._validate_consumer_commit(group, generation_id, member_id,
                                                  transactional, version)
        if generation_id < 0 and group.is_(G.EMPTY):
            return None
        if generation_id >= 0 or member_id != m.UNKNOWN_MEMBER or instance_id is not None:
            error = self._validate_current_member(group, member_id, instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
            return error
        # only members commit to a non-empty group; a producer without group metadata may
        return None if transactional or group.is_(G.EMPTY) else E.UNKNOWN_MEMBER_ID

    def process_txn_offset_commit(self, e: m.TxnOffsetCommit) -> None:
        error = self._validate_group_status(e.group_id)
        group = None
        if error is None:
            group = self._storage.groups.get(e.group_id)
            if group is None:
                group = GroupMetadata(e.group_id, G.EMPTY, self._now())
                self._storage.groups[e.group_id] = group
            if e.version >= 3:
                error = self._validate_offset_commit(group, e.generation_id, e.member_id,
                                                     e.group_instance_id, transactional=True)
            else:
                error = self._validate_offset_commit(group, m.NO_GENERATION, m.UNKNOWN_MEMBER,
                                                     None, transactional=True)
        if error is not None:
            error = txn_commit_answer(error, e.version)
            tps = dict.fromkeys((o.topic, o.partition) for o in e.offsets)
            return self._respond(e.request_id, m.OffsetCommitResult(tuple(
                m.CommitPartitionResult(t, p, error) for t, p in tps)))
        self._storage.store_offsets(group, e, self._now())

    def process_complete_txn(self, e: m.CompleteTxn) -> None:
        self._storage.complete_txn(e.producer_id, e.partitions, e.committed)

    def process_offset_fetch(self, e: m.OffsetFetch) -> None:
        error = self._validate_group_status(e.group_id, empty_id_ok=True)
        group = self._storage.groups.get(e.group_id) if error is None else None
        if group is not None and group.consumer is not None \
                and not (e.member_id is None and e.member_epoch < 0):
            member = group.consumer.members.get(e.member_id)    # validateOffsetFetch
            if member is None:
                error = E.UNKNOWN_MEMBER_ID
            elif member.assignment.member_epoch != e.member_epoch:
                error = E.STALE_MEMBER_EPOCH
        if error is not None:
            return self._respond(e.request_id, m.OffsetFetchResult(error))
        parts = self._storage.get_offsets(e.group_id, e.partitions, e.require_stable)
        self._respond(e.request_id, m.OffsetFetchResult(E.NONE, parts))

    # -- ListGroups, DescribeGroups, DeleteGroups -------------------------------------------
    def process_list_groups(self, e: m.ListGroups) -> None:
        wanted = {s.lower().strip() for s in e.states}
        types = {t.lower() for t in e.types}
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self._storage.loading else E.NONE
        listed = [m.ListedGroup(g.group_id, CONSUMER_PROTOCOL_TYPE, g.consumer.state.value,
                                CONSUMER_GROUP_TYPE) if g.consumer is not None
                  else m.ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                  for g in self._storage.groups.values()]
        groups = tuple(x for x in listed if (not wanted or x.state.lower() in wanted)
                       and (not types or x.group_type in types))
        self._respond(e.request_id, m.ListGroupsResult(error, groups))

    def process_describe_groups(self, e: m.DescribeGroups) -> None:
        out = []
        for gid in e.group_ids:
            error = self._validate_group_status(gid, empty_id_ok=True)
            group = None if error is not None else self._storage.groups.get(gid)
            if error is not None:
                out.append(m.DescribedGroup(error, gid, ""))
            elif group is None or group.consumer is not None:   # not a classic group
                out.append(m.DescribedGroup(E.NONE, gid, G.DEAD.value))
            else:
                out.append(m.DescribedGroup(
                    E.NONE, gid, group.state.value, group.protocol_type or "",
                    (group.protocol_name or "") if group.is_(G.STABLE) else "",
                    group.described_members()))
        self._respond(e.request_id, m.DescribeGroupsResult(tuple(out)))

    def process_delete_groups(self, e: m.DeleteGroups) -> None:
        results, eligible = {}, []
        for gid in dict.fromkeys(e.group_ids):
            error = self._validate_group_status(gid, empty_id_ok=True)
            group = None if error is not None else self._storage.groups.get(gid)
            if error is not None:
                results[gid] = error
            elif group is None or group.is_(G.DEAD):
                results[gid] = E.GROUP_ID_NOT_FOUND
            elif group.is_empty:
                group.transition_to(G.DEAD, self._now())
                eligible.append(group)
                results[gid] = E.NONE
            else:
                results[gid] = E.NON_EMPTY_GROUP
        self._storage.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets(),
                                             self._now())
        self._respond(e.request_id, m.DeleteGroupsResult(tuple(
            m.DeletedGroup(gid, error) for gid, error in results.items())))

    def process_offset_delete(self, e: m.OffsetDelete) -> None:
        """Kafka's handleDeleteOffsets: tombstones for the offsets no member consumes."""
        error = self._validate_group_status(e.group_id)
        group = None if error is not None else self._storage.groups.get(e.group_id)
        if error is None and (group is None or group.is_(G.DEAD)):
            error = E.GROUP_ID_NOT_FOUND
        eligible, refused = [], []
        if error is None:
            if group.is_empty:
                eligible = list(e.partitions)
            elif group.consumer is not None:
                subscribed = group.consumer.subscribed_topic_names()
                for tp in e.partitions:
                    (refused if tp[0] in subscribed else eligible).append(tp)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                for tp in e.partitions:
                    subscribed = group.subscribed_topics is None \
                        or tp[0] in group.subscribed_topics
                    (refused if subscribed else eligible).append(tp)
            else:
                error = E.NON_EMPTY_GROUP
        if error is not None:
            return self._respond(e.request_id, m.OffsetDeleteResult(error))
        if eligible:          # a KIP-848 group stays when its last offset goes (Kafka 4's
            self._storage.cleanup_group_metadata(     # OffsetMetadataManager.deleteOffsets)
                [group], lambda g: g.remove_offsets(eligible), self._now(),
                delete_empty=group.consumer is None)
        self._respond(e.request_id, m.OffsetDeleteResult(E.NONE, tuple(
            [(t, p, E.GROUP_SUBSCRIBED_TO_TOPIC) for t, p in refused]
            + [(t, p, E.NONE) for t, p in eligible])))

    # -- appends, loading and unloading -----------------------------------------------------
    def process_append_done(self, e: m.AppendDone) -> None:
        self._storage.append_done(e.token, e.error)

    def process_begin_load(self, e: m.BeginLoad) -> None:
        self._storage.begin_load(e.partition)

    def process_load_partition(self, e: m.LoadPartition) -> None:
        self._storage.load_partition(e.partition, e.records, self._now(), self._on_group_loaded)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group)  # give the members a chance to commit, then shrink
        for member in group.members.values():
            self._schedule_heartbeat(member)

    def process_unload_partition(self, e: m.UnloadPartition) -> None:
        now = self._now()

        def unloaded(group: GroupMetadata) -> None:
            group.transition_to(G.DEAD, now)
            for member in group.members.values():
                self._invoke_join(member, m.JoinGroupResult(E.NOT_COORDINATOR, member.member_id))
                self._invoke_sync(member, m.SyncGroupResult(E.NOT_COORDINATOR))
                member.heartbeat_deadline_ms = None
            group.join_timer = group.sync_timer = None
            group.pending_sync_members.clear()
            group.pending_members.clear()

        self._storage.unload_partition(e.partition, unloaded)

    # -- parked calls and session timers ----------------------------------------------------
    def _invoke_join(self, member: MemberMetadata, result: m.JoinGroupResult) -> bool:
        if member.awaiting_join is None:
            return False
        request_id, member.awaiting_join = member.awaiting_join, None
        self._respond(request_id, result)
        return True

    def _invoke_sync(self, member: MemberMetadata, result: m.SyncGroupResult) -> bool:
        if member.awaiting_sync is None:
            return False
        request_id, member.awaiting_sync = member.awaiting_sync, None
        self._respond(request_id, result)
        return True

    def _join_result(self, group: GroupMetadata, member_id: str, leader: str | None = None,
                     skip: bool = False) -> m.JoinGroupResult:
        with_members = group.is_leader(member_id)
        return m.JoinGroupResult(E.NONE, member_id, group.generation_id, group.protocol_type,
                                 group.protocol_name,
                                 group.leader_or_empty() if leader is None else leader,
                                 skip, group.current_member_metadata() if with_members else ())

    def _schedule_heartbeat(self, member: MemberMetadata, timeout_ms: int | None = None
                            ) -> None:
        # Kafka's completeAndScheduleNextExpiration: a new delayed heartbeat for a member that
        # is already satisfied (not new, with a parked call) completes at once: no timer.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            member.heartbeat_deadline_ms = None
        else:
            timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
            member.heartbeat_deadline_ms = self._now() + timeout

    # -- rebalance machinery ----------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_(G.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        group.sync_timer = None
        now, timeout = self._now(), group.rebalance_timeout_ms()
        if group.is_(G.EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            timer = JoinTimer(now + delay, True, delay, max(timeout - delay, 0))
        else:
            timer = JoinTimer(now + timeout)
        group.transition_to(G.PREPARING_REBALANCE, now)
        group.join_timer = timer
        self._try_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        timer = group.join_timer  # the initial delay never completes early
        if timer is not None and not timer.initial and group.has_all_members_joined():
            group.join_timer = None
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                self._drop_member(group, member.member_id)
        if group.is_(G.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin: wait for them or their session expiry
            group.join_timer = JoinTimer(self._now() + group.rebalance_timeout_ms())
            return self._try_complete_join(group)
        group.init_next_generation(self._now())
        if group.is_(G.EMPTY):
            # a lost write only brings back the previous generation, which has no members
            self._storage.store_group(group, {})
            return
        for member in list(group.members.values()):
            self._invoke_join(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_timer = SyncTimer(self._now() + group.rebalance_timeout_ms(),
                                     group.generation_id)
        self._try_complete_pending_sync(group)

    def _try_complete_pending_sync(self, group: GroupMetadata) -> None:
        timer = group.sync_timer
        if timer is None:
            return
        if timer.generation != group.generation_id \
                or group.state not in (G.COMPLETING_REBALANCE, G.STABLE) \
                or not group.pending_sync_members:
            group.sync_timer = None

    def _drop_member(self, group: GroupMetadata, member_id: str) -> None:
        """group.remove, answering the member's parked calls first (none may be left behind)."""
        member = group.members.get(member_id)
        if member is not None:
            self._invoke_join(member, m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, m.UNKNOWN_MEMBER))
            self._invoke_sync(member, m.SyncGroupResult(E.UNKNOWN_MEMBER_ID))
            member.heartbeat_deadline_ms = None
        group.remove(member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata
                                        ) -> None:
        self._drop_member(group, member.member_id)
        if group.state in (G.STABLE, G.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(G.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(G.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        ok = error == E.NONE
        ptype, pname = (group.protocol_type, group.protocol_name) if ok else (None, None)
        for member in group.members.values():
            if self._invoke_sync(member, m.SyncGroupResult(error, ptype, pname, member.assignment)):
                self._schedule_heartbeat(member)

    # -- Tick: the timers -------------------------------------------------------------------
    def _timers(self, now: int | None) -> list:
        """(deadline, kind rank, key) of every timer due at `now` (all when now is None)."""
        out = []

        def due(t):
            return t is not None and (now is None or t <= now)

        for gid, g in self._storage.groups.items():
            if g.join_timer is not None and due(g.join_timer.deadline_ms):
                out.append((g.join_timer.deadline_ms, 0, ("join", gid, "")))
            if g.sync_timer is not None and due(g.sync_timer.deadline_ms):
                out.append((g.sync_timer.deadline_ms, 1, ("sync", gid, "")))
            for mid, member in g.members.items():
                if due(member.heartbeat_deadline_ms):
                    out.append((member.heartbeat_deadline_ms, 2, ("heartbeat", gid, mid)))
            for mid, deadline in g.pending_members.items():
                if due(deadline):
                    out.append((deadline, 3, ("pending", gid, mid)))
            if g.consumer is not None and due(g.consumer.next_deadline_ms()):
                out.append((g.consumer.next_deadline_ms(), 4, ("consumer", gid, "")))
        out.sort(key=lambda t: (t[0], t[1]))
        return out

    def process_tick(self, _e: m.Tick) -> None:
        now, fired = self._now(), set()
        while True:
            todo = [t for t in self._timers(now) if t[2] not in fired]
            if not todo:
                break
            kind, gid, mid = key = todo[0][2]
            fired.add(key)
            group = self._storage.groups[gid]
            if kind == "join":
                self._fire_join(group)
            elif kind == "sync":
                timer, group.sync_timer = group.sync_timer, None
                self._on_expire_pending_sync(group, timer.generation)
            elif kind == "consumer":
                if group.consumer.expire(now):
                    self._persist_consumer(group)
            elif kind == "heartbeat":
                member = group.members[mid]
                member.heartbeat_deadline_ms = None
                if not member.has_satisfied_heartbeat():
                    self._remove_member_and_update_group(group, member)
            else:
                self._remove_pending_member(group, mid)
        if self._next_retention_check <= now:
            self._next_retention_check = now + self.config.offsets_retention_check_interval_ms
            self._storage.expire_offsets(now)

    def _fire_join(self, group: GroupMetadata) -> None:
        timer, group.join_timer = group.join_timer, None
        if not group.is_(G.PREPARING_REBALANCE):
            return
        if timer.initial and group.new_member_added and timer.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, timer.remaining_ms)
            group.join_timer = JoinTimer(self._now() + delay, True, delay,
                                         max(timer.remaining_ms - timer.delay_ms, 0))
            return
        self._on_complete_join(group)

    def _on_expire_pending_sync(self, group: GroupMetadata, generation: int) -> None:
        if generation != group.generation_id \
                or group.state not in (G.COMPLETING_REBALANCE, G.STABLE):
            return
        if group.pending_sync_members:
            for mid in list(group.pending_sync_members):
                self._drop_member(group, mid)
            self._prepare_rebalance(group)
