"""The data handlers' direct answers (protocol/handlers/data.py): from Fetch v12 the answer
is a protocol/fetch_answer.py FetchAnswer, whose entity must equal the one `build` makes
from the same outcomes and whose bytes, written straight from the outcomes, must be kio's
writer's over that entity (throttled too); for Produce v9-12 the answer's classes are
called with every field instead of going through protocol.build, and the entity must
equal build's (same fields, same conversions). Fetch: every version, isolation level,
error, diverging epoch, leader, aborted transactions, topic naming (names below v13, ids
from v13, unknown ids) and node endpoints (v16+). Produce: errors found before the append
and the broker's, record errors, messages, the current leader and endpoints of
NOT_LEADER_OR_FOLLOWER (v10+)."""

from __future__ import annotations

import datetime
import io
import uuid
from collections import OrderedDict
from dataclasses import replace
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from protocol.api import FetchOutcome, topic_id_text, topic_uuid
from protocol import fetch_answer
from protocol.build import build
from protocol.fetch_answer import FetchAnswer
from protocol.fetch_session import FetchContext, FetchData
from protocol.handlers.data import _current_leaders, _fetch_response, _produce_response

pytestmark = pytest.mark.unit

VERSIONS = range(12, 19)
I64 = st.integers(-1, 2**40)
ERRORS = st.sampled_from([0, 1, 6, 56, 74, 75])
TOPIC_IDS = {"orders": topic_id_text(uuid.UUID(int=11)), "audit": topic_id_text(uuid.UUID(int=12))}


@st.composite
def outcomes(draw):
    return FetchOutcome(
        draw(ERRORS), draw(st.sampled_from([b"", b"r" * 70, None])), draw(I64), draw(I64),
        draw(I64), draw(st.none() | st.tuples(st.integers(-1, 9), I64)),
        draw(st.tuples(st.integers(-1, 5), st.integers(-1, 9))),
        draw(st.none() | st.lists(st.tuples(st.integers(0, 99), I64), max_size=2)
             .map(tuple)),
        draw(st.integers(-1, 3)))


def _reference(v: int, committed: bool, session_id: int, answered, unknown, ids, nodes):
    """The answer as protocol.build makes it."""
    def partition(index, o):
        div = o.diverging_epoch or (-1, -1)
        return build(1, v, "PartitionData", partition_index=index, error_code=o.error,
                     high_watermark=o.high_watermark, last_stable_offset=o.last_stable_offset,
                     log_start_offset=o.log_start_offset,
                     diverging_epoch=build(1, v, "EpochEndOffset", epoch=div[0],
                                           end_offset=div[1]),
                     current_leader=build(1, v, "LeaderIdAndEpoch", leader_id=o.leader[0],
                                          leader_epoch=o.leader[1]),
                     snapshot_id=build(1, v, "SnapshotId", end_offset=-1, epoch=-1),
                     aborted_transactions=tuple(
                         build(1, v, "AbortedTransaction", producer_id=p, first_offset=f)
                         for p, f in (o.aborted_transactions or ())) if committed else None,
                     preferred_read_replica=o.preferred_read_replica, records=o.records)
    by_topic: dict = {}
    for (topic, index), o in answered:
        by_topic.setdefault((topic, ids.get(topic)), []).append(partition(index, o))
    for (topic_id, index), o in unknown.items():
        by_topic.setdefault((None, topic_id), []).append(partition(index, o))
    topics = tuple(build(1, v, "FetchableTopicResponse", topic=name,
                         topic_id=topic_uuid(topic_id), partitions=tuple(ps))
                   for (name, topic_id), ps in by_topic.items())
    endpoints = tuple(build(1, v, "NodeEndpoint", node_id=n.id, host=n.host, port=n.port,
                            rack=n.rack) for _, n in sorted(nodes.items()))
    return build(1, v, "FetchResponse", error_code=0, session_id=session_id,
                 responses=topics, node_endpoints=endpoints)


@settings(max_examples=300, deadline=None)
@given(v=st.sampled_from(VERSIONS), committed=st.booleans(),
       answered=st.lists(st.tuples(st.sampled_from(["orders", "audit"]),
                                   st.integers(0, 5)), unique=True, max_size=4),
       data=st.data())
