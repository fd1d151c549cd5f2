"""Seeded simulations of transactional offset commits (tests/coordinator_txn_sim.py).

Each seed runs a few hundred random steps: transactional producers commit offsets of three
groups (two on one offsets partition) in transactions that commit or abort, simple
consumers commit plain offsets of the same partitions, appends fail at random (some written
anyway) and are acknowledged in any order, markers reach the coordinator as CompleteTxn (at
once, later, or while their partition loads) or through a reload of the log. After every
step:
- every committed offset the coordinator holds, and every one an OffsetFetch answers, was
  written by a plain commit or by a COMMITTED transaction (never an aborted or open one),
  and never moves to an older position in the log;
- a transactional offset acknowledged in a transaction still open makes its partition
  answer UNSTABLE_OFFSET_COMMIT to a require_stable fetch;
- every Respond answers a request that was made, exactly once (the driver asserts it);
and at the end, once every transaction ended and every marker was delivered, no group holds
pending offsets, and a reload of every partition gives exactly what the logs say.
"""

import collections

import pytest

from replicas.errors import ErrorCode as E
from tests.coordinator_txn_sim import GROUPS, TOPIC, TOPIC_PARTITIONS, TxnWorld

pytestmark = pytest.mark.unit

SEEDS = range(16)
STEPS = 600


def run(seed: int) -> TxnWorld:
    world = TxnWorld(seed)
    for _ in range(STEPS):
        world.step()
        assert world.violations == [], f"seed {seed}: {world.violations[:3]}"
    world.finish()
    assert world.violations == [], f"seed {seed}: {world.violations[:3]}"
    assert world.d.unanswered() == set(), f"seed {seed}: never answered"
    return world


@pytest.mark.parametrize("seed", SEEDS)
def test_invariants_hold_for_every_step(seed):
    world = run(seed)
    expected = world.expected()
    for gid in GROUPS:
        for p in range(TOPIC_PARTITIONS):
            assert world.d.committed(gid, (TOPIC, p)) == expected.get((gid, (TOPIC, p)), -1), \
                f"seed {seed}: {gid} {p}"


def test_the_same_seed_gives_the_same_run():
    a, b = run(5), run(5)
    assert a.d.answers == b.d.answers and a.d.appends == b.d.appends


def test_the_runs_exercise_what_they_claim():
    seen = collections.Counter()
    for seed in SEEDS:
        seen.update(run(seed).stats)
    print(dict(seen))
    assert seen[("TxnOffsetCommit", E.NONE)] > 400
    assert seen[("TxnOffsetCommit", E.NOT_COORDINATOR)] > 0                # unloads
    assert seen[("TxnOffsetCommit", E.COORDINATOR_LOAD_IN_PROGRESS)] > 0   # loads
    assert seen[("TxnOffsetCommit", E.COORDINATOR_NOT_AVAILABLE)] > 0      # failed appends
    assert min(seen["commit"], seen["abort"]) > 100
    assert seen["ended with an append in flight"] > 30
    assert min(seen["marker while not loaded"], seen["completion while loading"],
               seen["completion while unloaded"]) > 10
    assert min(seen["unload"], seen["reload"]) > 50
    assert seen["failed append"] > 20 and seen["failed append, written"] > 20
    assert seen["fetch"] > 500
