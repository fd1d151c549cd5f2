"""Leader-epoch cache (Kafka's LeaderEpochFileCache) and the follower truncation rule."""

import pytest

from replicas.checkpoints import leader_epoch_checkpoint
from replicas.epoch_cache import (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache,
                                  follower_truncation)

pytestmark = pytest.mark.unit


def cache_of(*entries):
    cache = LeaderEpochCache()
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def pairs(cache):
    return [(e.epoch, e.start_offset) for e in cache.entries]


@pytest.mark.parametrize("entries, expected", [
    ([(0, 0), (1, 5), (2, 9)], [(0, 0), (1, 5), (2, 9)]),
    ([(0, 0), (0, 3)], [(0, 0)]),                      # same epoch, later start: ignored
    ([(0, 5), (0, 3)], [(0, 3)]),                      # same epoch, earlier start: replaces
    ([(0, 0), (2, 10), (1, 12)], [(0, 0), (1, 12)]),   # lower epoch wins the tail (non-monotone)
    ([(0, 0), (2, 10), (3, 8)], [(0, 0), (3, 8)]),     # lower start removes later entries
])
def test_assign_keeps_entries_monotone(entries, expected):
    assert pairs(cache_of(*entries)) == expected


# Kafka's LeaderEpochFileCacheTest cases for endOffsetFor, with LEO 20.
@pytest.mark.parametrize("requested, expected", [
    (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),
    (6, (6, 20)),                  # the latest epoch: the log end offset
    (4, (4, 15)),                  # known epoch: start of the next one
    (5, (4, 15)),                  # unknown between two: largest smaller, next start
    (2, (2, 10)),
    (1, (1, 5)),                   # older than everything: first start offset
    (7, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),  # newer than everything
])
def test_end_offset_for(requested, expected):
    cache = cache_of((2, 5), (4, 10), (6, 15))
    assert cache.end_offset_for(requested, 20) == expected


def test_empty_cache_answers_undefined():
    assert LeaderEpochCache().end_offset_for(3, 10) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncate_from_end_and_start():
    cache = cache_of((2, 5), (4, 10), (6, 15))
    cache.truncate_from_end(11)
    assert pairs(cache) == [(2, 5), (4, 10)]
    cache.truncate_from_end(10)
    assert pairs(cache) == [(2, 5)]
    cache = cache_of((2, 5), (4, 10), (6, 15))
    cache.truncate_from_start(12)
    assert pairs(cache) == [(4, 12), (6, 15)]
    cache.truncate_from_start(3)
    assert pairs(cache) == [(4, 12), (6, 15)]


def test_assignments_are_persisted_by_flush_and_truncations_at_once(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(leader_epoch_checkpoint(tmp_path))
    cache.assign(1, 0)
    cache.assign(3, 40)
    assert not path.exists()                     # no write per new epoch on the append path
    cache.flush()
    assert path.read_bytes() == b"0\n2\n1 0\n3 40\n"
    mtime = path.stat().st_mtime_ns
    cache.flush()                                # nothing dirty: no write
    assert path.stat().st_mtime_ns == mtime
    cache.assign(4, 50)
    cache.truncate_from_end(40)                  # writes everything, the assignment included
    assert pairs(LeaderEpochCache(leader_epoch_checkpoint(tmp_path))) == [(1, 0)]


@pytest.mark.parametrize("follower, leo, answer, expected", [
    # follower epochs, follower LEO, leader's (epoch, end offset) → (truncate to, done)
    ([(0, 0), (1, 10)], 20, (1, 15), (15, True)),     # diverged inside epoch 1
    ([(0, 0), (1, 10)], 12, (1, 15), (12, True)),     # leader has more: keep all
    ([(0, 0), (1, 10)], 20, (0, 10), (10, True)),     # epoch 1 never committed on leader
    ([(0, 0), (2, 10)], 20, (1, 14), (10, False)),    # we don't know epoch 1: cut, ask again
    ([(3, 0)], 5, (1, 0), (0, True)),                 # older than our first epoch
    ([], 0, (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), (0, True)),
])
def test_follower_truncation_table(follower, leo, answer, expected):
    decision = follower_truncation(cache_of(*follower), leo, answer[0], answer[1], fetch_offset=0)
    assert (decision.offset, decision.completed) == expected