def test_the_direct_fetch_answer_is_builds(v, committed, answered, data):
    asked = OrderedDict((tp, FetchData(0, -1, -1, -1, 1 << 20)) for tp in answered)
    got = {tp: data.draw(outcomes()) for tp in answered}
    unknown = {(topic_id_text(uuid.UUID(int=99)), i): FetchOutcome(100)
               for i in range(data.draw(st.integers(0, 2)))} if v >= 13 else {}
    ids = TOPIC_IDS if v >= 13 else {}
    nodes = {n: SimpleNamespace(id=n, host=f"h{n}", port=9000 + n, rack=None if n % 2 else "r")
             for n in range(data.draw(st.integers(0, 2)))} if v >= 16 else {}
    request = SimpleNamespace(body=SimpleNamespace(isolation_level=int(committed)),
                              api_key=1, api_version=v)
    context = FetchContext(None, None, asked, False)
    answer = _fetch_response(request, context, got, 1 << 20, None, unknown, ids, nodes)
    reference = _reference(v, committed, 0, [(tp, got[tp]) for tp in answered], unknown, ids,
                           nodes)
    # kio entities are dataclasses: == compares their classes and every field
    assert isinstance(answer, FetchAnswer) and answer.entity() == reference
    # and the bytes written straight from the outcomes are kio's over that entity, throttled
    # (a fetch quota) or not
    assert _written(answer) == _kio_written(reference)
    throttle_ms = data.draw(st.integers(1, 30_000))
    assert _written(answer.throttled(throttle_ms)) == _kio_written(
        replace(reference, throttle_time=datetime.timedelta(milliseconds=throttle_ms)))
    assert answer.record_bytes() == sum(len(p.records or b"") for t in reference.responses
                                        for p in t.partitions)


def _written(answer: FetchAnswer) -> bytes:
    out = io.BytesIO()
    fetch_answer.write(out, answer)
    return out.getvalue()


def _kio_written(entity) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


class LeadersApi:
    """A BrokerApi answering metadata only: partition p of every topic led by broker p % 3
    at epoch 7 (what a NOT_LEADER_OR_FOLLOWER answer names, KIP-951)."""

    def metadata(self, topics, allow_auto_create, listener):
        brokers = [SimpleNamespace(id=b, host=f"h{b}", port=9000 + b, rack=None)
                   for b in range(3)]
        return SimpleNamespace(brokers=brokers, topics=[
            SimpleNamespace(name=t, partitions=[
                SimpleNamespace(partition=p, leader=p % 3, leader_epoch=7) for p in range(6)])
            for t in topics])


def _produce_reference(v, body, answers, leaders, nodes):
    def partition(tp):
        code, base, start, message, record_errors = answers[tp]
        leader = leaders.get(tp) if code == 6 else None
        return build(0, v, "PartitionProduceResponse", index=tp[1], error_code=code,
                     base_offset=base, log_append_time=None, log_start_offset=start,
                     record_errors=tuple(build(0, v, "BatchIndexAndErrorMessage",
                                               batch_index=i, batch_index_error_message=m)
                                         for i, m in record_errors),
                     error_message=message,
                     **({} if leader is None else {"current_leader": build(
                         0, v, "LeaderIdAndEpoch", leader_id=leader[0],
                         leader_epoch=leader[1])}))
    topics = tuple(build(0, v, "TopicProduceResponse", name=t.name, partition_responses=tuple(
        partition((t.name, p.index)) for p in t.partition_data)) for t in body.topic_data)
    endpoints = tuple(build(0, v, "NodeEndpoint", node_id=n.id, host=n.host, port=n.port,
                            rack=n.rack) for _, n in sorted(nodes.items()))
    return build(0, v, "ProduceResponse", responses=topics, node_endpoints=endpoints)


@settings(max_examples=300, deadline=None)
@given(v=st.sampled_from(range(9, 13)),
       tps=st.lists(st.tuples(st.sampled_from(["orders", "audit"]), st.integers(0, 5)),
                    unique=True, min_size=1, max_size=4),
       data=st.data())
def test_the_direct_produce_answer_is_builds(v, tps, data):
    topics: dict = {}
    for topic, index in tps:
        topics.setdefault(topic, []).append(SimpleNamespace(index=index))
    body = SimpleNamespace(topic_data=[SimpleNamespace(name=t, partition_data=ps)
                                       for t, ps in topics.items()])
    refused = data.draw(st.sets(st.sampled_from(tps)))
    errors = {tp: (data.draw(st.sampled_from([2, 87, 10])), data.draw(st.none() | st.text()))
              for tp in refused}
    outcomes = {tp: SimpleNamespace(
        error=(code := data.draw(st.sampled_from([0, 0, 6, 19, 87]))),
        base_offset=data.draw(st.integers(-1, 2**40)),
        log_start_offset=data.draw(st.integers(-1, 9)),
        message=data.draw(st.text(max_size=9)) if code else None,
        record_errors=tuple(data.draw(st.lists(st.tuples(st.integers(0, 9), st.none() |
                                                         st.text(max_size=9)), max_size=2))))
        for tp in tps if tp not in refused}
    request = SimpleNamespace(body=body, api_key=0, api_version=v)
    answer = _produce_response(LeadersApi(), request, errors, outcomes, "PLAINTEXT")
    answers = {tp: (code, -1, -1, message, ()) for tp, (code, message) in errors.items()}
    answers.update((tp, (o.error, o.base_offset, o.log_start_offset, o.message,
                         o.record_errors)) for tp, o in outcomes.items())
    moved = {tp for tp, a in answers.items() if a[0] == 6}
    leaders, nodes = _current_leaders(LeadersApi(), moved, "PLAINTEXT") \
        if v >= 10 and moved else ({}, {})
    assert answer == _produce_reference(v, body, answers, leaders, nodes)
