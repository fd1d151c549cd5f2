"""Admin operations end to end through the REAL ZooKeeper: topic deletion (with a dead
broker and a failing replica), partition reassignment through its phases, preferred leader
election from /admin/preferred_replica_election, the auto leader rebalance timer and a
topic config change turning unclean election on."""

from __future__ import annotations

import pytest

from controller import events as ev
from controller.controller import ControllerConfig
from controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from controller.layout import LeaderIsrAndControllerEpoch
from replicas.errors import (ElectionNotNeeded, NoReassignmentInProgress, PreferredLeaderNotAvailable,
                             UnknownTopicOrPartition)
from tests.controller_cluster import cluster, state  # noqa: F401  (fixture)
from tests.zk_helpers import exists

pytestmark = pytest.mark.zk


def online(cluster, c, topic, partitions):
    cluster.settled(c, lambda: all(state(cluster.admin, topic, p) for p in range(partitions)),
                    f"{topic} online")


def stop_replicas(channel, delete):
    return sorted((b, p.topic, p.partition) for b, r in channel.sent
                  if isinstance(r, StopReplicaRequest) for p in r.partitions if p.delete == delete)


def grow_isr(cluster, c, topic, p, isr):
    """The partition's leader asks the controller to set the ISR (as a broker would)."""
    cur = state(cluster.admin, topic, p)
    proposal = LeaderIsrAndControllerEpoch(cur.leader, cur.leader_epoch, tuple(isr), c.ctx.epoch,
                                           cur.zk_version)
    got = cluster.ask(c, ev.AlterPartition, cur.leader, c.ctx.broker_epoch(cur.leader),
                      {(topic, p): proposal})[(topic, p)]
    assert tuple(got.isr) == tuple(isr), got
    return got


def test_topic_deletion_removes_replicas_then_znodes(cluster, zk_client):
    for b in (1, 2, 3):
        cluster.broker(b)
    c = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("doomed", {0: [1, 2], 1: [2, 3], 2: [3, 1]},
                               {"retention.ms": 1000})
    cluster.admin.create_topic("kept", {0: [1, 2]})
    online(cluster, c, "doomed", 3)
    online(cluster, c, "kept", 1)
    cluster.channel.clear()

    assert cluster.admin.request_topic_deletion("doomed")
    cluster.settled(c, lambda: "doomed" not in cluster.admin.get_topics(), "doomed deleted")
    for path in ("/brokers/topics/doomed", "/config/topics/doomed", "/admin/delete_topics/doomed"):
        assert not exists(zk_client, cluster.admin, path)
    assert stop_replicas(cluster.channel, True) == sorted(
        [(1, "doomed", 0), (2, "doomed", 0), (2, "doomed", 1), (3, "doomed", 1),
         (3, "doomed", 2), (1, "doomed", 2)])
    during = [s for _, r in cluster.channel.sent if isinstance(r, UpdateMetadataRequest)
              for s in r.partition_states if s.topic == "doomed"]
    assert during and all(s.leader == -2 for s in during)        # LeaderDuringDelete
    assert "doomed" not in c.ctx.all_topics and not c.ctx.topics_to_delete
    assert state(cluster.admin, "kept", 0).leader == 1           # the other topic is untouched
    # a marker for a topic that does not exist is simply removed
    zk_client.create(cluster.admin.root + "/admin/delete_topics/ghost")
    cluster.settled(c, lambda: not exists(zk_client, cluster.admin, "/admin/delete_topics/ghost"),
                    "ghost marker removed")


def test_topic_deletion_waits_for_dead_broker_and_retries_failed_replicas(cluster):
    for b in (1, 2, 3):
        cluster.broker(b)
    c = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("t", {0: [1, 3], 1: [2, 3]})
    online(cluster, c, "t", 2)
    cluster.kill_broker(3)
    cluster.settled(c, lambda: 3 not in c.ctx.live_brokers, "broker 3 seen dead")
    cluster.channel.failing.add(2)
    cluster.channel.clear()

    cluster.admin.request_topic_deletion("t")
    cluster.settled(c, lambda: "t" in c.ctx.topics_ineligible_for_deletion
                    and (2, "t", 1) in stop_replicas(cluster.channel, True), "deletion blocked")
    assert "t" in cluster.admin.get_topics()                     # nothing removed yet
    assert {b for b, *_ in stop_replicas(cluster.channel, True)} == {1, 2}
    cluster.channel.failing.clear()
    cluster.broker(3)                                            # the broker comes back
    cluster.settled(c, lambda: "t" not in cluster.admin.get_topics(), "t deleted after restart")
    assert {(b, p) for b, _, p in stop_replicas(cluster.channel, True)} >= {(3, 0), (3, 1), (2, 1)}


