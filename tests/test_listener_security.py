"""actors/listener.py with security, on real loopback sockets over the in-memory FakeBrokerApi
and tests/fake_security.py's FakeSecurity (BrokerSecurity without ZooKeeper): SSL listeners
answer TLS clients (stdlib, kafka-python) and refuse or identify client certificates;
SASL_SSL and SASL_PLAINTEXT listeners authenticate librdkafka and kafka-python with SCRAM
and PLAIN, refuse a wrong password, anything asked before authenticating and an
unauthenticated request over Kafka's 512 KiB sasl.server.max.receive.size; a TLS connection
the broker closes ends with close_notify; silent clients time the TLS handshake out each in
its own thread; and hypothesis fuzzes (garbage, truncated or corrupted ClientHellos,
plaintext on a TLS port, junk inside or under TLS after a good handshake) each close their
own connection within a bound while good clients are still served. No Ray, no ZooKeeper;
the certificates are trustme's (tests/certs.py)."""

from __future__ import annotations

import os
import random
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass

import pytest
from cryptography import x509
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                                 SaslHandshakeRequest, SaslHandshakeResponse)

import actors.listener as listener_module
from actors.listener import KafkaListener
from controller.layout import Endpoint
from tests.certs import CLIENT_NAME, make_certs
from tests.fake_broker_api import FakeBrokerApi
from tests.fake_security import FakeSecurity
from tests.protocol_samples import frame_of, sample_frame
from tests.wire import client_hello as wire_client_hello, closed, read_frame

pytestmark = pytest.mark.unit
HOST = "127.0.0.1"
IDLE_MS = 10_000               # clients' listeners: never idle-closed during a test
FUZZ_IDLE_MS = 300             # the SASL fuzz: a truncated frame waits this long at most
HANDSHAKE_S = 0.3              # HANDSHAKE_TIMEOUT_S in the fuzzes (monkeypatched)
SLACK_S = 2.0                  # scheduling slack on top of every timeout bound
USER, PASSWORD = "alice", "alice-secret"
SASL_FAILED, ILLEGAL_SASL_STATE = 58, 34


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@dataclass
class Served:
    listener: KafkaListener
    api: FakeBrokerApi
    security: FakeSecurity
    endpoint: Endpoint

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.listener.port}"


@pytest.fixture
def serve(certs):
    """serve(protocol, client_auth=..., idle_ms=...): a started listener of that security
    protocol (listener name = protocol) over a FakeBrokerApi with topic "orders" (3
    partitions) that advertises the port bound, and user alice in FakeSecurity."""
    started: list[KafkaListener] = []

    def start(protocol: str, client_auth: str = "none", idle_ms: int = IDLE_MS,
              reauth_ms: int = 0) -> Served:
        endpoint = Endpoint(protocol, HOST, 0, protocol)
        security = FakeSecurity([endpoint], certs.broker_config(client_auth),
                                users={USER: PASSWORD}, reauth_ms=reauth_ms)
        api = FakeBrokerApi()
        api.add_topic("orders", 3)
        listener = KafkaListener(endpoint, api, 1 << 20, idle_ms,
                                 name=f"sec-{protocol.lower()}-{len(started)}", security=security)
        listener.start()
        started.append(listener)
        api.add_broker(1, **{protocol: (HOST, listener.port)})   # metadata names this port
        return Served(listener, api, security, endpoint)

    yield start
    for listener in started:
        listener.stop()


# -- raw clients ----------------------------------------------------------------------------------
def tcp(served: Served) -> socket.socket:
    return socket.create_connection((HOST, served.listener.port), timeout=10)


def tls(served: Served, certs, client_cert: bool = False) -> ssl.SSLSocket:
    """A stdlib TLS client, handshake done (hostname checked against the trustme cert)."""
    return certs.client_context(client_cert).wrap_socket(tcp(served), server_hostname=HOST)


def connect(served: Served, certs):
    """The listener's transport as a client sees it: TLS on SSL / SASL_SSL, else plain."""
    return tls(served, certs) if served.endpoint.security_protocol.endswith("SSL") \
        else tcp(served)


