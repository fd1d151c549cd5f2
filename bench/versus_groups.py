"""Side-by-side family "groups": how fast a consumer group settles, and transactions.

Rules: the same code runs against rayka and Kafka (bench/versus.py); clients are librdkafka
(confluent_kafka) over bootstrap_servers(), librdkafka's defaults unless named below;
every run uses fresh topics, a fresh group and a fresh transactional.id; every client is
closed before its topic is deleted. One sample per run per figure.

Before the first run, a warm-up (not measured, its seconds noted): one offset commit of a
throwaway group and one transaction of a throwaway producer, then wait_healed(): Kafka
creates __consumer_offsets and __transaction_state on first use, which would otherwise
land in run 1.

Figures:
1. group.join_4.settled_s (s, lower). A fresh topic of 12 partitions (RF 3, min ISR 2)
   holding 1,200 records of 100 B (100 per partition, acks=all). Four librdkafka Consumers
   of one fresh group (classic protocol, partition.assignment.strategy librdkafka's default
   "range,roundrobin", session.timeout.ms 45000, auto.offset.reset earliest,
   enable.auto.commit false), each created beforehand and polled in its own thread
   (consume(500, 0.1 s) back to back). The threads are released together by a barrier and
   each calls subscribe(); t0 = the instant (taken just before the call) of the LAST
   subscribe. Settled = every partition owned by exactly one member (ownership from the
   on_assign / on_revoke / on_lost callbacks) and every member has read at least one record
   from each partition it owns since its assignment; the figure is the instant the last
   member's reads covered its assignment, minus t0. Both systems run with
   group.initial.rebalance.delay.ms 3000 (Kafka's default), so ~3 s of it is that delay.
2. group.rebalance_5th.settled_s (s, lower). With those 4 settled, a 5th Consumer (same
   settings) subscribes; t0 = just before its subscribe(). Settled as above, with 5
   members, every member's current assignment handed to it after t0 (the eager protocol:
   the old members learn of the rebalance by their next heartbeat, heartbeat.interval.ms
   3000). Offsets are never committed, so every new owner starts again at the earliest
   offset and has records to read at once: the figure is the group protocol plus a first
   fetch, not the pace of a producer. The 4 members' heartbeats are in step (their
   timers start at the same SyncGroup) and the 5th joins just after they settled, so this
   figure is ~one heartbeat interval plus the rebalance itself.
3. txn.commits_per_s (transactions/s, higher), txn.commit_p50_ms / txn.commit_p99_ms
   (ms, lower). One transactional librdkafka Producer (fresh transactional.id;
   init_transactions() outside the clock) on a fresh topic of 6 partitions (RF 3, min ISR
   2), back to back for 5 s (quick: 1 s): begin_transaction(), 100 records of 100 B
   (record i to partition i % 6), commit_transaction(). Figures: transactions completed /
   loop seconds, and the p50 / p99 (nearest rank) of the time the commit_transaction()
   call took.

    .venv/bin/python bench/versus_groups.py kafka|rayka [--runs 3] [--quick]
"""

from __future__ import annotations

import math
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.systems import wait_until  # noqa: E402
from bench.txn_bench import PARTITIONS as TXN_PARTITIONS, PER_TXN, wire_loop  # noqa: E402

PARTITIONS, PER_PARTITION, MEMBERS = 12, 100, 4
VALUE = b"x" * 100
TXN_S = 5.0
TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 120.0


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    values = sorted(values)
    return values[max(0, math.ceil(q * len(values)) - 1)]


