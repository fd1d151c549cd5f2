"""Seeded simulations of consumers against the pure group coordinator (tests/coordinator_sim.py).

Each seed runs a few hundred random steps: consumers (dynamic and static) join, heartbeat,
commit (several commits in flight, acknowledged in any order), rejoin, leave, die and restart;
appends fail at random (some written anyway, as NOT_ENOUGH_REPLICAS_AFTER_APPEND); offsets
partitions are unloaded and reloaded from what was written. After every step:
- one generation active: a live dynamic member holding an assignment that the coordinator
  still counts as a member holds the group's current generation;
- no two live members of one generation are assigned the same partition (the leader assigns
  with a naive range assignor);
- the cached committed offset of every partition never goes back, and never below a commit
  that was acknowledged (every member commits increasing offsets);
- every Respond answers a request that was made, exactly once (the driver asserts it);
- right after an UnloadPartition no call of its groups is left unanswered;
and at the end, once everyone stopped and the clock ran out every timer, every request ever
made has had its answer.
"""

import collections

import pytest

from coordinator import messages as m
from replicas.errors import ErrorCode as E
from tests.coordinator_sim import World

pytestmark = pytest.mark.unit

SEEDS = range(16)
STEPS = 600


def run(seed: int) -> World:
    world = World(seed)
    for _ in range(STEPS):
        world.step()
        assert world.violations == [], f"seed {seed}: {world.violations[:3]}"
    world.finish()
    assert world.violations == [], f"seed {seed}: {world.violations[:3]}"
    assert world.d.unanswered() == set(), f"seed {seed}: never answered"
    return world


@pytest.mark.parametrize("seed", SEEDS)
def test_invariants_hold_for_every_step(seed):
    run(seed)


def test_the_same_seed_gives_the_same_run():
    a, b = run(3), run(3)
    assert a.d.answers == b.d.answers and a.d.appends == b.d.appends


def test_the_runs_exercise_what_they_claim():
    seen = collections.Counter()
    for seed in SEEDS:
        world = run(seed)
        seen.update(world.stats)
        for rid, res in world.d.answers.items():
            kind = type(world.d.issued[rid]).__name__
            error = res.partitions[0].error if isinstance(res, m.OffsetCommitResult) else \
                getattr(res, "error", None)
            seen[(kind, error)] += 1
        seen["generations"] += sum(g.generation_id for g in world.d.coord.groups.values())
    print(dict(seen))
    assert seen[("OffsetCommit", E.NONE)] > 500
    assert seen[("SyncGroup", E.NONE)] > 100 and seen[("Heartbeat", E.NONE)] > 200
    assert seen[("JoinGroup", E.MEMBER_ID_REQUIRED)] > 50
    assert seen[("Heartbeat", E.REBALANCE_IN_PROGRESS)] > 20
    assert seen[("OffsetCommit", E.COORDINATOR_NOT_AVAILABLE)] > 0       # failed appends
    assert seen[("OffsetCommit", E.NOT_COORDINATOR)] > 0                 # unloads
    assert seen[("JoinGroup", E.FENCED_INSTANCE_ID)] + seen[("SyncGroup", E.FENCED_INSTANCE_ID)] > 0
    assert min(seen["unload"], seen["reload"], seen["static restart"], seen["death"]) > 10
    assert seen["failed append"] > 20 and seen["failed append, written"] > 20
    assert seen["generations"] > 50