def still_open(sock) -> bool:
    """The connection is open and has nothing to read right now (no EOF, no reset)."""
    sock.settimeout(0)
    try:
        sock.recv(1)
        return False                           # EOF (or data, which no test expects here)
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(10)


def refused(sock, request: bytes) -> bool:
    """Send `request`; True if the connection closes without any answer, False if it is
    answered (AssertionError if neither happens in 10 s)."""
    try:
        sock.sendall(request)
        read_frame(sock)
        return False
    except TimeoutError:
        raise AssertionError("neither answered nor closed in 10 s") from None
    except OSError:                            # ConnectionError, ssl.SSLError
        return True


def api_versions(sock, correlation_id: int = 99) -> int:
    """ApiVersions v3 over `sock`: its error code (the correlation id is checked)."""
    sock.sendall(sample_frame(18, 3, correlation_id=correlation_id))
    answer = ApiVersionsResponse.decode(read_frame(sock), version=3, header=True)
    assert answer.header.correlation_id == correlation_id
    return answer.error_code


def api_versions_ok(served: Served, certs) -> bool:
    with connect(served, certs) as s:
        return api_versions(s) == 0


def sasl_handshake(sock, mechanism: str, correlation_id: int = 1):
    sock.sendall(frame_of(SaslHandshakeRequest[1](mechanism=mechanism), correlation_id))
    return SaslHandshakeResponse.decode(read_frame(sock), version=1, header=True)


def sasl_authenticate(sock, auth_bytes: bytes, correlation_id: int = 2):
    sock.sendall(frame_of(SaslAuthenticateRequest[1](auth_bytes=auth_bytes), correlation_id))
    return SaslAuthenticateResponse.decode(read_frame(sock), version=1, header=True)


def metadata_frame(correlation_id: int = 3) -> bytes:
    return frame_of(MetadataRequest[9](topics=None, allow_auto_topic_creation=False,
                                       include_cluster_authorized_operations=False,
                                       include_topic_authorized_operations=False),
                    correlation_id)


def plain_login_then_metadata(served: Served, certs, password: str = PASSWORD) -> list[str]:
    """SASL PLAIN by raw frames, then Metadata: the topics answered."""
    with connect(served, certs) as s:
        assert sasl_handshake(s, "PLAIN").error_code == 0
        assert sasl_authenticate(s, f"\0{USER}\0{password}".encode()).error_code == 0
        s.sendall(metadata_frame())
        answer = MetadataResponse.decode(read_frame(s), version=9, header=True)
        return sorted(t.name for t in answer.topics)


def records_in(api: FakeBrokerApi, topic: str = "orders") -> list[bytes]:
    """Every batch appended to the fake's log for `topic`, as bytes."""
    return [b.data for part in api.topics[topic].values() for b in part.batches]


