"""The consumer-group side of a chaos run: members that join, leave and die while the
group's coordinator is attacked, recording what they were assigned, read and committed.

Rules:
- Members are native consumers of one group (rayka/client/consumer.py), of the classic
  protocol or (`group_protocol="consumer"`) KIP-848's, whose generation is the member
  epoch, subscribed to the chaos topic with session.timeout.ms 3000 and heartbeats every
  300 ms (KIP-848: the coordinator's group.consumer.* at the same values) (the brokers allow
  sessions from 1 s and delay a new group's first rebalance 500 ms: GROUP_BROKER_CONFIG). Every other member
  polls in its own thread; the rest share ONE polling thread that polls them in turn (each
  poll of 200 ms), as a script with several consumers would.
- Odd members commit by themselves (enable_auto_commit: on the interval, before a
  revocation, on leaving); even members commit what each poll returned, synchronously
  (`group-commit` ok, or fail when the group rebalanced meanwhile): commit after
  processing, so the group consumes every record at least once either way.
- Churn, on a seeded schedule: a member joins (up to `max_members`), leaves (close: commit,
  LeaveGroup), or dies: its heartbeats and polls stop at once and it never leaves, so the
  coordinator sees exactly what a killed process looks like and expires it after the
  session timeout.
- After each poll a member in a stable generation records its generation and assignment
  when they changed (`group-assign`); each record read is recorded with the generation (`group-read`); a
  sampler records the group's committed offsets twice a second (`group-committed-sample`).
- Coordinator faults (FaultInjector-style, public APIs): the broker leading the group's
  `__consumer_offsets` partition is killed (Ray restarts it) or paused (SIGSTOP) right
  after a member joins, so it lands mid-rebalance, with commits in flight.
- `finish()`: churn stops, one member is guaranteed, and the run waits until the committed
  offsets reach every partition's end (everything consumed and committed), then every
  member leaves. `group-final` records the committed offsets and the end offsets.
"""

from __future__ import annotations

import threading
import time

import ray

from coordinator.records import partition_for
from replicas.errors import KafkaError

GROUP = "chaos-group"
SESSION_MS, HEARTBEAT_MS, AUTO_COMMIT_MS = 3000, 300, 1000
# Kafka's defaults (a 6 s minimum session, 3 s initial delay) would let a member dying every
# few seconds mid-rebalance stall the group for the whole run
GROUP_BROKER_CONFIG = {"group_min_session_timeout_ms": 1000,
                       "group_initial_rebalance_delay_ms": 500,
                       "group_consumer_min_session_timeout_ms": SESSION_MS,  # KIP-848 groups
                       "group_consumer_session_timeout_ms": SESSION_MS,
                       "group_consumer_min_heartbeat_interval_ms": HEARTBEAT_MS,
                       "group_consumer_heartbeat_interval_ms": HEARTBEAT_MS}
POLL_MS = 200


def churn_step(rng, live: list, max_members: int) -> tuple[str, object]:
    """One seeded churn decision over the live members: ("join", None), or ("leave" |
    "die", the victim). A lone member is never taken; a full group loses one instead."""
    action = rng.choice(["join", "leave", "die"]) if len(live) > 1 else "join"
    if action == "join" and len(live) >= max_members:
        action = "leave"
    return (action, None) if action == "join" else (action, rng.choice(live))


