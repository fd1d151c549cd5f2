"""actors/fetcher.py: which partitions' positions a follower fetcher reads again before a
round. All of them on its first round; then only those whose position may have moved: the
ones named by `positions_moved` (local retention moved a log start), not every partition
it follows (a follower of 3,000 quiet partitions reads none of them per round)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from actors.fetcher import Fetcher
from replicas.replica_types import FetchPosition
from tests.fakes import IdleBroker

pytestmark = pytest.mark.unit
T0, T1, ELSEWHERE = ("t", 0), ("t", 1), ("u", 7)


class Replicas:
    """The replica manager as a follower's fetcher asks it: positions and log starts, and
    which partitions it was asked about."""

    def __init__(self, tps):
        self.ends = {tp: 10 for tp in tps}
        self.starts = {tp: 0 for tp in tps}
        self.asked: list = []
        self.empty: set = set()          # logs with no epoch yet: nothing to truncate

    def follower_fetch_request(self, tp) -> FetchPosition:
        self.asked.append(tp)
        return FetchPosition(self.ends[tp], -1 if tp in self.empty else 3, 4)

    def log(self, tp):
        return SimpleNamespace(log_start_offset=self.starts[tp])


class FollowerBroker(IdleBroker):
    def __init__(self, tps):
        super().__init__()
        self.lock = threading.RLock()
        self.rm = Replicas(tps)


@pytest.fixture
def fetcher():
    f = Fetcher(FollowerBroker((T0, T1)), leader_id=1)
    f.partitions = {T0: False, T1: False}
    return f


def test_the_first_round_reads_every_position_and_the_next_none(fetcher):
    rm = fetcher.broker.rm
    fetcher._refresh_positions()
    assert sorted(rm.asked) == [T0, T1]
    assert fetcher._wanted[T0].fetch_offset == 10 and fetcher._wanted[T0].log_start_offset == 0
    rm.asked.clear()
    rm.starts[T0] = 5                       # nobody told the fetcher
    fetcher._refresh_positions()
    assert rm.asked == [] and fetcher._wanted[T0].log_start_offset == 0


def test_a_log_start_moved_by_retention_is_read_again_for_the_next_round(fetcher):
    rm = fetcher.broker.rm
    fetcher._refresh_positions()
    rm.asked.clear()
    rm.starts[T0] = 5
    with fetcher.broker.lock:
        fetcher.positions_moved({T0: "deleted", ELSEWHERE: "deleted"})  # u-7: not followed here
    fetcher._refresh_positions()
    assert rm.asked == [T0]
    assert fetcher._wanted[T0].log_start_offset == 5 and fetcher._wanted[T1].log_start_offset == 0
    assert ELSEWHERE not in fetcher._wanted


def test_truncation_reads_only_the_partitions_added_since(fetcher):
    """A partition added (LeaderAndIsr) truncates first; the check reads its position
    alone, not every partition the fetcher follows, and then it fetches."""
    rm = fetcher.broker.rm
    rm.ends[ELSEWHERE], rm.starts[ELSEWHERE] = 0, 0
    rm.empty.add(ELSEWHERE)
    fetcher._refresh_positions()
    fetcher.add([ELSEWHERE])
    rm.asked.clear()
    asyncio.run(fetcher._truncate())
    assert rm.asked == [ELSEWHERE] and fetcher.partitions[ELSEWHERE] is False
    asyncio.run(fetcher._truncate())                 # nothing left to truncate
    assert rm.asked == [ELSEWHERE]
    fetcher._refresh_positions()
    assert rm.asked == [ELSEWHERE, ELSEWHERE] and ELSEWHERE in fetcher._wanted
