"""Share groups' membership (KIP-932's ShareGroupHeartbeat and ShareGroupDescribe; Kafka's
GroupMetadataManager.shareGroupHeartbeat and SimpleAssignor), pure.

Rules:
- The request's own checks first, INVALID_REQUEST with Kafka's messages: "GroupId can't be
  empty.", "MemberId can't be empty.", "RackId can't be empty." (an empty rack, not a
  missing one), "MemberEpoch is invalid." (below -1), and on a join (epoch 0)
  "SubscribedTopicNames must be set in first request.".
- A group id held by a classic or consumer group is GROUP_ID_NOT_FOUND "Group G is not a
  share group." (the caller says which ids are taken).
- Epoch 0 joins; -1 leaves (answered with epoch -1); a request for a group that does not
  exist (other than a join) is GROUP_ID_NOT_FOUND "Share group G not found.", for a member
  the group does not know UNKNOWN_MEMBER_ID. Any other epoch must be the member's current
  one or, lower, its previous one (the answer that moved it may have been lost); else
  FENCED_MEMBER_EPOCH, a rejoin at epoch 0 of a known member included (it is fenced until
  its session times out). A new member beyond group.share.max.size is
  GROUP_MAX_SIZE_REACHED.
- The group epoch goes up when a member joins or leaves, when a subscription changes, and
  when a subscribed topic appears, goes away or changes its partition count; the target
  assignment is then computed again and its epoch is the group epoch. A share group does
  not reconcile: a member takes its target at its next heartbeat and its epoch becomes the
  assignment epoch. The answer carries the assignment on a join, on a full request (one
  naming its subscription) and when the member's partitions changed; else none.
- The assignor (SimpleAssignor): members with the same subscription share all its
  partitions; otherwise each topic is dealt among its subscribers. With M members (in
  member-id order) and P partitions each partition is read by ceil(M/P) members, member i
  taking ceil(prec*(i+1)) - ceil(prec*i) partitions (prec = ceil(M/P)*P/M), dealt in
  partition order: with no more members than partitions each partition has one reader;
  with more, partitions are shared and no member idles. (Kafka's keeps members' old
  partitions where balance allows; this one deals afresh on every change.)
- A member that misses group.share.session.timeout.ms is removed (`expire`). States:
  Empty (no members) or Stable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from replicas.errors import ErrorCode as E

EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
SHARE_GROUP_TYPE = "share"
LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatAnswer:
    error: int = E.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict | None = None          # topic id → partitions; None: unchanged


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: dict = field(default_factory=dict)     # topic id → tuple of partitions
    previous_member_epoch: int = -1
    sent: dict | None = None            # the assignment its last answer carried


def check_request(r: ShareHeartbeat) -> ShareHeartbeatAnswer | None:
    def invalid(message: str) -> ShareHeartbeatAnswer:
        return ShareHeartbeatAnswer(E.INVALID_REQUEST, message)
    if not r.group_id:
        return invalid("GroupId can't be empty.")
    if r.rack_id is not None and r.rack_id == "":
        return invalid("RackId can't be empty.")
    if not r.member_id:
        return invalid("MemberId can't be empty.")
    if r.member_epoch < LEAVE_EPOCH:
        return invalid("MemberEpoch is invalid.")
    if r.member_epoch == 0 and not r.subscribed_topic_names:
        return invalid("SubscribedTopicNames must be set in first request.")
    return None


def _share_out(members: list[str], partitions: list) -> dict[str, list]:
    """SimpleAssignor's counts over one set of members and partitions: each partition read by
    ceil(M/P) members, member i taking ceil(prec*(i+1)) - ceil(prec*i) of them, dealt in
    partition order (a member never gets one partition twice)."""
    out: dict[str, list] = {m: [] for m in members}
    if not members or not partitions:
        return out
    sharing = -(-len(members) // len(partitions))
    slots = [p for _ in range(sharing) for p in partitions]
    prec = sharing * len(partitions) / len(members)
    start = 0
    for i, m in enumerate(members):
        count = math.ceil(prec * (i + 1) - 1e-9) - math.ceil(prec * i - 1e-9)
        out[m] = slots[start:start + count]
        start += count
    return out


def assign(members: dict[str, ShareMember], topics: dict[str, tuple[str, int]]
           ) -> dict[str, dict[str, tuple[int, ...]]]:
    """SimpleAssignor: member id → {topic id: partitions}. Members with one subscription
    share all its partitions together (homogeneous); otherwise each topic is dealt among
    its own subscribers."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    subscriptions = {frozenset(m.subscribed_topic_names) for m in members.values()}
    if len(subscriptions) == 1:
        groups = [(sorted(members), [(topics[n][0], p) for n in sorted(next(iter(subscriptions)))
                                     if n in topics for p in range(topics[n][1])])]
    else:
        groups = [(sorted(m for m, x in members.items() if name in x.subscribed_topic_names),
                   [(topic_id, p) for p in range(count)])
                  for name, (topic_id, count) in sorted(topics.items())]
    for readers, partitions in groups:
        for m, got in _share_out(readers, partitions).items():
            for topic_id, p in got:
                out[m].setdefault(topic_id, []).append(p)
    return {m: {t: tuple(sorted(ps)) for t, ps in a.items()} for m, a in out.items()}


