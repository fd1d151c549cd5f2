"""Seeded deterministic simulation of the controller (issue 3): random broker up/down and
bounces, controller kills, REAL-semantics session expiries (in-memory ZooKeeper), paused
controllers, /controller deleted, failing ZooKeeper writes, AlterPartition proposals
(some stale), admin operations (create/delete topic, reassignment, preferred election,
unclean config) and timers. After every step the invariants below must hold; after
healing, the cluster must have converged.

Invariants (rayka/chaos/checker.py's, issue 3):
- one controller per epoch: every request ever sent names one controller per epoch, and
  at most one un-paused controller believes it is active;
- leader ∈ ISR ⊆ assignment, or leader = -1 with the last ISR member kept (ISR never empty);
- leader epochs and partition epochs (zk versions) only grow;
- no fenced write lands: a state znode never carries a controller epoch newer than the
  ZooKeeper epoch, nor one older than the epoch at the start of the step that wrote it;
- committed AlterPartition answers are what ZooKeeper holds (or were superseded later).

Re-run one seed: RAYKA_SIM_SEEDS=1234 pytest tests/test_controller_simulation.py
"""

from __future__ import annotations

import os

import pytest

from controller.states import PartitionState as P
from controller.layout import LeaderIsrAndControllerEpoch, partition_state_path
from tests.memory_zk import Op
from tests.sim_world import World

pytestmark = pytest.mark.unit

SEEDS = [int(s) for s in os.environ.get("RAYKA_SIM_SEEDS", "").split(",") if s] or list(range(24))
STEPS = int(os.environ.get("RAYKA_SIM_STEPS", "120"))


def check(w: World, epoch_before: int) -> None:
    where = w.where()
    zk_epoch = w.admin.get_controller_epoch()[0]
    for _, request in w.channel.sent:
        owner = w.epoch_owner.setdefault(request.controller_epoch, request.controller_id)
        assert owner == request.controller_id, f"two controllers sent at epoch {request.controller_epoch}: {where}"
    active = [c for cid, c in w.controllers.items() if c.is_active and cid not in w.paused]
    assert len({c.ctx.epoch for c in active}) == len(active), f"two actives in one epoch: {where}"
    assert len([c for c in active if c.ctx.epoch == zk_epoch]) <= 1, where

    assignments = w.admin.get_all_assignments()
    for (topic, p), s in w.admin.get_partition_states().items():
        a = assignments.get(topic)
        assert s.isr, f"{topic}-{p} empty ISR {s}: {where}"
        assert s.leader == -1 or s.leader in s.isr, f"{topic}-{p} leader outside ISR {s}: {where}"
        if a is not None:
            assert set(s.isr) <= set(a.partitions.get(p, ())), \
                f"{topic}-{p} ISR {s.isr} outside replicas {a.partitions.get(p)}: {where}"
        assert s.controller_epoch <= zk_epoch, f"{topic}-{p} from the future {s}: {where}"
        key = ((a.topic_id if a else topic), p)
        before = w.seen_epochs.get(key)
        if before is not None:
            assert (s.leader_epoch, s.zk_version) >= before, f"{topic}-{p} epochs went back: {where}"
            if s.zk_version > before[1]:
                assert s.controller_epoch >= epoch_before, f"{topic}-{p} fenced write landed {s}: {where}"
        w.seen_epochs[key] = (s.leader_epoch, s.zk_version)
    for tp, isr, reply in w.replies:
        if isinstance(reply, dict) and isinstance(got := reply.get(tp), LeaderIsrAndControllerEpoch):
            assert tuple(got.isr) == tuple(isr), f"answer {got} is not the proposal {isr}: {where}"
            now = w.admin.get_partition_state(*tp)
            assert now is None or now.zk_version >= got.zk_version, where
    w.replies.clear()


def check_converged(w: World) -> None:
    where = w.where()
    c = w.active()
    assert c is not None, f"no active controller after healing: {where}"
    assert w.admin.get_controller() == c.id and c.ctx.epoch == w.admin.get_controller_epoch()[0], where
    assert not w.admin.get_topic_deletions(), f"deletions stuck {w.admin.get_topic_deletions()}: {where}"
    assert not w.admin.get_reassignment(), f"reassignment stuck {w.admin.get_reassignment()}: {where}"
    assert not w.admin.get_preferred_election(), where
    states = w.admin.get_partition_states()
    assignments = w.admin.get_all_assignments()
    assert {t for t, _ in states} <= set(assignments), where
    for tp, s in states.items():
        assert s.leader in w.brokers, f"{tp} has no live leader after healing {s}: {where}"
        assert c.ctx.leadership.get(tp) == s, f"{tp} context {c.ctx.leadership.get(tp)} != zk {s}: {where}"
        assert c.ctx.partition_states.get(tp) == P.ONLINE, where
    for topic, a in assignments.items():
        assert not a.adding_replicas and not a.removing_replicas, f"{topic} still moving: {where}"
        for p, replicas in a.partitions.items():
            assert c.ctx.replicas((topic, p)) == replicas, f"{topic}-{p} context replicas: {where}"


@pytest.mark.parametrize("seed", SEEDS)
def test_random_schedules_keep_the_invariants(seed):
    w = World(seed)
    print(f"simulation seed {seed}")
    for _ in range(STEPS):
        epoch_before = w.admin.get_controller_epoch()[0]
        w.random_step()
        check(w, epoch_before)
    w.heal()
    check(w, 0)
    check_converged(w)
    assert not w.zk.callback_errors, f"watch callbacks raised: {w.zk.callback_errors[:3]} {w.where()}"


def test_the_simulation_is_deterministic():
    runs = []
    for _ in range(2):
        w = World(7)
        for _ in range(60):
            w.random_step()
        runs.append((w.log, w.zk.dump(), [(b, repr(r)) for b, r in w.channel.sent]))
    assert runs[0] == runs[1]


def test_the_checker_sees_a_fenced_write():
    """Not vacuous: a state written under an old controller epoch is reported."""
    w = World(3)
    for _ in range(5):
        w.random_step()
    w.create_topic()
    w.settle()
    check(w, w.admin.get_controller_epoch()[0])
    tp = w.partitions()[0]
    old = w.admin.get_partition_state(*tp)
    forged = LeaderIsrAndControllerEpoch(old.leader, old.leader_epoch, old.isr, 0, old.zk_version)
    w.zk.multi(None, w.admin.root, [Op("set", partition_state_path(*tp), forged.to_json())])
    with pytest.raises(AssertionError, match="fenced write landed"):
        check(w, w.admin.get_controller_epoch()[0])


def test_a_bounced_broker_gets_leadership_back_and_no_stop_replica():
    """Kafka's bounce: failure then startup in one event; StopReplica meant for the dead
    incarnation must not reach the new one (it would stop the partitions the following
    LeaderAndIsr cannot restart at the same leader epoch)."""
    from controller.requests import LeaderAndIsrRequest, StopReplicaRequest
    w = World(11)
    w.create_topic()
    w.settle()
    tp = w.partitions()[0]
    leader = w.admin.get_partition_state(*tp).leader
    w.channel.clear()
    w.broker_bounce(leader)
    w.settle()
    sent = w.channel.by_broker().get(leader, [])
    assert not [r for r in sent if isinstance(r, StopReplicaRequest)]
    assert any(isinstance(r, LeaderAndIsrRequest) and r.broker_epoch == w.broker_epochs[leader]
               for r in sent)
