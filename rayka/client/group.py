"""GroupMember: the shell around a native consumer's Membership (rayka/client/membership.py;
with group_protocol "consumer" the KIP-848 ConsumerMembership of consumer_membership.py,
whose member id it makes), talking to the group's coordinator broker over Ray calls (BrokerActor.find_coordinator,
BrokerActor.group). The coordinator is the one Kafka clients reach over the wire, so native
and librdkafka members share a group.

Rules:
- Nothing here blocks the application's poll past its deadline: a request is an ObjectRef
  kept in flight across polls; `refs()` are what poll waits on (beside its fetches) and
  `advance(ready)` takes the answers. A JoinGroup parked by the coordinator for the other
  members to join just stays in flight; poll returns on time.
- The coordinator (CoordinatorLink) is found by asking every live broker's find_coordinator
  at once. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or a dead
  broker make the link forget it (its epoch moves on); every request in flight to it is sent
  again, after RETRY_BACKOFF_S, to the next one found, until the request's deadline (a
  JoinGroup: the rebalance timeout + 5 s, as Kafka's; others REQUEST_TIMEOUT_S); then the
  machine gets NoAnswer.
- A member's commits go out one at a time, in order: Ray may start two calls of one caller
  on a threaded actor in either order, and a late older commit would move the committed
  offset back.
- The heartbeat thread feeds HeartbeatDue at the machine's next heartbeat time, sends the
  heartbeat and waits for it up to the session timeout; an unanswered one makes the link
  forget the coordinator (a frozen broker: Kafka's markCoordinatorUnknown after the session
  timeout), which re-routes the poll thread's requests too.
- Effects: Send and SendCommit go out from whichever thread processed the event;
  ComputeAssignment runs the chosen assignor (rayka/client/assignors.py) over partition
  counts from the consumer's metadata; Revoke, Assign and Lose wait in a queue for the
  application's thread, which runs them (and the user's callbacks) in poll, as Kafka does.
  The machine's ownership view (`fetchable`) changes at once, so a partition lost by the
  heartbeat thread returns no record even before its Lose ran.
- The machine is processed under one lock, taken by the poll and heartbeat threads.
- Close waits until the machine is closed and its leave (LeaveGroup, or a leave heartbeat)
  and commits are answered, up to the close timeout.
"""

from __future__ import annotations

import base64
import itertools
import logging
import threading
import time
import uuid
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Callable

import ray

from coordinator import messages as m
from rayka.client import membership as ms
from rayka.client.consumer_membership import ConsumerMembership
from rayka.client.membership import CommitFailed, MemberConfig, Membership
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError, RequestTimedOut, error_for_code

__all__ = ["CommitFailed", "CoordinatorLink", "GroupMember", "MemberConfig"]

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 30.0            # Kafka's request.timeout.ms
JOIN_EXTRA_S = 5.0                  # a JoinGroup may wait the rebalance timeout, and then this
REDISCOVER = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS}


