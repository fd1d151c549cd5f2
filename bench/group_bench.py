"""Consumer groups: how fast a group settles after its last member joins, and commit rates.

Setup: one local rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper), Kafka's
group defaults (group.initial.rebalance.delay.ms 3000, 50 offsets partitions); a topic of
64 partitions (RF 3) prefilled with 64,000 records (1,000 per partition; --quick 6,400).

Measured (one sample per run, a fresh group per run):
0. KIP-848: the same 4 members with group.protocol=consumer (native and librdkafka): last
   join -> settled (every partition owned once and read), beside the classic figures of 1
   (no join phase: the coordinator assigns at each heartbeat, no initial delay).
1. settle: 4 members join one after the other, 0.2 s apart (members in this process, one
   thread each); the clock starts when the LAST member subscribes. Two instants are taken:
   - join phase done: the coordinator's group state (DescribeGroups, polled every 20 ms)
     leaves PreparingRebalance with all 4 members. Kafka's initial delay (InitialDelayedJoin)
     re-arms a full group.initial.rebalance.delay.ms whenever a member joined during the
     previous delay, so with joins spread over 0.6 s the phase ends ~2 delays after the first
     join, ~5.4 s after the last: this is Kafka's rule, not a cost of rayka.
   - settled: every one of the 64 partitions is owned by exactly one member and every member
     has read a record from each partition it owns.
   Reported: settle (last join -> settled), join phase (last join -> join phase done) and
   settled after the join phase (target: within 1 s: SyncGroup, assignment,
   OffsetFetch, first fetches). Native members (the Ray API) and librdkafka members
   (confluent-kafka over the listeners) separately.
2. commits: one member alone in a fresh group (so it owns all 64 partitions) commits the
   positions of every partition synchronously, back to back, for 5 s (--quick 1 s):
   commits/s, each carrying 64 offsets. Native and librdkafka.
3. one thread: 4 native members of a fresh group, polled in turn from ONE thread
   (poll(200 ms) each, max_poll_records 500, auto-commit on), read the whole topic: seconds
   from their subscribe to settled (as in 1) and to every record read, the longest single
   poll (it must stay near its 200 ms: a join in progress waits in flight, not in poll), and
   the records read twice in the group (0: positions are committed before every hand-over).

    .venv/bin/python bench/group_bench.py [--quick] [--runs 3] [--out bench/out/group.json]
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import arg_parser, emit, figure, local_cluster, machine_facts, say  # noqa: E402

NAME = "group"
DEFAULT_OUT = Path(__file__).resolve().parent / "out" / f"{NAME}.json"
PARTITIONS, MEMBERS, PER_PARTITION = 64, 4, 1000
INITIAL_DELAY_MS = 3000
COMMIT_S = 5.0
TIMEOUT_S = 300.0
TARGET_S = 1.0


class _Native:
    def __init__(self, cluster, group, topic, protocol: str = "classic"):
        # KIP-848 members read before the group settles: with auto-commit a partition handed
        # over when fully read would have nothing left for its new owner to read (the
        # settle test's "read from every owned partition"); librdkafka members never commit
        self.c = cluster.consumer(group_id=group, group_protocol=protocol,
                                  enable_auto_commit=protocol == "classic")
        self.c.subscribe([topic])
        self.read: set = set()

    def poll(self):
        for r in self.c.poll(timeout_ms=100):
            self.read.add((r.topic, r.partition))

    def owned(self):
        return set(self.c.assignment()) if not self.c.member.needs_join else set()

    def commit_all(self):
        self.c.commit()

    def close(self):
        self.c.close()


class _Wire:
    def __init__(self, bootstrap, group, topic, protocol: str = "classic"):
        from confluent_kafka import Consumer
        conf = {"bootstrap.servers": bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "consumer":           # KIP-848: the broker assigns, incrementally
            conf["group.protocol"] = "consumer"
        else:
            conf["partition.assignment.strategy"] = "range"
        self.incremental = protocol == "consumer"
        self.c = Consumer(conf)
        self.assigned: frozenset = frozenset()
        # confluent-kafka serialises calls on one handle: assignment() from the watching
        # thread would starve behind the member thread's back-to-back consume() calls, so
        # the member keeps its own view from the rebalance callbacks (eager: whole sets)
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.read: set = set()
        self.positions: dict = {}

    def _on_assign(self, _consumer, partitions):
        got = frozenset((tp.topic, tp.partition) for tp in partitions)
        self.assigned = self.assigned | got if self.incremental else got

    def _on_revoke(self, _consumer, partitions):
        gone = frozenset((tp.topic, tp.partition) for tp in partitions)
        self.assigned = self.assigned - gone if self.incremental else frozenset()

    def poll(self):
        for m in self.c.consume(num_messages=500, timeout=0.1):
            if m.error() is None:
                self.read.add((m.topic(), m.partition()))
                self.positions[(m.topic(), m.partition())] = m.offset() + 1

    def owned(self):
        return set(self.assigned)

    def commit_all(self):
        # explicit offsets: a plain commit() of unchanged positions is skipped by librdkafka
        # (_NO_OFFSET), while the native commit always writes
        from confluent_kafka import TopicPartition
        self.c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in self.positions.items()],
                      asynchronous=False)

    def close(self):
        self.c.close()


class _JoinWatch:
    """Polls the group's state at its coordinator; `done` is the first instant the group is
    past PreparingRebalance with every member (the join phase of the rebalance complete)."""

    def __init__(self, cluster, group: str, members: int):
        from rayka.client.group import CoordinatorLink
        self.link, self.group, self.members = CoordinatorLink(cluster, group), group, members
        self.done: float | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        from coordinator import messages as m
        while not self.stop.wait(0.02):       # the sampling period of the watch
            try:
                g = self.link.call(m.DescribeGroups(0, (self.group,)),
                                   time.monotonic() + 10).groups[0]
            except Exception:                 # coordinator moving or loading: sample again
                continue
            if g.state in ("CompletingRebalance", "Stable") and len(g.members) == self.members:
                self.done = time.monotonic()
                return

    def close(self):
        self.stop.set()
        self.thread.join(30)


def settle_once(make, topic: str, watch: _JoinWatch | None) -> tuple[float, float | None]:
    """Seconds from the last member's subscribe to (every partition owned once and read, the
    join phase done: None without a watch, for KIP-848 groups, which have no join phase)."""
    members, stop = [], threading.Event()

    def loop(m):
        while not stop.is_set():
            m.poll()
    threads = []
    for i in range(MEMBERS):
        members.append(make())
        if i == MEMBERS - 1:
            t0 = time.monotonic()
        threads.append(threading.Thread(target=loop, args=(members[-1],), daemon=True))
        threads[-1].start()
        if i < MEMBERS - 1:
            time.sleep(0.2)                  # joins spread out a little, as real starts are
    want = {(topic, p) for p in range(PARTITIONS)}
    try:
        while time.monotonic() - t0 < TIMEOUT_S:
            owned = [m.owned() for m in members]
            if (sum(len(o) for o in owned) == PARTITIONS and set().union(*owned) == want
                    and all(o and o <= m.read for o, m in zip(owned, members))):
                settled = time.monotonic()
                if watch is None:
                    return settled - t0, None
                watch.close()
                if watch.done is None:
                    raise RuntimeError("settled, but the watch never saw the join phase end")
                return settled - t0, watch.done - t0
            time.sleep(0.01)                 # poll interval of a deadline loop
        raise TimeoutError("the group did not settle")
    finally:
        if watch is not None:
            watch.close()
        stop.set()
        for t in threads:
            t.join(30)
        for m in members:
            m.close()


def commits_once(member, duration_s: float) -> float:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (member.owned() and member.owned() <= member.read):
        member.poll()                        # a position on every owned partition
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < duration_s:
        member.commit_all()
        n += 1
    rate = n / (time.monotonic() - t0)
    member.close()
    return rate


def one_thread_once(cluster, topic: str, total: int) -> tuple[float, float, float, int]:
    """(settle s, all read s, longest poll ms, records read twice) for MEMBERS native
    members polled in turn from this thread."""
    import collections
    group = f"one-{uuid.uuid4().hex[:6]}"
    members = [cluster.consumer(group_id=group, max_poll_records=500) for _ in range(MEMBERS)]
    want = {(topic, p) for p in range(PARTITIONS)}
    reads: collections.Counter = collections.Counter()
    longest, settled = 0.0, None
    t0 = time.monotonic()
    for c in members:
        c.subscribe([topic])
    try:
        while sum(reads.values()) < total or settled is None:
            if time.monotonic() - t0 > TIMEOUT_S:
                raise TimeoutError("one thread: the group did not read everything")
            for c in members:
                start = time.monotonic()
                got = c.poll(timeout_ms=200)
                longest = max(longest, time.monotonic() - start)
                reads.update((r.partition, r.offset) for r in got)
            owned = [set(c.assignment()) for c in members]
            if (settled is None and sum(map(len, owned)) == PARTITIONS
                    and set().union(*owned) == want and not any(c.member.needs_join
                                                                for c in members)):
                settled = time.monotonic() - t0
        return settled, time.monotonic() - t0, longest * 1000, sum(n - 1 for n in reads.values())
    finally:
        for c in members:
            c.close()


def run(quick: bool = False, runs: int = 3) -> dict:
    per = PER_PARTITION // 10 if quick else PER_PARTITION
    commit_s = COMMIT_S / 5 if quick else COMMIT_S
    settle = {"native": [], "librdkafka": []}
    joined = {"native": [], "librdkafka": []}
    commits = {"native": [], "librdkafka": []}
    one = {"settle_s": [], "read_all_s": [], "longest_poll_ms": [], "read_twice": []}
    settle848 = {"native": [], "librdkafka": []}
    with local_cluster("gb") as (cluster, _):
        topic = f"groups-{uuid.uuid4().hex[:6]}"
        cluster.admin().create_topic(topic, PARTITIONS, 3)
        p = cluster.producer(acks="all")
        for part in range(PARTITIONS):
            p.send_batch(topic, [b"x" * 100] * per, partition=part)
        p.flush(TIMEOUT_S)
        p.close()
        bootstrap = cluster.bootstrap_servers()
        makers = {"native": lambda g: _Native(cluster, g, topic),
                  "librdkafka": lambda g: _Wire(bootstrap, g, topic)}
        kip848 = {"native": lambda g: lambda: _Native(cluster, g, topic, "consumer"),
                  "librdkafka": lambda g: lambda: _Wire(bootstrap, g, topic, "consumer")}
        for run_i in range(runs):
            for kind, make in makers.items():
                group = f"{kind}-{uuid.uuid4().hex[:6]}"
                watch = _JoinWatch(cluster, group, MEMBERS)
                settled_s, joined_s = settle_once(lambda: make(group), topic, watch)
                settle[kind].append(settled_s)
                joined[kind].append(joined_s)
                rate = commits_once(make(f"{group}-c"), commit_s)
                commits[kind].append(rate)
                say(f"run {run_i}: {kind}: join phase done {joined_s:.2f} s after the last "
                    f"join, settled {settled_s:.2f} s ({settled_s - joined_s:.2f} s after the "
                    f"join phase); {rate:,.0f} commits/s of {PARTITIONS} partitions")
            for kind, make in kip848.items():
                settled_s, _ = settle_once(make(f"{kind}-{uuid.uuid4().hex[:6]}"), topic, None)
                settle848[kind].append(settled_s)
                say(f"run {run_i}: {kind} (group.protocol=consumer): settled {settled_s:.2f} s "
                    f"after the last join")
            got = one_thread_once(cluster, topic, per * PARTITIONS)
            for key, value in zip(one, got):
                one[key].append(value)
            say(f"run {run_i}: native, one thread: settled {got[0]:.2f} s, all read "
                f"{got[1]:.2f} s, longest poll {got[2]:.0f} ms, read twice {got[3]}")
    params = dict(members=MEMBERS, partitions=PARTITIONS, initial_delay_ms=INITIAL_DELAY_MS)
    figures = []
    for kind in settle:
        figures += [
            figure(f"group.{kind}.settle_after_last_join_s", "s", settle[kind], None, "lower",
                   **params),
            figure(f"group.{kind}.join_phase_after_last_join_s", "s", joined[kind], None,
                   "lower", **params),
            figure(f"group.{kind}.settle_after_join_phase_s", "s",
                   [s - j for s, j in zip(settle[kind], joined[kind])], TARGET_S, "lower",
                   **params),
            figure(f"group.{kind}.commits_per_s", "commits/s", commits[kind], None,
                   partitions_per_commit=PARTITIONS, duration_s=commit_s),
        ]
    for kind in settle848:               # KIP-848 (group.protocol=consumer) beside classic
        figures.append(figure(f"group.{kind}.consumer_protocol.settle_after_last_join_s", "s",
                              settle848[kind], None, "lower", members=MEMBERS,
                              partitions=PARTITIONS, assignor="uniform"))
    figures += [
        figure("group.native_one_thread.settle_s", "s", one["settle_s"], None, "lower",
               **params),
        figure("group.native_one_thread.read_all_s", "s", one["read_all_s"], None, "lower",
               **params),
        figure("group.native_one_thread.longest_poll_ms", "ms", one["longest_poll_ms"], None,
               "lower", poll_timeout_ms=200, **params),
        figure("group.native_one_thread.read_twice", "records", one["read_twice"], 0, "lower",
               **params),
    ]
    setup = {"brokers": 3, "controllers": 2, "partitions": PARTITIONS, "members": MEMBERS,
             "records_per_partition": per, "group.initial.rebalance.delay.ms": INITIAL_DELAY_MS,
             "offsets.topic.num.partitions": 50, "assignor": "range (native default order: "
             "range, cooperative-sticky)", "quick": quick, "runs": runs,
             "machine": machine_facts()}
    return {"bench": NAME, "setup": setup, "figures": figures, "extra": {}}


def main(argv=None) -> dict:
    args = arg_parser(__doc__, DEFAULT_OUT, "1/10 records, 1 s of commits").parse_args(argv)
    return emit(run(quick=args.quick, runs=args.runs), args.out)


if __name__ == "__main__":
    main()