class _Member:
    def __init__(self, cluster, topic: str, history, name: str, auto_commit: bool,
                 group_protocol: str = "classic"):
        self.name, self.history, self.auto_commit = name, history, auto_commit
        self.consumer = cluster.consumer(group_id=GROUP, session_timeout_ms=SESSION_MS,
                                         heartbeat_interval_ms=HEARTBEAT_MS,
                                         enable_auto_commit=auto_commit,
                                         auto_commit_interval_ms=AUTO_COMMIT_MS,
                                         group_protocol=group_protocol)
        self.consumer.subscribe([topic])
        self.stop = threading.Event()
        self.errors: list[str] = []
        self._seen: tuple | None = None

    def _generation(self) -> int:
        return self.consumer.group_metadata().generation_id

    def poll_once(self) -> None:
        """One poll; its records and, when it changed, the assignment go to the history."""
        try:
            records = self.consumer.poll(timeout_ms=POLL_MS)
        except KafkaError as exc:          # the coordinator or a leader is down: next poll
            self.errors.append(f"{type(exc).__name__}")
            return
        if self.stop.is_set():
            return                           # died mid-poll: nothing after this
        gen = self._generation()
        seen = (gen, tuple(self.consumer.assignment()))
        if seen != self._seen and gen >= 0 and not self.consumer.member.needs_join:
            self._seen = seen
            self.history.record("ok", "group-assign", member=self.name, generation=gen,
                                partitions=sorted(p for _, p in seen[1]))
        for r in records:
            self.history.record("ok", "group-read", member=self.name, generation=gen,
                                partition=r.partition, offset=r.offset, value=r.value.decode())
        if records and not self.auto_commit:
            offsets = {(r.topic, r.partition): r.offset + 1 for r in records}
            try:
                self.consumer.commit(offsets)
                self.history.record("ok", "group-commit", member=self.name, generation=gen,
                                    offsets={str(p): o for (_, p), o in offsets.items()})
            except KafkaError as exc:
                self.history.record("fail", "group-commit", member=self.name,
                                    generation=gen, error=type(exc).__name__)

    def leave(self) -> None:
        self.stop.set()
        self.consumer.close()

    def die(self) -> None:
        """No LeaveGroup, no more heartbeats or polls: what a SIGKILL leaves behind."""
        self.stop.set()
        self.consumer.member.pause_heartbeats()


class _Poller:
    """Polls its members in turn until stopped (one thread for one or several members).
    A member is closed by the thread that polls it (a consumer is not thread-safe)."""

    def __init__(self, name: str):
        self.members: list[_Member] = []
        self.leaving: list[_Member] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def add(self, member: _Member) -> None:
        with self.lock:
            self.members.append(member)

    def leave(self, member: _Member, timeout_s: float = 60.0) -> None:
        """Have the polling thread close `member`; wait until it did."""
        with self.lock:
            self.leaving.append(member)
        deadline = time.monotonic() + timeout_s
        while member in self.members and time.monotonic() < deadline:
            time.sleep(0.05)     # polled: the polling thread closes it between two polls

    def _run(self) -> None:
        while not self.stopped.is_set():
            with self.lock:
                members = [m for m in self.members if not m.stop.is_set() or m in self.leaving]
            if not members:
                time.sleep(0.05)  # polled: a member may be added
                continue
            for member in members:
                if member in self.leaving:
                    member.leave()
                    with self.lock:
                        self.leaving.remove(member)
                        self.members.remove(member)
                elif not member.stop.is_set():
                    member.poll_once()