def new_member_id() -> str:
    """A KIP-848 member id, made by the client (KIP-1082): a random UUID in Kafka's text
    form (URL-safe base64, unpadded)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def _ms(t: float) -> int:
    return int(t * 1000)


def _now() -> float:
    return time.monotonic()


def _coordinator_error(result) -> int | None:
    """The error that means 'ask another broker' in an answer (None: a real answer)."""
    if isinstance(result, m.OffsetCommitResult):
        codes = {p.error for p in result.partitions}
        return codes.pop() if len(codes) == 1 and codes <= REDISCOVER else None
    error = getattr(result, "error", None)
    return error if error in REDISCOVER else None


class CoordinatorLink:
    """Which broker coordinates the group (or, key type 1, the transactional id), found
    without blocking (`find_refs`, `on_ready`) or, for the heartbeat thread, by waiting
    (`wait_found`); `call` sends the coordinator requests through the broker's `method`
    (`group`, or `txn` for the transaction coordinator)."""

    def __init__(self, cluster, group_id: str, key_type: int = 0, method: str = "group"):
        self.cluster, self.group_id = cluster, group_id
        self.key_type, self.method = key_type, method
        self._lock = threading.Lock()
        self._actor = None
        self.epoch = 0
        self._finding: set = set()
        self._retry_at = 0.0

    def current(self):
        """(actor, epoch) of the coordinator, or None while unknown."""
        with self._lock:
            return None if self._actor is None else (self._actor, self.epoch)

    def forget(self, epoch: int) -> None:
        with self._lock:
            if epoch == self.epoch and self._actor is not None:
                self._actor = None
                self.epoch += 1
                self._retry_at = _now() + RETRY_BACKOFF_S

    def find_refs(self) -> list:
        """The find_coordinator calls in flight, started when none is and none is known."""
        with self._lock:
            if self._actor is not None or self._finding or _now() < self._retry_at:
                return list(self._finding)
        refs = [b.find_coordinator.remote(self.group_id, self.key_type)
                for b in self.cluster.broker_actors()]
        with self._lock:
            if self._actor is None and not self._finding:
                self._finding = set(refs)
            return list(self._finding)

    def on_ready(self, ready) -> None:
        with self._lock:
            mine = self._finding & set(ready)
        for ref in mine:
            try:
                error, node = ray.get(ref)
            except ray.exceptions.RayError:     # that broker is down: the others answer
                error, node = -1, None
            actor = self.cluster.broker_actor(node) if not error else None
            with self._lock:
                self._finding.discard(ref)
                if actor is not None and self._actor is None:
                    self._actor, self._finding = actor, set()
                    self.epoch += 1
                elif not self._finding and self._actor is None:
                    self._retry_at = _now() + RETRY_BACKOFF_S   # the offsets topic is being made

    def call(self, request, deadline: float):
        """One coordinator request, waited for (Admin and tools): the coordinator is found, and
        followed when it moves, until `deadline` (monotonic s); then a typed error."""
        while True:
            found = self.wait_found(deadline)
            if found is None:
                raise error_for_code(E.COORDINATOR_NOT_AVAILABLE,
                                     f"group {self.group_id}: no coordinator found")
            actor, epoch = found
            try:
                result = ray.get(getattr(actor, self.method).remote(request),
                                 timeout=max(1.0, deadline - _now()))
            except ray.exceptions.GetTimeoutError:
                raise RequestTimedOut(f"group {self.group_id}: no answer to "
                                      f"{type(request).__name__}") from None
            except ray.exceptions.RayError:          # the coordinator's broker died or restarts
                result = None
            error = E.COORDINATOR_NOT_AVAILABLE if result is None else _coordinator_error(result)
            if error is None:
                return result
            self.forget(epoch)
            if _now() > deadline:
                raise error_for_code(error, f"group {self.group_id}: no coordinator answered")
            time.sleep(RETRY_BACKOFF_S)              # back off before asking where it moved

    def wait_found(self, deadline: float):
        """(actor, epoch), waiting up to `deadline` (monotonic s); None if none was found."""
        while True:
            found = self.current()
            if found is not None or _now() >= deadline:
                return found
            refs = self.find_refs()
            if refs:
                ready, _ = ray.wait(refs, num_returns=1, timeout=max(0.0, deadline - _now()))
                self.on_ready(ready)
            else:
                time.sleep(min(RETRY_BACKOFF_S, max(0.0, deadline - _now())))  # backoff


@dataclass
class _Call:
    token: int
    request: object
    deadline: float
    done: Callable                      # done(result or None, error, sent_ms)
    ref: object = None
    epoch: int = -1
    sent: float = 0.0
    retry_at: float = 0.0
    commit: bool = False


def _heartbeats(member_ref, stop: threading.Event, wake: threading.Event) -> None:
    """The heartbeat thread: ends on close(), when the member is collected, or when this
    process's Ray is shut down (a Ray call then would start a NEW local Ray instance)."""
    while True:
        member = member_ref()
        if member is None or not ray.is_initialized():
            return
        wait_s = member.heartbeat_wait_s()
        del member
        wake.wait(wait_s)
        wake.clear()
        if stop.is_set():
            return
        member = member_ref()
        if member is None or not ray.is_initialized():
            return
        member.heartbeat_once()
        del member


