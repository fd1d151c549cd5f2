"""KIP-848 reconciliation: how one member of a consumer group moves from its current
assignment to the group's target assignment without two members ever owning a partition.

Rules (Kafka's group-coordinator modern/consumer/CurrentAssignmentBuilder.java,
ConsumerGroupMember.java, ConsumerGroup.java `addPartitionEpochs`, trunk 1eb7644):
- A member's assignment state (`MemberAssignment`): its member epoch and the one before,
  its `MemberState`, the partitions ASSIGNED to it (it may consume them) and those PENDING
  REVOCATION (it must give them up; until it says so, they are still its).
- The group keeps one ledger (`PartitionEpochs`): every partition assigned to or pending
  revocation from a member maps to that member's epoch; a partition with no entry is
  free. Adding a partition that already has an owner is an error (IllegalStateException in
  Kafka), which is the protocol's invariant: no partition owned by two members at once.
- `reconcile(member, target_epoch, target, partition_epoch, owned)` is one step of Kafka's
  state machine, by the member's state:
  STABLE: at the target epoch nothing changes; otherwise the next assignment is computed.
  UNREVOKED_PARTITIONS: while the member still reports (`owned`, from its heartbeat; None
  when it did not send the field) any partition pending revocation, nothing changes; once
  it does not, the next assignment is computed at member epoch + 1.
  UNRELEASED_PARTITIONS: the next assignment is computed (partitions others released
  since are given).
  UNKNOWN (a state a newer coordinator wrote): a member that reports owned partitions (or
  None) is fenced (FencedMemberEpoch); one reporting none starts over at the target epoch.
- The next assignment, per topic: kept = current ∩ target; pending revocation = current -
  kept; to assign = target - kept minus the partitions another member still holds
  (partition_epoch != -1: unreleased). Then: something to revoke that the member still
  owns → UNREVOKED_PARTITIONS at the member's current epoch with only `kept` assigned;
  else something to assign → the assignment grows by it, epoch = target epoch, STABLE or
  UNRELEASED_PARTITIONS (some partition still held elsewhere); else unreleased ones →
  UNRELEASED_PARTITIONS at the target epoch; else STABLE at the target epoch. Revocation
  always comes before assignment: a member is never given new partitions while it holds
  some it must give up.
- A member is reconciled to epoch E when it is STABLE at member epoch E; the group derives
  its state from its members (`group_state`): no members EMPTY, group epoch above the
  target assignment's ASSIGNING, a member not reconciled to the target RECONCILING, else
  STABLE.
- Member states are data (`VALID_PREVIOUS`: the states each may be entered from) and one
  helper (`transition`) rejects the rest: UNKNOWN is never entered.
- Pure: stdlib only. Assignments are {topic id: frozenset of partitions}, empty topics
  left out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

__all__ = ["MemberState", "VALID_PREVIOUS", "InvalidMemberTransition", "transition",
           "FencedMemberEpoch", "MemberAssignment", "PartitionEpochs", "reconcile",
           "GroupState", "group_state"]

Assignment = Mapping[str, frozenset[int]]


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


S = MemberState
_RECONCILABLE = frozenset({S.STABLE, S.UNREVOKED_PARTITIONS, S.UNRELEASED_PARTITIONS,
                           S.UNKNOWN})
VALID_PREVIOUS: Mapping[MemberState, frozenset[MemberState]] = {
    S.STABLE: _RECONCILABLE,
    S.UNREVOKED_PARTITIONS: _RECONCILABLE,
    S.UNRELEASED_PARTITIONS: _RECONCILABLE,
    S.UNKNOWN: frozenset(),
}


class InvalidMemberTransition(Exception):
    def __init__(self, member_id: str, current: MemberState, target: MemberState):
        super().__init__(f"member {member_id} cannot move from {current.value} to "
                         f"{target.value}")
        self.member_id, self.current, self.target = member_id, current, target


def transition(member_id: str, current: MemberState, target: MemberState) -> MemberState:
    """`target` if a member in `current` may enter it; else InvalidMemberTransition."""
    if current not in VALID_PREVIOUS[target]:
        raise InvalidMemberTransition(member_id, current, target)
    return target


class FencedMemberEpoch(Exception):
    """Kafka's FencedMemberEpochException (FENCED_MEMBER_EPOCH, 110): the member must drop
    every partition and rejoin."""


def _clean(a: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in sorted(a.items()) if ps}


@dataclass(frozen=True)
class MemberAssignment:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def _next(self, state: MemberState, epoch: int, assigned, pending) -> "MemberAssignment":
        return replace(self, state=transition(self.member_id, self.state, state),
                       previous_member_epoch=self.member_epoch, member_epoch=epoch,
                       assigned=_clean(assigned), pending_revocation=_clean(pending))


class PartitionEpochs:
    """The group's ledger: (topic id, partition) -> the epoch of the member holding it."""

    def __init__(self):
        self._epochs: dict[tuple[str, int], int] = {}

    def epoch(self, topic: str, partition: int) -> int:
        """The holder's epoch, -1 when the partition is free."""
        return self._epochs.get((topic, partition), -1)

    def add(self, assignment: Assignment, epoch: int) -> None:
        """Record partitions as held at `epoch`; a partition already held is an error."""
        taken = [(t, p) for t, ps in assignment.items() for p in ps if (t, p) in self._epochs]
        if taken:
            t, p = min(taken)
            raise ValueError(f"cannot set the epoch of {t}-{p} to {epoch}: it is already "
                             f"held at epoch {self._epochs[(t, p)]}")
        for t, ps in assignment.items():
            for p in ps:
                self._epochs[(t, p)] = epoch

    def remove(self, assignment: Assignment, epoch: int) -> None:
        """Free partitions held at `epoch`; one held at another epoch is an error."""
        wrong = [(t, p) for t, ps in assignment.items() for p in ps
                 if self._epochs.get((t, p)) != epoch]
        if wrong:
            t, p = min(wrong)
            raise ValueError(f"cannot remove the epoch {epoch} of {t}-{p}: it is "
                             f"{self.epoch(t, p)}")
        for t, ps in assignment.items():
            for p in ps:
                del self._epochs[(t, p)]

    def update(self, old: MemberAssignment | None, new: MemberAssignment | None) -> None:
        """A member's assignment changed from `old` to `new` (None: absent)."""
        if old is not None:
            self.remove(old.assigned, old.member_epoch)
            self.remove(old.pending_revocation, old.member_epoch)
        if new is not None:
            self.add(new.assigned, new.member_epoch)
            self.add(new.pending_revocation, new.member_epoch)

    def held(self) -> dict[tuple[str, int], int]:
        return dict(self._epochs)


