"""End to end on REAL Ray and the REAL ZooKeeper: rayka.start_local with 3 broker actors and
2 controller actors, topics, acks=all production, consumption, leader and controller kills,
bad input, stale controller epochs, a fenced (SIGSTOPped) old leader, a broker killed for good
and recovered from disk, committed offsets, reassignment and preferred elections, and reads
below the high watermark only."""

from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest
import ray

import rayka
from rayka.chaos.faults import FaultInjector
from controller.requests import (LeaderAndIsrRequest, PartitionLeaderState, StopReplicaPartition,
                                 StopReplicaRequest, UpdateMetadataRequest, live_broker)
from rayka.client.admin import wait_for
from rayka.client.types import PartitionInfo, RecordMetadata
from replicas.errors import (CorruptRecord, ElectionNotNeeded, InvalidRequiredAcks,
                             InvalidReplicationFactor, RecordTooLarge, StaleControllerEpoch,
                             TopicAlreadyExists, UnknownTopicOrPartition)
from replicas.records import build_batch

from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray


def read_all(cluster, topic, expected, timeout_s=60):
    consumer = cluster.consumer()
    consumer.subscribe([topic])
    got = []
    wait_for(lambda: got.extend(consumer.poll(timeout_ms=200)) or len(got) >= expected,
             timeout_s, f"{expected} records from {topic}")
    return got


def check_exactly_once(acked, records):
    by_offset = {(r.partition, r.offset): r.value for r in records}
    assert len(by_offset) == len(records), "a record was read twice"
    for meta, value in acked:
        assert by_offset.get((meta.partition, meta.offset)) == value, f"lost or wrong: {meta}"
    for p in {r.partition for r in records}:
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == sorted(offsets) and offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_produce_acks_all_and_consume_everything(cluster):
    infos = cluster.admin().create_topic("clicks", 3, 3, {"min.insync.replicas": 2})
    assert {i.leader for i in infos} == {1, 2, 3} and all(len(i.isr) == 3 for i in infos)
    producer = cluster.producer(acks="all")
    futures = [(producer.send("clicks", b"v%d" % i, key=b"k%d" % i), b"v%d" % i) for i in range(3000)]
    producer.flush(60)
    acked = [(f.result(), v) for f, v in futures]
    bulk = producer.send_batch("clicks", [b"bulk%d" % i for i in range(2000)], partition=1).result(60)
    acked += list(zip(bulk, [b"bulk%d" % i for i in range(2000)]))
    producer.close()
    records = read_all(cluster, "clicks", 5000)
    check_exactly_once(acked, records)
    assert {r.partition for r in records} == {0, 1, 2}


