"""controller/zookeeper/store.py against the real ZooKeeper 3.8 server (no fakes).

Each test works in its own chroot /rayka/<unique cluster>. Synchronisation is by
threading.Event / queue with timeouts or poll-with-deadline, never by sleeping.
"""
from __future__ import annotations

import json
import pickle
import threading
import time
from pathlib import Path

import pytest

import controller.zookeeper.store as zs
from controller.layout import (BrokerRegistration, LeaderIsrAndControllerEpoch, parse_endpoints,
                               TopicAssignment, new_topic_id)
from controller.zookeeper.store import (BadVersion, ControllerElection, ControllerMovedError, NodeExists, NoNode)
from tests.zk_helpers import wait_until, Inbox, raw, raw_json, exists, expire_session, lisr
from replicas.errors import InvalidTopic

pytestmark = pytest.mark.zk

ROOT = Path(__file__).resolve().parent.parent


# -- JSON layout (Kafka's ZkData.scala) -------------------------------------------------------
def test_znode_json_matches_kafka_layout(stores, zk_client):
    s = stores()
    assert exists(zk_client, s, "/brokers/ids") and exists(zk_client, s, "/brokers/topics")
    election = s.elect_controller(7)
    assert (election.epoch, election.controller_id) == (1, 7)
    assert raw(zk_client, s, "/controller_epoch") == b"1"
    ctl = raw_json(zk_client, s, "/controller")
    assert ctl == {"version": 1, "brokerid": 7, "timestamp": ctl["timestamp"]}
    assert isinstance(ctl["timestamp"], str) and ctl["timestamp"].isdigit()
    assert abs(int(ctl["timestamp"]) - time.time() * 1000) < 60_000
    assert zk_client.exists(s.root + "/controller").ephemeralOwner == s.session_id
    assert zk_client.exists(s.root + "/controller_epoch").ephemeralOwner == 0

    reg = BrokerRegistration(3, "10.0.0.5", 9092, rack="r1", node_id="abc123",
                             actor_name="broker-3", timestamp_ms=1700000000123)
    epoch = s.register_broker(reg, wait_s=5)
    stat = zk_client.exists(s.root + "/brokers/ids/3")
    assert epoch == stat.czxid and stat.ephemeralOwner == s.session_id
    assert raw_json(zk_client, s, "/brokers/ids/3") == {
        "version": 5, "host": "10.0.0.5", "port": 9092, "endpoints": ["PLAINTEXT://10.0.0.5:9092"],
        "jmx_port": -1, "rack": "r1", "timestamp": "1700000000123", "node_id": "abc123",
        "actor_name": "broker-3"}
    assert s.get_broker(3) == BrokerRegistration(3, "10.0.0.5", 9092, "r1", "abc123", "broker-3",
                                                 1700000000123, epoch)
    # a broker with Kafka listeners: Kafka's endpoints and listener_security_protocol_map
    eps = parse_endpoints("PLAINTEXT://10.0.0.6:9092,INTERNAL://10.0.0.6:9093",
                          "INTERNAL:SSL,PLAINTEXT:PLAINTEXT")
    reg4 = BrokerRegistration.for_listeners(4, "10.9.9.9", eps, node_id="n4", actor_name="broker-4")
    s.register_broker(reg4, wait_s=5)
    got = raw_json(zk_client, s, "/brokers/ids/4")
    assert got["endpoints"] == ["PLAINTEXT://10.0.0.6:9092", "INTERNAL://10.0.0.6:9093"]
    assert got["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"}
    assert (got["host"], got["port"]) == ("10.0.0.6", 9092)
    assert s.get_broker(4).endpoints == eps

    tid = new_topic_id()
    ta = s.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1], 10: [3, 1, 2]},
                        {"retention.ms": 1000, "unclean.leader.election.enable": False}, tid)
    assert ta.topic_id == tid and len(tid) == 22
    assert raw_json(zk_client, s, "/brokers/topics/orders") == {
        "version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1], "10": [3, 1, 2]},
        "adding_replicas": {}, "removing_replicas": {}, "topic_id": tid}
    assert raw_json(zk_client, s, "/config/topics/orders") == {
        "version": 1, "config": {"retention.ms": "1000", "unclean.leader.election.enable": "false"}}
    assert s.get_topic_assignment("orders") == ta
    assert s.get_topic_config("orders") == {"retention.ms": "1000",
                                            "unclean.leader.election.enable": "false"}

    w = s.fenced(election)
    created = w.create_partition_states("orders", {0: lisr(1, 0, [1, 2, 3])})
    assert created == {0: LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), 1, zk_version=0)}
    assert raw_json(zk_client, s, "/brokers/topics/orders/partitions/0/state") == {
        "version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 1, "isr": [1, 2, 3]}
    assert s.get_partition_state("orders", 0) == created[0]

    assert s.request_topic_deletion("orders") is True
    assert raw(zk_client, s, "/admin/delete_topics/orders") == b""
    s.request_reassignment({("orders", 0): [3, 2, 1]})
    assert raw_json(zk_client, s, "/admin/reassign_partitions") == {
        "version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 2, 1]}]}
    s.request_preferred_election([("orders", 1), ("orders", 0)])
    assert raw_json(zk_client, s, "/admin/preferred_replica_election") == {
        "version": 1, "partitions": [{"topic": "orders", "partition": 0},
                                     {"topic": "orders", "partition": 1}]}
    name = s.create_isr_change_notification([("orders", 0)])
    assert name.startswith("isr_change_") and name[len("isr_change_"):].isdigit()
    assert raw_json(zk_client, s, f"/isr_change_notification/{name}") == {
        "version": 1, "partitions": [{"topic": "orders", "partition": 0}]}


def test_records_round_trip_through_json():
    reg = BrokerRegistration(1, "h", 1, None, "n", "a", 5)
    assert BrokerRegistration.from_json(1, reg.to_json(), 99) == BrokerRegistration(
        1, "h", 1, None, "n", "a", 5, 99)
    st = lisr(2, 7, [2, 3], ce=4)
    assert LeaderIsrAndControllerEpoch.from_json(st.to_json(), 12) == st.with_version(12)
    ta = TopicAssignment("t", {1: (1, 2), 0: (2, 1)}, adding_replicas={0: (3,)}, topic_id="x")
    back = TopicAssignment.from_json("t", ta.to_json())
    assert back == ta and json.loads(ta.to_json())["adding_replicas"] == {"0": [3]}
    with pytest.raises(InvalidTopic):
        TopicAssignment("a/b", {})


# -- controller election ---------------------------------------------------------------------------
def test_racing_elections_have_exactly_one_winner_then_failover(stores, zk_client, cluster):
    for round_ in range(3):
        a, b = stores(cluster=f"{cluster}-{round_}"), stores(cluster=f"{cluster}-{round_}")
        barrier, results = threading.Barrier(2), {}

        def run(store, cid):
            barrier.wait(10)
            try:
                results[cid] = store.elect_controller(cid)
            except ControllerMovedError as e:
                results[cid] = e

        threads = [threading.Thread(target=run, args=(st, cid)) for st, cid in ((a, 1), (b, 2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        wins = {cid: r for cid, r in results.items() if isinstance(r, ControllerElection)}
        losses = {cid: r for cid, r in results.items() if isinstance(r, ControllerMovedError)}
        assert len(wins) == 1 and len(losses) == 1, results
        (winner, election), (loser, moved) = next(iter(wins.items())), next(iter(losses.items()))
        assert election.epoch == 1 and moved.controller_id == winner
        assert a.get_controller() == winner and a.get_controller_epoch() == (1, election.epoch_zk_version)

        winner_store, loser_store = (a, b) if winner == 1 else (b, a)
        winner_store.close()  # closing the session deletes /controller at once
        wait_until(lambda: loser_store.get_controller() is None, 10, "/controller gone")
        second = loser_store.elect_controller(loser)
        assert (second.epoch, second.controller_id) == (2, loser)
        assert raw(zk_client, loser_store, "/controller_epoch") == b"2"
        assert second.epoch_zk_version > election.epoch_zk_version


def test_real_session_expiry_moves_controller(stores, zk_server, zk_client):
    a, b = stores(), stores()
    states = Inbox()
    a.add_state_listener(states)
    controller_seen = Inbox()
    b.watch_controller(controller_seen)
    controller_seen.expect(None)

    first = a.elect_controller(1)
    assert first.epoch == 1
    controller_seen.expect(1)
    with pytest.raises(ControllerMovedError) as info:
        b.elect_controller(2)
    assert info.value.controller_id == 1
    old_session = a.session_id

    expire_session(zk_server, a)
    controller_seen.expect(None)  # the server removed the ephemeral /controller
    second = b.elect_controller(2)
    assert (second.epoch, b.get_controller()) == (2, 2)
    controller_seen.expect(2)
    states.expect("LOST", timeout_s=20)
    states.expect("CONNECTED", timeout_s=20)
    wait_until(lambda: a.session_id not in (None, old_session), 20, "a new session for a")
    # the old controller's election result is fenced now
    with pytest.raises(ControllerMovedError) as info:
        a.fenced(first).verify()
    assert info.value.controller_id == 2
    assert a.delete_controller_if_ours() is False  # not ours: b holds it
    assert b.get_controller() == 2


def test_election_retry_semantics_and_resign(stores, zk_client):
    a, b = stores(), stores()
    e1 = a.elect_controller(1)
    # a retried election that had actually landed (e.g. after a connection loss) is accepted
    assert a._check_controller_and_epoch(1, 1) == e1
    # Kafka's registerController: a second attempt while holding /controller is "moved"
    with pytest.raises(ControllerMovedError) as info:
        a.elect_controller(1)
    assert info.value.controller_id == 1
    assert a.get_controller_epoch() == (1, e1.epoch_zk_version)  # nothing was bumped
    assert b.delete_controller_if_ours() is False and a.get_controller() == 1
    assert a.resign() is True and a.get_controller() is None
    e2 = b.elect_controller(2)
    assert e2.epoch == 2
    assert b.fenced(e2).delete_controller() is True and b.get_controller() is None
    moved = pickle.loads(pickle.dumps(ControllerMovedError("x", 5)))
    assert moved.controller_id == 5 and str(moved) == "x"


def test_a_restarted_candidate_deletes_only_its_dead_incarnations_controller_node(stores):
    dead, other, restarted = stores(), stores(), stores()   # three sessions
    dead.elect_controller(1001)                  # the incarnation Ray is about to restart
    assert other.delete_dead_incarnation_controller(1002) is False    # not its id
    assert dead.delete_dead_incarnation_controller(1001) is False     # its own session
    assert dead.get_controller() == 1001
    assert restarted.delete_dead_incarnation_controller(1001) is True
    assert restarted.get_controller() is None
    e = other.elect_controller(1002)              # the election goes on at once, fenced
    assert e.epoch == 2 and other.get_controller() == 1002
    assert restarted.delete_dead_incarnation_controller(1001) is False  # not 1001's node


# -- fencing ---------------------------------------------------------------------------------------
def test_zombie_controller_writes_are_fenced(stores, zk_client):
    old, new = stores(), stores()
    old.create_topic("t", {p: [1, 2] for p in range(4)})
    e1 = old.elect_controller(1)
    zombie = old.fenced(e1)
    zombie.create_partition_states("t", {p: lisr(1, 0, [1, 2]) for p in range(2)})
    before = {p: zk_client.get(old.root + f"/brokers/topics/t/partitions/{p}/state")
              for p in range(2)}
    topic_before = zk_client.get(old.root + "/brokers/topics/t")

    assert old.resign() is True  # the old controller loses /controller but keeps e1 (a zombie)
    e2 = new.elect_controller(2)
    assert e2.epoch == 2

    with pytest.raises(ControllerMovedError) as info:
        zombie.update_partition_states({("t", 0): (lisr(2, 1, [2], ce=1), 0),
                                        ("t", 1): (lisr(2, 1, [2], ce=1), 0)})
    assert info.value.controller_id == 2
    with pytest.raises(ControllerMovedError):
        zombie.create_partition_states("t", {2: lisr(1, 0, [1, 2]), 3: lisr(2, 0, [2, 1])})
    with pytest.raises(ControllerMovedError):
        zombie.set_topic_assignment(TopicAssignment("t", {0: (9,)}))
    with pytest.raises(ControllerMovedError):
        zombie.delete_topic_znodes("t")
    with pytest.raises(ControllerMovedError):
        zombie.verify()

    for p in range(2):
        assert zk_client.get(old.root + f"/brokers/topics/t/partitions/{p}/state") == before[p]
    for p in (2, 3):
        assert not exists(zk_client, old, f"/brokers/topics/t/partitions/{p}")
    assert zk_client.get(old.root + "/brokers/topics/t") == topic_before
    # the new controller's writes land
    res = new.fenced(e2).update_partition_states({("t", 0): (lisr(2, 1, [2], ce=2), 0)})
    assert res == {("t", 0): 1}
    assert new.get_partition_state("t", 0) == LeaderIsrAndControllerEpoch(2, 1, (2,), 2, 1)


def test_fence_failure_in_a_large_pipelined_batch_writes_nothing(stores, zk_client, monkeypatch):
    monkeypatch.setattr(zs, "MAX_OPS_PER_MULTI", 8)  # many multis per call
    a, b = stores(), stores()
    a.create_topic("t", {p: [1] for p in range(40)})
    e1 = a.elect_controller(1)
    a.fenced(e1).create_partition_states("t", {p: lisr(1, 0, [1]) for p in range(40)})
    a.resign()
    b.elect_controller(2)
    with pytest.raises(ControllerMovedError):
        a.fenced(e1).update_partition_states({("t", p): (lisr(1, 1, [1]), 0) for p in range(40)})
    states = a.get_partition_states(["t"])
    assert len(states) == 40 and all(st.zk_version == 0 and st.leader_epoch == 0
                                     for st in states.values())


# -- conditional partition-state updates ----------------------------------------------------------
def test_stale_zk_version_fails_only_that_partition(stores, zk_client):
    s = stores()
    s.create_topic("t", {p: [1, 2] for p in range(5)})
    w = s.fenced(s.elect_controller(1))
    w.create_partition_states("t", {p: lisr(1, 0, [1, 2]) for p in range(5)})
    assert w.update_partition_states({("t", 2): (lisr(2, 1, [2]), 0)}) == {("t", 2): 1}
    stale_raw = raw(zk_client, s, "/brokers/topics/t/partitions/2/state")

    res = w.update_partition_states({("t", p): (lisr(1, 5, [1]), 0) for p in range(5)}
                                    | {("t", 9): (lisr(1, 5, [1]), 0)})
    assert isinstance(res[("t", 2)], BadVersion) and res[("t", 2)].path.endswith("/2/state")
    assert isinstance(res[("t", 9)], NoNode)
    assert {tp: v for tp, v in res.items() if tp[1] not in (2, 9)} == {
        ("t", 0): 1, ("t", 1): 1, ("t", 3): 1, ("t", 4): 1}
    assert raw(zk_client, s, "/brokers/topics/t/partitions/2/state") == stale_raw
    assert s.get_partition_state("t", 0) == LeaderIsrAndControllerEpoch(1, 5, (1,), 1, 1)
    assert not exists(zk_client, s, "/brokers/topics/t/partitions/9")


def test_many_stale_versions_across_chunks(stores, monkeypatch):
    """Exercises re-commits and the one-multi-per-item fallback: every 3rd partition stale."""
    monkeypatch.setattr(zs, "MAX_OPS_PER_MULTI", 10)
    s = stores()
    n = 60
    s.create_topic("t", {p: [1] for p in range(n)})
    w = s.fenced(s.elect_controller(1))
    created = w.create_partition_states("t", {p: lisr(1, 0, [1]) for p in range(n)})
    assert all(st.zk_version == 0 for st in created.values())
    stale = {p for p in range(n) if p % 3 == 0}
    w.update_partition_states({("t", p): (lisr(1, 1, [1]), 0) for p in stale})  # now version 1
    res = w.update_partition_states({("t", p): (lisr(1, 2, [1]), 0) for p in range(n)})
    assert {p for (_, p), r in res.items() if isinstance(r, BadVersion)} == stale
    assert all(res[("t", p)] == 1 for p in range(n) if p not in stale)
    states = s.get_partition_states(["t"])
    assert all(states[("t", p)].leader_epoch == (1 if p in stale else 2) for p in range(n))


def test_create_partition_states_reports_existing_per_partition(stores, zk_client, monkeypatch):
    monkeypatch.setattr(zs, "MAX_OPS_PER_MULTI", 7)
    s = stores()
    s.create_topic("t", {p: [1, 2] for p in range(12)})
    w = s.fenced(s.elect_controller(1))
    first = w.create_partition_states("t", {p: lisr(1, 0, [1, 2]) for p in (1, 4, 5)})
    assert all(v.zk_version == 0 for v in first.values())
    before = raw(zk_client, s, "/brokers/topics/t/partitions/4/state")
    res = w.create_partition_states("t", {p: lisr(2, 3, [2]) for p in range(12)})
    assert {p for p, v in res.items() if isinstance(v, NodeExists)} == {1, 4, 5}
    assert all(res[p] == lisr(2, 3, [2]).with_version(0) for p in range(12) if p not in (1, 4, 5))
    assert raw(zk_client, s, "/brokers/topics/t/partitions/4/state") == before
    assert len(s.get_partition_states(["t"])) == 12
    # a topic znode that is gone: NoNode for each partition, nothing created
    res = w.create_partition_states("ghost", {0: lisr(1, 0, [1])})
    assert isinstance(res[0], NoNode) and not exists(zk_client, s, "/brokers/topics/ghost")
