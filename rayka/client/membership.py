"""Membership: a native consumer's side of Kafka's classic consumer-group protocol (pure).

Kafka's AbstractCoordinator + ConsumerCoordinator (clients/src/main/java/org/apache/kafka/
clients/consumer/internals/) as one state machine: `process(event)` takes an event and
returns effects. It never waits, sleeps or reads a clock (events carry `now_ms`); the shell
(rayka/client/group.py) sends the requests, runs the callbacks and feeds the answers back.

Rules:
- States are Kafka's MemberState; VALID_PREVIOUS says which states each may follow and
  `_transition` refuses the rest: UNJOINED → PREPARING_REBALANCE (JoinGroup sent) →
  COMPLETING_REBALANCE (joined, SyncGroup sent) → STABLE (assignment received); a reset
  generation goes back to UNJOINED from anywhere.
- A rejoin is needed after subscribe, a REBALANCE_IN_PROGRESS heartbeat or commit while
  STABLE, a cooperative revocation, and a reset generation. Only `Poll` starts one (the
  application's thread runs rebalances, as Kafka's poll does); the JoinGroup or SyncGroup in
  flight (one at a time) is kept across polls and its answer continues the rebalance.
- Join prepare (onJoinPrepare), before the JoinGroup of a member still in a generation: with
  auto-commit the owned partitions' positions are committed and the answer awaited (the
  shell retries a moving coordinator; a commit that fails for good is not retried: the next
  owner re-reads from the last committed offset), waiting at most max_poll_interval_ms; then
  eager protocols revoke every owned partition, cooperative ones only those of topics no
  longer subscribed.
  Partitions being revoked stop being fetchable the moment the prepare starts (Kafka's
  pending revocation), so what was committed is what was returned.
- Join answers: MEMBER_ID_REQUIRED rejoins with the id given (KIP-394), UNKNOWN_MEMBER_ID
  with no id; ILLEGAL_GENERATION and REBALANCE_IN_PROGRESS rejoin at once; an answer the
  shell could not get (coordinator gone, timeout) rejoins after retry_backoff_ms; any other
  error is fatal: the next poll raises it (Kafka throws it from poll) and the member stays
  UNJOINED. The leader asks the shell to run the chosen assignor (ComputeAssignment →
  Assigned) and syncs the plan; followers sync with none.
- Sync answers: the assignment of this generation. Cooperative: partitions owned but no
  longer assigned are revoked (their positions committed first with auto-commit), then the
  member rejoins; partitions not owned before are handed to the shell (Assign).
- Lost (Kafka's onPartitionsLost): UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or
  FENCED_INSTANCE_ID answering a heartbeat, sync or commit sent in the CURRENT generation, or
  max_poll_interval_ms without a poll (the member then sends LeaveGroup, as Kafka's heartbeat
  thread does). The generation is reset (the member id too, except after ILLEGAL_GENERATION:
  it may still be valid), every owned partition is dropped at once (Lose) and a rejoin is
  needed. FENCED_INSTANCE_ID is also fatal (another process holds the group.instance.id).
- Ownership is confirmed by the coordinator. A partition is fetchable (its records may be
  returned) only while (a) the newest heartbeat the coordinator acknowledged in this
  generation, or the JoinGroup or SyncGroup that began it, was SENT less than
  session_timeout_ms ago (the coordinator's session timer restarts when a request ARRIVES,
  later than it was sent), and (b) the newest one answered NONE (the group not rebalancing)
  was sent less than max_poll_interval_ms ago (a rebalance that began after it removes a
  member that has not rejoined within that rebalance timeout). A member frozen past its
  session returns nothing until a heartbeat confirms it or it has rejoined; the seeded
  simulation (tests/test_membership_simulation.py) checks that no two members can return
  records of one partition at the same instant.
- Heartbeats (HeartbeatDue, from the shell's heartbeat thread) go out every
  heartbeat_interval_ms while the member has a generation, one at a time, also while its
  JoinGroup is parked (Kafka stops them then; here they keep the confirmation fresh, and
  the coordinator answers them REBALANCE_IN_PROGRESS without harm); a failed one is retried
  after retry_backoff_ms. REBALANCE_IN_PROGRESS outside STABLE is not a reason to rejoin
  (Kafka: the member is already rebalancing). ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID
  answering a heartbeat or commit while a JoinGroup is in flight (`_joining`) are left to the
  JoinGroup's answer: Ray keeps no order between two calls, so a request sent even BEFORE
  the JoinGroup may reach the coordinator after the join completed a new generation.
- Auto-commit (enable_auto_commit): a Poll in STABLE commits every owned partition's
  position each auto_commit_interval_ms, counted from the assignment; asynchronous, one at a
  time. Commits are also made before revocation (above) and on Close. The shell sends a
  member's commits one at a time in order (Ray may run two calls of one caller out of order;
  a Kafka connection would not), so committed offsets never go back.
- Application commits (CommitRequested): sent with the generation when STABLE; otherwise
  RebalanceInProgress while a rebalance runs and CommitFailed with no generation (Kafka's
  sendOffsetCommitRequest); answers as OffsetCommitResponseHandler. Without a subscription
  (manually assigned partitions) a commit carries generation -1 and no member: a "simple"
  group's commit.
- Close: nothing more is returned; commit (auto-commit), revoke the owned partitions,
  LeaveGroup; `closed` then holds. A member closing while its JoinGroup or SyncGroup is in
  flight (a cooperative one still owns partitions) first lets that rebalance end, so the
  commit carries the generation the coordinator now holds (the old one would be refused).
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

from coordinator import messages as m
from rayka.client.assignors import get_assignor
from rayka.client.consumer_protocol import (Assignment, Subscription, decode_assignment,
                                            decode_subscription, encode_assignment,
                                            encode_subscription)
from replicas.dispatch import handler_name
from replicas.errors import ErrorCode as E
from replicas.errors import (FencedInstanceId, IllegalGeneration, KafkaError, RebalanceInProgress,
                             error_for_code)

COORDINATOR_ERRORS = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                                E.NOT_COORDINATOR, E.REQUEST_TIMED_OUT})
LOST_ERRORS = frozenset({E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID})


class CommitFailed(IllegalGeneration):
    """Kafka's CommitFailedException: this member is not in the group's current generation
    (it was expelled or the group rebalanced without it); nothing was committed, and its
    partitions may belong to another member now."""


class State(enum.Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


VALID_PREVIOUS: dict[State, frozenset[State]] = {
    State.UNJOINED: frozenset(State),
    State.PREPARING_REBALANCE: frozenset({State.UNJOINED, State.PREPARING_REBALANCE,
                                          State.COMPLETING_REBALANCE, State.STABLE}),
    State.COMPLETING_REBALANCE: frozenset({State.PREPARING_REBALANCE}),
    State.STABLE: frozenset({State.COMPLETING_REBALANCE}),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class MemberConfig:
    group_id: str
    assignors: tuple[str, ...] = ("range", "cooperative-sticky")
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000     # also JoinGroup's rebalance timeout, as in Kafka
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    retry_backoff_ms: int = 100
    group_instance_id: str | None = None
    client_id: str = "rayka"
    group_protocol: str = "classic"         # or "consumer": KIP-848 (consumer_membership.py)


# ---------------------------------------------------------------- events
@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]        # empty: unsubscribe (revoke, leave)
    now_ms: int


@dataclass(frozen=True)
class Poll:
    now_ms: int


@dataclass(frozen=True)
class HeartbeatDue:
    now_ms: int


@dataclass(frozen=True)
class Answered:
    """The coordinator answered request `token` (sent, last, at `sent_ms`)."""
    token: int
    result: object
    sent_ms: int
    now_ms: int


@dataclass(frozen=True)
class NoAnswer:
    """Request `token` got no answer: no coordinator could be reached in time (`error`:
    COORDINATOR_NOT_AVAILABLE or REQUEST_TIMED_OUT)."""
    token: int
    error: int
    now_ms: int


@dataclass(frozen=True)
class Assigned:
    """The leader's plan for `generation`: (member id, encoded assignment) per member."""
    generation: int
    assignments: tuple[tuple[str, bytes], ...]
    now_ms: int


