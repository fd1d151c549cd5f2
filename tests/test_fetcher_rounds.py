"""actors/fetcher.py's rounds against a real listener on loopback (tests/fake_broker_api.py
as the leader; no Ray, no ZooKeeper): a follower applies a Fetch answer inside its link's
data callback and sends the next Fetch from there, so no task resumes between an answer and
the next request (an awaited answer waits for every other I/O callback of its loop pass);
a round whose partitions answered an error hands over to the coroutine, which backs off and
reports it; stop() ends the rounds and closes the link."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from actors.fetcher import Fetcher
from actors.listener import EventLoop, KafkaListener
from controller.layout import Endpoint
from replicas.records import build_batch
from replicas.replica_types import FetchPosition
from tests.fake_broker_api import FakeBrokerApi
from tests.fakes import IdleBroker

pytestmark = pytest.mark.unit
TP = ("t", 0)
NOT_LEADER_OR_FOLLOWER = 6


class FollowerReplicas:
    """The replica manager as a follower's fetcher asks it: an empty log (nothing to
    truncate) that takes what the leader sends, noting where each call ran."""

    def __init__(self):
        self.end = 0
        self.appends: list[tuple[object, int]] = []   # (the running task, records' bytes)
        self.positions_asked: list[object] = []       # the running task at each ask

    def follower_fetch_request(self, tp) -> FetchPosition:
        self.positions_asked.append(_task())
        return FetchPosition(self.end, -1 if self.end == 0 else 0, 0)

    def log(self, tp):
        return SimpleNamespace(log_start_offset=0)

    def append_as_follower(self, tp, records, high_watermark, **_):
        if records:
            self.appends.append((_task(), len(records)))
            self.end += 1
        return []


def _task():
    try:
        return asyncio.current_task()
    except RuntimeError:            # no running loop
        return "no loop"


class LiveFollower(IdleBroker):
    """Broker 2 on a real network loop, following broker 1 at `endpoint`."""

    def __init__(self, endpoint: Endpoint):
        super().__init__()
        self.network = EventLoop("follower-loop")
        self.lock = threading.RLock()
        self.rm = FollowerReplicas()
        self.endpoint = endpoint

    def peer_endpoint(self, leader_id):
        return self.endpoint

    def apply_effects(self, effects) -> None:
        pass


@pytest.fixture
def leader():
    api = FakeBrokerApi(broker_id=1)
    api.add_broker(1, PLAINTEXT=("127.0.0.1", 0))
    api.add_broker(2, PLAINTEXT=("127.0.0.1", 0))
    api.add_topic("t", replicas=(1, 2))
    api.append(TP, build_batch([b"v" * 100], timestamps_ms=1))
    served = KafkaListener(Endpoint("PLAINTEXT", "127.0.0.1", 0), api, 1 << 20, 60_000)
    served.start()
    yield api, served
    served.stop()


@pytest.fixture
def follower(leader):
    _, served = leader
    broker = LiveFollower(Endpoint("PLAINTEXT", "127.0.0.1", served.port, "PLAINTEXT"))
    fetchers = []

    def start():
        f = Fetcher(broker, leader_id=1)
        fetchers.append(f)
        f.add([TP])
        return f

    yield broker, start
    for f in fetchers:
        f.stop()
    broker.network.stop()


def wait_for(predicate, what: str, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} in {timeout_s} s"
        time.sleep(0.005)


def test_an_answer_is_applied_and_the_next_fetch_sent_inside_the_links_data_callback(
        follower, leader):
    api, _ = leader
    broker, start = follower
    fetcher = start()
    rm = broker.rm
    wait_for(lambda: rm.appends and len(api.calls_of("fetch")) >= 5, "append and rounds")
    task, size = rm.appends[0]
    assert task is None and size > 61             # a batch, appended in no task
    # the first round's position is read by the coroutine; the round after the append
    # (its partition answered, so read again) in the callback that appended
    assert rm.positions_asked[0] is fetcher._task
    assert len(rm.positions_asked) >= 2 and rm.positions_asked[-1] is None
    assert fetcher.problem() is None


def test_a_partition_error_hands_the_round_to_the_coroutine_which_backs_off(follower, leader):
    api, _ = leader
    api.errors[TP] = NOT_LEADER_OR_FOLLOWER
    broker, start = follower
    fetcher = start()
    wait_for(lambda: fetcher.problem() is not None, "problem reported")
    problem = fetcher.problem()
    assert problem["error"] == "NOT_LEADER_OR_FOLLOWER" and problem["partitions"] == [list(TP)]
    rounds = len(api.calls_of("fetch"))
    # backing off replica.fetch.backoff.ms (100) between rounds, not spinning
    time.sleep(0.35)
    assert len(api.calls_of("fetch")) - rounds <= 5
    del api.errors[TP]
    wait_for(lambda: fetcher.problem() is None and broker.rm.appends, "recovery")


def test_stop_ends_the_rounds_and_closes_the_link(follower, leader):
    api, _ = leader
    broker, start = follower
    fetcher = start()
    wait_for(lambda: len(api.calls_of("fetch")) >= 3, "rounds")
    fetcher.stop()
    wait_for(lambda: fetcher._task.done(), "the coroutine's end")
    after = len(api.calls_of("fetch"))
    assert not fetcher.link.connected
    time.sleep(0.1)
    assert len(api.calls_of("fetch")) <= after + 1      # at most the one in flight