def test_leader_killed_during_production_loses_nothing(cluster):
    admin = cluster.admin()
    admin.create_topic("orders", 2, 3, {"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", linger_ms=2)
    acked, stop = [], threading.Event()

    def produce():
        i = 0
        while not stop.is_set() or i < 4000:
            value = b"o%d" % i
            acked.append((producer.send("orders", value, partition=i % 2), value))
            i += 1
            if i % 500 == 0:
                producer.flush(60)
    t = threading.Thread(target=produce)
    t.start()
    wait_for(lambda: len(acked) > 1000, 30, "production under way")
    leader = admin.describe_topic("orders")[0].leader
    cluster.kill_broker(leader, restart=True)
    wait_for(lambda: admin.describe_topic("orders")[0].leader not in (-1, leader), 30, "new leader")
    stop.set()
    t.join(120)
    producer.flush(120)
    results = [(f.result(), v) for f, v in acked]
    records = read_all(cluster, "orders", len(results))
    check_exactly_once(results, records)
    assert len(records) == len(results)                         # no duplicates either
    wait_for(lambda: all(len(p.isr) == 3 for p in admin.describe_topic("orders")), 60,
             "the restarted broker back in every ISR")


def test_controller_killed_then_broker_failure_handled(cluster):
    """The active controller is killed (Ray restarts it as a plain candidate); then a broker
    is killed for good. The NEW controller handles that failure: every partition the broker
    led gets another leader at a higher leader epoch, in a partition state written at the new
    controller's epoch; the broker leaves every ISR; acks=all writes go on everywhere (2
    replicas left, min.insync.replicas 2) and are read back. The broker is revived after."""
    admin = cluster.admin()
    topic = "ctl-then-broker"
    admin.create_topic(topic, 3, 3, {"min.insync.replicas": 2})
    wait_for(lambda: isr_full(admin, topic), 60, f"{topic} ISR full")
    before = admin.controller()
    killed = cluster.kill_controller(restart=True)
    assert killed == before.id
    new = wait_for(lambda: (c := admin.controller()).epoch > before.epoch and c.id is not None
                   and c, 60, "a new controller epoch")
    admin.create_topic("after", 1, 2)         # wait=True: the new controller is serving
    assert admin.describe_topic("after")[0].leader in (1, 2, 3)

    start = {p.partition: p for p in admin.describe_topic(topic)}
    victim = start[0].leader
    led = sorted(p for p, info in start.items() if info.leader == victim)
    FaultInjector(cluster, timeout_s=120).kill_broker(victim, restart=False)   # its process gone
    try:
        def handled():
            now = {p.partition: p for p in admin.describe_topic(topic)}
            return all(victim not in p.isr and p.leader not in (-1, victim) for p in now.values()) \
                and all(now[p].leader_epoch > start[p].leader_epoch for p in led) and now
        now = wait_for(handled, 90, f"broker {victim}'s failure handled by the new controller")
        for p in led:
            state = cluster.store.get_partition_state(topic, p)
            assert state.leader == now[p].leader != victim and victim not in state.isr
            assert state.controller_epoch == new.epoch, (p, state, new)   # elected by it
        assert admin.controller() == new          # and no other controller meanwhile
        assert victim not in cluster.store.get_broker_ids()
        # the new controller's journal (controller/journal.py) tells the same story
        journal = [e for e in cluster.controller_journal() if e["controller_id"] == new.id]
        assert any(e["kind"] == "controller" and e["event"] == "active"
                   and e["epoch"] == new.epoch for e in journal)
        assert any(e["kind"] == "broker" and e["event"] == "left" and e["broker"] == victim
                   for e in journal)
        elected = {e["partition"]: e for e in journal if e["kind"] == "leader"
                   and e["topic"] == topic and e.get("reason") == "election"}
        assert all((elected[p]["previous_leader"], elected[p]["leader"]) == (victim, now[p].leader)
                   for p in led), elected
        later = cluster.controller_journal(after={new.id: journal[-1]["seq"]})
        assert all(e["seq"] > journal[-1]["seq"] for e in later if e["controller_id"] == new.id)
        producer = cluster.producer(acks="all")
        acked = []
        for p in start:
            acked += produce_acked(producer, topic, [b"f%d-%d" % (p, i) for i in range(100)],
                                   partition=p)
        producer.close()
        assert sorted({m.partition for m, _ in acked}) == sorted(start) and len(acked) == 300
        check_exactly_once(acked, read_all(cluster, topic, 300))
    finally:
        cluster.ensure_actors()               # a new actor recovers the victim's data dir
    wait_cluster_healthy(cluster)
    assert all(victim in p.isr for p in admin.describe_topic(topic))


def test_bad_input_is_typed_and_appends_nothing(cluster):
    admin = cluster.admin()
    with pytest.raises(InvalidReplicationFactor):
        admin.create_topic("too-many", 1, 4)
    admin.create_topic("once", 1, 1)
    with pytest.raises(TopicAlreadyExists):
        admin.create_topic("once", 1, 1)
    with pytest.raises(InvalidRequiredAcks):
        cluster.producer(acks=2)
    producer = cluster.producer()
    with pytest.raises(UnknownTopicOrPartition):
        producer.metadata.topic_wait_s = 0.5
        producer.send("no-such-topic", b"x")
    leader = admin.describe_topic("once")[0].leader
    broker = cluster.broker_actor(leader)
    good = bytes(build_batch([b"a"], timestamps_ms=0))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    r = ray.get(broker.produce.remote(("once", 0), bytes(corrupt), -1, 5000))
    assert r["error"] == CorruptRecord.code
    huge = bytes(build_batch([b"x" * (2 << 20)], timestamps_ms=0))
    r = ray.get(broker.produce.remote(("once", 0), huge, -1, 5000))
    assert r["error"] == RecordTooLarge.code
    r = ray.get(broker.produce.remote(("once", 0), good, 7, 5000))
    assert r["error"] == InvalidRequiredAcks.code
    info = ray.get(broker.partition_info.remote(("once", 0)))
    assert info["log_end_offset"] == 0                          # nothing was appended


def test_produce_many_answers_each_partition(cluster):
    """One multi-partition produce request (Kafka's ProduceRequest): a result per partition,
    acks=all answered with the HW past every accepted batch, rejects append nothing."""
    admin = cluster.admin()
    admin.create_topic("many", 3, 3, {"min.insync.replicas": 2})
    wait_for(lambda: isr_full(admin, "many"), 60, "many fully replicated")
    infos = admin.describe_topic("many")
    leader = infos[0].leader
    led = [("many", p.partition) for p in infos if p.leader == leader]
    other = [("many", p.partition) for p in infos if p.leader != leader]
    good = bytes(build_batch([b"a", b"b"], timestamps_ms=0))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    requests = [(led[0], good), (("no-such-topic", 0), good)] + [(tp, bytes(corrupt)) for tp in led[1:]]
    requests += [(tp, good) for tp in other]
    broker = cluster.broker_actor(leader)
    answers = ray.get(broker.produce_many.remote(requests, -1, 10_000))
    assert answers[led[0]]["error"] == 0 and answers[led[0]]["base_offset"] == 0
    assert answers[led[0]]["last_offset"] == 1
    assert answers[("no-such-topic", 0)]["error"] == UnknownTopicOrPartition.code
    for tp in led[1:]:
        assert answers[tp]["error"] == CorruptRecord.code
    for tp in other:
        assert answers[tp]["error"] == 6                     # NOT_LEADER_OR_FOLLOWER
    assert ray.get(broker.partition_info.remote(led[0]))["high_watermark"] >= 2
    for tp in led[1:]:
        assert ray.get(broker.partition_info.remote(tp))["log_end_offset"] == 0
    # the one-partition call is the same path
    r = ray.get(broker.produce.remote(led[0], good, -1, 10_000))
    assert (r["error"], r["base_offset"]) == (0, 2)


def test_unreachable_zookeeper_fails_fast_with_the_address(ray_session):
    from controller.store_api import ZkUnavailable
    from controller.zookeeper.server import free_port
    address, name = f"127.0.0.1:{free_port()}", f"nozk{uuid.uuid4().hex[:6]}"
    with pytest.raises(ZkUnavailable, match=address):
        rayka.start_local(name=name, zookeeper=address, zk_connect_timeout_s=2)
    with pytest.raises(ValueError):        # nothing was created in Ray for it
        ray.get_actor("rayka-cluster", namespace=f"rayka-{name}")


# ---------------------------------------------------------------------------------------------
# Helpers for the tests below.

def isr_full(admin, topic) -> bool:
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in admin.describe_topic(topic))