@dataclass(frozen=True)
class Revoked:
    """The shell ran the revocation of `partitions` (callback, positions dropped)."""
    partitions: frozenset
    now_ms: int


@dataclass(frozen=True)
class CommitRequested:
    """The application commits: `offsets` ((tp, next offset), ...) or None for every owned
    partition's position; `ticket` names the CommitDone that answers it."""
    ticket: int
    offsets: tuple | None
    now_ms: int


@dataclass(frozen=True)
class Close:
    now_ms: int
    timeout_ms: int = 30_000       # Kafka's default close timeout: commit retries stop there


def compute_assignment(effect: "ComputeAssignment", partition_counts) -> tuple:
    """The leader's plan: the chosen assignor over every member's subscription;
    `partition_counts(topics)` → {topic: partitions}. (member id, encoded assignment) each."""
    subs = {x.member_id: decode_subscription(x.metadata, x.group_instance_id)
            for x in effect.members}
    topics = sorted({t for s in subs.values() for t in s.topics})
    plan = get_assignor(effect.protocol).assign(subs, partition_counts(topics))
    return tuple((member, encode_assignment(plan.get(member, Assignment()))) for member in subs)


# ---------------------------------------------------------------- effects
@dataclass(frozen=True)
class Send:
    """Send `request` (a coordinator.messages request) to the coordinator; answer with
    Answered(token, ...) or NoAnswer(token, ...)."""
    token: int
    request: object


