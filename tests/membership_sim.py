"""A seeded world of native group members (rayka/client/membership.py, pure) against the real
group coordinator (coordinator/, pure) with one fake clock, a network that delays every
request and answer by a random time, and consumers reading partitions of known lengths.

- Each member plays the shell of rayka/client/group.py: its Sends travel to the coordinator
  and back, its commits go out one at a time, the leader computes the plan, Revoke/Lose drop
  positions, Assign asks for the committed offsets (earliest when none).
- Without auto-commit a member commits what each poll read (CommitRequested) at once.
- Producers append to every partition at every step (up to `records` each; `drain` fills
  them all), faster than the members read, so records wait through every rebalance.
- Each step advances the clock a little and does one thing: a member polls (Poll, then reads
  up to a few records of every fetchable partition), a heartbeat thread ticks, a member
  joins, closes, freezes (processes nothing, its heartbeats stop, answers wait) or thaws.
- `reads` records every (time, member, partition, offset) returned; `check_disjoint()` is
  the ownership invariant: no partition is fetchable by two members at the same instant.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import random

from coordinator import messages as m
from coordinator.config import GroupCoordinatorConfig
from rayka.client import membership as ms
from tests.coordinator_sim import Driver

GROUP, TOPIC = "sim", "t"


class SimMember:
    def __init__(self, world: "World", name: str, config: ms.MemberConfig):
        self.world, self.name = world, name
        self.machine = ms.Membership(config)
        self.positions: dict[tuple, int] = {}
        self.frozen_until = -1
        self.inbox: list = []                 # events waiting while frozen
        self.commits: list = []               # SendCommit effects, oldest first (one in flight)
        self.commit_sent = False

    @property
    def frozen(self) -> bool:
        return self.world.now < self.frozen_until

    def deliver(self, event) -> None:
        if self.frozen:
            self.inbox.append(event)
            return
        self.process(event)

    def thaw(self) -> None:
        while self.inbox and not self.frozen:
            self.process(self.inbox.pop(0))

    def process(self, event) -> None:
        for effect in self.machine.process(event):
            self.carry_out(effect)

    def carry_out(self, effect) -> None:
        w = self.world
        if isinstance(effect, ms.Send):
            w.send(self, effect.token, effect.request)
        elif isinstance(effect, ms.SendCommit):
            offsets = effect.offsets         # positions as they are now, as the shell does
            if offsets is None:
                offsets = tuple(sorted((tp, self.positions[tp]) for tp in effect.partitions
                                       if tp in self.positions))
            self.commits.append(dataclasses.replace(effect, offsets=offsets))
            self._next_commit()
        elif isinstance(effect, ms.ComputeAssignment):
            plan = ms.compute_assignment(effect, lambda ts: {t: w.partitions for t in ts})
            self.process(ms.Assigned(effect.generation, plan, w.now))
        elif isinstance(effect, ms.Revoke):
            for tp in effect.partitions:
                self.positions.pop(tp, None)
            self.process(ms.Revoked(effect.partitions, w.now))
        elif isinstance(effect, ms.Lose):
            for tp in effect.partitions:
                self.positions.pop(tp, None)
        elif isinstance(effect, ms.Assign):
            w.send(self, None, m.OffsetFetch(0, GROUP, tuple(sorted(effect.partitions))))

    def _next_commit(self) -> None:
        if self.commit_sent or not self.commits:
            return
        effect = self.commits[0]
        offsets = effect.offsets
        if not offsets:
            self.commits.pop(0)
            self.process(ms.Answered(effect.token, m.OffsetCommitResult(()), self.world.now,
                                     self.world.now))
            self._next_commit()
            return
        self.commit_sent = True
        self.world.send(self, effect.token, m.OffsetCommit(
            0, GROUP, tuple(m.CommitOffset(tp[0], tp[1], o) for tp, o in offsets),
            effect.generation, effect.member_id, effect.group_instance_id))

    def answered(self, token, result, sent_ms) -> None:
        if token is None:                     # OffsetFetch of an assignment
            for p in result.partitions:
                tp = (p.topic, p.partition)
                if tp in self.machine.owned and tp not in self.positions:
                    self.positions[tp] = max(p.offset, 0)
            return
        if self.commits and self.commits[0].token == token:
            self.commits.pop(0)
            self.commit_sent = False
        self.process(ms.Answered(token, result, sent_ms, self.world.now))
        self._next_commit()

    def poll(self) -> None:
        w = self.world
        self.process(ms.Poll(w.now))
        read = {}
        for tp in sorted(self.machine.fetchable(w.now)):
            pos = self.positions.get(tp)
            if pos is None:
                continue
            n = min(w.rng.randint(1, 5), w.ends[tp] - pos)
            for offset in range(pos, pos + n):
                w.reads.append((w.now, self.name, tp[1], offset))
            self.positions[tp] = read[tp] = pos + n
        if read and not self.machine.config.enable_auto_commit:   # commit after processing
            self.process(ms.CommitRequested(next(w.tickets), tuple(sorted(read.items())), w.now))


class World:
    def __init__(self, seed: int, *, members: int = 2, protocol: str = "range",
                 auto_commit: bool = True, partitions: int = 6, records: int = 2000,
                 freezes: bool = False, churn: bool = True, max_delay_ms: int = 40):
        self.rng = random.Random(seed)
        self.now = 0
        self.partitions = partitions
        self.ends = {(TOPIC, p): 0 for p in range(partitions)}
        self.records = records                  # per partition, produced while the run lasts
        self.driver = Driver(GroupCoordinatorConfig(group_min_session_timeout_ms=1000,
                                                    group_initial_rebalance_delay_ms=300),
                             seed=seed)
        self.driver.own(GROUP)
        self.config = ms.MemberConfig(GROUP, assignors=(protocol,), session_timeout_ms=3000,
                                      heartbeat_interval_ms=500, max_poll_interval_ms=20_000,
                                      enable_auto_commit=auto_commit,
                                      auto_commit_interval_ms=1000)
        self.max_delay_ms = max_delay_ms
        self.freezes, self.churn = freezes, churn
        self.members: list[SimMember] = []
        self.closed: list[SimMember] = []
        self.reads: list[tuple] = []
        self._net: list = []
        self._seq = itertools.count()
        self._rids: dict[int, tuple] = {}          # coordinator request id → (member, token, sent)
        self._names = itertools.count(1)
        self.tickets = itertools.count(1)
        for _ in range(members):
            self.add_member()

    # -- the network ------------------------------------------------------------------------
    def _later(self, fn) -> None:
        heapq.heappush(self._net, (self.now + self.rng.randint(0, self.max_delay_ms),
                                   next(self._seq), fn))

    def send(self, member: SimMember, token, request) -> None:
        sent = self.now

        def arrive():
            rid = next(self.driver._rid)
            event = dataclasses.replace(request, request_id=rid)
            self.driver.issued[rid] = event
            self._rids[rid] = (member, token, sent)
            self.driver.send(event)
            self._collect()
        self._later(arrive)

    def _collect(self) -> None:
        for rid in [r for r in self._rids if r in self.driver.answers]:
            member, token, sent = self._rids.pop(rid)
            result = self.driver.answers[rid]
            self._later(lambda member=member, token=token, result=result, sent=sent:
                        member.deliver(("answer", token, result, sent)))

    # -- the world --------------------------------------------------------------------------
    def add_member(self) -> SimMember:
        member = SimMember(self, f"m{next(self._names)}", self.config)
        member.process = _answers_too(member)
        self.members.append(member)
        member.process(ms.Subscribe((TOPIC,), self.now))
        return member

    def advance(self, ms_: int) -> None:
        target = self.now + ms_
        while self._net and self._net[0][0] <= target:
            at, _, fn = heapq.heappop(self._net)
            self.now = max(self.now, at)
            fn()
        self.now = target
        self.driver.clock.now = self.now
        self.driver.send(m.Tick())
        self._collect()
        for member in self.members:
            if not member.frozen:
                member.thaw()

    def step(self) -> None:
        self.advance(self.rng.randint(1, 60))
        for tp in self.ends:                                    # producers append
            self.ends[tp] = min(self.records, self.ends[tp] + self.rng.randint(0, 2))
        live = [x for x in self.members if not x.frozen]
        roll = self.rng.random()
        if roll < 0.55 and live:
            self.rng.choice(live).poll()
        elif roll < 0.9:
            closing = [x for x in self.closed if not x.machine.closed]
            for member in live + closing:         # a closing member's thread still beats
                due = member.machine.next_heartbeat_ms()
                if due is not None and self.now >= due:
                    member.process(ms.HeartbeatDue(self.now))
        elif self.churn and roll < 0.93 and len(self.members) < 4:
            self.add_member()
        elif self.churn and roll < 0.96 and len(live) > 1:
            self.close(self.rng.choice(live))
        elif self.freezes and roll < 0.98 and live:
            self.rng.choice(live).frozen_until = self.now + self.rng.choice([500, 2000, 6000])
        self.check_disjoint()

    def close(self, member: SimMember) -> None:
        member.process(ms.Close(self.now))
        self.members.remove(member)
        self.closed.append(member)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def drain(self, limit_ms: int = 120_000) -> bool:
        """No more churn or freezes: members poll and heartbeat until everything is read and
        committed. True when it got there."""
        self.churn = self.freezes = False
        self.ends = {tp: self.records for tp in self.ends}
        end = self.now + limit_ms
        for member in self.members:
            member.frozen_until = -1
        while self.now < end:
            self.advance(self.rng.randint(1, 60))
            for member in self.members:
                member.thaw()
                member.poll()
                due = member.machine.next_heartbeat_ms()
                if due is not None and self.now >= due:
                    member.process(ms.HeartbeatDue(self.now))
            self.check_disjoint()
            if self.committed() == self.ends:
                return True
        return False

    def committed(self) -> dict:
        result = self.driver.fetch(GROUP, tuple(self.ends))
        return {(p.topic, p.partition): p.offset for p in result.partitions}

    # -- the invariant -----------------------------------------------------------------------
    def check_disjoint(self) -> None:
        seen: dict[tuple, str] = {}
        for member in self.members + self.closed:
            for tp in member.machine.fetchable(self.now):
                assert tp not in seen, (f"t={self.now}: {tp} fetchable by {seen[tp]} and "
                                        f"{member.name}")
                seen[tp] = member.name


def _answers_too(member: SimMember):
    """member.process that also takes the network's ("answer", ...) deliveries."""
    plain = SimMember.process.__get__(member)

    def process(event):
        if isinstance(event, tuple) and event[0] == "answer":
            member.answered(*event[1:])
        else:
            plain(event)
    return process
