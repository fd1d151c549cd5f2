"""Controller fencing on the REAL ZooKeeper: a really expired controller session, a
zombie (paused) controller whose write lands after a newer controller won, and a deleted
/controller znode triggering a re-election."""

from __future__ import annotations

import threading

import pytest

from controller import events as ev
from controller.layout import LeaderIsrAndControllerEpoch
from replicas.errors import NotController
from tests.controller_cluster import cluster, state  # noqa: F401  (fixture)
from tests.zk_helpers import expire_session, wait_until

pytestmark = pytest.mark.zk


class Stall:
    """The controller process paused right before a ZooKeeper write (GC pause, SIGSTOP):
    when armed, the next partition-state update waits until released."""

    def __init__(self):
        self.armed = False
        self.reached = threading.Event()
        self.release = threading.Event()

    def maybe_wait(self):
        if self.armed:
            self.armed = False
            self.reached.set()
            assert self.release.wait(30)


class StallingWriter:
    def __init__(self, writer, stall):
        self.writer, self.stall = writer, stall

    def __getattr__(self, name):
        return getattr(self.writer, name)

    def update_partition_states(self, updates):
        self.stall.maybe_wait()
        return self.writer.update_partition_states(updates)


class StallingStore:
    """A real ZkStore whose fenced writer can be paused before a write."""

    def __init__(self, store, stall):
        self.store, self.stall = store, stall

    def __getattr__(self, name):
        return getattr(self.store, name)

    def fenced(self, election):
        return StallingWriter(self.store.fenced(election), self.stall)


def active_is(cluster, controller, timeout_s=15):
    def check():
        controller.loop.idle(0.5)
        return controller.is_active
    wait_until(check, timeout_s, f"controller {controller.id} active")


def test_real_session_expiry_moves_the_controller(cluster, zk_server):
    for b in (1, 2):
        cluster.broker(b)
    first = cluster.controller(101)
    cluster.active()
    second = cluster.controller(102)
    cluster.admin.create_topic("t", {0: [1, 2]})
    cluster.settled(first, lambda: state(cluster.admin, "t", 0) is not None, "t online")

    expire_session(zk_server, first.store)                      # server-side expiry
    active_is(cluster, second)
    assert second.ctx.epoch == 2 and cluster.admin.get_controller_epoch()[0] == 2
    cluster.settled(first, lambda: first.active_controller_id == 102 and not first.is_active,
                    "the expired controller re-registered as a standby")
    assert first.election is None and first.psm is None
    cluster.kill_broker(1)
    cluster.settled(second, lambda: state(cluster.admin, "t", 0).leader == 2, "failover by 102")
    assert state(cluster.admin, "t", 0).controller_epoch == 2


def test_zombie_controller_write_is_fenced_and_it_resigns(cluster, zk_server):
    for b in (1, 2, 3):
        cluster.broker(b)
    stall = Stall()
    zombie = cluster.controller(101, store=StallingStore(cluster.store(), stall))
    cluster.active()
    successor = cluster.controller(102)
    cluster.admin.create_topic("t", {0: [1, 2, 3]})
    cluster.settled(zombie, lambda: state(cluster.admin, "t", 0) is not None, "t online")
    before = state(cluster.admin, "t", 0)

    stall.armed = True
    replies = []
    shrink = LeaderIsrAndControllerEpoch(1, before.leader_epoch, (1, 2), 1, before.zk_version)
    zombie.loop.put(ev.AlterPartition(1, zombie.ctx.broker_epoch(1), {("t", 0): shrink},
                                      reply=replies.append))
    assert stall.reached.wait(10)                                # paused right before writing
    expire_session(zk_server, zombie.store.store)
    active_is(cluster, successor)                                # a newer controller, epoch 2
    assert successor.ctx.epoch == 2
    wait_until(lambda: zombie.store.client.connected, 15, "zombie's client reconnected")

    stall.release.set()                                          # the zombie wakes up and writes
    wait_until(lambda: replies, 10, "a reply to the broker")
    assert isinstance(replies[0], NotController)
    after = state(cluster.admin, "t", 0)
    assert (after.isr, after.zk_version) == (before.isr, before.zk_version)   # nothing landed
    cluster.settled(zombie, lambda: not zombie.is_active and zombie.active_controller_id == 102,
                    "zombie resigned")
    assert successor.is_active


def test_deleting_controller_znode_triggers_reelection(cluster, zk_client):
    cluster.broker(1)
    a, b = cluster.controller(101), cluster.controller(102)
    first = cluster.active()
    zk_client.delete(cluster.admin.root + "/controller")
    wait_until(lambda: cluster.admin.get_controller_epoch()[0] == 2, 10, "epoch 2 elected")
    winner = cluster.active()
    assert winner.ctx.epoch == 2
    loser = b if winner is a else a
    assert loser.active_controller_id == winner.id and not loser.is_active
    if winner is not first:
        assert not first.is_active and first.election is None
