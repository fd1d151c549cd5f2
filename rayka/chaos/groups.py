"""The consumer-group side of a chaos run: members that join, leave and die while the
group's coordinator is attacked, recording what they were assigned, read and committed.

Rules:
- Members are native consumers of one group (rayka/client/group.py), each in its own
  thread, subscribed to the chaos topic with session.timeout.ms 6000 and heartbeats every
  500 ms. Each poll's records are recorded (`group-read`), then committed synchronously
  (`group-commit` ok, or fail when the group rebalanced meanwhile): commit after
  processing, so the group consumes every record at least once.
- Churn, on a seeded schedule: a member joins (up to `max_members`), leaves (LeaveGroup), or
  dies: its heartbeats and polls stop at once and it never leaves, so the coordinator sees
  exactly what a killed process looks like and expires it after the session timeout.
- Every assignment a member receives is recorded with its generation (`group-assign`); a
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
SESSION_MS, HEARTBEAT_MS = 6000, 500


class _Member:
    def __init__(self, cluster, topic: str, history, name: str):
        self.name, self.history = name, history
        self.consumer = cluster.consumer(group_id=GROUP, session_timeout_ms=SESSION_MS,
                                         heartbeat_interval_ms=HEARTBEAT_MS)
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"chaos-{name}")
        self.thread.start()

    def _generation(self) -> int:
        return self.consumer.member.generation

    def _assigned(self, _added) -> None:
        self.history.record("ok", "group-assign", member=self.name, generation=self._generation(),
                            partitions=sorted(p for _, p in self.consumer.member.owned))

    def _revoked(self, _lost) -> None:
        pass      # the next group-assign of this member says what it still owns

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                records = self.consumer.poll(timeout_ms=200)
            except KafkaError as exc:          # the coordinator or a leader is down: next poll
                self.errors.append(f"{type(exc).__name__}")
                continue
            if self.stop.is_set():
                return                           # died mid-poll: nothing after this
            gen = self._generation()
            for r in records:
                self.history.record("ok", "group-read", member=self.name, generation=gen,
                                    partition=r.partition, offset=r.offset,
                                    value=r.value.decode())
            if records:
                offsets = {tp: p for tp, p in self.consumer.positions.items() if p is not None}
                try:
                    self.consumer.commit(offsets)
                    self.history.record("ok", "group-commit", member=self.name, generation=gen,
                                        offsets={str(p): o for (_, p), o in offsets.items()})
                except KafkaError as exc:
                    self.history.record("fail", "group-commit", member=self.name,
                                        generation=gen, error=type(exc).__name__)

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()

    def die(self) -> None:
        """No LeaveGroup, no more heartbeats or polls: what a SIGKILL leaves behind."""
        self.stop.set()
        self.consumer.member._stop.set()


class GroupWorkload:
    def __init__(self, cluster, topic: str, history, rng, *, members: int = 3,
                 max_members: int = 4, churn_s: tuple[float, float] = (2.0, 5.0)):
        self.cluster, self.topic, self.history, self.rng = cluster, topic, history, rng
        self.initial, self.max_members, self.churn_s = members, max_members, churn_s
        self.members: list[_Member] = []
        self.dead: list[_Member] = []
        self.stop_churn, self.stop_all = threading.Event(), threading.Event()
        self._n = 0
        self._lock = threading.Lock()
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
        with self._lock:
            self._n += 1
            name = f"m{self._n}"
            self.members.append(_Member(self.cluster, self.topic, self.history, name))
        self.history.record("info", "group-member", member=name, action="join")
        return name

    def _churn(self) -> None:
        while not self.stop_churn.wait(self.rng.uniform(*self.churn_s)):
            with self._lock:
                live = list(self.members)
            action = self.rng.choice(["join", "leave", "die"]) if len(live) > 1 else "join"
            if action == "join" and len(live) >= self.max_members:
                action = "leave"
            if action == "join":
                self.add_member()
                continue
            victim = self.rng.choice(live)
            with self._lock:
                self.members.remove(victim)
            self.history.record("info", "group-member", member=victim.name, action=action)
            if action == "leave":
                victim.leave()
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
                m.leave()
            for t in self.threads[1:]:
                t.join(30)

    @property
    def errors(self) -> list[str]:
        return []