def _fill(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    failed: list = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for part in range(PARTITIONS):
        for _ in range(PER_PARTITION):
            p.produce(topic, VALUE, partition=part,
                      on_delivery=lambda err, _m: err is not None and failed.append(err))
    left = p.flush(TIMEOUT_S)
    p.close()
    if left or failed:
        raise RuntimeError(f"{topic}: prefill: {left} undelivered, errors {failed[:3]}")


class _Member:
    """A librdkafka group member polled by its own thread; what it owns comes from its
    rebalance callbacks (eager protocol: whole sets), which run in that thread."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        from confluent_kafka import Consumer
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.topic = topic
        self.lock = threading.Lock()
        self.assigned: frozenset = frozenset()
        self.assigned_at: float | None = None
        self.read: set = set()
        self.covered_at: float | None = None     # reads first covered the assignment
        self.subscribed_at: float | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, barrier: threading.Barrier | None = None) -> None:
        self.thread = threading.Thread(target=self._loop, args=(barrier,), daemon=True)
        self.thread.start()

    def _on_assign(self, _c, parts):
        with self.lock:
            self.assigned = frozenset(tp.partition for tp in parts)
            self.assigned_at = time.monotonic()
            self.read = set()
            self.covered_at = None

    def _on_revoke(self, _c, _parts):
        with self.lock:
            self.assigned, self.assigned_at = frozenset(), None
            self.read, self.covered_at = set(), None

    def _loop(self, barrier):
        if barrier is not None:
            barrier.wait(TIMEOUT_S)
        self.subscribed_at = time.monotonic()
        self.c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                         on_lost=self._on_revoke)
        while not self.stop.is_set():
            got = {m.partition() for m in self.c.consume(500, 0.1) if m.error() is None}
            if got:
                with self.lock:
                    self.read |= got & self.assigned
                    if self.covered_at is None and self.assigned and self.assigned <= self.read:
                        self.covered_at = time.monotonic()

    def state(self) -> tuple[frozenset, float | None, float | None]:
        with self.lock:
            return self.assigned, self.assigned_at, self.covered_at

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(TIMEOUT_S)


def _settled_at(members: list[_Member], after: float) -> float | None:
    """The instant the group was settled (see the module's rules), or None if not yet."""
    owned, covered = [], []
    for m in members:
        assigned, assigned_at, covered_at = m.state()
        if not assigned or assigned_at is None or assigned_at < after or covered_at is None:
            return None
        owned.append(assigned)
        covered.append(covered_at)
    if sum(map(len, owned)) != PARTITIONS or frozenset().union(*owned) != set(range(PARTITIONS)):
        return None
    return max(covered)


def warm_up(system) -> float:
    """What a first group and a first transactional producer would otherwise create inside
    a measured run (Kafka makes __consumer_offsets and __transaction_state on first use),
    then until every partition is led with a full ISR; the seconds that took."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    t0 = time.monotonic()
    bootstrap, topic = system.bootstrap_servers(), f"vw-{uuid.uuid4().hex[:8]}"
    system.create_topic(topic, 1, 3)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"vw-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        c.close()
    p = Producer({"bootstrap.servers": bootstrap,
                  "transactional.id": f"vw-{uuid.uuid4().hex[:8]}"})
    try:
        p.init_transactions(TIMEOUT_S)
        p.begin_transaction()
        p.produce(topic, VALUE, partition=0)
        p.commit_transaction(TIMEOUT_S)
    finally:
        p.close()
    system.delete_topic(topic)
    system.wait_healed(TIMEOUT_S)
    return time.monotonic() - t0


def group_once(system) -> tuple[float, float]:
    """(join_4 settled s, rebalance_5th settled s) on a fresh topic and group."""
    bootstrap = system.bootstrap_servers()
    topic, group = f"vg-{uuid.uuid4().hex[:8]}", f"vg-{uuid.uuid4().hex[:8]}"
    system.create_topic(topic, PARTITIONS, 3)
    members: list[_Member] = []
    try:
        _fill(bootstrap, topic)
        members = [_Member(bootstrap, group, topic) for _ in range(MEMBERS)]
        barrier = threading.Barrier(MEMBERS)
        for m in members:
            m.start(barrier)
        wait_until(lambda: all(m.subscribed_at for m in members), TIMEOUT_S, "4 subscribed",
                   interval_s=0.001)
        t0 = max(m.subscribed_at for m in members)
        join_4 = wait_until(lambda: _settled_at(members, t0), SETTLE_TIMEOUT_S,
                            f"{group}: 4 members settled", interval_s=0.01) - t0

        fifth = _Member(bootstrap, group, topic)
        members.append(fifth)
        fifth.start()
        t1 = wait_until(lambda: fifth.subscribed_at, TIMEOUT_S, "5th subscribed",
                        interval_s=0.001)
        rebalance_5th = wait_until(lambda: _settled_at(members, t1), SETTLE_TIMEOUT_S,
                                   f"{group}: 5 members settled", interval_s=0.01) - t1
        return join_4, rebalance_5th
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.halt()
        for m in members:
            m.c.close()
        system.delete_topic(topic)


def txn_once(system, seconds: float) -> tuple[float, list[float]]:
    """(transactions/s, commit_transaction() ms each) on a fresh topic (linger.ms
    librdkafka's default)."""
    topic = f"vt-{uuid.uuid4().hex[:8]}"
    system.create_topic(topic, TXN_PARTITIONS, 3)
    try:
        return wire_loop(system.bootstrap_servers(), topic, seconds, linger_ms=None)
    finally:
        system.delete_topic(topic)


def run(system, sheet, runs: int, quick: bool) -> None:
    seconds = TXN_S / 5 if quick else TXN_S
    gparams = dict(partitions=PARTITIONS, records_per_partition=PER_PARTITION,
                   initial_rebalance_delay_ms=3000, assignor="range,roundrobin (librdkafka)",
                   protocol="classic")
    tparams = dict(partitions=TXN_PARTITIONS, records_per_transaction=PER_TXN,
                   value_bytes=len(VALUE), loop_s=seconds, replication_factor=3)
    sheet.note("groups.warm_up_s", round(warm_up(system), 2))
    for _ in range(runs):
        t_run = time.monotonic()
        join_4, rebalance_5th = group_once(system)
        sheet.add("group.join_4.settled_s", join_4, "s", "lower", members=4, **gparams)
        sheet.add("group.rebalance_5th.settled_s", rebalance_5th, "s", "lower", members=5,
                  **gparams)
        rate, commits = txn_once(system, seconds)
        sheet.add("txn.commits_per_s", rate, "transactions/s", "higher", **tparams)
        sheet.add("txn.commit_p50_ms", _pct(commits, 0.50), "ms", "lower", **tparams)
        sheet.add("txn.commit_p99_ms", _pct(commits, 0.99), "ms", "lower", **tparams)
        sheet.note("groups.transactions", len(commits))
        sheet.note("groups.run_s", round(time.monotonic() - t_run, 2))


if __name__ == "__main__":
    from bench.versus import family_main
    family_main(run, __doc__)