@dataclass(frozen=True)
class SendCommit:
    """OffsetCommit of `offsets`, or (None) of the current positions of `partitions`, under
    generation/member (-1/"" for a simple group). Answered(token, OffsetCommitResult)."""
    token: int
    partitions: frozenset
    offsets: tuple | None
    generation: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True)
class ComputeAssignment:
    generation: int
    protocol: str
    members: tuple            # coordinator.messages.JoinGroupMember, every member's metadata


@dataclass(frozen=True)
class Revoke:
    partitions: frozenset     # run on_revoke, drop them, then process Revoked


@dataclass(frozen=True)
class Lose:
    partitions: frozenset     # already dropped here: run on_lost, discard their fetches


@dataclass(frozen=True)
class Assign:
    partitions: frozenset     # new: find their committed offsets, run on_assign


@dataclass(frozen=True)
class CommitDone:
    ticket: int
    error: KafkaError | None


@dataclass
class _Out:
    kind: str                 # join, sync, heartbeat, commit, leave
    generation: int
    member_id: str
    purpose: str = ""         # commits: auto, prepare, revoke, close, app
    partitions: frozenset = frozenset()
    ticket: int | None = None


class MemberMachine:
    """What both protocols' member machines share (this one and the KIP-848 one of
    rayka/client/consumer_membership.py): one `process(event)` returning effects, the
    requests in flight by token with their answers routed to `_on_<kind>`, a commit left
    unanswered read as its partitions' error, the answer of a commit (CommitDone for the
    application's), auto-commit on its interval, and the fatal error the next poll raises.
    A subclass has `_send_commit`, `_commit_error(out, code)`, `_on_<kind>` handlers,
    `generation`, `member_id`, `owned`, `revoking`, and says when it may auto-commit."""

    def __init__(self, config: MemberConfig):
        self.config = config
        self.fatal: KafkaError | None = None
        self._next_auto_commit_ms = 0
        self._auto_commit_token: int | None = None
        self._out: dict = {}
        self._tokens = itertools.count(1)
        self._effects: list = []

    def process(self, event) -> list:
        self._effects = []
        getattr(self, handler_name(type(event)))(event)
        out, self._effects = self._effects, []
        return out

    def take_fatal(self) -> KafkaError | None:
        fatal, self.fatal = self.fatal, None
        return fatal

    def process_answered(self, e: Answered) -> None:
        out = self._out.pop(e.token, None)
        if out is not None:
            getattr(self, f"_on_{out.kind}")(e.token, out, e.result, e.sent_ms, e.now_ms)

    def _commit_not_answered(self, e: NoAnswer, out) -> None:
        self._on_commit(e.token, out, m.OffsetCommitResult(tuple(
            m.CommitPartitionResult(tp[0], tp[1], e.error) for tp in sorted(out.partitions))),
            e.now_ms, e.now_ms)

    def _commit_answered(self, token: int, out, r: m.OffsetCommitResult) -> None:
        """The answer's first part, the same in both protocols: the auto-commit slot freed,
        the application told (CommitDone)."""
        if token == self._auto_commit_token:
            self._auto_commit_token = None
        failed = [p for p in r.partitions if p.error]
        error = self._commit_error(out, failed[0].error) if failed else None
        if out.ticket is not None:
            self._emit(CommitDone(out.ticket, error))

    def _may_auto_commit(self) -> bool:
        raise NotImplementedError

    def _maybe_auto_commit(self, now_ms: int) -> None:
        if (not self.config.enable_auto_commit or not self._may_auto_commit()
                or now_ms < self._next_auto_commit_ms or self._auto_commit_token is not None):
            return
        self._next_auto_commit_ms = now_ms + self.config.auto_commit_interval_ms
        parts = self.owned - self.revoking
        if parts:
            self._auto_commit_token = self._send_commit("auto", parts, None, self.generation,
                                                        self.member_id)

    def _emit(self, effect) -> None:
        self._effects.append(effect)