def _owns_any(owned: Mapping[str, Iterable[int]] | None, partitions: Assignment) -> bool:
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, ps in owned.items() for p in ps)


def reconcile(member: MemberAssignment, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[str, int], int],
              owned: Mapping[str, Iterable[int]] | None) -> MemberAssignment:
    """One step of Kafka's CurrentAssignmentBuilder (see the module's rules)."""
    if member.state is S.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target,
                                partition_epoch, owned)
    if member.state is S.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target,
                                partition_epoch, owned)
    if member.state is S.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target,
                                partition_epoch, owned)
    if owned is None or any(owned.values()):
        raise FencedMemberEpoch(f"The consumer group member {member.member_id} is in an "
                                "unknown state. The member must abandon all its partitions "
                                "and rejoin.")
    return _next_assignment(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next_assignment(member: MemberAssignment, member_epoch: int, target_epoch: int,
                     target: Assignment, partition_epoch: Callable[[str, int], int],
                     owned: Mapping[str, Iterable[int]] | None) -> MemberAssignment:
    assigned: dict[str, set[int]] = {}
    pending_revocation: dict[str, set[int]] = {}
    to_assign: dict[str, set[int]] = {}
    unreleased = False
    for t in sorted(set(target) | set(member.assigned)):
        want, have = set(target.get(t, ())), set(member.assigned.get(t, ()))
        kept = have & want
        assigned[t] = kept
        pending_revocation[t] = have - kept
        free = set()
        for p in want - kept:
            if partition_epoch(t, p) == -1:
                free.add(p)
            else:
                unreleased = True
        to_assign[t] = free
    pending = _clean(pending_revocation)
    if pending and _owns_any(owned, pending):
        return member._next(S.UNREVOKED_PARTITIONS, member_epoch, assigned, pending)
    if any(to_assign.values()):
        grown = {t: assigned.get(t, set()) | to_assign.get(t, set())
                 for t in set(assigned) | set(to_assign)}
        state = S.UNRELEASED_PARTITIONS if unreleased else S.STABLE
        return member._next(state, target_epoch, grown, {})
    if unreleased:
        return member._next(S.UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return member._next(S.STABLE, target_epoch, assigned, {})


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def group_state(members: Iterable[MemberAssignment], group_epoch: int,
                target_assignment_epoch: int) -> GroupState:
    """Kafka's ConsumerGroup.maybeUpdateGroupState (DEAD is set apart, on deletion)."""
    members = list(members)
    if not members:
        return GroupState.EMPTY
    if group_epoch > target_assignment_epoch:
        return GroupState.ASSIGNING
    if any(not m.is_reconciled_to(target_assignment_epoch) for m in members):
        return GroupState.RECONCILING
    return GroupState.STABLE
