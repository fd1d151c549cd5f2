"""ConsumerMembership: a native consumer's side of KIP-848's consumer group protocol (pure).

Kafka's ConsumerMembershipManager (clients/.../consumer/internals/) as one state machine
with the classic machine's vocabulary and bookkeeping (rayka/client/membership.py's
MemberMachine: the same events in, the same effects out), so the shell
(rayka/client/group.py) runs either. The coordinator
computes the assignment; the member only reconciles: revoke what it lost, take what it got,
and say so in its next heartbeat.

Rules:
- States (`CState`, valid previous states as data): UNSUBSCRIBED → JOINING (epoch 0 sent)
  → RECONCILING (an assignment to apply) → STABLE; FENCED (the coordinator fenced the
  member: everything owned is lost, it rejoins at epoch 0 with the same member id, as
  KIP-848 says) and LEAVING (epoch -1, or -2 for a static member) from any state.
- One ConsumerGroupHeartbeat in flight at a time (Send of coordinator.messages'
  ConsumerGroupHeartbeat; topics by NAME on this native door, the broker maps them to ids).
  Every heartbeat is a full one: member id, epoch, instance id, rebalance timeout
  (max_poll_interval_ms), subscribed topics, owned partitions; the coordinator then always
  answers the assignment, which the member compares with what it owns. Next one: the
  interval the coordinator gave after an answer, at once after an assignment changed,
  retry_backoff_ms after a failure.
- An assignment: partitions owned but not assigned are revoked first (their positions
  committed before when auto-commit is on; Revoke for the application's thread, whose
  Revoked completes it); only then are the new ones taken (Assign) and owned. A revocation
  is acknowledged by the next heartbeat's owned partitions, never before the application
  ran it. A new assignment arriving during a revocation waits for it.
- Answers: NONE → the epoch and interval given, ownership confirmed (below).
  FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID → FENCED: every owned partition is lost
  (Lose), the member rejoins at epoch 0. The coordinator errors and no answer → retried.
  Any other error is fatal: the next poll raises it; the member retries the join after
  retry_backoff_ms.
- Ownership is confirmed by the coordinator: records are returned from an owned partition
  only while the newest acknowledged heartbeat was SENT less than session_timeout_ms ago
  and the application polled within max_poll_interval_ms (the classic machine's rule).
- max_poll_interval_ms without a poll: the member leaves (epoch -1) and rejoins at the next
  poll (Kafka's poll timer).
- Commits carry the member epoch as generation id (OffsetCommit v9); STALE_MEMBER_EPOCH is
  RebalanceInProgress to the application, UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH
  CommitFailed. Auto-commit as in the classic machine. Without a subscription a commit is a
  simple group's (generation -1, no member).
- Close / unsubscribe: commit (auto-commit), revoke, then the leave heartbeat (-1; -2 for a
  static member), sent only once the heartbeat in flight is answered (Ray keeps no order
  between two calls: a join overtaking the leave would hold partitions for a whole
  session); `closed` after a close, `leaving` until the leave is answered.
- `member_id` is the client's (KIP-1082), given by the shell.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from coordinator import messages as m
from coordinator.consumer_group import HeartbeatRequest, LEAVE_EPOCH, LEAVE_STATIC_EPOCH
from rayka.client.membership import (Assign, CommitDone, CommitFailed, CommitRequested,
                                     COORDINATOR_ERRORS, Lose, MemberConfig, MemberMachine,
                                     Revoke, Send, SendCommit, Subscribe, Poll, HeartbeatDue,
                                     NoAnswer, Revoked, Close)
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, RebalanceInProgress, error_for_code

__all__ = ["CState", "VALID_PREVIOUS", "ConsumerMembership", "FENCING_ERRORS"]

FENCING_ERRORS = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})


class CState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    LEAVING = "LEAVING"


_ANY = frozenset(CState)
VALID_PREVIOUS: dict[CState, frozenset[CState]] = {
    CState.UNSUBSCRIBED: _ANY,
    CState.JOINING: frozenset({CState.UNSUBSCRIBED, CState.FENCED, CState.JOINING,
                               CState.LEAVING}),
    CState.RECONCILING: frozenset({CState.JOINING, CState.RECONCILING, CState.STABLE}),
    CState.STABLE: frozenset({CState.JOINING, CState.RECONCILING, CState.STABLE}),
    CState.FENCED: _ANY - {CState.UNSUBSCRIBED},
    CState.LEAVING: _ANY,
}


class IllegalTransition(RuntimeError):
    pass


@dataclass
class _Out:
    kind: str                 # heartbeat, commit, leave
    epoch: int
    purpose: str = ""         # commits: auto, revoke, close, app
    partitions: frozenset = frozenset()
    ticket: int | None = None
    owned: frozenset = frozenset()     # heartbeats: the owned partitions they reported


class ConsumerMembership(MemberMachine):
    def __init__(self, config: MemberConfig, member_id: str):
        super().__init__(config)
        self.member_id = member_id
        self.state = CState.UNSUBSCRIBED
        self.epoch = 0
        self.subscription: tuple[str, ...] | None = None
        self.owned: frozenset = frozenset()
        self.revoking: frozenset = frozenset()
        self.target: frozenset | None = None        # the last assignment not yet applied
        self.closing = self.closed = False
        self._revoke_token: int | None = None        # the commit a revocation waits for
        self._leave_token: int | None = None
        self._heartbeat_token: int | None = None
        self._leave_when_answered = False
        self._next_heartbeat_ms = 0
        self._confirmed_until_ms = -1
        self._last_poll_ms: int | None = None

    # -- views (the classic machine's) ------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.epoch if self.state in (CState.RECONCILING, CState.STABLE) else -1

    @property
    def stable(self) -> bool:
        return self.state is CState.STABLE

    @property
    def rebalancing(self) -> bool:
        return self.subscription is not None and self.state is not CState.STABLE

    def fetchable(self, now_ms: int) -> frozenset:
        if (self.subscription is None or now_ms >= self._confirmed_until_ms
                or (self._last_poll_ms is not None
                    and now_ms >= self._last_poll_ms + self.config.max_poll_interval_ms)):
            return frozenset()
        return self.owned - self.revoking

    def next_heartbeat_ms(self) -> int | None:
        if self.subscription is None or self.state in (CState.UNSUBSCRIBED, CState.LEAVING):
            return None
        due = self._next_heartbeat_ms
        if self._last_poll_ms is not None and not self.closing:
            due = min(due, self._last_poll_ms + self.config.max_poll_interval_ms)
        return due

    # -- the application ----------------------------------------------------------------------
    def process_subscribe(self, e: Subscribe) -> None:
        topics = tuple(sorted(set(e.topics)))
        if not topics:
            self.subscription = None
            self._give_up_all("unsubscribe", e.now_ms)
            return
        self.subscription = topics
        if self.state in (CState.UNSUBSCRIBED, CState.FENCED):
            self._join(e.now_ms)
        else:
            self._next_heartbeat_ms = e.now_ms          # tell the coordinator now

    def process_poll(self, e: Poll) -> None:
        self._last_poll_ms = e.now_ms
        if self.subscription is None or self.closing:
            return
        if self.state is CState.UNSUBSCRIBED and self._heartbeat_token is None:
            self._join(e.now_ms)                          # after a poll timeout's leave
        self._maybe_auto_commit(e.now_ms)

    def process_commit_requested(self, e: CommitRequested) -> None:
        if self.subscription is None:
            offsets = e.offsets or ()
            self._send_commit("app", frozenset(tp for tp, _ in offsets), offsets,
                              m.NO_GENERATION, m.UNKNOWN_MEMBER, ticket=e.ticket)
            return
        if self.state not in (CState.STABLE, CState.RECONCILING) or self.epoch <= 0:
            self._emit(CommitDone(e.ticket, RebalanceInProgress(
                f"group {self.config.group_id}: this member has no assignment yet (epoch "
                f"{self.epoch}): poll() until it has, then commit")))
            return
        parts = frozenset(tp for tp, _ in e.offsets) if e.offsets is not None else \
            self.owned - self.revoking
        self._send_commit("app", parts, e.offsets, self.epoch, self.member_id, ticket=e.ticket)

    def process_close(self, e: Close) -> None:
        self.closing = True
        self._give_up_all("close", e.now_ms)

    def process_revoked(self, e: Revoked) -> None:
        self.owned -= e.partitions
        self.revoking -= e.partitions
        if self.revoking:
            return
        if self.closing or self.subscription is None:
            self._leave(e.now_ms)
            return
        self._next_heartbeat_ms = e.now_ms              # acknowledge the revocation
        self._apply_target(e.now_ms)

    # -- the heartbeat thread -----------------------------------------------------------------
    def process_heartbeat_due(self, e: HeartbeatDue) -> None:
        if self.subscription is None or self.state in (CState.UNSUBSCRIBED, CState.LEAVING):
            return
        if (self._last_poll_ms is not None and not self.closing
                and e.now_ms - self._last_poll_ms > self.config.max_poll_interval_ms):
            # Kafka's poll timer: the application stopped polling; leave, rejoin at its poll
            self._lose_all()
            self._send_leave()
            self._transition(CState.UNSUBSCRIBED)
            return
        if self._heartbeat_token is not None or e.now_ms < self._next_heartbeat_ms:
            return
        owned = self.owned                 # partitions being revoked are still held
        self._heartbeat_token = self._send("heartbeat", m.ConsumerGroupHeartbeat(
            0, HeartbeatRequest(
                self.config.group_id, self.member_id, self.epoch,
                instance_id=self.config.group_instance_id,
                rebalance_timeout_ms=self.config.max_poll_interval_ms,
                subscribed_topic_names=self.subscription, owned=_by_topic(owned),
                client_id=self.config.client_id), {}), owned=owned)

    # -- answers ------------------------------------------------------------------------------
    def process_no_answer(self, e: NoAnswer) -> None:
        out = self._out.pop(e.token, None)
        if out is None:
            return
        if out.kind == "commit":
            self._commit_not_answered(e, out)
        elif out.kind == "heartbeat":
            self._on_heartbeat(e.token, out, None, e.now_ms, e.now_ms)

    def _on_heartbeat(self, token, out, r, sent_ms, now_ms) -> None:
        if token == self._heartbeat_token:
            self._heartbeat_token = None
            if self._leave_when_answered:     # a join may have reached the coordinator:
                self._leave_when_answered = False          # the leave must come after it
                self._send_leave()
                return
        if self.state in (CState.UNSUBSCRIBED, CState.LEAVING) or out.epoch != self.epoch:
            return                                     # left, or fenced meanwhile: stale
        if r is None or r.error in COORDINATOR_ERRORS:
            self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms
            return
        if r.error in FENCING_ERRORS:
            self._fence(now_ms)
            return
        if r.error != E.NONE:
            self.fatal = error_for_code(r.error, f"heartbeat of group {self.config.group_id}"
                                        + (f": {r.message}" if r.message else ""))
            self._fence(now_ms)
            self._next_heartbeat_ms = now_ms + self.config.retry_backoff_ms
            return
        self.epoch = r.member_epoch
        self._confirmed_until_ms = max(self._confirmed_until_ms,
                                       sent_ms + self.config.session_timeout_ms)
        self._next_heartbeat_ms = sent_ms + max(r.heartbeat_interval_ms, 1)
        if r.assignment is not None:
            self.target = frozenset((t, p) for t, ps in r.assignment.items() for p in ps)
        if self.state is CState.JOINING:
            self._transition(CState.RECONCILING)
            self._next_auto_commit_ms = now_ms + self.config.auto_commit_interval_ms
        if not self.revoking:
            self._apply_target(now_ms)

    def _on_commit(self, token, out, r: m.OffsetCommitResult, sent_ms, now_ms) -> None:
        self._commit_answered(token, out, r)
        if token == self._revoke_token:
            self._revoke_token = None
            self._emit(Revoke(self.revoking))         # committed or not: revoke now

    def _commit_error(self, out: _Out, code: int) -> KafkaError:
        group = self.config.group_id
        if code == E.STALE_MEMBER_EPOCH:
            return RebalanceInProgress(f"group {group}: member epoch {out.epoch} is stale: "
                                       "poll() and commit again")
        if code in FENCING_ERRORS:
            return CommitFailed(f"group {group}: this member was fenced ({code}); nothing "
                                "committed")
        return error_for_code(code, f"commit to group {group}")

    def _on_leave(self, token, out, r, sent_ms, now_ms) -> None:
        pass                            # best effort: the session timeout covers a lost one

    # -- steps --------------------------------------------------------------------------------
    def _join(self, now_ms: int) -> None:
        self._transition(CState.JOINING)
        self.epoch = 0
        self.target = None
        self._next_heartbeat_ms = now_ms

    def _apply_target(self, now_ms: int) -> None:
        """Revoke what the target leaves out (commit first), else take what it adds."""
        if self.target is None or self.state not in (CState.RECONCILING, CState.STABLE):
            return
        lost = self.owned - self.target
        if lost:
            self._transition(CState.RECONCILING)
            self.revoking = lost
            if self.config.enable_auto_commit:
                self._revoke_token = self._send_commit("revoke", lost, None, self.epoch,
                                                       self.member_id)
            else:
                self._emit(Revoke(lost))
            return
        added = self.target - self.owned
        if added:
            self.owned |= added
            self._emit(Assign(added))
            self._next_heartbeat_ms = now_ms            # acknowledge at once
        self._transition(CState.STABLE)

    def _fence(self, now_ms: int) -> None:
        self._lose_all()
        self._transition(CState.FENCED)
        if self.closing or self.subscription is None:
            self._transition(CState.UNSUBSCRIBED)
            self.closed = self.closing
            return
        self._join(now_ms)

    def _lose_all(self) -> None:
        if self.owned:
            self._emit(Lose(self.owned))
        self.owned = self.revoking = frozenset()
        self.target = None
        self._confirmed_until_ms = -1
        self._revoke_token = None

    def _give_up_all(self, why: str, now_ms: int) -> None:
        """Close or unsubscribe: commit, revoke, then leave."""
        if self.state in (CState.UNSUBSCRIBED, CState.FENCED) or not self.owned:
            self._leave(now_ms)
            return
        self.revoking = self.owned
        if self.config.enable_auto_commit and self.epoch > 0:
            self._revoke_token = self._send_commit(why, self.owned, None, self.epoch,
                                                   self.member_id)
        else:
            self._emit(Revoke(self.owned))

    def _leave(self, now_ms: int) -> None:
        if self._heartbeat_token is not None:
            self._leave_when_answered = True   # Ray keeps no order between two calls
        elif self.state not in (CState.UNSUBSCRIBED, CState.FENCED) or self.epoch > 0:
            self._send_leave()
        self._lose_all()
        self._transition(CState.UNSUBSCRIBED)
        self.epoch = 0
        self.closed = self.closing

    def _send_leave(self) -> None:
        static = self.config.group_instance_id is not None
        self._leave_token = self._send("leave", m.ConsumerGroupHeartbeat(0, HeartbeatRequest(
            self.config.group_id, self.member_id,
            LEAVE_STATIC_EPOCH if static else LEAVE_EPOCH,
            instance_id=self.config.group_instance_id), {}))
        self._heartbeat_token = None

    @property
    def leaving(self) -> bool:
        """A leave is still to be sent or answered (the shell's close waits for it)."""
        return self._leave_when_answered or self._leave_token in self._out

    def _may_auto_commit(self) -> bool:
        return self.state is CState.STABLE          # generation is then the member epoch

    # -- helpers ------------------------------------------------------------------------------
    def _transition(self, target: CState) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(f"member of {self.config.group_id}: {self.state.name} → "
                                    f"{target.name}")
        self.state = target

    def _send(self, kind: str, request, **out) -> int:
        token = next(self._tokens)
        self._out[token] = _Out(kind, self.epoch, **out)
        self._emit(Send(token, request))
        return token

    def _send_commit(self, purpose: str, partitions: frozenset, offsets, epoch: int,
                     member_id: str, ticket: int | None = None) -> int:
        token = next(self._tokens)
        self._out[token] = _Out("commit", epoch, purpose, frozenset(partitions), ticket)
        simple = epoch == m.NO_GENERATION
        self._emit(SendCommit(token, frozenset(partitions), offsets, epoch, member_id,
                              None if simple else self.config.group_instance_id))
        return token


def _by_topic(partitions) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        out.setdefault(t, []).append(p)
    return {t: tuple(ps) for t, ps in out.items()}
