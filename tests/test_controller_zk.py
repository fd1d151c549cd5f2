"""The controller against the REAL ZooKeeper: election, failover, broker changes, topic
creation, AlterPartition and controlled shutdown, with brokers as plain ZooKeeper sessions
and a recording channel in place of the broker actors."""

from __future__ import annotations

import pytest

from controller import events as ev
from controller.requests import LeaderAndIsrRequest, UpdateMetadataRequest
from controller.layout import LeaderIsrAndControllerEpoch
from replicas.errors import FencedLeaderEpoch, IneligibleReplica, StaleBrokerEpoch
from tests.controller_cluster import cluster, state  # noqa: F401  (fixture)

pytestmark = pytest.mark.zk


def test_one_controller_creates_topics_and_handles_broker_failure(cluster):
    for b in (1, 2, 3):
        cluster.broker(b)
    c1, c2 = cluster.controller(101), cluster.controller(102)
    active = cluster.active()
    assert active.ctx.epoch == 1 and active.ctx.live_broker_ids() == {1, 2, 3}
    standby = c2 if active is c1 else c1
    assert standby.active_controller_id == active.id

    cluster.admin.create_topic("clicks", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    cluster.settled(active, lambda: all(state(cluster.admin, "clicks", p) for p in range(3)),
                    "partition states created")
    assert [(state(cluster.admin, "clicks", p).leader, state(cluster.admin, "clicks", p).isr)
            for p in range(3)] == [(1, (1, 2, 3)), (2, (2, 3, 1)), (3, (3, 1, 2))]
    new_lai = [(b, s.partition) for b, r in cluster.channel.sent if isinstance(r, LeaderAndIsrRequest)
               for s in r.partition_states if s.is_new]
    assert sorted(new_lai) == sorted((b, p) for p in range(3) for b in (1, 2, 3))
    assert all(r.controller_epoch == 1 for _, r in cluster.channel.sent)

    cluster.channel.clear()
    cluster.kill_broker(1)
    cluster.settled(active, lambda: state(cluster.admin, "clicks", 0).leader == 2, "clicks-0 moved to 2")
    s0 = state(cluster.admin, "clicks", 0)
    assert (s0.leader, s0.isr, s0.leader_epoch) == (2, (2, 3), 1)
    assert all(1 not in state(cluster.admin, "clicks", p).isr for p in range(3))
    assert {b for b, r in cluster.channel.sent if isinstance(r, UpdateMetadataRequest)} == {2, 3}


def test_failover_to_the_standby_with_epoch_plus_one(cluster):
    for b in (1, 2):
        cluster.broker(b)
    cluster.controller(101)
    first = cluster.active()
    cluster.controller(102)
    cluster.admin.create_topic("t", {0: [1, 2]})
    cluster.settled(first, lambda: state(cluster.admin, "t", 0) is not None, "t-0 online")
    first.store.close()                                   # its session ends: /controller goes
    del cluster.controllers[first.id]
    second = cluster.active()
    assert second.id != first.id and second.ctx.epoch == 2
    assert second.ctx.leadership[("t", 0)].leader == 1
    cluster.kill_broker(1)                                # the new controller handles it
    cluster.settled(second, lambda: state(cluster.admin, "t", 0).leader == 2, "t-0 moved")
    assert state(cluster.admin, "t", 0).controller_epoch == 2


def test_alter_partition_and_controlled_shutdown(cluster):
    for b in (1, 2, 3):
        cluster.broker(b)
    cluster.controller(101)
    c = cluster.active()
    cluster.admin.create_topic("t", {0: [1, 2, 3], 1: [2, 1, 3]})
    cluster.settled(c, lambda: state(cluster.admin, "t", 1) is not None, "t online")
    epoch1 = c.ctx.broker_epoch(1)

    def ask(event_cls, *args):
        return cluster.ask(c, event_cls, *args)

    current = state(cluster.admin, "t", 0)
    shrink = LeaderIsrAndControllerEpoch(1, current.leader_epoch, (1, 2), 1, current.zk_version)
    got = ask(ev.AlterPartition, 1, epoch1, {("t", 0): shrink})[("t", 0)]
    assert (got.isr, got.leader_epoch, got.zk_version) == ((1, 2), 0, current.zk_version + 1)
    assert state(cluster.admin, "t", 0).isr == (1, 2)
    assert ask(ev.AlterPartition, 1, epoch1, {("t", 0): shrink})[("t", 0)] == got   # idempotent
    stale = ask(ev.AlterPartition, 1, epoch1 - 1, {("t", 0): shrink})[("t", 0)]
    assert isinstance(stale, StaleBrokerEpoch) and stale.code == 77
    fenced = LeaderIsrAndControllerEpoch(1, -1, (1,), 1, got.zk_version)
    assert isinstance(ask(ev.AlterPartition, 1, epoch1, {("t", 0): fenced})[("t", 0)], FencedLeaderEpoch)
    bad = LeaderIsrAndControllerEpoch(1, 0, (1, 9), 1, got.zk_version)
    assert isinstance(ask(ev.AlterPartition, 1, epoch1, {("t", 0): bad})[("t", 0)], IneligibleReplica)

    remaining = ask(ev.ControlledShutdown, 1, epoch1)
    assert remaining == set()
    s0, s1 = state(cluster.admin, "t", 0), state(cluster.admin, "t", 1)
    assert s0.leader == 2 and 1 not in s0.isr
    assert s1.leader == 2 and 1 not in s1.isr