def wait_for(condition, timeout_s: float = 10.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout_s
    while not (got := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)                       # poll interval of a deadline loop
    return got


def connections(served: Served) -> int:
    """The connections the listener still holds open."""
    return served.listener.open_connections


# -- SSL ------------------------------------------------------------------------------------------
def test_five_mebibytes_each_way_over_tls_arrive_intact(serve, certs):
    """A 5 MiB produce written in chunks of every size through TLS, then fetched back (a
    5 MiB answer): the same bytes, on the listener's one event loop."""
    from protocol.build import build_request
    from protocol.client import ClientConnection
    from replicas.records import build_batch
    served = serve("SSL")
    served.listener.max_frame_bytes = 16 << 20
    batch = bytes(build_batch([os.urandom(1 << 20) for _ in range(5)], timestamps_ms=1))
    client, rng = ClientConnection("big"), random.Random(5)

    def call(sock, frame: bytes, chunked: bool = False):
        i = 0
        while i < len(frame):
            n = rng.choice([1, 100, 5000, 16384, 70000, 300000]) if chunked else len(frame)
            sock.sendall(frame[i:i + n])
            i += n
        while (got := client.next_response()) is None:
            client.receive_data(sock.recv(1 << 20))
        return got[1]
    with tls(served, certs) as s:
        produced = call(s, client.request(build_request(0, 9, None, acks=1, timeout=5000,
                                                        topic_data=(build_request(
            0, 9, "TopicProduceData", name="orders", partition_data=(build_request(
                0, 9, "PartitionProduceData", index=0, records=batch),)),)))[1], chunked=True)
        assert produced.responses[0].partition_responses[0].error_code.value == 0
        fetched = call(s, client.request(build_request(
            1, 12, None, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=16 << 20,
            topics=(build_request(1, 12, "FetchTopic", topic="orders", partitions=(
                build_request(1, 12, "FetchPartition", partition=0, fetch_offset=0,
                              partition_max_bytes=16 << 20),)),)))[1])
        assert bytes(fetched.responses[0].partitions[0].records) == batch


def test_idle_connections_cost_no_thread(serve, certs):
    served = serve("PLAINTEXT")
    before = threading.active_count()
    socks = [tcp(served) for _ in range(200)]
    try:
        wait_for(lambda: served.listener.connections_accepted == 200, what="200 accepts")
        assert threading.active_count() - before < 5
        assert api_versions_ok(served, certs)
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: connections(served) == 0, what="the connections to be released")



def test_a_tls_client_gets_api_versions_answered(serve, certs):
    served = serve("SSL")
    with tls(served, certs) as s:
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        assert api_versions(s) == 0
        assert api_versions(s, correlation_id=100) == 0      # and the next one
    [session] = served.security.sessions
    assert (session.listener, session.security_protocol, session.host) == ("SSL", "SSL", HOST)
    assert session.principal == "User:ANONYMOUS" and session.sasl is None


def test_a_plaintext_client_on_the_ssl_listener_is_closed_at_once(serve, certs, monkeypatch):
    # no timer can close it within refused()'s 10 s: the plaintext bytes themselves do
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT_S", 600.0)
    served = serve("SSL", idle_ms=600_000)
    with tcp(served) as s:
        assert refused(s, sample_frame(18, 3))
    assert served.security.sessions == [] and served.api.calls == []
    assert api_versions_ok(served, certs)