class GroupMember:
    """`owner` receives the application-thread effects: owner._group_revoke(partitions),
    owner._group_lose(partitions), owner._group_assign(partitions), and gives positions:
    owner._group_positions(partitions) → {tp: offset}."""

    def __init__(self, cluster, config: MemberConfig, owner, partition_counts: Callable):
        self.cluster, self.config = cluster, config
        self.machine = (ConsumerMembership(config, new_member_id())
                        if config.group_protocol == "consumer" else Membership(config))
        self.link = CoordinatorLink(cluster, config.group_id)
        self._owner = weakref.proxy(owner) if owner is not None else None
        self._partition_counts = partition_counts
        self._lock = threading.RLock()
        self._calls: dict[int, _Call] = {}
        self._commit_queue: deque[int] = deque()      # commit tokens, oldest first
        self._plain = itertools.count(-1, -1)         # tokens of requests outside the machine
        self._tickets = itertools.count(1)
        self._app: deque = deque()                    # Revoke / Assign / Lose for poll
        self._commit_results: dict[int, KafkaError | None] = {}
        self._commit_callbacks: dict[int, Callable | None] = {}
        self._done_callbacks: deque = deque()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._heartbeats_paused = False
        self._heartbeat_planned_ms = 0           # when the heartbeat thread wakes next
        self._heartbeats = threading.Thread(target=_heartbeats, daemon=True,
                                            args=(weakref.ref(self), self._stop, self._wake),
                                            name=f"heartbeat-{config.group_id}")
        self._heartbeats.start()

    # -- views ----------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.machine.generation

    @property
    def member_id(self) -> str:
        return self.machine.member_id

    @property
    def owned(self) -> frozenset:
        return self.machine.owned

    @property
    def stable(self) -> bool:
        """In a generation, with its assignment (Kafka's MemberState.STABLE)."""
        return self.machine.stable

    @property
    def needs_join(self) -> bool:
        return self.machine.rebalancing

    def fetchable(self) -> frozenset:
        with self._lock:
            return self.machine.fetchable(_ms(_now()))

    # -- the machine ------------------------------------------------------------------------------
    def process(self, event) -> None:
        """Process an event and carry its effects out (from this thread)."""
        with self._lock:
            effects = self.machine.process(event)
            due = self.machine.next_heartbeat_ms()
        if (due is not None and due < self._heartbeat_planned_ms
                and threading.current_thread() is not self._heartbeats):
            self._wake.set()                 # a heartbeat is due before the thread wakes
        for effect in effects:
            self._carry_out(effect)

    def _carry_out(self, effect) -> None:
        if isinstance(effect, ms.Send):
            if threading.current_thread() is self._heartbeats:
                self._send_now(effect.token, effect.request)
            else:
                self._submit(effect.token, effect.request, self._answer_machine(effect.token))
        elif isinstance(effect, ms.SendCommit):
            offsets = effect.offsets
            if offsets is None and self._owner is not None:
                offsets = tuple(sorted(self._owner._group_positions(effect.partitions).items()))
            if not offsets:
                self.process(ms.Answered(effect.token, m.OffsetCommitResult(()), _ms(_now()),
                                         _ms(_now())))
                return
            request = m.OffsetCommit(0, self.config.group_id, tuple(
                m.CommitOffset(tp[0], tp[1], o) for tp, o in offsets),
                effect.generation, effect.member_id, effect.group_instance_id)
            self._submit(effect.token, request, self._answer_machine(effect.token), commit=True)
        elif isinstance(effect, ms.ComputeAssignment):
            plan = ms.compute_assignment(effect, self._partition_counts)
            self.process(ms.Assigned(effect.generation, plan, _ms(_now())))
        elif isinstance(effect, ms.CommitDone):
            self._commit_results[effect.ticket] = effect.error
            if effect.ticket in self._commit_callbacks:
                self._done_callbacks.append(effect.ticket)
        else:                                # Revoke, Assign, Lose: the application's thread
            self._app.append(effect)

    def _answer_machine(self, token: int) -> Callable:
        def done(result, error, sent_ms):
            now = _ms(_now())
            self.process(ms.Answered(token, result, sent_ms, now) if result is not None
                         else ms.NoAnswer(token, error, now))
        return done

    def run_app_effects(self) -> None:
        """The application's thread: run the queued Revoke / Assign / Lose (and callbacks)."""
        while self._done_callbacks:
            ticket = self._done_callbacks.popleft()
            callback, offsets = self._commit_callbacks.pop(ticket, (None, None))
            error = self._commit_results.pop(ticket, None)
            if callback is not None:
                callback(offsets, error)       # Kafka's OffsetCommitCallback.onComplete
            elif error is not None:
                log.warning("group %s: asynchronous commit failed: %s", self.config.group_id, error)
        while self._app:
            effect = self._app.popleft()
            now = _ms(_now())
            if isinstance(effect, ms.Revoke):
                try:
                    if self._owner is not None:
                        self._owner._group_revoke(effect.partitions)
                finally:
                    self.process(ms.Revoked(effect.partitions, now))
            elif isinstance(effect, ms.Lose):
                if self._owner is not None:
                    self._owner._group_lose(effect.partitions)
            elif isinstance(effect, ms.Assign) and self._owner is not None:
                self._owner._group_assign(effect.partitions)

    # -- requests of the application's thread ---------------------------------------------------------
    def _submit(self, token: int, request, done: Callable, commit: bool = False) -> None:
        timeout = (self.config.max_poll_interval_ms / 1000 + JOIN_EXTRA_S
                   if isinstance(request, m.JoinGroup) else REQUEST_TIMEOUT_S)
        call = _Call(token, request, _now() + timeout, done, commit=commit)
        self._calls[token] = call
        if commit:
            self._commit_queue.append(token)
        self._maybe_send(call, _now())

    def _maybe_send(self, call: _Call, now: float) -> None:
        if call.ref is not None or now < call.retry_at:
            return
        if call.commit and self._commit_queue and self._commit_queue[0] != call.token:
            return                                  # an older commit is still in flight
        found = self.link.current()
        if found is None:
            self.link.find_refs()
            return
        actor, call.epoch = found
        call.sent = now
        call.ref = actor.group.remote(call.request)

    def refs(self) -> list:
        """What an answer may come on: the calls in flight, and a coordinator search when a
        call waits for one."""
        refs = [c.ref for c in self._calls.values() if c.ref is not None]
        if any(c.ref is None for c in self._calls.values()):
            refs += self.link.find_refs()
        return refs

    def next_wakeup(self) -> float | None:
        """When advance() has something to do without an answer (a retry, a deadline)."""
        times = [c.retry_at if c.ref is None else c.deadline for c in self._calls.values()]
        return min(times) if times else None

    def advance(self, ready) -> None:
        """Take the answers among `ready`; resend what lost its coordinator; expire calls."""
        ready = set(ready)
        self.link.on_ready(ready)
        now = _now()
        epoch = self.link.epoch
        for call in list(self._calls.values()):
            if call.ref is not None and call.ref in ready:
                try:
                    result = ray.get(call.ref)
                except ray.exceptions.RayError:     # the coordinator's broker died or restarts
                    result = None
                if result is not None and _coordinator_error(result) is None:
                    self._finish(call, result, 0)
                    continue
                self.link.forget(call.epoch)
                call.ref, call.retry_at = None, now + RETRY_BACKOFF_S
            elif call.ref is not None and call.epoch != epoch:
                call.ref = None                      # the link moved on (the heartbeat thread)
            if now >= call.deadline:
                self._finish(call, None, E.REQUEST_TIMED_OUT if call.ref is not None
                             else E.COORDINATOR_NOT_AVAILABLE)
                continue
            self._maybe_send(call, now)

    def _finish(self, call: _Call, result, error: int) -> None:
        self._calls.pop(call.token, None)
        if call.commit:
            self._commit_queue.remove(call.token)
            if self._commit_queue:
                nxt = self._calls.get(self._commit_queue[0])
                if nxt is not None:
                    self._maybe_send(nxt, _now())
        call.done(result, error, _ms(call.sent or _now()))

    def wait(self, deadline: float, other_refs=()) -> set:
        """Wait for one answer (ours or `other_refs`) up to `deadline`; advance; the ready set."""
        refs = self.refs() + list(other_refs)
        wake = self.next_wakeup()
        until = deadline if wake is None else min(deadline, max(wake, _now()))
        ready: list = []
        if refs:
            ready, rest = ray.wait(refs, num_returns=1, timeout=max(0.0, until - _now()))
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
        else:
            time.sleep(max(0.0, min(until - _now(), RETRY_BACKOFF_S)))  # a retry's backoff
        self.advance(ready)
        return set(ready)

    def call(self, request, timeout_s: float = REQUEST_TIMEOUT_S):
        """One coordinator request outside the machine (OffsetFetch, ...), waited for here."""
        box: list = []
        self._submit(next(self._plain), request, lambda r, e, _s: box.append((r, e)))
        deadline = _now() + timeout_s
        while not box:
            if _now() >= deadline:
                raise RequestTimedOut(f"group {self.config.group_id}: no answer to "
                                      f"{type(request).__name__}")
            self.wait(deadline)
        result, error = box[0]
        if result is None:
            raise error_for_code(error, f"group {self.config.group_id}: no coordinator answered")
        return result

    def call_async(self, request, on_done: Callable) -> None:
        """on_done(result or None, error) once answered (from the thread that advances)."""
        self._submit(next(self._plain), request, lambda r, e, _s: on_done(r, e))

    # -- commits ----------------------------------------------------------------------------------
    def commit(self, offsets: tuple, *, asynchronous: bool = False, callback=None,
               timeout_s: float = 60.0) -> None:
        ticket = next(self._tickets)
        if asynchronous:
            self._commit_callbacks[ticket] = (callback, dict(offsets or ()))
        self.process(ms.CommitRequested(ticket, offsets, _ms(_now())))
        if asynchronous:
            return
        deadline = _now() + timeout_s
        while ticket not in self._commit_results:
            if _now() >= deadline:
                raise RequestTimedOut(f"group {self.config.group_id}: commit not answered")
            self.wait(deadline)
        error = self._commit_results.pop(ticket)
        if error is not None:
            raise error

    def committed(self, partitions=None) -> dict[tuple, int]:
        """{tp: committed offset} (partitions without a committed offset are absent)."""
        asked = None if partitions is None else tuple(tuple(tp) for tp in partitions)
        result = self.call(m.OffsetFetch(0, self.config.group_id, asked))
        if result.error:
            raise error_for_code(result.error, f"offsets of group {self.config.group_id}")
        return {(p.topic, p.partition): p.offset for p in result.partitions
                if p.offset >= 0 and not p.error}

    # -- the heartbeat thread ---------------------------------------------------------------------
    def heartbeat_wait_s(self) -> float:
        interval = self.config.heartbeat_interval_ms / 1000
        with self._lock:
            due = self.machine.next_heartbeat_ms()
        wait = interval if due is None or self._heartbeats_paused else \
            min(interval, max(0.005, due / 1000 - _now()))
        self._heartbeat_planned_ms = _ms(_now() + wait)
        return wait

    def heartbeat_once(self) -> None:
        if self._heartbeats_paused:
            return
        try:
            self.process(ms.HeartbeatDue(_ms(_now())))
        except Exception:                        # never kill the thread: log and go on
            log.exception("group %s: heartbeat", self.config.group_id)

    def _send_now(self, token: int, request) -> None:
        """The heartbeat thread's requests: sent and waited for here."""
        timeout = max(1.0, self.config.session_timeout_ms / 1000)
        found = self.link.wait_found(_now() + timeout)
        sent = _now()
        if found is None:
            self.process(ms.NoAnswer(token, E.COORDINATOR_NOT_AVAILABLE, _ms(_now())))
            return
        actor, epoch = found
        try:
            result = ray.get(actor.group.remote(request), timeout=timeout)
        except ray.exceptions.GetTimeoutError:   # a frozen coordinator: find another
            result = None
        except ray.exceptions.RayError:          # its broker died
            result = None
        if result is None or _coordinator_error(result) is not None:
            self.link.forget(epoch)
            self.process(ms.NoAnswer(token, E.COORDINATOR_NOT_AVAILABLE, _ms(_now())))
            return
        self.process(ms.Answered(token, result, _ms(sent), _ms(_now())))

    # -- fault injection (chaos and tests) -------------------------------------------------------------
    def pause_heartbeats(self) -> None:
        """Stop heartbeating (what a frozen or killed process looks like to the coordinator)."""
        self._heartbeats_paused = True

    def resume_heartbeats(self) -> None:
        self._heartbeats_paused = False
        self._wake.set()

    # -- leaving ----------------------------------------------------------------------------------
    def close(self, timeout_s: float = 30.0) -> None:
        """Commit (auto-commit), revoke, LeaveGroup, then stop the heartbeat thread."""
        deadline = _now() + timeout_s
        try:
            self.process(ms.Close(_ms(_now()), int(timeout_s * 1000)))
            while _now() < deadline:
                self.run_app_effects()
                if self.machine.closed and not self.machine.leaving and not any(
                        isinstance(c.request, (m.LeaveGroup, m.ConsumerGroupHeartbeat))
                        or c.commit for c in self._calls.values()):
                    break
                self.wait(deadline)
        except KafkaError as exc:                # the coordinator is gone: the session expires it
            log.info("group %s close: %s", self.config.group_id, exc)
        finally:
            self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