def wait_cluster_healthy(cluster, timeout_s=120):
    """Every broker registered, and every partition of every topic led with a full ISR."""
    admin = cluster.admin()
    cluster.wait_ready(timeout_s)
    wait_for(lambda: all(isr_full(admin, t) for t in admin.list_topics()), timeout_s,
             "every ISR full again")


def produce_acked(producer, topic, values, partition=0, timeout_s=120):
    futures = [(producer.send(topic, v, partition=partition), v) for v in values]
    producer.flush(timeout_s)
    return [(f.result(), v) for f, v in futures]


def read_partition(cluster, tp, timeout_s=60):
    """Every record of one partition below its high watermark, from offset 0."""
    consumer = cluster.consumer()
    consumer.assign([tp])
    hw = consumer.end_offsets([tp])[tuple(tp)]
    got = []
    wait_for(lambda: got.extend(consumer.poll(timeout_ms=200)) or len(got) >= hw, timeout_s,
             f"{hw} records from {tp}")
    return hw, got


# ---------------------------------------------------------------------------------------------
# Controller fencing at the broker.

def test_stale_controller_epoch_is_rejected(cluster):
    admin = cluster.admin()
    topic = "stale-ctl"
    admin.create_topic(topic, 1, 3)      # wait=True: every broker heard the current controller
    controller = admin.controller()
    assert controller.epoch >= 1
    stale = controller.epoch - 1
    tp = (topic, 0)
    zk = cluster.store.get_partition_state(topic, 0)
    replicas = admin.describe_topic(topic)[0].replicas
    registered = cluster.store.get_brokers()
    live = tuple(live_broker(registered[b]) for b in sorted(registered))
    for b in sorted(registered):
        broker = cluster.broker_actor(b)
        broker_epoch = registered[b].epoch
        before = ray.get(broker.partition_info.remote(tp))
        md_before = ray.get(broker.metadata.remote())
        other = next(x for x in sorted(registered) if x != zk.leader)
        # Would make `other` the leader at a higher leader epoch if it were accepted.
        state = PartitionLeaderState(topic, 0, stale, other, zk.leader_epoch + 5, tuple(zk.isr),
                                     zk.zk_version + 5, tuple(replicas))
        leader_and_isr = LeaderAndIsrRequest(controller.id, stale, broker_epoch, (state,),
                                             tuple(x for x in live if x.id == other))
        r = ray.get(broker.handle_controller_request.remote(leader_and_isr))
        assert r["error"] == StaleControllerEpoch.code, r
        stop = StopReplicaRequest(controller.id, stale, broker_epoch,
                                  (StopReplicaPartition(topic, 0, zk.leader_epoch + 5, True),))
        r = ray.get(broker.handle_controller_request.remote(stop))
        assert r["error"] == StaleControllerEpoch.code, r
        update = UpdateMetadataRequest(controller.id, stale, broker_epoch, (state,), ())
        r = ray.get(broker.handle_controller_request.remote(update))
        assert r["error"] == StaleControllerEpoch.code, r
        after = ray.get(broker.partition_info.remote(tp))   # not deleted, not stopped
        for key in ("role", "leader", "leader_epoch", "partition_epoch", "replicas", "isr"):
            assert after[key] == before[key], (b, key, before, after)
        assert after["leader"] == zk.leader and after["leader_epoch"] == zk.leader_epoch
        md_after = ray.get(broker.metadata.remote())
        assert md_after["brokers"].keys() == md_before["brokers"].keys() == set(registered)
        assert md_after["partitions"][tp] == md_before["partitions"][tp]
        assert md_after["partitions"][tp][:2] == (zk.leader, zk.leader_epoch)
    assert admin.describe_topic(topic)[0].leader == zk.leader
    # The partition still works: the real controller's view was never overridden.
    producer = cluster.producer(acks="all")
    acked = produce_acked(producer, topic, [b"s%d" % i for i in range(20)])
    producer.close()
    check_exactly_once(acked, read_all(cluster, topic, 20))