class ShareGroup:
    def __init__(self, group_id: str, config: ShareGroupConfig):
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.session_deadline: dict[str, int] = {}
        self.subscribed: dict[str, tuple[str, int]] = {}   # topic name → (id, partitions)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def heartbeat(self, r: ShareHeartbeat, topics: dict[str, tuple[str, int]],
                  now_ms: int) -> ShareHeartbeatAnswer:
        """`topics`: the cluster's topics {name: (id, partition count)}."""
        member = self.members.get(r.member_id)
        if r.member_epoch == LEAVE_EPOCH:
            if member is None:
                return self._unknown(r.member_id)
            self._remove(r.member_id, topics)
            return ShareHeartbeatAnswer(member_id=r.member_id, member_epoch=LEAVE_EPOCH)
        if member is None and len(self.members) >= self.config.max_size:
            return ShareHeartbeatAnswer(
                E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum "
                f"capacity of {self.config.max_size} members.")
        if member is None:
            if r.member_epoch != 0:
                return self._unknown(r.member_id)
            member = self.members[r.member_id] = ShareMember(r.member_id)
            self.group_epoch += 1
        elif r.member_epoch != member.member_epoch and \
                not (r.member_epoch < member.member_epoch
                     and r.member_epoch == member.previous_member_epoch):
            return ShareHeartbeatAnswer(
                E.FENCED_MEMBER_EPOCH, f"The share group member has a "
                f"{'smaller' if r.member_epoch < member.member_epoch else 'greater'} member "
                f"epoch ({r.member_epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and "
                f"rejoin.")
        if r.subscribed_topic_names is not None and \
                tuple(r.subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(r.subscribed_topic_names)
            self.group_epoch += 1
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        member.client_id, member.client_host = r.client_id, r.client_host
        self._maybe_reassign(topics)
        self.session_deadline[member.member_id] = now_ms + self.config.session_timeout_ms
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        full = r.member_epoch == 0 or r.subscribed_topic_names is not None
        send = full or member.assignment != member.sent
        if send:
            member.sent = dict(member.assignment)
        return ShareHeartbeatAnswer(
            member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(member.assignment) if send else None)

    def expire(self, now_ms: int, topics: dict[str, tuple[str, int]]) -> list[str]:
        """Members whose session timed out, removed."""
        gone = [m for m, t in self.session_deadline.items() if t <= now_ms]
        for m in gone:
            self._remove(m, topics)
        return gone

    def next_deadline_ms(self) -> int | None:
        return min(self.session_deadline.values()) if self.session_deadline else None

    def assigned_partitions(self) -> set[tuple[str, int]]:
        """(topic id, partition) of every member's assignment."""
        return {(t, p) for m in self.members.values() for t, ps in m.assignment.items()
                for p in ps}

    # -- helpers -------------------------------------------------------------------------------
    def _unknown(self, member_id: str) -> ShareHeartbeatAnswer:
        return ShareHeartbeatAnswer(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member "
                                                         f"of group {self.group_id}.")

    def _remove(self, member_id: str, topics) -> None:
        self.members.pop(member_id, None)
        self.session_deadline.pop(member_id, None)
        self.group_epoch += 1
        self._maybe_reassign(topics)

    def _maybe_reassign(self, topics: dict[str, tuple[str, int]]) -> None:
        names = {n for m in self.members.values() for n in m.subscribed_topic_names}
        subscribed = {n: topics[n] for n in sorted(names) if n in topics}
        if subscribed != self.subscribed:
            self.subscribed = subscribed
            self.group_epoch += 1
        if self.assignment_epoch == self.group_epoch:
            return
        for member_id, a in assign(self.members, subscribed).items():
            self.members[member_id].assignment = a
        self.assignment_epoch = self.group_epoch


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    member_id: str
    member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: dict


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    error: int = E.NONE
    message: str | None = None
    state: str = DEAD
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = "simple"
    members: tuple[DescribedShareMember, ...] = ()


class ShareGroups:
    """The share groups a group coordinator holds, by group id (the caller keeps to the
    groups whose __consumer_offsets partition it leads)."""

    def __init__(self, config: ShareGroupConfig):
        self.config = config
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(self, r: ShareHeartbeat, topics, now_ms: int, other_kind: bool,
                  config: ShareGroupConfig | None = None) -> ShareHeartbeatAnswer:
        """`other_kind`: the id is a classic or consumer group's."""
        refused = check_request(r)
        if refused is not None:
            return refused
        if other_kind:
            return ShareHeartbeatAnswer(E.GROUP_ID_NOT_FOUND,
                                        f"Group {r.group_id} is not a share group.")
        group = self.groups.get(r.group_id)
        if group is None:
            if r.member_epoch != 0:
                return ShareHeartbeatAnswer(E.GROUP_ID_NOT_FOUND,
                                            f"Share group {r.group_id} not found.")
            group = self.groups[r.group_id] = ShareGroup(r.group_id, config or self.config)
        group.config = config or self.config
        return group.heartbeat(r, topics, now_ms)

    def expire(self, now_ms: int, topics) -> dict[str, list[str]]:
        return {g: gone for g, group in self.groups.items()
                if (gone := group.expire(now_ms, topics))}

    def next_deadline_ms(self) -> int | None:
        times = [t for g in self.groups.values() if (t := g.next_deadline_ms()) is not None]
        return min(times) if times else None

    def describe(self, group_id: str) -> DescribedShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedShareGroup(group_id, E.GROUP_ID_NOT_FOUND,
                                       f"Group {group_id} not found.")
        return DescribedShareGroup(
            group_id, state=group.state, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, members=tuple(
                DescribedShareMember(m.member_id, m.member_epoch, m.rack_id, m.client_id,
                                     m.client_host, m.subscribed_topic_names,
                                     dict(m.assignment))
                for _id, m in sorted(group.members.items())))

    def delete(self, group_id: str) -> int:
        """DeleteGroups: only an empty share group goes (NON_EMPTY_GROUP otherwise)."""
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        return E.NONE

    def drop(self, keep) -> None:
        """Forget the groups `keep(group_id)` refuses (their coordinator moved away)."""
        for g in [g for g in self.groups if not keep(g)]:
            del self.groups[g]
