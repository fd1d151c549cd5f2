"""Seeded simulations of transactional producers against the pure transaction coordinator
(tests/txn_sim.py).

Each seed runs a thousand random steps: producers (several per transactional id: a new one
fences the old, which goes on as a zombie until it learns it) initialize, bump their epoch
with their ids (KIP-360), add partitions and offsets, verify partitions, commit and abort;
appends fail at random (some written anyway) and are acknowledged in any order; markers are
written late and in any order; `__transaction_state` partitions are unloaded and reloaded
from what was written; the clock jumps past transaction timeouts and transactional id
expiry, ticking at every deadline on the way. After every step:
- one owner per transactional id: a request answered NONE comes from the producer the last
  successful InitProducerId answered, at the epoch the coordinator holds; an InitProducerId
  with a producer's ids succeeds only for that owner (or on a new producer id);
- epochs only grow: each producer id is handed out with a strictly larger epoch each time;
- an answer follows the durable change: InitProducerId's epoch, AddPartitionsToTxn's and
  AddOffsetsToTxn's partitions are in the cache when they are answered NONE;
- memory equals the log for every transactional id with nothing pending (unless a failed
  append was written anyway, or a failed fence bumped the epoch in memory only);
- a Complete* is written only after the markers of that transaction were written at the
  coordinator epoch the partition is owned at;
- a transaction aborted by the coordinator on timeout is fenced first (its epoch grows);
- no transaction stays Ongoing past its timeout and one abort interval, counted from when
  its last append settled;
- right after an unload no request of its partition is left unanswered, and every request
  is answered at most once (the driver asserts it);
- a reload brings back exactly what memory held at the unload (for the in-sync ids);
and at the end, once appends stop failing, everything is delivered and the clock ran out
every timeout: every request has had its answer, every EndTxn answered NONE was followed by
markers with its result and by its Complete* in the log, and every transaction settled in
Empty, CompleteCommit or CompleteAbort with nothing pending.
"""

import collections
import functools

import pytest

from replicas.errors import ErrorCode as E
from tests.txn_sim import World

pytestmark = pytest.mark.unit

SEEDS = range(24)
STEPS = 1000


@functools.cache
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
    a, b = run(3), World(3)
    for _ in range(STEPS):
        b.step()
    b.finish()
    assert a.d.answers == b.d.answers and a.d.appends == b.d.appends
    assert a.d.effects == b.d.effects


def test_the_runs_exercise_what_they_claim():
    seen = collections.Counter()
    for seed in SEEDS:
        seen.update(run(seed).stats)
    print(dict(seen))
    assert seen[("EndTxn", E.NONE)] > 100 and seen[("AddPartitionsToTxn", E.NONE)] > 300
    assert seen[("AddOffsetsToTxn", E.NONE)] > 50 and seen[("InitProducerId", E.NONE)] > 300
    assert seen[("InitProducerId", E.CONCURRENT_TRANSACTIONS)] > 50     # fences
    assert seen[("InitProducerId", E.PRODUCER_FENCED)] > 5              # KIP-360 zombies
    assert seen[("AddPartitionsToTxn", E.PRODUCER_FENCED)] > 50
    assert seen[("EndTxn", E.PRODUCER_FENCED)] > 20
    assert seen[("AddPartitionsToTxn", E.TRANSACTION_ABORTABLE)] > 5     # verification
    assert seen[("AddPartitionsToTxn", E.COORDINATOR_NOT_AVAILABLE)] > 5  # failed appends
    assert seen[("EndTxn", E.NOT_COORDINATOR)] > 5                       # unloads
    assert seen[("AddPartitionsToTxn", E.INVALID_PRODUCER_ID_MAPPING)] > 0  # expiry
    assert min(seen["unload"], seen["reload"], seen["timeout abort"], seen["fenced"]) > 20
    assert seen["failed append"] > 30 and seen["failed append, written"] > 30
    assert seen["markers written"] > 200
    # transaction version 2: ends that bumped the epoch, aborts with nothing added
    assert seen["EndTxn v5 bumped"] > 50 and seen["EndTxn v5 empty abort"] > 5