def test_kafka_python_reads_metadata_produces_and_consumes_over_ssl(serve, certs):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    served = serve("SSL")
    ssl_args = dict(bootstrap_servers=served.bootstrap, security_protocol="SSL",
                    ssl_cafile=str(certs.ca), request_timeout_ms=10000)
    producer = KafkaProducer(**ssl_args)
    try:
        assert producer.partitions_for("orders") == {0, 1, 2}
        sent = [producer.send("orders", f"kp-{i}".encode(), partition=1).get(10) for i in range(3)]
    finally:
        producer.close(5)
    assert [m.offset for m in sent] == [0, 1, 2]
    assert [c["partitions"][0][0] for c in served.api.calls_of("produce")] == [("orders", 1)] * 3
    assert all(f"kp-{i}".encode() in b"".join(records_in(served.api)) for i in range(3))
    consumer = KafkaConsumer(**ssl_args, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tp = TopicPartition("orders", 1)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = [m.value for _, m in zip(range(3), consumer)]
    finally:
        consumer.close()
    assert got == [b"kp-0", b"kp-1", b"kp-2"]
    assert served.security.principals() and \
        set(served.security.principals()) == {"User:ANONYMOUS"}


def test_client_auth_required_refuses_a_client_without_a_certificate(serve, certs):
    served = serve("SSL", client_auth="required")
    try:
        s = tls(served, certs)                    # TLS 1.2: the handshake itself fails
    except (ssl.SSLError, ConnectionError):
        pass
    else:
        with s:                                   # TLS 1.3: the client learns on its first read
            assert refused(s, sample_frame(18, 3))
    assert served.security.sessions == []        # no session: it never got past TLS
    assert served.api.calls == []


def test_client_auth_required_names_the_certificate_subject_as_principal(serve, certs):
    served = serve("SSL", client_auth="required")
    with tls(served, certs, client_cert=True) as s:
        assert api_versions(s) == 0
    subject = x509.load_pem_x509_certificate(certs.client_chain.read_bytes()).subject
    [session] = served.security.sessions
    # Kafka's default SSL principal: X500Principal.getName(), i.e. RFC 2253/4514 order
    assert session.principal == "User:" + subject.rfc4514_string()
    assert session.principal.startswith(f"User:CN={CLIENT_NAME},")


def test_client_auth_requested_lets_both_in(serve, certs):
    served = serve("SSL", client_auth="requested")
    with tls(served, certs) as anonymous, tls(served, certs, client_cert=True) as named:
        assert api_versions(anonymous) == 0 and api_versions(named) == 0
    assert sorted(served.security.principals()) == sorted(
        ["User:ANONYMOUS", "User:" + x509.load_pem_x509_certificate(
            certs.client_chain.read_bytes()).subject.rfc4514_string()])


# -- SASL -----------------------------------------------------------------------------------------
def librdkafka_config(served: Served, certs, mechanism: str, password: str = PASSWORD) -> dict:
    config = {"bootstrap.servers": served.bootstrap,
              "security.protocol": served.endpoint.security_protocol,
              "sasl.mechanisms": mechanism, "sasl.username": USER, "sasl.password": password,
              "socket.timeout.ms": 10000, "message.timeout.ms": 10000}
    if served.endpoint.security_protocol == "SASL_SSL":
        config["ssl.ca.location"] = str(certs.ca)
    return config


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_librdkafka_authenticates_and_produces(serve, certs, protocol, mechanism):
    from confluent_kafka import Producer
    served = serve(protocol)
    reports = []
    producer = Producer({**librdkafka_config(served, certs, mechanism), "acks": "all"})
    try:
        for i in range(3):
            producer.produce("orders", f"{mechanism}-{i}".encode(), partition=0,
                             on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        assert producer.flush(15) == 0
    finally:
        producer.close()
    assert reports == [(None, 0), (None, 1), (None, 2)]
    log = b"".join(records_in(served.api))
    assert all(f"{mechanism}-{i}".encode() in log for i in range(3))
    sessions = served.security.sessions
    assert sessions and all(s.principal == f"User:{USER}" and s.sasl.mechanism == mechanism
                            and s.security_protocol == protocol for s in sessions)


def test_librdkafka_reauthenticates_before_its_session_expires(serve, certs):
    """KIP-368: with connections.max.reauth.ms the broker answers a session lifetime, and
    librdkafka re-authenticates on the same connection before it ends (at 85-95% of it),
    producing all along. A session the client renews too late is closed (Kafka's rule), so
    the lifetime leaves the client seconds of slack on a loaded machine; whatever happens,
    nothing is lost and every authenticated session is the user's."""
    from confluent_kafka import Producer
    served = serve("SASL_PLAINTEXT", reauth_ms=4000)
    reports = []
    producer = Producer({**librdkafka_config(served, certs, "SCRAM-SHA-512"), "acks": "all",
                         "linger.ms": 0})
    try:
        deadline = time.monotonic() + 60
        i = 0
        while not any(s.sasl.reauthentications >= 2 for s in served.security.sessions):
            assert time.monotonic() < deadline, "no two re-authentications in 60 s"
            producer.produce("orders", b"r-%d" % i, partition=0,
                             on_delivery=lambda err, msg: reports.append(err))
            i += 1
            producer.flush(10)
    finally:
        producer.close()
    assert len(reports) == i and not any(reports)
    assert all(s.principal == f"User:{USER}" for s in served.security.sessions
               if s.sasl.authenticated)


def test_an_expired_session_is_closed_at_its_next_request(serve, certs):
    served = serve("SASL_PLAINTEXT", reauth_ms=2000)
    with tcp(served) as s:
        assert sasl_handshake(s, "PLAIN").error_code == 0
        answer = sasl_authenticate(s, f"\0{USER}\0{PASSWORD}".encode())
        assert (answer.error_code, answer.session_lifetime_ms) == (0, 2000)
        s.sendall(metadata_frame())
        read_frame(s)                                   # inside the session: answered
        time.sleep(2.2)                                 # let the 2 s session run out
        assert refused(s, metadata_frame(4))
    assert api_versions_ok(served, certs)               # the listener serves others


class LinkSecurity:
    """What a BrokerLink asks of the broker's security: its SASL client for a listener."""

    def client_sasl(self, _listener: str):
        from protocol.security.sasl_client import SaslClient
        return SaslClient("SCRAM-SHA-512", USER, PASSWORD)


def test_a_broker_link_reauthenticates_before_the_peer_expires_it(serve, certs):
    """actors/broker_link.py, the replica fetcher's socket: it re-authenticates on the same
    connection at 85% of the session lifetime the peer answered."""
    import asyncio
    from actors.broker_link import BrokerLink
    from protocol.build import build_request
    served = serve("SASL_PLAINTEXT", reauth_ms=4000)

    async def run() -> tuple[int, int]:
        link = BrokerLink("broker-2", LinkSecurity())
        await link.connect(Endpoint("SASL_PLAINTEXT", HOST, served.listener.port, "SASL_PLAINTEXT"))
        answered = 0
        deadline = time.monotonic() + 30
        while link.reauthentications < 2:
            assert time.monotonic() < deadline, "no two re-authentications in 30 s"
            got = await link.call(build_request(3, 9, None, topics=None,
                                                allow_auto_topic_creation=False,
                                                include_cluster_authorized_operations=False,
                                                include_topic_authorized_operations=False), 10)
            answered += got is not None
            await asyncio.sleep(0.05)        # pace: a fetcher's rounds, not a busy loop
        link.close()
        return answered, link.reauthentications

    answered, reauths = asyncio.run(run())
    assert reauths >= 2 and answered >= 2
    [session] = served.security.sessions
    assert session.sasl.reauthentications >= 2 and session.principal == f"User:{USER}"


def test_a_fetcher_going_round_in_callbacks_reauthenticates_its_link(serve, certs):
    """actors/fetcher.py: rounds run in the link's data callbacks; when the session's
    re-authentication falls due the rounds hand over to the coroutine, which re-authenticates
    on the same connection before the next Fetch (the peer never expires the session)."""
    from actors.fetcher import Fetcher
    from tests.test_fetcher_rounds import LiveFollower
    served = serve("SASL_PLAINTEXT", reauth_ms=1000)
    broker = LiveFollower(Endpoint("SASL_PLAINTEXT", HOST, served.listener.port,
                                   "SASL_PLAINTEXT"))
    broker.security = LinkSecurity()
    fetcher = Fetcher(broker, leader_id=1)
    try:
        fetcher.add([("orders", 0)])
        deadline = time.monotonic() + 30
        while fetcher.link.reauthentications < 2:
            assert time.monotonic() < deadline, "no two re-authentications in 30 s"
            time.sleep(0.02)
        rounds = len(served.api.calls_of("fetch"))
    finally:
        fetcher.stop()
        broker.network.stop()
    assert rounds >= 3 and fetcher.problem() is None
    [session] = served.security.sessions
    assert session.sasl.reauthentications >= 2 and session.principal == f"User:{USER}"


def test_kafka_python_authenticates_with_scram_sha_512_over_sasl_ssl(serve, certs):
    from kafka import KafkaProducer
    served = serve("SASL_SSL")
    producer = KafkaProducer(bootstrap_servers=served.bootstrap, security_protocol="SASL_SSL",
                             ssl_cafile=str(certs.ca), sasl_mechanism="SCRAM-SHA-512",
                             sasl_plain_username=USER, sasl_plain_password=PASSWORD,
                             request_timeout_ms=10000)
    try:
        sent = producer.send("orders", b"from-kafka-python", partition=2).get(10)
    finally:
        producer.close(5)
    assert (sent.partition, sent.offset) == (2, 0)
    assert b"from-kafka-python" in served.api.partition(("orders", 2)).batches[0].data
    assert served.security.sessions and all(
        s.principal == f"User:{USER}" and s.sasl.mechanism == "SCRAM-SHA-512"
        for s in served.security.sessions)


@pytest.mark.parametrize("protocol,mechanism", [("SASL_SSL", "SCRAM-SHA-256"),
                                                ("SASL_PLAINTEXT", "PLAIN")])
def test_a_wrong_password_is_an_authentication_error_and_nothing_is_produced(
        serve, certs, protocol, mechanism):
    from confluent_kafka import KafkaError, Producer
    served = serve(protocol)
    errors = []
    producer = Producer({**librdkafka_config(served, certs, mechanism, password="not-it"),
                         "error_cb": errors.append})
    try:
        producer.produce("orders", b"must-not-land", partition=0)
        wait_for(lambda: producer.poll(0.05) is not None and any(
            e.code() == KafkaError._AUTHENTICATION for e in errors), what="_AUTHENTICATION")
        producer.purge()
    finally:
        producer.close()
    assert any("Authentication failed" in e.str() for e in errors), errors
    assert served.api.calls_of("produce") == [] and records_in(served.api) == []
    sessions = served.security.sessions
    assert sessions and all(s.principal == "User:ANONYMOUS" and s.sasl.state == "failed"
                            for s in sessions)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_a_wrong_plain_password_is_answered_then_the_connection_closes(serve, certs, protocol):
    served = serve(protocol)
    with connect(served, certs) as s:
        assert sasl_handshake(s, "PLAIN").error_code == 0
        answer = sasl_authenticate(s, f"\0{USER}\0not-it".encode())
        assert answer.error_code == SASL_FAILED and "Invalid username or password" in \
            answer.error_message
        assert closed(s)
    assert plain_login_then_metadata(served, certs) == ["orders"]   # the right one gets in


def test_a_tls_connection_the_broker_closes_ends_with_close_notify(serve, certs):
    served = serve("SASL_SSL")
    ctx = certs.client_context()
    with ctx.wrap_socket(tcp(served), server_hostname=HOST, suppress_ragged_eofs=False) as s:
        assert sasl_handshake(s, "PLAIN").error_code == 0
        assert sasl_authenticate(s, f"\0{USER}\0not-it".encode()).error_code == SASL_FAILED
        # a clean TLS close (close_notify), as Kafka's: a bare TCP close would be SSLEOFError
        assert s.recv(10) == b""


def produce_frame(size: int, correlation_id: int = 4) -> bytes:
    from kafka.protocol.producer import ProduceRequest
    tpd = ProduceRequest.TopicProduceData
    return frame_of(ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1500, topic_data=[
        tpd(name="orders", partition_data=[tpd.PartitionProduceData(index=0,
                                                                    records=b"r" * size)])]),
        correlation_id)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("shape", ["announced", "whole-token"])
def test_a_request_over_512_kib_before_authenticating_is_refused(serve, certs, protocol, shape,
                                                                monkeypatch):
    """Kafka's sasl.server.max.receive.size (CVE-2022-34917): an unauthenticated client
    cannot make the broker buffer up to socket.request.max.bytes (1 MiB here)."""
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT_S", 600.0)
    served = serve(protocol, idle_ms=600_000)    # no timer runs out in refused()'s 10 s:
    big = 600 * 1024                             # only the limit can close it
    with connect(served, certs) as s:
        if shape == "announced":                 # a size prefix, then part of the body
            assert refused(s, struct.pack(">i", 900 * 1024) + b"\0" * big)
        else:                                    # a whole SaslAuthenticate with a huge token
            assert sasl_handshake(s, "PLAIN").error_code == 0
            assert refused(s, frame_of(SaslAuthenticateRequest[1](auth_bytes=b"\0" * big), 2))
    assert served.api.calls == []
    # the same size once authenticated is an ordinary request (under socket.request.max.bytes)
    with connect(served, certs) as s:
        assert sasl_handshake(s, "PLAIN").error_code == 0
        assert sasl_authenticate(s, f"\0{USER}\0{PASSWORD}".encode()).error_code == 0
        s.sendall(produce_frame(big))
        assert struct.unpack_from(">i", read_frame(s))[0] == 4
    assert [len(c["partitions"][0][1]) for c in served.api.calls_of("produce")] == [big]


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("before", ["nothing", "api_versions", "handshake"])
def test_a_request_before_authenticating_closes_the_connection(serve, certs, protocol, before):
    served = serve(protocol)
    with connect(served, certs) as s:
        if before == "api_versions":
            assert api_versions(s) == 0
        elif before == "handshake":
            assert sasl_handshake(s, "SCRAM-SHA-256").error_code == 0
        assert refused(s, metadata_frame())
    assert served.api.calls == []                              # Metadata never reached it
    assert [s.sasl.state for s in served.security.sessions] == ["failed"]
    assert plain_login_then_metadata(served, certs) == ["orders"]
    assert served.api.calls_of("metadata")                      # the good client's


def test_an_unsupported_mechanism_is_answered_then_the_connection_closes(serve, certs):
    served = serve("SASL_SSL")
    with tls(served, certs) as s:
        answer = sasl_handshake(s, "GSSAPI")
        assert answer.error_code == 33 and set(answer.mechanisms) == {
            "SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"}
        assert closed(s)


# -- timeouts and fuzz ----------------------------------------------------------------------------
def client_hello() -> bytes:
    return wire_client_hello(ssl.create_default_context(), HOST)


HELLO = client_hello()


def test_silent_clients_time_out_on_their_own_clocks_while_others_are_served(
        serve, certs, monkeypatch):
    timeout_s = 1.0
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT_S", timeout_s)
    served = serve("SSL")
    t0 = time.monotonic()
    silent = [tcp(served) for _ in range(4)]
    half_hello = tcp(served)
    half_hello.sendall(HELLO[:len(HELLO) // 2])
    try:
        # a good client is served while all five handshakes are pending
        with tls(served, certs) as good:
            assert api_versions(good) == 0
        assert all(still_open(s) for s in silent + [half_hello])
        # each times out on its own clock: all five closed by ONE deadline (in series they
        # would take 5 timeouts), and none before its timeout
        deadline = t0 + timeout_s + SLACK_S
        for s in silent + [half_hello]:
            assert closed(s, max(0.05, deadline - time.monotonic()))
        assert time.monotonic() - t0 >= timeout_s * 0.9
    finally:
        for s in silent + [half_hello]:
            s.close()
    assert len(served.security.sessions) == 1                  # the good client's only
    wait_for(lambda: connections(served) == 0, what="the connections to be released")
    assert api_versions_ok(served, certs)


def test_stop_closes_connections_still_in_their_handshake(serve, certs, monkeypatch):
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT_S", 30.0)
    served = serve("SSL")
    with tcp(served) as s:
        s.sendall(HELLO[:10])
        wait_for(lambda: served.listener.connections_accepted == 1, what="the accept")
        served.listener.stop()
        assert closed(s, 5.0)          # by stop(): neither timer (30 s, 10 s) runs out in 5 s
    wait_for(lambda: connections(served) == 0, what="the connections to be released")


def _check_closed_within(socks_and_starts, bound_s: float) -> None:
    for sock, started in socks_and_starts:
        left = max(0.05, started + bound_s - time.monotonic())
        assert closed(sock, left), f"still open {bound_s:g} s after its bytes were sent"


def _send(sock, data: bytes, half_close: bool) -> None:
    try:
        if data:
            sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass                                   # closed on us already: fine


TLS_JUNK = st.one_of(
    st.binary(min_size=1, max_size=300),                                    # random bytes
    st.integers(1, len(HELLO) - 1).map(lambda n: HELLO[:n]),                # truncated hello
    st.tuples(st.integers(0, len(HELLO) - 1), st.integers(0, 255)).map(     # corrupted hello
        lambda p: HELLO[:p[0]] + bytes([HELLO[p[0]] ^ (p[1] or 1)]) + HELLO[p[0] + 1:]),
    st.sampled_from([(18, 3), (3, 12), (0, 9), (17, 1)]).map(               # plaintext Kafka
        lambda kv: sample_frame(*kv)),
)


def test_fuzz_the_ssl_listener_before_the_handshake(serve, certs, monkeypatch):
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT_S", HANDSHAKE_S)
    served = serve("SSL")
    good_clients = [0]

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(attempts=st.lists(st.tuples(TLS_JUNK, st.booleans()), min_size=1, max_size=3))
    def one(attempts):
        socks = []
        try:
            for data, half_close in attempts:      # at once: each waits on its own thread
                sock = tcp(served)
                socks.append((sock, time.monotonic()))
                _send(sock, data, half_close)
            _check_closed_within(socks, HANDSHAKE_S + SLACK_S)
        finally:
            for sock, _ in socks:
                sock.close()
        assert api_versions_ok(served, certs)
        good_clients[0] += 1
        assert len(served.security.sessions) == good_clients[0]   # junk never got a session

    one()
    assert served.api.calls == []
    wait_for(lambda: connections(served) == 0, what="the connections to be released")
    assert api_versions_ok(served, certs)


def _sasl_frames() -> list[bytes]:
    return [frame_of(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"), 1),
            frame_of(SaslHandshakeRequest[0](mechanism="PLAIN"), 1),
            frame_of(SaslAuthenticateRequest[2](auth_bytes=b"n,,n=alice,r=abcdefgh"), 2),
            sample_frame(18, 3, correlation_id=1)]


SASL_FRAMES = _sasl_frames()
SASL_JUNK = st.one_of(
    st.binary(min_size=1, max_size=300),                                          # random
    st.sampled_from(SASL_FRAMES).flatmap(                                         # truncated
        lambda f: st.integers(1, len(f) - 1).map(lambda n: f[:n])),
    st.tuples(st.sampled_from(SASL_FRAMES), st.binary(min_size=1, max_size=60)).map(
        lambda p: p[0] + p[1]),                                                   # frame + junk
    st.binary(min_size=0, max_size=100).map(                                      # bad SCRAM
        lambda token: SASL_FRAMES[0] + frame_of(SaslAuthenticateRequest[1](auth_bytes=token), 2)),
)


def test_fuzz_the_sasl_ssl_listener_after_a_good_tls_handshake(serve, certs, monkeypatch):
    monkeypatch.setattr(listener_module, "HANDSHAKE_TIMEOUT_S", HANDSHAKE_S)
    served = serve("SASL_SSL", idle_ms=FUZZ_IDLE_MS)
    bound_s = max(HANDSHAKE_S, FUZZ_IDLE_MS / 1000) + SLACK_S
    logins = [0]

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(attempts=st.lists(st.tuples(SASL_JUNK, st.sampled_from(["tls", "raw"]),
                                       st.booleans()), min_size=1, max_size=3))
    def one(attempts):
        socks, raws = [], []
        try:
            for data, layer, half_close in attempts:
                sock = tls(served, certs)              # a good TLS handshake first
                socks.append((sock, time.monotonic()))
                if layer == "tls":                     # junk inside TLS records
                    _send(sock, data, half_close)
                else:                                  # junk on the wire, under TLS
                    raws.append(socket.socket(fileno=os.dup(sock.fileno())))
                    _send(raws[-1], data, half_close)
            _check_closed_within(socks, bound_s)
        finally:
            for sock in raws + [s for s, _ in socks]:
                sock.close()
        assert plain_login_then_metadata(served, certs) == ["orders"]
        logins[0] += 1
        authenticated = [s for s in served.security.sessions if s.sasl.authenticated]
        assert len(authenticated) == logins[0]       # junk never authenticated anyone

    one()
    assert [name for name, _ in served.api.calls] == ["metadata"] * logins[0]
    wait_for(lambda: connections(served) == 0, what="the connections to be released")
    assert plain_login_then_metadata(served, certs) == ["orders"]
