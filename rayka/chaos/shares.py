"""The share-group side of a chaos run (KIP-932): members of one share group reading the
chaos topic as a queue while brokers (partition leaders, share coordinators, the group's
coordinator) are killed and paused, recording what they acquired and what their
acknowledgements settled.

Rules:
- Members are native ShareConsumers (rayka/client/share_consumer.py) in explicit mode, each
  polling in its own thread; every record a poll returns is recorded (`share-acquire`:
  member, partition, offset, delivery count), accepted, and the poll's acknowledgements
  committed at once; each record's outcome is recorded (`share-ack`: ok when the broker
  took the acknowledgement, fail with the error it answered, info when no answer came: the
  broker died or went silent, and may have written it).
- The group's records lock for LOCK_MS (share.record.lock.duration.ms; the brokers allow
  it: SHARE_BROKER_CONFIG) and start at the earliest offset.
- Churn, on a seeded schedule: a member joins (up to `max_members`), leaves (close: what
  it holds goes back), or dies: its thread stops at once and it never closes, so its
  records come back only when their locks expire.
- `finish()`: churn stops, one member is guaranteed, and the run waits until every record
  the producers had acknowledged is accepted (ok, or info: perhaps), then every member
  closes.
  `share-final` records the topic's end offsets.
"""

from __future__ import annotations

import threading

from rayka.chaos.groups import churn_step
from replicas.errors import ErrorCode as E
from replicas.errors import KafkaError

SHARE_GROUP = "chaos-share"
LOCK_MS = 3000
HEARTBEAT_MS = 500
SHARE_BROKER_CONFIG = {"group_share_min_record_lock_duration_ms": 1000,
                       "group_share_min_heartbeat_interval_ms": HEARTBEAT_MS,
                       "group_share_heartbeat_interval_ms": HEARTBEAT_MS,
                       "share_coordinator_state_topic_num_partitions": 6}
POLL_MS = 200
MAX_RECORDS = 50
# the broker died or went silent before answering: the acknowledgement may have been written
# (as a producer's unanswered send may have been appended)
UNKNOWN_OUTCOME = {E.REQUEST_TIMED_OUT, -1}


class _ShareMember:
    def __init__(self, cluster, topic: str, history, name: str, settled: set):
        self.name, self.history, self.settled = name, history, settled
        self.consumer = cluster.share_consumer(SHARE_GROUP, acknowledgement_mode="explicit",
                                               max_records=MAX_RECORDS)
        self.consumer.subscribe([topic])
        self.stop = threading.Event()
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"chaos-{name}")
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._round()
            except Exception as exc:             # recorded; a member never dies of it
                self.history.record("info", "share-member-error", member=self.name,
                                    error=f"{type(exc).__name__}: {exc}")
        if self.closing.is_set():
            self.consumer.close()

    def _round(self) -> None:
        """One poll: its records accepted, the acceptances committed and recorded."""
        try:
            records = self.consumer.poll(POLL_MS)
        except KafkaError:
            return                         # a broker is down: the next poll
        if self.stop.is_set():
            return                         # died mid-poll: nothing after this
        for r in records:
            self.history.record("ok", "share-acquire", member=self.name,
                                partition=r.partition, offset=r.offset,
                                delivery_count=r.delivery_count)
            self.consumer.acknowledge(r, "accept")
        if not records:
            return
        try:
            codes = self.consumer.commit_sync()
        except KafkaError as exc:
            codes = {}
            self.history.record("fail", "share-commit", member=self.name,
                                error=type(exc).__name__)
        for r in records:
            code = int(codes.get((r.topic, r.partition), -1))
            kind = "ok" if code == 0 else "info" if code in UNKNOWN_OUTCOME else "fail"
            self.history.record(kind, "share-ack",
                                member=self.name, partition=r.partition, offset=r.offset,
                                delivery_count=r.delivery_count, error=code)
            if kind != "fail":
                self.settled.add((r.partition, r.offset))

    def leave(self) -> None:
        self.closing.set()
        self.stop.set()
        self.thread.join(60)

    def die(self) -> None:
        """No close, no more heartbeats or polls: what a SIGKILL leaves behind."""
        self.stop.set()
        self.consumer.abandon()


class ShareWorkload:
    def __init__(self, cluster, topic: str, history, rng, *, members: int = 3,
                 max_members: int = 5, churn_s: tuple[float, float] = (2.0, 5.0)):
        self.cluster, self.topic, self.history, self.rng = cluster, topic, history, rng
        self.initial, self.max_members, self.churn_s = members, max_members, churn_s
        self.members: list[_ShareMember] = []
        self.settled: set = set()                      # (partition, offset) accepted
        self.stop_churn = threading.Event()
        self._n = 0
        self._lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.cluster.admin().set_group_config(SHARE_GROUP, {
            "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": LOCK_MS})
        for _ in range(self.initial):
            self.add_member()
        t = threading.Thread(target=self._churn, daemon=True, name="chaos-share-churn")
        t.start()
        self.threads.append(t)

    def add_member(self) -> str:
        with self._lock:
            self._n += 1
            name = f"s{self._n}"
            self.members.append(_ShareMember(self.cluster, self.topic, self.history, name,
                                             self.settled))
        self.history.record("info", "share-member", member=name, action="join")
        return name

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
            self.history.record("info", "share-member", member=victim.name, action=action)
            if action == "leave":
                victim.leave()
            else:
                victim.die()

    def finish(self, acked, timeout_s: float = 240.0) -> None:
        """Churn stops; every acknowledged record (`acked`: (partition, offset) pairs) is
        accepted and settled by some member; then every member closes."""
        from rayka.client.admin import wait_for
        self.stop_churn.set()
        for t in self.threads:
            t.join(30)
        if not self.members:
            self.add_member()
        try:
            wait_for(lambda: set(acked) <= set(self.settled), timeout_s,
                     "every acknowledged record accepted by the group")
        finally:
            self.history.record("ok", "share-final", settled=len(self.settled))
            for m in list(self.members):
                m.leave()

    def stop(self) -> None:
        self.stop_churn.set()
        for m in list(self.members):
            m.stop.set()
