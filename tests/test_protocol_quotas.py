"""protocol/handlers/quotas.py and the throttle step of protocol.handlers.answer, without Ray
or sockets: kafka-python's requests in, kafka-python decodes the answers (every version of
DescribeClientQuotas, AlterClientQuotas, DescribeUserScramCredentials,
AlterUserScramCredentials), Kafka's filter rules table-driven."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (AlterClientQuotasRequest, AlterUserScramCredentialsRequest,
                                  DescribeClientQuotasRequest,
                                  DescribeUserScramCredentialsRequest)
from kio.index import load_response_schema

from protocol.connection import Connection
from protocol.handlers import answer
from protocol.handlers.quotas import ANY_NAME, filter_quotas
from protocol.quotas import DEFAULT, QuotaEntity as E
from protocol.security.authorizer import Authorizer
from protocol.security.session import Session
from protocol.versions import SUPPORTED
from replicas.errors import ErrorCode as C
from tests.handler_wire import cluster, kio_read
from tests.protocol_samples import RESPONSES, frame_of, sample_request

pytestmark = pytest.mark.unit

QUOTAS = {E("alice", None): {"producer_byte_rate": 1024.0},
          E("alice", "app"): {"consumer_byte_rate": 2048.0},
          E(DEFAULT, None): {"request_percentage": 50.0},
          E(None, "app"): {"producer_byte_rate": 10.0},
          E(None, DEFAULT): {"producer_byte_rate": 20.0},
          E("bob", DEFAULT): {"consumer_byte_rate": 30.0}}


class QuotaApi:
    """The BrokerApi calls these handlers make, over a dict."""

    broker_id = 1

    def __init__(self):
        self.quotas = dict(QUOTAS)
        self.altered: list = []
        self.scram_asks: list = []

    def client_quotas(self):
        return dict(self.quotas)

    def alter_client_quotas(self, asks, validate_only):
        self.altered.append((asks, validate_only))
        return [(C.NONE, None)] * len(asks)

    def describe_scram(self, users):
        self.scram_asks.append(users)
        return [("alice", C.NONE, None, ((1, 4096), (2, 8192))),
                ("bob", C.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that "
                 "does not exist: bob", ())]

    def alter_scram(self, upsertions, deletions):
        self.scram_asks.append((upsertions, deletions))
        return [("alice", C.NONE, None), ("bob", C.RESOURCE_NOT_FOUND, "nope")]


def ask(api, msg):
    conn = Connection()
    conn.receive_data(frame_of(msg, 77))
    request = conn.next_request()
    out = answer(conn, api, request, "PLAINTEXT")
    header, _ = kio_read(out, load_response_schema(msg.API_KEY, msg.API_VERSION))
    assert header.correlation_id == 77
    return RESPONSES[msg.API_KEY].decode(out[4:], version=msg.API_VERSION, header=True)


def versions(key):
    lo, hi = SUPPORTED[key]
    return list(range(lo, hi + 1))


@pytest.mark.parametrize("version", versions(48))
def test_describe_client_quotas_every_version(version):
    got = ask(QuotaApi(), sample_request(48, version))      # user alice exact, client any
    assert got.error_code == 0 and got.error_message is None
    entries = [([(e.entity_type, e.entity_name) for e in x.entity],
                [(v.key, v.value) for v in x.values]) for x in got.entries]
    assert entries == [([("user", "alice"), ("client-id", "app")],
                        [("consumer_byte_rate", 2048.0)])]


@pytest.mark.parametrize("version", versions(49))
def test_alter_client_quotas_every_version(version):
    api = QuotaApi()
    got = ask(api, sample_request(49, version))
    assert [(e.error_code, [(d.entity_type, d.entity_name) for d in e.entity])
            for e in got.entries] == [(0, [("user", "alice"), ("client-id", None)]),
                                      (0, [("client-id", "app")])]
    assert api.altered == [([(E("alice", DEFAULT), [("producer_byte_rate", "1048576"),
                                                    ("request_percentage", None)]),
                             (E(None, "app"), [("consumer_byte_rate", "2000000")])], True)]


@pytest.mark.parametrize("version", versions(50))
def test_describe_user_scram_credentials_every_version(version):
    api = QuotaApi()
    got = ask(api, sample_request(50, version))
    assert api.scram_asks == [["alice", "bob"]]
    assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in got.results] == [("alice", 0, [(1, 4096), (2, 8192)]),
                                      ("bob", C.RESOURCE_NOT_FOUND, [])]


@pytest.mark.parametrize("version", versions(51))
def test_alter_user_scram_credentials_every_version(version):
    api = QuotaApi()
    got = ask(api, sample_request(51, version))
    assert api.scram_asks == [([("alice", 1, 8192, b"s" * 16, b"p" * 32)], [("bob", 2)])]
    assert [(r.user, r.error_code) for r in got.results] == [("alice", 0),
                                                              ("bob", C.RESOURCE_NOT_FOUND)]


def _describe(components, strict=False, version=1):
    c = DescribeClientQuotasRequest.ComponentData
    return DescribeClientQuotasRequest[version](
        components=[c(entity_type=t, match_type=m, match=n) for t, m, n in components],
        strict=strict)


@pytest.mark.parametrize("components,code", [
    ([("user", 0, None)], C.INVALID_REQUEST),              # exact without a name
    ([("user", 1, "x")], C.INVALID_REQUEST),               # default with a name
    ([("user", 2, "x")], C.INVALID_REQUEST),               # any with a name
    ([("user", 7, None)], C.INVALID_REQUEST),
    ([("user", 2, None), ("user", 1, None)], C.INVALID_REQUEST),
    ([("", 2, None)], C.INVALID_REQUEST),
    ([("group", 2, None)], C.UNSUPPORTED_VERSION),
    ([("ip", 2, None), ("user", 2, None)], C.INVALID_REQUEST),
])
def test_describe_client_quotas_bad_filters(components, code):
    got = ask(QuotaApi(), _describe(components))
    assert got.error_code == code and got.error_message and got.entries is None


def names(found):
    return [(e.user, e.client_id) for e, _ in found]


@pytest.mark.parametrize("components,strict,expected", [
    ({}, False, [(None, DEFAULT), (None, "app"), (DEFAULT, None), ("alice", None),
                 ("alice", "app"), ("bob", DEFAULT)]),
    ({}, True, []),
    ({"user": "alice"}, False, [("alice", None), ("alice", "app")]),
    ({"user": "alice"}, True, [("alice", None)]),
    ({"user": DEFAULT}, False, [(DEFAULT, None)]),
    ({"user": ANY_NAME}, True, [(DEFAULT, None), ("alice", None)]),
    ({"client-id": "app"}, False, [(None, "app"), ("alice", "app")]),
    ({"client-id": ANY_NAME}, False, [(None, DEFAULT), (None, "app"), ("alice", "app"),
                                      ("bob", DEFAULT)]),
    ({"client-id": DEFAULT}, True, [(None, DEFAULT)]),
    ({"user": "bob", "client-id": DEFAULT}, True, [("bob", DEFAULT)]),
    ({"user": ANY_NAME, "client-id": ANY_NAME}, False, [("alice", "app"), ("bob", DEFAULT)]),
    ({"ip": ANY_NAME}, False, []),
])
def test_describe_filters_are_kafkas(components, strict, expected):
    assert names(filter_quotas(QUOTAS, components, strict)) == expected


def _alter(entries, validate_only=False):
    e = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest[1](entries=[
        e(entity=[e.EntityData(entity_type=t, entity_name=n) for t, n in entity],
          ops=[e.OpData(key=k, value=v, remove=r) for k, v, r in ops])
        for entity, ops in entries], validate_only=validate_only)


def test_alter_client_quotas_refuses_per_entry_as_kafka():
    api = QuotaApi()
    ok = ([("client-id", "web")], [("consumer_byte_rate", 5.0, False)])
    got = ask(api, _alter([
        ([], [("producer_byte_rate", 1.0, False)]),
        ([("group", "g")], []),
        ([("user", "")], []),
        ([("ip", "1.2.3.4")], []),
        ([("user", "a")], [("producer_byte_rate", 1.5, False)]),
        ([("user", "a")], [("bogus", 1.0, False)]),
        ([("user", "a")], [("request_percentage", 0.0, False)]),
        ok]))
    codes = [e.error_code for e in got.entries]
    assert codes == [C.INVALID_REQUEST] * 7 + [0]
    assert all(e.error_message for e in got.entries[:7])
    assert api.altered == [([(E(None, "web"), [("consumer_byte_rate", "5")])], False)]


def test_unauthorised_quota_and_scram_calls_are_cluster_authorization_failed():
    api = QuotaApi()
    denied = Session("PLAINTEXT", "127.0.0.1", "PLAINTEXT", None, Authorizer((), False))
    for msg in (_describe([("user", 2, None)]), _alter([([("user", "a")], [])]),
                DescribeUserScramCredentialsRequest[0](users=None),
                AlterUserScramCredentialsRequest[0](deletions=[
                    AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="a",
                                                                             mechanism=1)],
                    upsertions=[])):
        conn = Connection()
        conn.receive_data(frame_of(msg, 5))
        out = answer(conn, api, conn.next_request(), denied)
        got = RESPONSES[msg.API_KEY].decode(out[4:], version=msg.API_VERSION, header=True)
        tree = got.to_dict()
        codes = {v for k, v in _walk(tree) if k == "error_code"}
        assert codes == {C.CLUSTER_AUTHORIZATION_FAILED}, tree
    assert api.altered == [] and api.scram_asks == []


def _walk(tree):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(tree, list):
        for item in tree:
            yield from _walk(item)


# -- the throttle step -----------------------------------------------------------------------------
class Hook:
    """A QuotaHook answering fixed throttles, keeping what it was asked."""

    def __init__(self, request_ms=0, bytes_ms=0):
        self.request_ms, self.bytes_ms, self.seen = request_ms, bytes_ms, []

    def request_time(self, request, principal):
        self.seen.append(("time", request.api_key, principal))
        return self.request_ms

    def bandwidth(self, request, principal, nbytes):
        self.seen.append(("bytes", request.api_key, nbytes))
        return self.bytes_ms


@pytest.mark.parametrize("request_ms,bytes_ms,expected", [(0, 0, 0), (0, 250, 250),
                                                          (300, 250, 300)])
def test_a_throttled_produce_answer_carries_the_larger_throttle(request_ms, bytes_ms, expected):
    fake = cluster()
    hook = Hook(request_ms, bytes_ms)
    conn = Connection()
    conn.receive_data(frame_of(sample_request(0, 9), 9))
    request = conn.next_request()
    out = answer(conn, fake, request, "PLAINTEXT", hook)
    if not isinstance(out, bytes):
        out = out.result()
    got = RESPONSES[0].decode(out[4:], version=9, header=True)
    assert got.throttle_time_ms == expected
    # the sample's third partition carries a record the broker refuses (INVALID_RECORD)
    assert [p.error_code for t in got.responses for p in t.partition_responses] == [0, 0, 87]
    assert hook.seen == [("time", 0, "User:ANONYMOUS"), ("bytes", 0, request.size)]


def test_no_hook_no_throttle_and_follower_fetches_are_exempt():
    fake = cluster()
    conn = Connection()
    conn.receive_data(frame_of(sample_request(0, 9), 9))
    out = answer(conn, fake, conn.next_request(), "PLAINTEXT")
    out = out if isinstance(out, bytes) else out.result()
    assert RESPONSES[0].decode(out[4:], version=9, header=True).throttle_time_ms == 0
    hook = Hook(500, 500)
    fetch = sample_request(1, 12)
    fetch.replica_id = 2                         # a follower: replication is not throttled
    conn.receive_data(frame_of(fetch, 10))
    out = answer(conn, fake, conn.next_request(), "PLAINTEXT", hook)
    out = out if isinstance(out, bytes) else out.result()
    assert RESPONSES[1].decode(out[4:], version=12, header=True).throttle_time_ms == 0
    assert hook.seen == []
