"""rayka.chaos.faults.FaultInjector against ONE real cluster (real Ray, real ZooKeeper):
a paused leader is replaced (an acks=all producer writing through the pause goes on with the
new leader, no write failing; how long it stalls is bench/failover_bench.py's figure) and
rejoins when resumed, an expired broker session re-registers
with a larger broker epoch, and a corrupted segment tail is cut by crash recovery and
re-replicated, and a follower cut off from its leader (the link-cut failpoint) leaves the
ISR while writes go on, and rejoins byte-identical. Brokers also leave
`controller-epochs.log` evidence: one controller per epoch.

Waits are rayka.client.admin.wait_for with generous deadlines (2 cores, other Ray tests may run)."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
import ray

from rayka.client.admin import wait_for
from rayka.chaos.faults import FaultInjector

from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray

TIMEOUT_S = 120


def isr_full(admin, topic) -> bool:
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in admin.describe_topic(topic))


@pytest.fixture
def injector(cluster):
    # start from a healthy cluster, so one failed test does not cascade into the next
    admin = cluster.admin()
    cluster.wait_ready(TIMEOUT_S)
    wait_for(lambda: all(isr_full(admin, t) for t in admin.list_topics()), TIMEOUT_S,
             "every ISR full before the test")
    inj = FaultInjector(cluster, rng=random.Random(20240607), timeout_s=TIMEOUT_S)
    try:
        yield inj
    finally:
        inj.resume_all()      # never leave a SIGSTOPped process behind


def produce(cluster, topic, n, tag):
    # a batch sent to a paused broker (metadata not yet updated) is retried after 10 s
    producer = cluster.producer(acks="all", request_timeout_ms=10_000)
    try:
        futures = [producer.send(topic, b"%s-%d" % (tag, i), partition=0) for i in range(n)]
        producer.flush(TIMEOUT_S)
        return [f.result(TIMEOUT_S) for f in futures]
    finally:
        producer.close()


def partition_info(cluster, broker_id, tp):
    try:
        return ray.get(cluster.broker_actor(broker_id).partition_info.remote(tp), timeout=10)
    except Exception:     # restarting, or not hosting the partition yet
        return None


class Writer:
    """Back-to-back single-record acks=all writes to partition 0, each acknowledgement kept as
    (monotonic time, offset); the producer's request timeout is Kafka's default (30 s), so a
    stall shorter than that is the producer noticing the new leader by itself."""

    def __init__(self, cluster, topic):
        self.producer = cluster.producer(acks="all", linger_ms=0)
        self.topic, self.acks, self.errors = topic, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        i = 0
        while not self._stop.is_set():
            try:
                md = self.producer.send(self.topic, b"w-%d" % i, partition=0).result(TIMEOUT_S)
                self.acks.append((time.monotonic(), md.offset))
            except Exception as exc:       # kept for the assertion, not raised in a thread
                self.errors.append(repr(exc))
            i += 1

    def stop(self):
        self._stop.set()
        self._thread.join(TIMEOUT_S)
        self.producer.close(TIMEOUT_S)


def test_pause_leader_elects_a_new_one_and_writes_resume(cluster, injector):
    """How long the writes stall is bench/failover_bench.py's
    failover.leader_paused.first_ack_s (target 6 s), not an assertion here."""
    admin = cluster.admin()
    admin.create_topic("paused", 1, 3, {"min.insync.replicas": 2})
    produce(cluster, "paused", 200, b"before")
    wait_for(lambda: isr_full(admin, "paused"), TIMEOUT_S, "full ISR")
    writer = Writer(cluster, "paused")
    try:
        wait_for(lambda: len(writer.acks) >= 20, TIMEOUT_S, "writes acknowledged before the pause")
        what = injector.pause_leader("paused", 0)
        old = what["broker"]
        assert what["kind"] == "pause_leader" and what["target"] == f"broker-{old}"
        assert what["partition"] == 0 and what["pid"] in injector.paused
        # its ZooKeeper session times out while it is frozen: the controller moves leadership
        wait_for(lambda: injector.live_leaders("paused")[0] not in (-1, old), TIMEOUT_S,
                 "a new leader while the old one is paused")
        acked = len(writer.acks)
        wait_for(lambda: len(writer.acks) >= acked + 20, TIMEOUT_S,
                 "the new leader takes acks=all writes while the old one is paused")
    finally:
        writer.stop()
    assert writer.errors == []
    offsets = [o for _, o in writer.acks]
    assert offsets == sorted(set(offsets)), "an acknowledged offset repeated or went back"

    injector.resume_pid(what["pid"])
    assert what["pid"] not in injector.paused
    wait_for(lambda: old in cluster.store.get_broker_ids() and isr_full(admin, "paused"),
             TIMEOUT_S, f"broker {old} re-registered and back in the ISR")


def test_expire_broker_session_re_registers_with_a_larger_epoch(cluster, injector):
    admin = cluster.admin()
    admin.create_topic("expired", 1, 3, {"min.insync.replicas": 2})
    broker = admin.describe_topic("expired")[0].leader
    before = cluster.store.get_brokers()[broker].epoch
    session = ray.get(cluster.broker_actor(broker).zk_session.remote(), timeout=30)

    what = injector.expire_broker_session(broker)
    assert what["kind"] == "expire_broker_session" and what["broker_epoch"] == before
    assert what["session_id"] == session[0]

    def re_registered():
        reg = cluster.store.get_brokers().get(broker)
        return reg is not None and reg.epoch > before
    wait_for(re_registered, TIMEOUT_S, f"broker {broker} registered with a new epoch")
    assert ray.get(cluster.broker_actor(broker).zk_session.remote(), timeout=30)[0] != session[0]
    produce(cluster, "expired", 50, b"after")
    wait_for(lambda: isr_full(admin, "expired"), TIMEOUT_S, "full ISR after the bounce")


def test_corrupt_segment_tail_is_cut_and_re_replicated(cluster, injector):
    admin = cluster.admin()
    topic, tp = "torn", ("torn", 0)
    admin.create_topic(topic, 1, 3, {"min.insync.replicas": 2})
    acked = produce(cluster, topic, 300, b"rec")
    wait_for(lambda: isr_full(admin, topic), TIMEOUT_S, "full ISR")
    leader = admin.describe_topic(topic)[0].leader
    victim = next(b for b in cluster.facts["brokers"] if b != leader)
    wait_for(lambda: (partition_info(cluster, victim, tp) or {}).get("log_end_offset")
             == acked[-1].offset + 1, TIMEOUT_S, "the follower caught up")

    what = injector.corrupt_segment_tail(victim, topic, 0, mode="flip+torn")
    assert what["kind"] == "corrupt_segment_tail" and what["target"] == f"broker-{victim}"
    assert what["partition"] == 0 and what["mode"] == "flip+torn" and what["restarted"]
    batch = what["last_batch"]
    assert batch is not None and what["flipped"] and what["appended"] > 0
    assert all(batch["position"] <= off < batch["position"] + batch["size"] and old != new
               for off, old, new in what["flipped"])
    segment = Path(what["file"])
    assert segment.parent.name == "torn-0" and segment.parent.parent.name == f"broker-{victim}"

    def caught_up():
        mine = partition_info(cluster, victim, tp)
        theirs = partition_info(cluster, leader, tp)
        return (mine and theirs and isr_full(admin, topic)
                and mine["log_end_offset"] == theirs["log_end_offset"] == acked[-1].offset + 1)
    wait_for(caught_up, TIMEOUT_S, f"broker {victim} recovered, re-replicated, back in the ISR")
    # the cut tail was fetched again from the leader: the replicas are byte-identical
    leader_segment = (Path(cluster.facts["data_dir"]) / f"broker-{leader}" / "torn-0"
                      / segment.name)
    assert segment.read_bytes() == leader_segment.read_bytes()


def test_cut_replication_links_shrink_the_isr_and_the_follower_rejoins_byte_identical(
        cluster, injector):
    admin = cluster.admin()
    topic, tp = "cut", ("cut", 0)
    admin.create_topic(topic, 1, 3, {"min.insync.replicas": 2})
    produce(cluster, topic, 100, b"before")
    wait_for(lambda: isr_full(admin, topic), TIMEOUT_S, "full ISR")
    leader = admin.describe_topic(topic)[0].leader
    victim = next(b for b in cluster.facts["brokers"] if b != leader)

    what = injector.cut_replication(victim, 600)
    assert what["target"] == f"broker-{victim}" and leader in what["leaders"]
    # acks=all writes go on with two replicas once the leader drops the cut-off follower
    acked = produce(cluster, topic, 100, b"during")
    wait_for(lambda: victim not in admin.describe_topic(topic)[0].isr, TIMEOUT_S,
             f"broker {victim} out of the ISR")
    stuck = partition_info(cluster, victim, tp)["log_end_offset"]
    assert stuck < acked[-1].offset + 1          # it really stopped replicating
    assert cluster.store.get_brokers().keys() >= {victim}     # alive and registered all along

    injector.restore_replication(victim)

    def caught_up():
        mine, theirs = partition_info(cluster, victim, tp), partition_info(cluster, leader, tp)
        return (mine and theirs and isr_full(admin, topic)
                and mine["log_end_offset"] == theirs["log_end_offset"] == acked[-1].offset + 1)
    wait_for(caught_up, TIMEOUT_S, f"broker {victim} caught up and back in the ISR")
    ours = Path(cluster.facts["data_dir"]) / f"broker-{victim}" / "cut-0"
    theirs = Path(cluster.facts["data_dir"]) / f"broker-{leader}" / "cut-0"
    assert [p.read_bytes() for p in sorted(ours.glob("*.log"))] == \
        [p.read_bytes() for p in sorted(theirs.glob("*.log"))]


def test_brokers_record_one_controller_per_epoch(cluster, injector):
    admin = cluster.admin()
    before = admin.controller()
    injector.kill_controller()
    wait_for(lambda: admin.controller().epoch > before.epoch and admin.controller().id, TIMEOUT_S,
             "a new controller epoch")
    admin.create_topic("after-failover", 1, 3)   # every broker hears the new controller
    now = admin.controller()
    terms: dict[int, set[int]] = {}

    def read_terms():
        terms.clear()
        for b in cluster.facts["brokers"]:
            path = Path(cluster.facts["data_dir"]) / f"broker-{b}" / "controller-epochs.log"
            for line in path.read_text().splitlines() if path.exists() else ():
                epoch, cid = map(int, line.split())
                terms.setdefault(epoch, set()).add(cid)
        return now.epoch in terms
    wait_for(read_terms, TIMEOUT_S, "the new controller's epoch recorded by a broker")
    assert terms[now.epoch] == {now.id}
    assert all(len(ids) == 1 for ids in terms.values()), terms