def test_reassignment_moves_replicas_in_phases(cluster, zk_client):
    for b in (1, 2, 3):
        cluster.broker(b)
    c = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("r", {0: [1, 2], 1: [2, 3]})
    online(cluster, c, "r", 2)
    cluster.channel.clear()

    cluster.admin.request_reassignment({("r", 0): [3, 2], ("r", 1): [2, 9], ("nope", 0): [1]})
    cluster.settled(c, lambda: cluster.admin.get_topic_assignment("r").adding_replicas,
                    "phase A written")
    a = cluster.admin.get_topic_assignment("r")
    assert (a.partitions[0], a.adding_replicas, a.removing_replicas) == ((3, 2, 1), {0: (3,)}, {0: (1,)})
    assert a.partitions[1] == (2, 3)                             # broker 9 is not alive: rejected
    assert cluster.admin.get_reassignment() == {("r", 0): (3, 2)}
    s0 = state(cluster.admin, "r", 0)
    assert (s0.leader, s0.leader_epoch, s0.isr) == (1, 1, (1, 2))  # epoch bumped, same ISR
    lai = {(b, s.is_new, s.replicas, s.adding_replicas) for b, r in cluster.channel.sent
           if isinstance(r, LeaderAndIsrRequest) for s in r.partition_states if s.partition == 0}
    assert lai >= {(3, True, (3, 2, 1), (3,)), (1, False, (3, 2, 1), (3,)), (2, False, (3, 2, 1), (3,))}

    cluster.channel.clear()
    grow_isr(cluster, c, "r", 0, (1, 2, 3))                     # broker 3 caught up
    cluster.settled(c, lambda: not exists(zk_client, cluster.admin, "/admin/reassign_partitions"),
                    "reassignment finished")
    a = cluster.admin.get_topic_assignment("r")
    assert (a.partitions[0], a.adding_replicas, a.removing_replicas) == ((3, 2), {}, {})
    s0 = state(cluster.admin, "r", 0)
    assert s0.leader == 3 and set(s0.isr) == {2, 3} and s0.leader_epoch > 1
    assert (1, "r", 0) in stop_replicas(cluster.channel, True)   # the old replica is deleted
    assert c.ctx.replicas(("r", 0)) == (3, 2) and not c.reassignment.in_progress


def test_reassignment_resumes_on_the_next_controller(cluster):
    for b in (1, 2, 3):
        cluster.broker(b)
    first = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("r", {0: [1, 2]})
    online(cluster, first, "r", 1)
    cluster.admin.request_reassignment({("r", 0): [2, 3]})
    cluster.settled(first, lambda: ("r", 0) in first.reassignment.in_progress, "phase A")
    cluster.controller(102)
    first.store.close()
    del cluster.controllers[101]
    second = cluster.active()
    assert second.id == 102 and ("r", 0) in second.reassignment.in_progress
    grow_isr(cluster, second, "r", 0, (1, 2, 3))
    cluster.settled(second, lambda: cluster.admin.get_topic_assignment("r").partitions[0] == (2, 3),
                    "completed by the new controller")
    assert state(cluster.admin, "r", 0).leader == 2


def test_preferred_election_from_zookeeper_and_admin(cluster, zk_client):
    for b in (1, 2):
        cluster.broker(b)
    c = cluster.controller(101, ControllerConfig(auto_leader_rebalance_enable=False))
    cluster.active()
    cluster.admin.create_topic("p", {0: [1, 2], 1: [2, 1]})
    online(cluster, c, "p", 2)
    cluster.kill_broker(1)
    cluster.settled(c, lambda: state(cluster.admin, "p", 0).leader == 2, "p-0 failed over")
    cluster.broker(1)
    cluster.settled(c, lambda: 1 in c.ctx.live_brokers, "broker 1 back")
    assert state(cluster.admin, "p", 0).leader == 2              # no automatic move back
    grow_isr(cluster, c, "p", 0, (2, 1))

    cluster.admin.request_preferred_election([("p", 0)])
    cluster.settled(c, lambda: not exists(zk_client, cluster.admin, "/admin/preferred_replica_election"),
                    "election done, znode removed")
    s0 = state(cluster.admin, "p", 0)
    assert (s0.leader, set(s0.isr)) == (1, {1, 2})
    answers = cluster.ask(c, ev.PreferredReplicaElection, frozenset({("p", 0), ("p", 1), ("x", 0)}))
    assert isinstance(answers[("p", 0)], ElectionNotNeeded)
    assert isinstance(answers[("p", 1)], ElectionNotNeeded)
    assert isinstance(answers[("x", 0)], UnknownTopicOrPartition)


