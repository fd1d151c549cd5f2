"""Seeded simulation of native group members (rayka/client/membership.py) against the real
group coordinator, one fake clock and a network that delays and reorders
(tests/membership_sim.py): members join, poll, commit, close and freeze past their session.

Invariants, checked at every step and at the end:
- no partition is fetchable by two members at the same instant (a member returns records
  only of partitions the coordinator confirms it owns);
- every record is read, and the group's committed offsets reach every partition's end;
- with auto-commit and no frozen member, no record is read twice in the group (positions
  are committed before every hand-over: eager revocation, cooperative revocation, close).
Replay a failure with its seed: World(seed, ...) in a script, then trace its members."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.membership_sim import World

pytestmark = pytest.mark.unit
SEEDS = range(25)


def run(seed: int, **kw) -> tuple[World, Counter]:
    world = World(seed, **kw)
    world.run(2500)
    assert world.drain(), f"seed {seed}: committed {world.committed()} of {world.ends}"
    reads = Counter((p, o) for _, _, p, o in world.reads)
    assert set(reads) == {(tp[1], o) for tp, end in world.ends.items() for o in range(end)}
    return world, reads


@pytest.mark.parametrize("protocol", ["range", "roundrobin", "cooperative-sticky"])
@pytest.mark.parametrize("seed", SEEDS)
def test_with_auto_commit_and_no_freeze_every_record_is_read_once(seed, protocol):
    world, reads = run(seed, members=2 + seed % 2, protocol=protocol)
    twice = sorted(k for k, n in reads.items() if n > 1)
    assert not twice, f"seed {seed}: read twice {twice[:10]}"
    assert len(world.closed) > 0           # members came and went


@pytest.mark.parametrize("protocol", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("seed", SEEDS)
def test_members_frozen_past_their_session_never_share_a_partition(seed, protocol):
    run(seed, members=3, protocol=protocol, freezes=True)


@pytest.mark.parametrize("protocol", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("seed", range(10))
def test_manual_commits_after_each_poll_read_everything(seed, protocol):
    run(seed, members=2, protocol=protocol, auto_commit=False, freezes=seed % 2 == 1)