# ---------------------------------------------------------------------------------------------
# A zombie leader (SIGSTOP past its ZooKeeper session) must not commit acks=all.

def test_fenced_old_leader_cannot_commit_acks_all(cluster):
    admin = cluster.admin()
    topic, tp = "zombie", ("zombie", 0)
    admin.create_topic(topic, 1, 3, {"min.insync.replicas": 2})
    wait_for(lambda: isr_full(admin, topic), 60, f"{topic} ISR full")
    producer = cluster.producer(acks="all")
    acked = produce_acked(producer, topic, [b"before%d" % i for i in range(100)])
    producer.close()
    start = admin.describe_topic(topic)[0]
    old = start.leader
    old_broker = cluster.broker_actor(old)
    pid = ray.get(old_broker.pid.remote())
    unique = b"zombie-" + uuid.uuid4().hex.encode()
    batch = bytes(build_batch([unique], timestamps_ms=0))
    os.kill(pid, signal.SIGSTOP)
    try:
        ref = old_broker.produce.remote(tp, batch, -1, 20_000)
        new = wait_for(lambda: (p := admin.describe_topic(topic)[0]).leader not in (-1, old)
                       and p.leader_epoch > start.leader_epoch and p,
                       60, "a new leader elected after the old leader's session expired")
        assert old not in new.isr
        # Every other replica has obeyed the new leader epoch, so none of them still fetches
        # from the zombie (which could otherwise legally commit with a stale ISR member).
        wait_for(lambda: all(ray.get(cluster.broker_actor(b).partition_info.remote(tp))
                             ["leader_epoch"] >= new.leader_epoch for b in new.isr),
                 60, "the surviving replicas at the new leader epoch")
    finally:
        os.kill(pid, signal.SIGCONT)
    answer = ray.get(ref, timeout=120)
    assert answer["error"] != 0, f"the fenced old leader acknowledged an acks=all write: {answer}"
    producer = cluster.producer(acks="all")
    acked += produce_acked(producer, topic, [b"after%d" % i for i in range(200)])
    producer.close()
    hw, records = read_partition(cluster, tp)
    assert hw == len(acked) == 300
    assert unique not in {r.value for r in records}
    check_exactly_once(acked, records)
    assert len(records) == len(acked)
    wait_for(lambda: old in admin.describe_topic(topic)[0].isr, 90,
             f"broker {old} back in the ISR with a new session")
    leader = cluster.broker_actor(admin.describe_topic(topic)[0].leader)
    wait_for(lambda: ray.get(cluster.broker_actor(old).partition_info.remote(tp))["log_end_offset"]
             == ray.get(leader.partition_info.remote(tp))["log_end_offset"] == 300,
             60, "the old leader truncated its uncommitted write and caught up")
    wait_cluster_healthy(cluster)


