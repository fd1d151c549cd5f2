"""A real broker (tests/broker_world.py, a real ZooKeeper) keeps its watch on a fetch
session between the session's fetches (actors/purgatory.py SessionWatch): a parked
incremental fetch of a session of many partitions is woken by an append to one of them and
answers that one; a consumer's fetch through the handler stack (tests/handler_wire.py) is
the request a Kafka client sends; closing the session takes its watch away."""

from __future__ import annotations

import threading

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from protocol.api import Deferred
from tests.broker_world import InProcessCluster, running
from tests.handler_wire import ask, fetch_request

pytestmark = pytest.mark.zk
PARTITIONS = 20


def batch(value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=1_000, key=None, value=value, headers=[])
    return bytes(b.build())


def produce(api, tp, value: bytes) -> None:
    out = api.produce(1, 5_000, [(tp, batch(value))])
    out = out.result() if isinstance(out, Deferred) else out
    assert out[tp].error == 0, out


@pytest.fixture
def world(zk_server, tmp_path):
    yield from running(InProcessCluster(zk_server.connect_string, tmp_path))


@pytest.mark.timeout(120)
def test_a_session_fetch_waits_on_the_sessions_watch_and_answers_what_woke_it(world):
    world.create_topic("many", PARTITIONS, 1)
    broker = world.brokers[1]
    api = broker.kafka_api
    parts = {"many": [(p, 0, -1, -1, 1 << 20) for p in range(PARTITIONS)]}
    full = ask(api, fetch_request(12, parts, session_epoch=0, max_wait_ms=0))
    assert full.session_id > 0 and sum(len(t.partitions) for t in full.responses) == PARTITIONS

    def incremental(epoch: int, moved: dict, into: dict) -> None:
        into["answer"] = ask(api, fetch_request(12, moved, session_id=full.session_id,
                                                session_epoch=epoch, max_wait_ms=20_000))

    moved: dict = {}                               # what the fetcher read moves it past
    for epoch, partition in ((1, 7), (2, 13)):     # the second parks on the same watch
        got: dict = {}
        waiter = threading.Thread(target=incremental, args=(epoch, moved, got))
        waiter.start()
        world.wait_for(lambda: len(broker.parked) == 1, 30, "the fetch parked")
        assert broker.parked.watched_partitions() == PARTITIONS
        produce(api, ("many", partition), b"news")
        waiter.join(30)
        answer = got["answer"]
        assert [(t.topic, p.partition_index) for t in answer.responses
                for p in t.partitions] == [("many", partition)]
        assert answer.responses[0].partitions[0].records
        moved = {"many": [(partition, 1, -1, -1, 1 << 20)]}

    # a FINAL fetch closes the session: its watch goes at the next change
    ask(api, fetch_request(12, {}, session_id=full.session_id, session_epoch=-1,
                           max_wait_ms=0))
    produce(api, ("many", 0), b"more")
    assert broker.parked.watched_partitions() == 0 and len(broker.parked) == 0