class Membership(MemberMachine):
    def __init__(self, config: MemberConfig):
        super().__init__(config)
        self.state = State.UNJOINED
        self.member_id, self.generation = "", m.NO_GENERATION
        self.protocol: str | None = None
        self.leader = ""
        self.subscription: tuple[str, ...] | None = None
        self.owned: frozenset = frozenset()
        self.revoking: frozenset = frozenset()
        self.rejoin_needed = False
        self.closing = self.closed = False
        self._prepare: str | None = None       # None (not started), committing, revoking, done
        self._prepare_deadline_ms = 0
        self._prepare_token: int | None = None     # the commit a prepare or close waits for
        self._rebalance_token: int | None = None   # the JoinGroup or SyncGroup in flight
        self._join_sent_ms = 0
        self._retry_join_ms = 0
        self._heartbeat_token: int | None = None
        self._next_heartbeat_ms = 0
        self._confirmed_until_ms = -1
        self._stable_since_ms = -(2**62)
        self._last_poll_ms: int | None = None

    # -- views --------------------------------------------------------------------------------
    def fetchable(self, now_ms: int) -> frozenset:
        """The partitions whose records may be returned now (see the ownership rule)."""
        if (self.subscription is None or now_ms >= self._confirmed_until_ms
                or now_ms >= self._stable_since_ms + self.config.max_poll_interval_ms):
            return frozenset()
        return self.owned - self.revoking

    @property
    def stable(self) -> bool:
        """In a generation, with its assignment (Kafka's MemberState.STABLE)."""
        return self.state is State.STABLE

    @property
    def leaving(self) -> bool:
        """A leave not yet handed to the shell: never here (LeaveGroup goes out at once)."""
        return False

    @property
    def rebalancing(self) -> bool:
        """A rejoin is needed or under way (Kafka's rejoinNeededOrPending)."""
        return self.subscription is not None and (
            self.rejoin_needed or self.state is not State.STABLE)

    def next_heartbeat_ms(self) -> int | None:
        """When HeartbeatDue is next worth sending (None: not while nothing to heartbeat)."""
        if not self._in_generation():
            return None
        due = self._next_heartbeat_ms
        if self._last_poll_ms is not None:
            due = min(due, self._last_poll_ms + self.config.max_poll_interval_ms)
        return due

    # -- the application ----------------------------------------------------------------------
    def process_subscribe(self, e: Subscribe) -> None:
        topics = tuple(sorted(set(e.topics)))
        if not topics:
            self._unsubscribe(e.now_ms)
            return
        if topics != self.subscription:
            self.subscription = topics
            self._request_rejoin()

    def process_poll(self, e: Poll) -> None:
        self._last_poll_ms = e.now_ms
        if self.subscription is None or self.closing:
            return
        if self.rejoin_needed and self._rebalance_token is None:
            self._maybe_join(e.now_ms)
        self._maybe_auto_commit(e.now_ms)

    def process_commit_requested(self, e: CommitRequested) -> None:
        if self.subscription is None:
            offsets = e.offsets or ()
            self._send_commit("app", frozenset(tp for tp, _ in offsets), offsets,
                              m.NO_GENERATION, m.UNKNOWN_MEMBER, ticket=e.ticket, simple=True)
            return
        if self.state is not State.STABLE:
            error = (CommitFailed(f"group {self.config.group_id}: this member is not part of an "
                                  "active generation (it was expelled); nothing committed")
                     if self.state is State.UNJOINED else
                     RebalanceInProgress(f"group {self.config.group_id} is rebalancing: poll() "
                                         "to complete the rebalance, then commit again"))
            self._emit(CommitDone(e.ticket, error))
            return
        parts = frozenset(tp for tp, _ in e.offsets) if e.offsets is not None else \
            self.owned - self.revoking
        self._send_commit("app", parts, e.offsets, self.generation, self.member_id, ticket=e.ticket)

    def process_close(self, e: Close) -> None:
        self.closing = True
        self.revoking = self.owned                # nothing more is returned
        self._prepare_deadline_ms = e.now_ms + e.timeout_ms
        if (self.config.enable_auto_commit and self.owned and self._in_generation()
                and self._rebalance_token is not None):
            return      # the rebalance in flight ends first: commit under the generation it makes
        self._close_now(e.now_ms)

    def _close_now(self, now_ms: int) -> None:
        if self.subscription is None or not self.owned or not self._in_generation():
            self._leave()
            return
        self.revoking = self.owned
        if self.config.enable_auto_commit:
            self._prepare = "committing"
            self._prepare_token = self._send_commit("close", self.owned, None, self.generation,
                                                    self.member_id)
        else:
            self._revoke_pending(now_ms)

    def process_revoked(self, e: Revoked) -> None:
        self.owned -= e.partitions
        self.revoking -= e.partitions
        self._after_revoke(e.now_ms)

    def process_assigned(self, e: Assigned) -> None:
        if (e.generation != self.generation or self.state is not State.COMPLETING_REBALANCE
                or self._rebalance_token is not None):
            return                      # a rebalance moved on while the plan was made
        self._send_rebalance("sync", m.SyncGroup(
            0, self.config.group_id, self.generation, self.member_id,
            self.config.group_instance_id, "consumer", self.protocol, e.assignments))

    # -- the heartbeat thread -----------------------------------------------------------------
    def process_heartbeat_due(self, e: HeartbeatDue) -> None:
        if not self._in_generation():
            return
        if (self._last_poll_ms is not None and not self.closing
                and e.now_ms - self._last_poll_ms > self.config.max_poll_interval_ms):
            # Kafka's handlePollTimeoutExpiry: the application stopped polling; leave so the
            # group can hand the partitions on, and rejoin at the next poll
            member = self.member_id
            self._reset_generation(reset_member_id=True)
            self._send("leave", m.LeaveGroup(0, self.config.group_id, (m.LeaveMember(
                member, self.config.group_instance_id, "consumer poll timeout has expired"),)))
            return
        if self._heartbeat_token is not None or e.now_ms < self._next_heartbeat_ms:
            return
        self._heartbeat_token = self._send("heartbeat", m.Heartbeat(
            0, self.config.group_id, self.generation, self.member_id,
            self.config.group_instance_id))

    # -- answers ------------------------------------------------------------------------------
    def process_no_answer(self, e: NoAnswer) -> None:
        out = self._out.pop(e.token, None)
        if out is None:
            return
        if out.kind == "commit":
            self._commit_not_answered(e, out)
        elif out.kind == "heartbeat":
            self._on_heartbeat(e.token, out, m.HeartbeatResult(e.error), e.now_ms, e.now_ms)
        elif out.kind in ("join", "sync") and e.token == self._rebalance_token:
            self._rebalance_token = None
            self._retry_join(e.now_ms)
        elif out.kind == "leave":
            self._on_leave(e.token, out, None, e.now_ms, e.now_ms)

    def _on_join(self, token, out, r: m.JoinGroupResult, sent_ms, now_ms) -> None:
        if token != self._rebalance_token:
            return                      # the member reset or left meanwhile: a stale answer
        self._rebalance_token = None
        if r.error == E.NONE:
            self._transition(State.COMPLETING_REBALANCE)
            self.member_id, self.generation = r.member_id, r.generation_id
            self.protocol, self.leader = r.protocol_name, r.leader
            self._confirmed_until_ms = -1        # a new generation: only its own answers count
            self._confirm(self._join_sent_ms, stable=True)
            self._next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms
            if r.leader == r.member_id:
                self._emit(ComputeAssignment(r.generation_id, r.protocol_name, r.members))
            else:
                self._send_rebalance("sync", m.SyncGroup(
                    0, self.config.group_id, r.generation_id, r.member_id,
                    self.config.group_instance_id, "consumer", r.protocol_name, ()))
            return
        if r.error == E.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            self._send_join(now_ms)
        elif r.error == E.UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            self._send_join(now_ms)
        elif r.error in (E.ILLEGAL_GENERATION, E.REBALANCE_IN_PROGRESS):
            self._send_join(now_ms)
        elif r.error in COORDINATOR_ERRORS:
            self._retry_join(now_ms)
        else:
            self._fail(r.error, "join group", now_ms)

    def _on_sync(self, token, out, r: m.SyncGroupResult, sent_ms, now_ms) -> None:
        if token != self._rebalance_token:
            return
        self._rebalance_token = None
        if r.error == E.NONE:
            self._transition(State.STABLE)
            self._confirm(sent_ms, stable=True)
            self._on_assignment(decode_assignment(r.assignment) if r.assignment else None, now_ms)
        elif r.error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self._reset_generation(reset_member_id=r.error == E.UNKNOWN_MEMBER_ID)
            self._send_join(now_ms)
        elif r.error == E.REBALANCE_IN_PROGRESS:
            self._send_join(now_ms)
        elif r.error in COORDINATOR_ERRORS:
            self._retry_join(now_ms)
        else:
            self._fail(r.error, "sync group", now_ms)

    def _on_assignment(self, assignment, now_ms: int) -> None:
        assigned = frozenset(tuple(tp) for tp in assignment.partitions) if assignment else frozenset()
        if self.closing:     # the close waited for this generation: commit what it read, all
            self._close_now(now_ms)                 # of it (a partition taken away included)
            return
        self.rejoin_needed = False
        self._prepare = None
        self._next_auto_commit_ms = now_ms + self.config.auto_commit_interval_ms
        added = assigned - self.owned
        revoked = self.owned - assigned
        if added:
            self.owned |= added
            self._emit(Assign(added))
        if revoked:
            # cooperative: give these back, then rejoin so their new owner gets them
            self.revoking |= revoked
            self.rejoin_needed = True
            self._prepare_deadline_ms = now_ms + self.config.max_poll_interval_ms
            if self.config.enable_auto_commit:
                self._prepare = "committing"
                self._prepare_token = self._send_commit("revoke", revoked, None, self.generation,
                                                        self.member_id)
            else:
                self._revoke_pending(now_ms)

    def _on_heartbeat(self, token, out, r: m.HeartbeatResult, sent_ms, now_ms) -> None:
        if token == self._heartbeat_token:
            self._heartbeat_token = None
        current = out.generation == self.generation and out.member_id == self.member_id
        if r.error in (E.NONE, E.REBALANCE_IN_PROGRESS):
            if current:
                self._confirm(sent_ms, stable=r.error == E.NONE)
                self._next_heartbeat_ms = sent_ms + self.config.heartbeat_interval_ms
            if r.error == E.REBALANCE_IN_PROGRESS and current and self.state is State.STABLE:
                self._request_rejoin()
            return
        self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms
        if self._joining():
            return          # the JoinGroup in flight (maybe done already) answers for membership
        if r.error in LOST_ERRORS and current:
            self._reset_generation(reset_member_id=r.error != E.ILLEGAL_GENERATION)
            if r.error == E.FENCED_INSTANCE_ID:
                self._fail(r.error, "heartbeat", now_ms)

    def _on_commit(self, token, out, r: m.OffsetCommitResult, sent_ms, now_ms) -> None:
        self._commit_answered(token, out, r)
        if token != self._prepare_token or self._prepare != "committing":
            return
        # committed, or failed (the shell already retried a moving coordinator): revoke
        # anyway; the next owner re-reads what was not committed
        self._revoke_pending(now_ms)

    def _commit_error(self, out: _Out, code: int) -> KafkaError:
        """OffsetCommitResponseHandler's reading of a partition's error."""
        group = self.config.group_id
        current = out.generation == self.generation and out.member_id == self.member_id
        if out.generation == m.NO_GENERATION and out.purpose == "app" and code not in LOST_ERRORS:
            return error_for_code(code, f"commit to group {group}")
        if code == E.REBALANCE_IN_PROGRESS:
            self._request_rejoin()
            return RebalanceInProgress(f"group {group} is rebalancing: poll() to complete it, "
                                       "then commit again")
        if code in LOST_ERRORS:
            if self._joining():
                return RebalanceInProgress(f"group {group}: this member's generation "
                                           f"{out.generation} is stale and it is rejoining")
            if current:
                self._reset_generation(reset_member_id=code != E.ILLEGAL_GENERATION)
            if code == E.FENCED_INSTANCE_ID and current:
                return FencedInstanceId(f"group {group}: group.instance.id "
                                        f"{self.config.group_instance_id} is used by another member")
            return CommitFailed(f"group {group} rebalanced: commit of generation "
                                f"{out.generation} refused ({code}); nothing committed")
        return error_for_code(code, f"commit to group {group}")

    def _on_leave(self, token, out, r, sent_ms, now_ms) -> None:
        pass                            # best effort: the session timeout covers a lost one

    # -- steps --------------------------------------------------------------------------------
    def _maybe_join(self, now_ms: int) -> None:
        """Kafka's joinGroupIfNeeded, one step: prepare (commit, revoke), then JoinGroup."""
        if now_ms < self._retry_join_ms or self._rebalance_token is not None:
            return
        if self._prepare is None:
            self._prepare_deadline_ms = now_ms + self.config.max_poll_interval_ms
            if not self._in_generation() or not self.owned:
                self._prepare = "done"
            else:
                eager = self.protocol != "cooperative-sticky"
                self.revoking |= self.owned if eager else frozenset(
                    tp for tp in self.owned if tp[0] not in (self.subscription or ()))
                if self.config.enable_auto_commit and self.state is State.STABLE:
                    self._prepare = "committing"
                    self._prepare_token = self._send_commit("prepare", self.owned, None,
                                                            self.generation, self.member_id)
                else:
                    self._revoke_pending(now_ms)
                return
        if self._prepare == "committing" and now_ms >= self._prepare_deadline_ms:
            self._revoke_pending(now_ms)        # Kafka: joinPrepareTimer expired, join anyway
        elif self._prepare == "done":
            self._send_join(now_ms)

    def _revoke_pending(self, now_ms: int) -> None:
        """Hand the partitions being revoked to the shell (Revoke), or go on at once."""
        self._prepare = "revoking"
        giving = self.revoking & self.owned
        if giving:
            self._emit(Revoke(giving))
        else:
            self._after_revoke(now_ms)

    def _after_revoke(self, now_ms: int) -> None:
        if self.closing:
            if self._prepare != "committing":     # the close's own commit answers first
                self._leave()
        elif self.subscription is None:
            self._leave(closed=False)
        elif self._prepare == "revoking":
            self._prepare = "done"
            if self.rejoin_needed:
                self._maybe_join(now_ms)

    def _send_join(self, now_ms: int) -> None:
        if self.closing:                          # no new rebalance for a closing member
            self._close_now(now_ms)
            return
        self._transition(State.PREPARING_REBALANCE)
        self._join_sent_ms = now_ms
        self._send_rebalance("join", m.JoinGroup(
            0, self.config.group_id, self.member_id, self.config.session_timeout_ms,
            self.config.max_poll_interval_ms, "consumer", self._protocols(),
            self.config.group_instance_id, self.config.client_id, "", 5))

    def _retry_join(self, now_ms: int) -> None:
        """No coordinator answered the JoinGroup or SyncGroup: join again after a backoff
        (the member keeps its id and generation; the coordinator decides what they are worth)."""
        if self.closing:
            self._close_now(now_ms)
            return
        self.rejoin_needed = True
        self._retry_join_ms = now_ms + self.config.retry_backoff_ms

    def _protocols(self) -> tuple:
        out = []
        for name in self.config.assignors:
            sticky = name == "cooperative-sticky"
            sub = Subscription(tuple(self.subscription or ()),
                               owned_partitions=tuple(sorted(self.owned)) if sticky else (),
                               generation=self.generation if sticky and self.generation >= 0 else None,
                               group_instance_id=self.config.group_instance_id)
            out.append((name, encode_subscription(sub)))
        return tuple(out)

    def _may_auto_commit(self) -> bool:
        return self.state is State.STABLE and not self.rejoin_needed

    def _unsubscribe(self, now_ms: int) -> None:
        """Kafka's unsubscribe: revoke what is owned (committing first), leave the group."""
        self.subscription = None
        self.rejoin_needed = False
        self.revoking = self.owned
        self._revoke_pending(now_ms)

    def _leave(self, closed: bool = True) -> None:
        if self.member_id and self.state is not State.UNJOINED:
            self._send("leave", m.LeaveGroup(0, self.config.group_id, (m.LeaveMember(
                self.member_id, self.config.group_instance_id, "the consumer is leaving"),)))
        if self.owned:
            self._emit(Lose(self.owned))
        self.owned = self.revoking = frozenset()
        self._transition(State.UNJOINED)
        self.member_id, self.generation = "", m.NO_GENERATION
        self._rebalance_token = self._heartbeat_token = None
        self._prepare = None
        self.closed = closed

    # -- helpers ------------------------------------------------------------------------------
    def _joining(self) -> bool:
        """A JoinGroup is in flight: an older request answered ILLEGAL_GENERATION or
        UNKNOWN_MEMBER_ID may have been overtaken by it (Ray keeps no order between calls),
        so its answer, not theirs, says whether this member is still in the group."""
        return self.state is State.PREPARING_REBALANCE and self._rebalance_token is not None

    def _in_generation(self) -> bool:
        return self.generation >= 0 and bool(self.member_id)

    def _confirm(self, sent_ms: int, stable: bool) -> None:
        self._confirmed_until_ms = max(self._confirmed_until_ms,
                                       sent_ms + self.config.session_timeout_ms)
        if stable:
            self._stable_since_ms = max(self._stable_since_ms, sent_ms)

    def _request_rejoin(self) -> None:
        if not self.rejoin_needed:
            self.rejoin_needed = True
            if self._prepare == "done" or self.state is State.STABLE:
                self._prepare = None

    def _reset_generation(self, reset_member_id: bool) -> None:
        """Kafka's resetStateAndRejoin: whatever was owned is lost."""
        if self.owned:
            self._emit(Lose(self.owned))
        self.owned = self.revoking = frozenset()
        self._transition(State.UNJOINED)
        self.generation = m.NO_GENERATION
        if reset_member_id:
            self.member_id = m.UNKNOWN_MEMBER
        self._confirmed_until_ms = -1
        self._rebalance_token = None
        self._prepare = "done"              # nothing left to commit or revoke before the join
        self.rejoin_needed = self.subscription is not None

    def _fail(self, code: int, what: str, now_ms: int) -> None:
        self.fatal = error_for_code(code, f"{what} {self.config.group_id}")
        self._retry_join_ms = now_ms + self.config.retry_backoff_ms
        self._transition(State.UNJOINED)
        self.rejoin_needed = self.subscription is not None
        self._prepare = "done" if not self.owned else None

    def _transition(self, target: State) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"member of {self.config.group_id}: {self.state.name} → "
                                    f"{target.name}")
        self.state = target

    def _send(self, kind: str, request, **out) -> int:
        token = next(self._tokens)
        self._out[token] = _Out(kind, self.generation, self.member_id, **out)
        self._emit(Send(token, request))
        return token

    def _send_rebalance(self, kind: str, request) -> None:
        self._rebalance_token = self._send(kind, request)

    def _send_commit(self, purpose: str, partitions: frozenset, offsets, generation: int,
                     member_id: str, ticket: int | None = None, simple: bool = False) -> int:
        token = next(self._tokens)
        self._out[token] = _Out("commit", generation, member_id, purpose, frozenset(partitions),
                                ticket)
        self._emit(SendCommit(token, frozenset(partitions), offsets, generation, member_id,
                              None if simple else self.config.group_instance_id))
        return token
