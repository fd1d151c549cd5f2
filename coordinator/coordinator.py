"""Kafka's classic group coordinator as a pure state machine: `process(event) -> [effect]`.

Rules (Kafka's GroupCoordinator.scala, trunk 1eb7644):
- Events, results and effects: messages.py. The join/sync phases and timers: rebalance.py.
  Offsets, admin APIs, load/unload: storage.py. Group and member data: group.py.
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
  PARKED until the join phase completes (rebalance.py). In CompletingRebalance a member
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

import re
import uuid as _uuid
from dataclasses import dataclass
from typing import Callable

from coordinator import error_codes as E
from coordinator import messages as m
from coordinator.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupCoordinatorConfig
from coordinator.group import GroupMetadata, MemberMetadata
from coordinator.rebalance import RebalanceMixin
from coordinator.records import group_metadata_record, partition_for
from coordinator.states import GroupState
from coordinator.storage import StorageMixin, _Pending

G = GroupState


def handler_name(event) -> str:
    return "process_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()


@dataclass(slots=True)
class _SyncStore(_Pending):
    group: GroupMetadata = None
    generation: int = 0
    assignment: dict = None

    def done(self, coordinator, token: int, error: int) -> None:
        coordinator._on_sync_store_done(self, error)


@dataclass(slots=True)
class _StaticStore(_Pending):
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

    def done(self, coordinator, token: int, error: int) -> None:
        coordinator._on_static_store_done(self, error)


class GroupCoordinator(RebalanceMixin, StorageMixin):
    def __init__(self, broker_id: int, clock_ms: Callable[[], int],
                 config: GroupCoordinatorConfig | None = None, *,
                 new_uuid: Callable[[], _uuid.UUID] = _uuid.uuid4):
        self.broker_id = broker_id
        self.config = config or GroupCoordinatorConfig()
        self._clock = clock_ms
        self._new_uuid = new_uuid  # injected so a seeded run hands out the same member ids
        self._groups: dict[str, GroupMetadata] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._pending: dict[int, _Pending] = {}
        self._next_token = 1
        self._next_retention_check = clock_ms() + self.config.offsets_retention_check_interval_ms
        self._out: list = []

    # -- the one entry point ----------------------------------------------------------------
    def process(self, event) -> list:
        handler = getattr(self, handler_name(event), None)
        if handler is None:
            raise TypeError(f"the group coordinator has no handler for {type(event).__name__}")
        self._out = []
        handler(event)
        out, self._out = self._out, []
        return out

    # -- read-only views --------------------------------------------------------------------
    def group(self, group_id: str) -> GroupMetadata | None:
        return self._groups.get(group_id)

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return dict(self._groups)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._owned)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def next_deadline_ms(self) -> int | None:
        """When the next Tick has something to do (None: nothing scheduled)."""
        times = [self._next_retention_check] + [t[0] for t in self._timers(None)]
        return min(times)

    # -- plumbing ---------------------------------------------------------------------------
    def _now(self) -> int:
        return self._clock()

    def _respond(self, request_id, result) -> None:
        self._out.append(m.Respond(request_id, result))

    def _append(self, group_id: str, records, pending: _Pending) -> int:
        token, self._next_token = self._next_token, self._next_token + 1
        pending.partition = self.partition_for(group_id)
        self._pending[token] = pending
        self._out.append(m.Append(pending.partition, tuple(records), token))
        return token

    def _append_group(self, group: GroupMetadata, assignment: dict, pending: _Pending) -> int:
        value = group.to_record_value(assignment)
        return self._append(group.group_id, [group_metadata_record(group.group_id, value)], pending)

    def _validate_group_status(self, group_id: str | None, empty_id_ok: bool = False) -> int | None:
        if group_id is None or (group_id == "" and not empty_id_ok):
            return E.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
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
        if not cfg.group_min_session_timeout_ms <= e.session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return self._respond(e.request_id, m.JoinGroupResult(E.INVALID_SESSION_TIMEOUT, e.member_id))
        unknown = e.member_id == m.UNKNOWN_MEMBER
        group = self._groups.get(e.group_id)
        if group is None:
            if not unknown:
                return self._respond(e.request_id, m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, e.member_id))
            group = self._groups[e.group_id] = GroupMetadata(e.group_id, G.EMPTY, self._now())
        if not self._accept_joining_member(group, e.member_id):
            self._drop_member(group, e.member_id)
            self._respond(e.request_id, m.JoinGroupResult(E.GROUP_MAX_SIZE_REACHED, m.UNKNOWN_MEMBER))
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
                self._respond(rid, m.JoinGroupResult(E.NONE, mid, group.generation_id, group.protocol_type,
                                                     group.protocol_name, group.leader_or_empty()))
        else:
            self._respond(rid, m.JoinGroupResult(E.UNKNOWN_MEMBER_ID, mid))

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     e: m.JoinGroup) -> None:
        superseded = group.update_member(member, e.protocols, e.rebalance_timeout_ms,
                                         e.session_timeout_ms, e.request_id)
        if superseded is not None:
            self._respond(superseded, m.JoinGroupResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        self._maybe_prepare_rebalance(group)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, e: m.JoinGroup) -> None:
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
        member, fenced_join, fenced_sync = group.replace_static_member(e.group_instance_id, old_id, new_id)
        if fenced_join is not None:
            self._respond(fenced_join, m.JoinGroupResult(E.FENCED_INSTANCE_ID, old_id))
        if fenced_sync is not None:
            self._respond(fenced_sync, m.SyncGroupResult(E.FENCED_INSTANCE_ID))
        self._schedule_heartbeat(member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, e.protocols, e.rebalance_timeout_ms, e.session_timeout_ms, e.request_id)
        if group.is_(G.STABLE):
            if group.protocol_name == group.select_protocol():
                # persist the new member id; no rebalance
                assignment = {x.member_id: x.assignment for x in group.members.values()}
                self._append_group(group, assignment, _StaticStore(
                    group=group, member=member, request_id=e.request_id, instance_id=e.group_instance_id,
                    old_id=old_id, new_id=new_id, old_protocols=old[0], old_rebalance_ms=old[1],
                    old_session_ms=old[2], current_leader=current_leader, skip_assignment=e.version >= 9))
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
                E.group_append_error(error), m.UNKNOWN_MEMBER, group.generation_id, group.protocol_type,
                group.protocol_name, p.current_leader))
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
            group = self._groups.get(e.group_id)
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
                self._append_group(group, assignment, _SyncStore(
                    group=group, generation=group.generation_id, assignment=assignment))
            return None
        group.pending_sync_members.discard(e.member_id)  # Stable: the stored assignment
        self._try_complete_pending_sync(group)
        self._respond(e.request_id, m.SyncGroupResult(E.NONE, group.protocol_type, group.protocol_name,
                                                      member.assignment))
        self._schedule_heartbeat(member)
        return None

    def _on_sync_store_done(self, p: _SyncStore, error: int) -> None:
        group = p.group
        # another member may have joined meanwhile: only the same CompletingRebalance counts
        if not group.is_(G.COMPLETING_REBALANCE) or group.generation_id != p.generation:
            return
        if error != E.NONE:
            self._reset_and_propagate_assignment_error(group, E.group_append_error(error))
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
            group = self._groups.get(e.group_id)
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
        group = self._groups.get(e.group_id)
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