class GroupWorkload:
    def __init__(self, cluster, topic: str, history, rng, *, members: int = 3,
                 max_members: int = 4, churn_s: tuple[float, float] = (2.0, 5.0),
                 group_protocol: str = "classic"):
        self.cluster, self.topic, self.history, self.rng = cluster, topic, history, rng
        self.group_protocol = group_protocol
        self.initial, self.max_members, self.churn_s = members, max_members, churn_s
        self.members: list[_Member] = []
        self.dead: list[_Member] = []
        self.stop_churn, self.stop_all = threading.Event(), threading.Event()
        self._n = 0
        self._lock = threading.Lock()
        self._pollers: dict[str, _Poller] = {}
        self._shared: _Poller | None = None
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for _ in range(self.initial):
            self.add_member()
        for target, name in ((self._churn, "chaos-group-churn"),
                             (self._sample, "chaos-group-sampler")):
            t = threading.Thread(target=target, daemon=True, name=name)
            t.start()
            self.threads.append(t)

    # -- membership ----------------------------------------------------------------------------
    def add_member(self) -> str:
        """m1 polls alone and auto-commits, m2 shares the polling thread and commits by hand,
        m3 shares and auto-commits, m4 alone by hand, and round again."""
        with self._lock:
            self._n += 1
            n, name = self._n, f"m{self._n}"
            member = _Member(self.cluster, self.topic, self.history, name,
                             auto_commit=n % 2 == 1, group_protocol=self.group_protocol)
            if n % 4 in (2, 3):
                if self._shared is None:
                    self._shared = _Poller("chaos-group-shared-poller")
                poller = self._shared
            else:
                poller = _Poller(f"chaos-{name}")
            self._pollers[name] = poller
            poller.add(member)
            self.members.append(member)
        self.history.record("info", "group-member", member=name, action="join")
        return name

    def _leave(self, member: _Member) -> None:
        self._pollers[member.name].leave(member)

    def _churn(self) -> None:
        while not self.stop_churn.wait(self.rng.uniform(*self.churn_s)):
            with self._lock:
                live = list(self.members)
            action, victim = churn_step(self.rng, live, self.max_members)
            if action == "join":
                self.add_member()
                continue
            with self._lock:
                self.members.remove(victim)
            self.history.record("info", "group-member", member=victim.name, action=action)
            if action == "leave":
                self._leave(victim)
            else:
                victim.die()
                self.dead.append(victim)

    def _sample(self) -> None:
        admin = self.cluster.admin()
        while not self.stop_all.wait(0.5):
            try:
                committed = admin.committed_offsets(GROUP, self.topic)
            except Exception:     # the coordinator is under attack: sample next time
                continue
            self.history.record("ok", "group-committed-sample",
                                offsets={str(p): o for (_, p), o in committed.items()})

    # -- coordinator faults ----------------------------------------------------------------------
    def coordinator(self) -> int:
        admin = self.cluster.admin()
        n = len(admin.describe_topic("__consumer_offsets"))
        return admin.describe_topic("__consumer_offsets")[partition_for(GROUP, n)].leader

    def kill_coordinator(self, injector) -> dict:
        """A member joins (a rebalance starts), then the coordinator's broker is killed."""
        self.add_member()
        broker = self.coordinator()
        injector.kill_broker(broker, restart=True)
        return {"kind": "kill-coordinator", "target": f"broker-{broker}", "partition": None,
                "broker": broker}

    def pause_coordinator(self, injector) -> dict:
        self.add_member()
        broker = self.coordinator()
        pid = ray.get(self.cluster.broker_actor(broker).pid.remote(), timeout=30)
        return dict(injector.pause_pid(pid, f"broker-{broker}"), kind="pause-coordinator",
                    partition=None, broker=broker)

    # -- the end ---------------------------------------------------------------------------------
    def finish(self, timeout_s: float = 240.0) -> None:
        """Churn stops; the group consumes and commits everything; every member leaves."""
        from rayka.client.admin import wait_for
        self.stop_churn.set()
        for t in self.threads[:1]:
            t.join(30)
        if not self.members:
            self.add_member()
        consumer = self.cluster.consumer()
        tps = [(self.topic, p.partition) for p in self.cluster.admin().describe_topic(self.topic)]
        ends = consumer.end_offsets(tps)
        consumer.close()
        admin = self.cluster.admin()

        def caught_up():
            try:
                committed = admin.committed_offsets(GROUP, self.topic)
            except KafkaError:
                return False
            return all(committed.get(tp, -1) >= end for tp, end in ends.items() if end > 0)
        try:
            wait_for(caught_up, timeout_s, "the group consumed and committed everything")
        finally:
            committed = {}
            try:
                committed = admin.committed_offsets(GROUP, self.topic)
            except KafkaError:
                pass
            self.history.record("ok", "group-final",
                                committed={str(p): o for (_, p), o in committed.items()},
                                ends={str(p): o for (_, p), o in ends.items()})
            self.stop_all.set()
            for m in list(self.members):
                self._leave(m)
            for poller in set(self._pollers.values()):
                poller.stopped.set()
            for t in self.threads[1:]:
                t.join(30)

    def stop(self) -> None:
        """Everything stops (the run ends, finished or not); members are not closed."""
        self.stop_churn.set()
        self.stop_all.set()
        for poller in set(self._pollers.values()):
            poller.stopped.set()

    @property
    def errors(self) -> list[str]:
        return []
