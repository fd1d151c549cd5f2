"""The rebalance machinery of the group coordinator: join phase, sync phase, timers.

Rules (GroupCoordinator.scala, DelayedJoin/InitialDelayedJoin/DelayedSync/DelayedHeartbeat,
Kafka trunk 1eb7644):
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
"""

from __future__ import annotations

from coordinator import error_codes as E
from coordinator import messages as m
from coordinator.group import GroupMetadata, JoinTimer, MemberMetadata, SyncTimer
from coordinator.states import GroupState
from coordinator.storage import _Pending

G = GroupState


class RebalanceMixin:
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
                                 group.protocol_name, group.leader_or_empty() if leader is None else leader,
                                 skip, group.current_member_metadata() if with_members else ())

    def _schedule_heartbeat(self, member: MemberMetadata, timeout_ms: int | None = None) -> None:
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
            self._append_group(group, {}, _Pending())
            return
        for member in list(group.members.values()):
            self._invoke_join(member, self._join_result(group, member.member_id))
            self._schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_timer = SyncTimer(self._now() + group.rebalance_timeout_ms(), group.generation_id)
        self._try_complete_pending_sync(group)

    def _try_complete_pending_sync(self, group: GroupMetadata) -> None:
        timer = group.sync_timer
        if timer is None:
            return
        if timer.generation != group.generation_id or group.state not in (G.COMPLETING_REBALANCE, G.STABLE) \
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

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
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

        for gid, g in self._groups.items():
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
            group = self._groups[gid]
            if kind == "join":
                self._fire_join(group)
            elif kind == "sync":
                timer, group.sync_timer = group.sync_timer, None
                self._on_expire_pending_sync(group, timer.generation)
            elif kind == "heartbeat":
                member = group.members[mid]
                member.heartbeat_deadline_ms = None
                if not member.has_satisfied_heartbeat():
                    self._remove_member_and_update_group(group, member)
            else:
                self._remove_pending_member(group, mid)
        if self._next_retention_check <= now:
            self._next_retention_check = now + self.config.offsets_retention_check_interval_ms
            self._expire_offsets(now)

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
        if generation != group.generation_id or group.state not in (G.COMPLETING_REBALANCE, G.STABLE):
            return
        if group.pending_sync_members:
            for mid in list(group.pending_sync_members):
                self._drop_member(group, mid)
            self._prepare_rebalance(group)