# ---------------------------------------------------------------------------------------------
# A broker killed for good, production goes on, then a new actor recovers its data dir.

def test_leader_killed_without_restart_then_recovered_from_disk(cluster):
    admin = cluster.admin()
    topic = "orders-nr"
    admin.create_topic(topic, 2, 3, {"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", linger_ms=2)
    acked, stop = [], threading.Event()

    def produce():
        i = 0
        while not stop.is_set() or i < 4000:
            value = b"n%d" % i
            acked.append((producer.send(topic, value, partition=i % 2), value))
            i += 1
            if i % 500 == 0:
                producer.flush(120)
    # A consumer of partition 0 only, that knows the old leader before the kill and keeps
    # polling through it (nothing else would make it refresh its metadata).
    early = cluster.consumer()
    early.assign([(topic, 0)])
    early_got = []
    t = threading.Thread(target=produce)
    t.start()
    try:
        wait_for(lambda: len(acked) > 1000, 60, "production under way")
        wait_for(lambda: early_got.extend(early.poll(timeout_ms=100)) or early_got, 60,
                 "the early consumer reading")
        leader = admin.describe_topic(topic)[0].leader
        cluster.kill_broker(leader, restart=False)
        wait_for(lambda: admin.describe_topic(topic)[0].leader not in (-1, leader), 60, "new leader")
        wait_for(lambda: cluster.broker_actor(leader) is None, 60, "the killed actor gone from Ray")
    finally:
        stop.set()
        t.join(180)
    assert not t.is_alive()
    producer.flush(120)
    producer.close()
    results = [(f.result(), v) for f, v in acked]
    assert leader not in cluster.store.get_broker_ids()      # still dead: not restarted
    assert all(leader not in p.isr for p in admin.describe_topic(topic))
    records = read_all(cluster, topic, len(results))
    check_exactly_once(results, records)
    assert len(records) == len(results)
    on_p0 = [(m, v) for m, v in results if m.partition == 0]
    wait_for(lambda: early_got.extend(early.poll(timeout_ms=200)) or len(early_got) >= len(on_p0),
             60, "the early consumer following the leader move")
    check_exactly_once(on_p0, early_got)
    assert len(early_got) == len(on_p0)
    # Bring it back: a NEW actor on the same data dir recovers and truncates by epoch.
    cluster.ensure_actors()
    cluster.wait_ready(60)
    wait_for(lambda: isr_full(admin, topic), 90, f"broker {leader} back in every ISR of {topic}")
    revived = cluster.broker_actor(leader)
    for p in admin.describe_topic(topic):
        tp = (topic, p.partition)
        lead = cluster.broker_actor(p.leader)

        def same_log():
            mine = ray.get(revived.partition_info.remote(tp))
            theirs = ray.get(lead.partition_info.remote(tp))
            return mine["log_end_offset"] == theirs["log_end_offset"] == theirs["high_watermark"]
        wait_for(same_log, 60, f"broker {leader}'s log of {tp} equal to the leader's")
        mine = ray.get(revived.partition_info.remote(tp))
        assert mine["role"] == "follower" or p.leader == leader
        assert mine["log_end_offset"] == sum(1 for m, _ in results if m.partition == p.partition)
    # Read the recovered log itself: make the revived broker (partition 0's preferred replica,
    # which led it until the kill) the leader again and read everything back from it.
    p0 = admin.describe_topic(topic)[0]
    assert p0.replicas[0] == leader
    if p0.leader != leader:
        admin.elect_preferred_leaders(topic)
        admin.wait_for_leaders(topic, 60)
    assert admin.describe_topic(topic)[0].leader == leader
    records = read_all(cluster, topic, len(results))
    check_exactly_once(results, records)
    assert len(records) == len(results)
    wait_cluster_healthy(cluster)


# ---------------------------------------------------------------------------------------------
# Consumer groups' committed offsets.

def test_commit_and_committed(cluster):
    admin = cluster.admin()
    topic, tp = "commits", ("commits", 0)
    admin.create_topic(topic, 1, 2)
    producer = cluster.producer(acks="all")
    acked = produce_acked(producer, topic, [b"c%d" % i for i in range(50)])
    producer.close()
    group = f"g-{uuid.uuid4().hex[:6]}"
    first = cluster.consumer(group_id=group)
    first.subscribe([topic])
    assert first.committed(tp) is None
    got = []
    wait_for(lambda: got.extend(first.poll(timeout_ms=200, max_records=20 - len(got)))
             or len(got) >= 20, 60, "20 records")
    assert [r.offset for r in got] == list(range(20))
    assert first.position(tp) == 20
    first.commit()
    assert first.committed(tp) == 20
    first.close()                       # leaves: the next member need not wait for it
    second = cluster.consumer(group_id=group, enable_auto_commit=False)   # commits by hand
    second.subscribe([topic])
    assert second.committed(tp) == 20
    rest = []
    wait_for(lambda: rest.extend(second.poll(timeout_ms=200)) or len(rest) >= 30, 60, "30 records")
    assert rest[0].offset == 20 and len(rest) == 30
    check_exactly_once(acked, got + rest)
    assert second.end_offsets([tp]) == {tp: 50}
    second.commit()
    assert cluster.consumer(group_id=group).committed(tp) == 50
    second.commit({tp: 35})                                     # explicit offsets
    second.close()                                              # no auto-commit on close
    third = cluster.consumer(group_id=group)
    third.subscribe([topic])
    assert third.committed(tp) == 35
    read = []
    wait_for(lambda: read.extend(third.poll(timeout_ms=200)) or len(read) >= 15, 60, "15 records")
    assert [r.offset for r in read] == list(range(35, 50)) and third.position(tp) == 50
    third.close()                                               # auto-commit: its position
    assert cluster.consumer(group_id=group).committed(tp) == 50
    assert cluster.consumer(group_id=f"other-{group}").committed(tp) is None   # groups are separate


# ---------------------------------------------------------------------------------------------
# Admin operations on Ray: describe, reassign, preferred elections.

def test_admin_describe_elect_reassign_on_ray(cluster):
    admin = cluster.admin()
    topic = "moves"
    infos = admin.create_topic(topic, 2, 2)
    assert [p.partition for p in infos] == [0, 1] and all(len(p.replicas) == 2 for p in infos)
    wait_for(lambda: isr_full(admin, topic), 60, f"{topic} ISR full")
    p0 = admin.describe_topic(topic)[0]
    outside = next(b for b in cluster.facts["brokers"] if b not in p0.replicas)
    target = [outside, p0.replicas[0]]
    moved = admin.reassign_partitions(topic, {0: target}, timeout_s=90)
    assert moved[0].replicas == tuple(target) and moved[0].leader in target
    assert set(moved[0].isr) <= set(target)
    assert moved[1].replicas == infos[1].replicas                # untouched
    wait_for(lambda: isr_full(admin, topic), 60, f"{topic} ISR full after the reassignment")
    producer = cluster.producer(acks="all")
    acked = produce_acked(producer, topic, [b"m%d" % i for i in range(100)], partition=0)
    producer.close()
    check_exactly_once(acked, read_all(cluster, topic, 100))

    def check_elected(results):
        assert set(results) == {(topic, 0), (topic, 1)}
        now = {p.partition: p for p in admin.describe_topic(topic)}
        for tp, r in results.items():
            assert now[tp.partition].leader == now[tp.partition].replicas[0]
            if isinstance(r, PartitionInfo):
                assert r.leader == r.replicas[0] == now[tp.partition].replicas[0]
            else:
                assert isinstance(r, ElectionNotNeeded), r
    check_elected(admin.elect_preferred_leaders(topic))
    again = admin.elect_preferred_leaders(topic)         # everything is preferred by now
    assert all(isinstance(r, ElectionNotNeeded) for r in again.values()), again
    # Move partition 1's leadership away by killing its preferred leader, then elect it back.
    p1 = admin.describe_topic(topic)[1]
    preferred = p1.replicas[0]
    assert p1.leader == preferred
    cluster.kill_broker(preferred, restart=True)
    wait_for(lambda: admin.describe_topic(topic)[1].leader not in (-1, preferred), 60,
             f"leadership of {topic}-1 moved away from {preferred}")
    wait_for(lambda: isr_full(admin, topic), 90, f"broker {preferred} back in the ISR")
    assert admin.describe_topic(topic)[1].leader != preferred    # no automatic move back
    results = admin.elect_preferred_leaders(topic)
    check_elected(results)
    assert isinstance(results[(topic, 1)], PartitionInfo) and results[(topic, 1)].leader == preferred
    admin.wait_for_leaders(topic, 60)
    assert admin.describe_topic(topic)[1].leader == preferred
    producer = cluster.producer(acks="all")
    acked2 = produce_acked(producer, topic, [b"p%d" % i for i in range(50)], partition=1)
    producer.close()
    assert {m.partition for m, _ in acked2} == {1}
    check_exactly_once(acked + acked2, read_all(cluster, topic, 150))
    wait_cluster_healthy(cluster)


# ---------------------------------------------------------------------------------------------
# Consumers read committed data only.

def test_consumer_never_sees_above_high_watermark(cluster):
    """The HW is pinned while the leader's log runs ahead of it: both followers' replication
    links are cut (the broker failpoint), so acks=1 writes land on the leader alone and the
    HW cannot move until the leader drops the followers from the ISR
    (replica.lag.time.max.ms later) or the links come back. Each poll is bracketed by two
    reads of the leader's HW: a record at or above the later one is a read past the HW (what
    a poll returns was fetched below the HW of its time, and the HW only grows). When both
    reads are equal, that HW held all through the poll, so the bound is exact; polls made
    then by a consumer sitting at the HW, with records above it in the log, are counted, and
    must return nothing. Once the links are back every write arrives, exactly once."""
    admin = cluster.admin()
    topic, tp = "hw-only", ("hw-only", 0)
    admin.create_topic(topic, 1, 3)
    wait_for(lambda: isr_full(admin, topic), 60, f"{topic} ISR full")
    p0 = admin.describe_topic(topic)[0]
    leader = cluster.broker_actor(p0.leader)
    followers = [b for b in p0.replicas if b != p0.leader]
    injector = FaultInjector(cluster, timeout_s=60)
    producer = cluster.producer(acks=1, linger_ms=1)
    consumer = cluster.consumer()
    consumer.assign([tp])
    acked, seen, pinned = [], [], []

    def marks():
        info = ray.get(leader.partition_info.remote(tp), timeout=30)
        assert info["leader"] == p0.leader                  # one leader: its HW only grows
        return info["high_watermark"], info["log_end_offset"]

    def poll_checked():
        hw, leo = marks()
        at_hw = consumer.position(tp) == hw
        got = consumer.poll(timeout_ms=50)
        hw_after, _ = marks()
        above = [r.offset for r in got if r.offset >= hw_after]
        assert not above, f"consumer saw offsets {above[:5]} at/above the HW {hw_after}"
        if hw_after == hw < leo and at_hw:
            pinned.append((hw, leo, len(got)))
        seen.extend(got)
        return hw_after, leo

    def all_read():
        hw, leo = poll_checked()
        return len(seen) >= len(acked) and hw == leo == len(acked)

    for episode in range(3):           # the ISR may shrink before a slow machine polled enough
        wait_for(lambda: isr_full(admin, topic), 90, f"{topic} ISR full")
        acked += produce_acked(producer, topic, [b"c%d-%d" % (episode, i) for i in range(300)])
        wait_for(all_read, 60, "everything committed read: the consumer at the HW")
        for b in followers:
            injector.cut_replication(b, 300)
        try:
            acked += produce_acked(producer, topic, [b"u%d-%d" % (episode, i) for i in range(300)])
            wait_for(lambda: (m := poll_checked())[0] == m[1] or len(pinned) >= 10, 60,
                     "10 polls at the pinned HW, or the ISR shrunk (the HW caught up)")
        finally:
            for b in followers:
                injector.restore_replication(b)
        wait_for(all_read, 60, "the writes made while the HW was pinned, read")
        if len(pinned) >= 10:
            break
    producer.close()
    assert len(pinned) >= 10, pinned            # the check ran with records above the HW
    check_exactly_once(acked, seen)
    assert len(seen) == len(acked)
    wait_for(lambda: isr_full(admin, topic), 90, f"the followers back in the ISR of {topic}")


def test_keyed_send_batch_routes_like_send_and_answers_in_input_order(cluster):
    from rayka.client.partitioner import partition_for_key
    cluster.admin().create_topic("keyed-bulk", 4, 3, {"min.insync.replicas": 2})
    producer = cluster.producer(acks="all")
    keys = [None if i % 7 == 0 else b"user-%d" % (i % 13) for i in range(600)]
    values = [b"v%d" % i for i in range(600)]
    metas = producer.send_batch("keyed-bulk", values, keys).result(60)
    producer.close(30)
    assert len(metas) == 600
    for key, md in zip(keys, metas):
        if key is not None:
            assert md.partition == partition_for_key(key, 4)
    assert len({md.partition for k, md in zip(keys, metas) if k is None}) == 1   # one sticky
    got = {(r.partition, r.offset): r.value for r in read_all(cluster, "keyed-bulk", 600)}
    assert [got[(md.partition, md.offset)] for md in metas] == values   # input order


def test_poll_batch_reads_what_poll_reads_and_the_two_mix(cluster):
    cluster.admin().create_topic("columnar", 2, 3, {"min.insync.replicas": 2})
    producer = cluster.producer(acks="all")
    for i in range(600):
        producer.send("columnar", None if i % 7 == 0 else b"v%d" % i, partition=i % 2,
                      key=None if i % 5 == 0 else b"k%d" % i, timestamp_ms=1_700_000_000_000 + i)
    reports = []
    producer.flush(60)
    producer.send("columnar", b"last", partition=0, on_delivery=lambda *a: reports.append(a))
    producer.close(60)
    assert reports == [(None, RecordMetadata("columnar", 0, 300))]
    as_rows = {(r.partition, r.offset, r.key, r.value, r.timestamp_ms)
               for r in read_all(cluster, "columnar", 601)}
    assert len(as_rows) == 601
    consumer = cluster.consumer()
    consumer.assign([("columnar", 0), ("columnar", 1)])
    mixed = []

    def take():   # poll first: decoded chunks, then Arrow ones, cut by both
        mixed.extend((r.partition, r.offset, r.key, r.value, r.timestamp_ms)
                     for r in consumer.poll(timeout_ms=200, max_records=11))
        table = consumer.poll_batch(timeout_ms=200, max_records=37)
        assert table.num_rows <= 37 and table.column_names[:5] == [
            "key", "value", "topic", "partition", "offset"]
        cols = table.to_pydict()
        mixed.extend(zip(cols["partition"], cols["offset"], cols["key"], cols["value"],
                         [int(t.timestamp() * 1000 + 0.5) for t in cols["timestamp"]]))
        return len(mixed) >= 601
    wait_for(take, 60, "601 records through poll_batch and poll")
    assert len(mixed) == len(set(mixed)) == 601 and set(mixed) == as_rows
    for p in (0, 1):
        assert [o for q, o, *_ in mixed if q == p] == list(range(301 if p == 0 else 300))
