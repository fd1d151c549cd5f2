"""The wire the protocol handler tests talk over, without Ray or sockets: requests encoded by
kafka-python go through protocol.connection.Connection and protocol.handlers.answer against
FakeBrokerApi (tests/fake_broker_api.py), and the bytes that come back are decoded by
kafka-python's response classes (and read by kio's own reader, which must consume the whole
frame). Also the cluster they ask, versions() for tables over every served version, and the
requests that tests in more than one module build (the test_handlers_* modules,
test_protocol_handlers and the protocol security, quota, group and legacy tests)."""

from __future__ import annotations

import struct
import uuid

from kafka.protocol.admin import DeleteTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kio.index import load_response_schema
from kio.serial import entity_reader

from protocol.api import Deferred
from protocol.codec import has_request_schema
from protocol.connection import Connection
from protocol.handlers import answer
from protocol.versions import REJECTED_VERSIONS, SUPPORTED
from tests.fake_broker_api import FakeBrokerApi
from tests.protocol_samples import RESPONSES, TOPIC_IDS, frame_of


def versions(api_key: int, lo: int | None = None, hi: int | None = None) -> list[int]:
    smin, smax = SUPPORTED[api_key]
    lo = smin if lo is None else lo
    hi = smax if hi is None else hi
    return [v for v in range(lo, hi + 1) if v not in REJECTED_VERSIONS.get(api_key, ())]


def send(fake, msg, listener="PLAINTEXT", correlation_id=4242, conn=None):
    """One kafka-python request through a Connection and answer(): (request, bytes | None)."""
    conn = conn or Connection()
    conn.receive_data(frame_of(msg, correlation_id))
    request = conn.next_request()
    assert request is not None and conn.next_request() is None
    return request, answer(conn, fake, request, listener)


def kio_read(frame: bytes, cls):
    """kio's reader on a whole response frame: it must consume every byte."""
    header, n = entity_reader(cls.__header_schema__)(frame, 4)
    body, m = entity_reader(cls)(frame, 4 + n)
    assert 4 + n + m == len(frame)
    return header, body


def ask(fake, msg, listener="PLAINTEXT", conn=None):
    """Send `msg`, check the frame (size, echoed correlation id, kio reads it all) and return
    kafka-python's decoding of the answer."""
    api_key, version = msg.API_KEY, msg.API_VERSION
    _, out = send(fake, msg, listener, 4242, conn)
    if isinstance(out, Deferred):            # a coordinator's answer: the fake's is ready
        out = out.result()
    assert out is not None
    assert struct.unpack_from(">ii", out) == (len(out) - 4, 4242)
    if has_request_schema(api_key, version):             # not protocol/legacy.py's
        header, _ = kio_read(out, load_response_schema(api_key, version))
        assert header.correlation_id == 4242
    decoded = RESPONSES[api_key].decode(out[4:], version=version, header=True)
    assert decoded.header.correlation_id == 4242
    return decoded


def cluster() -> FakeBrokerApi:
    """Broker 1 (us) and 2 on PLAINTEXT, 1 and 3 on EXTERNAL; broker 9 is not live.
    orders: 3 partitions on (1, 2, 9) at leader epoch 4; audit: 1 partition on broker 1."""
    fake = FakeBrokerApi(broker_id=1, cluster_id="rayka-test", controller_id=2)
    fake.add_broker(1, rack="r1", PLAINTEXT=("10.0.0.1", 9092), EXTERNAL=("ext-1", 19092))
    fake.add_broker(2, rack=None, PLAINTEXT=("10.0.0.2", 9092))
    fake.add_broker(3, rack="r3", EXTERNAL=("ext-3", 19093))
    fake.add_topic("orders", 3, replicas=(1, 2, 9), leader_epoch=4)
    fake.add_topic("audit", 1)
    return fake


def metadata_request(version, names, allow=True):
    t = MetadataRequest.MetadataRequestTopic
    topics = None if names is None else [t(name=n) for n in names]
    return MetadataRequest[version](topics=topics, allow_auto_topic_creation=allow,
                                    include_cluster_authorized_operations=False,
                                    include_topic_authorized_operations=False)


def produce_request(version, parts, acks=-1, transactional_id=None):
    """parts: {topic: [(index, records)]}."""
    tpd = ProduceRequest.TopicProduceData
    ppd = tpd.PartitionProduceData
    return ProduceRequest[version](
        transactional_id=transactional_id, acks=acks, timeout_ms=1500,
        topic_data=[tpd(name=t, partition_data=[ppd(index=i, records=r) for i, r in ps])
                    for t, ps in parts.items()])


def fetch_topic(version, name) -> dict:
    """How Fetch names a topic: by name, or from v13 by the id cluster() gave it."""
    return dict(topic_id=TOPIC_IDS[name]) if version >= 13 else dict(topic=name)


def fetch_request(version, parts, isolation=0, session_id=0, session_epoch=-1, replica_id=-1,
                  max_wait_ms=500, rack_id=""):
    """parts: {topic: [(partition, offset, current_leader_epoch, last_fetched_epoch,
    partition_max_bytes)]}."""
    ft = FetchRequest.FetchTopic
    fp = ft.FetchPartition
    state = FetchRequest[15].ReplicaState(replica_id=replica_id, replica_epoch=-1) \
        if version >= 15 else None                  # v15+: the replica in replica_state
    return FetchRequest[version](
        replica_id=replica_id, replica_state=state, max_wait_ms=max_wait_ms, min_bytes=7,
        max_bytes=123456,
        isolation_level=isolation, session_id=session_id, session_epoch=session_epoch,
        rack_id=rack_id, forgotten_topics_data=[],
        topics=[ft(**fetch_topic(version, t), partitions=[
            fp(partition=p, fetch_offset=o, current_leader_epoch=cle, last_fetched_epoch=lfe,
               log_start_offset=-1, partition_max_bytes=mb) for p, o, cle, lfe, mb in ps])
            for t, ps in parts.items()])


def delete_topics_request(version, names):
    s = DeleteTopicsRequest.DeleteTopicState
    return DeleteTopicsRequest[version](timeout_ms=20000, topic_names=names,
                                        topics=[s(name=n, topic_id=uuid.UUID(int=0))
                                                for n in names])
