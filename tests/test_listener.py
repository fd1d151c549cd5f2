"""actors/listener.py on real loopback sockets, over the in-memory FakeBrokerApi (no Ray, no
ZooKeeper): pipelined requests answered in order, a produce's acks=all wait overlapped
with the next request's append, an answer another connection's request settles written
in that request's handling, an acks=0 produce answered with nothing, idle connections
closed, and random or malformed bytes closing only their own connection (a hypothesis fuzz
against the live listener, which keeps serving)."""

from __future__ import annotations

import io
import select
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.protocol.metadata import ApiVersionsResponse

from actors.completion import Completion
from actors.listener import KafkaListener
from controller.layout import Endpoint
from protocol.api import Deferred
from tests.fake_broker_api import FakeBrokerApi
from tests.protocol_samples import frame_of, sample_frame
from tests.wire import closed, read_frame

pytestmark = pytest.mark.unit
IDLE_MS = 400


class SlowAcks(FakeBrokerApi):
    """The fake broker, with acks that arrive only when the test releases them (a Deferred,
    as the real broker answers an acks=all produce)."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def produce(self, acks, timeout_ms, partitions, transactional_id=None):
        got = super().produce(acks, timeout_ms, partitions)     # appended now, in order
        return Deferred(lambda: self.release.wait(10) and got)


class CrossAcks(FakeBrokerApi):
    """The fake broker, where a connection's produce waits for an ack that ANOTHER
    connection's produce gives, on the loop, as a follower's fetch acknowledges a client's
    acks=all produce: the second produce settles the first's Completion and then looks
    (poll, no wait) whether the first connection's answer is already on the test's socket."""

    def __init__(self):
        super().__init__()
        self.waiting: Completion | None = None
        self.first_socket: socket.socket | None = None
        self.answered_before_return: bool | None = None

    def produce(self, acks, timeout_ms, partitions, transactional_id=None):
        got = super().produce(acks, timeout_ms, partitions)
        if self.waiting is None:
            self.waiting = Completion()
            return Deferred(lambda: got, self.waiting.when_ready)
        self.waiting.settle()
        ready = select.poll()          # poll, not select: a suite's fds pass FD_SETSIZE
        ready.register(self.first_socket, select.POLLIN)
        self.answered_before_return = bool(ready.poll(0))
        return got


@pytest.fixture
def served():
    def start(api=None):
        api = api or FakeBrokerApi()
        api.add_broker(1, PLAINTEXT=("127.0.0.1", 0))
        api.add_topic("orders", 3)
        api.add_topic("audit", 2)
        listener = KafkaListener(Endpoint("PLAINTEXT", "127.0.0.1", 0), api, 1 << 20, IDLE_MS)
        listener.start()
        started.append(listener)
        return listener, api
    started: list[KafkaListener] = []
    yield start
    for listener in started:
        listener.stop()


def connect(listener) -> socket.socket:
    return socket.create_connection(("127.0.0.1", listener.port), timeout=10)


def correlation(frame: bytes) -> int:
    return struct.unpack_from(">i", frame)[0]


def api_versions_ok(listener) -> bool:
    with connect(listener) as s:
        s.sendall(sample_frame(18, 3, correlation_id=99))
        frame = read_frame(s)
    body = ApiVersionsResponse[3].decode(io.BytesIO(frame[4:]))
    return correlation(frame) == 99 and body.error_code == 0


def test_pipelined_requests_are_answered_in_order(served):
    listener, _api = served()
    with connect(listener) as s:
        s.sendall(b"".join(sample_frame(k, v, correlation_id=i) for i, (k, v) in
                           enumerate([(18, 3), (3, 12), (2, 7), (3, 4), (18, 0)] * 4)))
        assert [correlation(read_frame(s)) for _ in range(20)] == list(range(20))


def test_a_produce_waiting_for_acks_does_not_stop_the_next_append(served):
    listener, api = served(SlowAcks())
    with connect(listener) as s:
        s.sendall(sample_frame(0, 9, correlation_id=1) + sample_frame(0, 9, correlation_id=2)
                  + sample_frame(18, 3, correlation_id=3))
        deadline = time.monotonic() + 10
        while len(api.calls_of("produce")) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)                       # poll interval of a deadline loop
        assert len(api.calls_of("produce")) == 2   # both appended while the first waits
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):
            s.recv(1)                               # no answer may overtake the first one
        api.release.set()
        s.settimeout(10)
        assert [correlation(read_frame(s)) for _ in range(3)] == [1, 2, 3]


def test_an_answer_another_connection_settles_is_written_before_that_request_returns(served):
    listener, api = served(CrossAcks())
    with connect(listener) as first, connect(listener) as second:
        api.first_socket = first
        first.sendall(sample_frame(0, 9, correlation_id=1))
        deadline = time.monotonic() + 10
        while api.waiting is None and time.monotonic() < deadline:
            time.sleep(0.01)                       # poll interval of a deadline loop
        second.sendall(sample_frame(0, 9, correlation_id=2))
        assert correlation(read_frame(second)) == 2
        assert correlation(read_frame(first)) == 1
    # written in the settling request's handling, not at the loop's next pass
    assert api.answered_before_return is True


def acks_0_produce(partition_records):
    from kafka.protocol.producer import ProduceRequest
    tpd = ProduceRequest.TopicProduceData
    return ProduceRequest[9](transactional_id=None, acks=0, timeout_ms=1500, topic_data=[
        tpd(name="orders", partition_data=[tpd.PartitionProduceData(index=p, records=r)
                                           for p, r in partition_records])])


def test_acks_0_gets_no_answer_and_a_failed_one_closes_the_connection(served):
    listener, api = served()
    with connect(listener) as s:
        s.sendall(frame_of(acks_0_produce([(0, b"x"), (1, b"y")]), correlation_id=5)
                  + sample_frame(18, 3, correlation_id=6))
        assert correlation(read_frame(s)) == 6     # the next answer is the ApiVersions one
    assert [c["partitions"] for c in api.calls_of("produce")] == [[(("orders", 0), b"x"),
                                                                   (("orders", 1), b"y")]]
    with connect(listener) as s:                   # partition 9 does not exist: Kafka closes
        s.sendall(frame_of(acks_0_produce([(9, b"z")]), correlation_id=7))
        assert closed(s)


def test_an_idle_connection_is_closed(served):
    listener, _api = served()
    with connect(listener) as s:
        t0 = time.monotonic()
        assert closed(s) and time.monotonic() - t0 >= IDLE_MS / 1000 * 0.9
    assert api_versions_ok(listener)


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 2 << 20),                         # over the listener's 1 MiB limit
    struct.pack(">i", -5),
    struct.pack(">i", 12) + b"\xff" * 12,              # api key -1
    struct.pack(">ihhi", 10, 0, 9, 7) + b"\x00\x01",   # Produce v9, body cut short
    struct.pack(">ihhi", 8, 1, 3, 7),                  # Fetch v3: no schema, no answer
], ids=["oversized", "negative-size", "garbage", "truncated-body", "undecodable-version"])
def test_bad_frames_close_only_their_connection(served, payload):
    listener, api = served()
    with connect(listener) as bad, connect(listener) as good:
        bad.sendall(payload)
        assert closed(bad)
        good.sendall(sample_frame(18, 3, correlation_id=1))
        assert correlation(read_frame(good)) == 1
    assert api.calls_of("produce") == []                # nothing appended


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.binary(min_size=1, max_size=300), chunks=st.integers(1, 7))
def test_fuzz_the_live_listener_keeps_serving(served, junk, chunks):
    if not hasattr(test_fuzz_the_live_listener_keeps_serving, "listener"):
        test_fuzz_the_live_listener_keeps_serving.listener = served()[0]
    listener = test_fuzz_the_live_listener_keeps_serving.listener
    with connect(listener) as s:
        step = max(1, len(junk) // chunks)
        for i in range(0, len(junk), step):
            try:
                s.sendall(junk[i:i + step])
            except OSError:
                break                                    # closed on us already: fine
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass                                         # already closed by the listener
        closed(s)
    assert api_versions_ok(listener)


# -- Kafka's listener configs -----------------------------------------------------------------
def test_listener_configs_parse_like_kafka():
    from actors.kafka_api import KafkaConfig
    from controller.layout import parse_endpoints
    from replicas.errors import InvalidConfig
    eps = parse_endpoints("PLAINTEXT://0.0.0.0:9092, internal://[::1]:9093", "INTERNAL:SASL_SSL")
    assert eps == (Endpoint("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"),
                   Endpoint("INTERNAL", "::1", 9093, "SASL_SSL"))
    for bad in ("127.0.0.1:9092", "PLAINTEXT://host", "PLAINTEXT://h:x", "FOO://h:1",
                "PLAINTEXT://h:1,PLAINTEXT://h:2", ""):
        with pytest.raises(InvalidConfig):
            parse_endpoints(bad)
    config = {"listeners": "PLAINTEXT://0.0.0.0:0", "auto.create.topics.enable": "false",
              "num_partitions": 4, "min_insync_replicas": 2}
    kc = KafkaConfig.pop_from(config)
    assert config == {"min_insync_replicas": 2}          # the rest stay topic defaults
    assert (kc.auto_create_topics_enable, kc.num_partitions) == (False, 4)
    assert kc.advertised({"PLAINTEXT": 41234}, "10.1.2.3") == (
        Endpoint("PLAINTEXT", "10.1.2.3", 41234, "PLAINTEXT"),)   # wildcard → node, 0 → bound
    with pytest.raises(InvalidConfig):
        KafkaConfig.pop_from({"num.partitions": "many"})
    with pytest.raises(InvalidConfig):
        KafkaConfig.pop_from({"listeners": "PLAINTEXT//nowhere"})