def test_auto_leader_rebalance_moves_leaders_back(cluster):
    for b in (1, 2):
        cluster.broker(b)
    c = cluster.controller(101, ControllerConfig(leader_imbalance_check_interval_ms=200))
    cluster.active()
    cluster.admin.create_topic("a", {p: [1, 2] for p in range(4)})
    online(cluster, c, "a", 4)
    cluster.kill_broker(1)
    cluster.settled(c, lambda: all(state(cluster.admin, "a", p).leader == 2 for p in range(4)),
                    "all led by 2")
    cluster.broker(1)
    cluster.settled(c, lambda: 1 in c.ctx.live_brokers, "broker 1 back")
    for p in range(4):
        grow_isr(cluster, c, "a", p, (2, 1))
    cluster.settled(c, lambda: all(state(cluster.admin, "a", p).leader == 1 for p in range(4)),
                    "the timer moved leadership back to the preferred replica")


def test_unclean_config_change_elects_an_out_of_sync_replica(cluster):
    for b in (1, 2):
        cluster.broker(b)
    c = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("u", {0: [1, 2]})
    online(cluster, c, "u", 1)
    grow_isr(cluster, c, "u", 0, (1,))                           # 2 fell out of the ISR
    cluster.kill_broker(1)
    cluster.settled(c, lambda: state(cluster.admin, "u", 0).leader == -1, "u-0 offline")
    assert state(cluster.admin, "u", 0).isr == (1,)              # the last ISR member is kept
    cluster.admin.set_topic_config("u", {"unclean.leader.election.enable": True})
    cluster.settled(c, lambda: state(cluster.admin, "u", 0).leader == 2, "unclean leader elected")
    assert state(cluster.admin, "u", 0).isr == (2,) and c.psm.unclean_elections == 1


def test_admin_unclean_election_elects_an_out_of_sync_replica(cluster):
    for b in (1, 2):
        cluster.broker(b)
    c = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("e", {0: [1, 2], 1: [2, 1]})
    online(cluster, c, "e", 2)
    grow_isr(cluster, c, "e", 0, (1,))                           # 2 fell out of the ISR
    cluster.kill_broker(1)
    cluster.settled(c, lambda: state(cluster.admin, "e", 0).leader == -1, "e-0 offline")
    answers = cluster.ask(c, ev.PreferredReplicaElection, frozenset({("e", 0), ("e", 1), ("x", 0)}),
                          election_type=1)
    assert answers[("e", 0)].leader == 2 and state(cluster.admin, "e", 0).isr == (2,)
    assert isinstance(answers[("e", 1)], ElectionNotNeeded)      # led by live broker 2
    assert isinstance(answers[("x", 0)], UnknownTopicOrPartition)
    again = cluster.ask(c, ev.PreferredReplicaElection, frozenset({("e", 0)}))
    assert isinstance(again[("e", 0)], PreferredLeaderNotAvailable)   # 1 is dead


def test_api_reassignment_starts_lists_and_cancels(cluster, zk_client):
    for b in (1, 2, 3):
        cluster.broker(b)
    c = cluster.controller(101)
    cluster.active()
    cluster.admin.create_topic("k", {0: [1, 2], 1: [2, 3]})
    online(cluster, c, "k", 2)
    answers = cluster.ask(c, ev.ApiPartitionReassignment,
                          {("k", 0): (3, 2), ("k", 1): None, ("nope", 0): (1,),
                           ("nope", 1): None})
    assert answers[("k", 0)] is None
    assert isinstance(answers[("k", 1)], NoReassignmentInProgress)
    assert isinstance(answers[("nope", 0)], UnknownTopicOrPartition)
    assert isinstance(answers[("nope", 1)], UnknownTopicOrPartition)
    listed = cluster.ask(c, ev.ListPartitionReassignments, None)
    assert {tp: (a.replicas, a.adding, a.removing) for tp, a in listed.items()} == {
        ("k", 0): ((3, 2, 1), (3,), (1,))}
    cancelled = cluster.ask(c, ev.ApiPartitionReassignment, {("k", 0): None})
    assert cancelled[("k", 0)] is None
    a = cluster.admin.get_topic_assignment("k")
    # the origin replicas in the moving set's order, as Kafka's originReplicas (RS - AR)
    assert (a.partitions[0], a.adding_replicas, a.removing_replicas) == ((2, 1), {}, {})
    assert cluster.ask(c, ev.ListPartitionReassignments, frozenset({("k", 0)})) == {}
