"""A follower's Fetch request (actors/fetcher.py) is written straight from its session plan
(protocol/hot_writers.py `fetch_plan_bytes`, no entity made); it must be the bytes kio's
own writer makes of the entity protocol.build_request builds from the same plan: full and
incremental plans, forgotten partitions, several topics; and framed by the client
connection as kio frames that entity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import io

from kio.serial import entity_writer

from actors.fetcher import FETCH, FETCH_VERSION
from protocol.build import build_request
from protocol.client import ClientConnection, EncodedRequest
from protocol.fetch_session import FetchData, FetchPlan
from protocol.hot_writers import fetch_plan_bytes

pytestmark = pytest.mark.unit

TPS = st.tuples(st.sampled_from(["orders", "__consumer_offsets", "é"]), st.integers(0, 49))
DATA = st.builds(FetchData, st.integers(0, 2**40), st.integers(-1, 9), st.integers(-1, 9),
                 st.integers(-1, 2**40), st.integers(1, 2**20))


def _reference(plan, replica_id, max_wait_ms, min_bytes, max_bytes):
    by_topic: dict = {}
    for (topic, partition), d in plan.partitions.items():
        by_topic.setdefault(topic, []).append(build_request(
            FETCH, FETCH_VERSION, "FetchPartition", partition=partition,
            current_leader_epoch=d.current_leader_epoch, fetch_offset=d.fetch_offset,
            last_fetched_epoch=d.last_fetched_epoch, log_start_offset=d.log_start_offset,
            partition_max_bytes=d.max_bytes))
    forgotten: dict = {}
    for topic, partition in plan.forgotten:
        forgotten.setdefault(topic, []).append(partition)
    return build_request(
        FETCH, FETCH_VERSION, None, replica_id=replica_id, max_wait=max_wait_ms,
        min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
        session_id=plan.session_id, session_epoch=plan.epoch, rack_id="",
        forgotten_topics_data=tuple(
            build_request(FETCH, FETCH_VERSION, "ForgottenTopic", topic=t, partitions=tuple(ps))
            for t, ps in forgotten.items()),
        topics=tuple(build_request(FETCH, FETCH_VERSION, "FetchTopic", topic=t,
                                   partitions=tuple(ps)) for t, ps in by_topic.items()))


def _kio_bytes(entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(asked=st.dictionaries(TPS, DATA, max_size=6), forgotten=st.lists(TPS, unique=True,
                                                                         max_size=3),
       session=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
       replica_id=st.integers(0, 2000), max_wait_ms=st.integers(0, 30_000),
       min_bytes=st.integers(1, 9), max_bytes=st.integers(1, 2**31 - 1))
def test_the_followers_request_is_the_bytes_kio_writes_for_the_plans_entity(
        asked, forgotten, session, replica_id, max_wait_ms, min_bytes, max_bytes):
    plan = FetchPlan(session[0], session[1], asked, tuple(forgotten), asked)
    reference = _reference(plan, replica_id, max_wait_ms, min_bytes, max_bytes)
    assert fetch_plan_bytes(plan, replica_id, max_wait_ms, min_bytes, max_bytes) == \
        _kio_bytes(reference)


def test_the_encoded_request_is_framed_as_its_entity():
    plan = FetchPlan(77, 3, {("t", 0): FetchData(1234, 4, 4, 0, 1 << 20)}, (("u", 2),), None)
    encoded = EncodedRequest(FETCH, FETCH_VERSION, fetch_plan_bytes(plan, 2, 500, 1, 10 << 20))
    a, b = ClientConnection("broker-2"), ClientConnection("broker-2")
    for _ in range(2):           # correlation ids move on alike
        assert a.request(encoded) == b.request(_reference(plan, 2, 500, 1, 10 << 20))
    assert a.in_flight == b.in_flight == 2
