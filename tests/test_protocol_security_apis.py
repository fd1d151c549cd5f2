"""SASL and the ACL APIs through protocol.handlers.answer, without Ray, ZooKeeper or sockets:
the SASL gate and exchange (a real SaslServer, scramp as the client) and CreateAcls /
DescribeAcls / DeleteAcls (protocol/handlers/security.py) against FakeBrokerApi. The per-API
authorisation table and mixed requests are in tests/test_protocol_security.py, whose request
builders and sessions this module uses.
"""

from __future__ import annotations

import struct

import pytest
import scramp
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from protocol.connection import Connection
from protocol.errors import ProtocolError
from protocol.security.acl import (
    AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res,
)
from protocol.security.authorizer import Authorizer
from protocol.security.credentials import make_credential
from protocol.security.sasl import SaslServer
from protocol.security.session import Session
from tests.fake_broker_api import FakeBrokerApi
from tests.handler_wire import ask as wire_ask, metadata_request, send, versions
from tests.protocol_samples import ACL_ANY, ACL_READ
from tests.test_protocol_security import (
    ALICE, BOB, HOST, ILLEGAL_SASL_STATE, INVALID_REQUEST, SASL_AUTHENTICATION_FAILED,
    SECURITY_DISABLED, UNSUPPORTED_SASL_MECHANISM, UNSUPPORTED_VERSION, _create_acls,
    _delete_acls, _describe_acls, acl, ask, cluster_acl, fresh_fake, session_for,
)

pytestmark = pytest.mark.unit


# -- SASL gating through answer() ----------------------------------------------------------
PASSWORD = "alice-secret"
MECHANISM = "SCRAM-SHA-256"


def sasl_session(authorizer=None) -> Session:
    creds = {(MECHANISM, "alice"): make_credential(MECHANISM, PASSWORD)}
    server = SaslServer([MECHANISM], lambda mechanism, user: creds.get((mechanism, user)))
    return Session(listener="SASL_PLAINTEXT", host=HOST, security_protocol="SASL_PLAINTEXT",
                   sasl=server, authorizer=authorizer)


def sasl_fake() -> FakeBrokerApi:
    fake = FakeBrokerApi()
    fake.add_broker(1, SASL_PLAINTEXT=("127.0.0.1", 9094))
    fake.add_topic("orders", 1)
    return fake


def authenticate(fake, session, conn, password=PASSWORD, handshake_version=1,
                 authenticate_version=2):
    """ApiVersions, SaslHandshake and SCRAM's two SaslAuthenticate rounds: the last answer."""
    versions_answer = wire_ask(fake, ApiVersionsRequest[3](
        client_software_name="t", client_software_version="1"), session, conn)
    assert versions_answer.error_code == 0
    hs = wire_ask(fake, SaslHandshakeRequest[handshake_version](mechanism=MECHANISM),
                  session, conn)
    assert (hs.error_code, hs.mechanisms) == (0, [MECHANISM])
    client = scramp.ScramClient([MECHANISM], "alice", password)
    first = wire_ask(fake, SaslAuthenticateRequest[authenticate_version](
        auth_bytes=client.get_client_first().encode()), session, conn)
    assert first.error_code == 0 and not session.closing
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = wire_ask(fake, SaslAuthenticateRequest[authenticate_version](
        auth_bytes=client.get_client_final().encode()), session, conn)
    return client, final


def test_metadata_before_authenticating_closes_the_connection():
    fake, session = sasl_fake(), sasl_session()
    with pytest.raises(ProtocolError, match="ILLEGAL_SASL_STATE"):
        send(fake, metadata_request(12, ["orders"]), session)
    assert fake.calls == []


def test_metadata_after_the_handshake_but_before_authenticating_closes_the_connection():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    wire_ask(fake, SaslHandshakeRequest[1](mechanism=MECHANISM), session, conn)
    with pytest.raises(ProtocolError):
        send(fake, metadata_request(12, ["orders"]), session, conn=conn)
    assert fake.calls == []


@pytest.mark.parametrize("authenticate_version", versions(36))
def test_a_full_scram_exchange_then_metadata_is_answered(authenticate_version):
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    assert session.principal == "User:ANONYMOUS"
    client, final = authenticate(fake, session, conn,
                                 authenticate_version=authenticate_version)
    assert final.error_code == 0 and final.error_message is None
    client.set_server_final(bytes(final.auth_bytes).decode())   # the server proved itself
    assert session.principal == ALICE and not session.closing
    md = wire_ask(fake, metadata_request(12, ["orders"]), session, conn)
    assert [(t.name, t.error_code) for t in md.topics] == [("orders", 0)]
    assert [(b.node_id, b.port) for b in md.brokers] == [(1, 9094)]
    # no second exchange on the same connection
    with pytest.raises(ProtocolError):
        send(fake, SaslHandshakeRequest[1](mechanism=MECHANISM), session, conn=conn)


def test_the_authenticated_principal_is_what_the_acls_see():
    fake = sasl_fake()
    authorizer = Authorizer()
    authorizer.replace_all([acl(Res.TOPIC, "orders", Op.DESCRIBE)])
    session, conn = sasl_session(authorizer), Connection()
    authenticate(fake, session, conn)
    md = wire_ask(fake, metadata_request(12, ["orders", "secret"]), session, conn)
    assert [(t.name, t.error_code) for t in md.topics] == [("orders", 0), ("secret", 29)]


def test_a_wrong_password_is_58_and_the_connection_closes():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    _, final = authenticate(fake, session, conn, password="not-it")
    assert final.error_code == SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in final.error_message
    assert session.closing and session.principal == "User:ANONYMOUS"
    with pytest.raises(ProtocolError):
        send(fake, metadata_request(12, ["orders"]), session, conn=conn)


def test_an_unsupported_mechanism_is_33_and_the_connection_closes():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    resp = wire_ask(fake, SaslHandshakeRequest[1](mechanism="GSSAPI"), session, conn)
    assert (resp.error_code, resp.mechanisms) == (UNSUPPORTED_SASL_MECHANISM, [MECHANISM])
    assert session.closing


def test_apiversions_above_our_max_is_answered_then_an_older_retry_is_still_allowed():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    request, out = send(fake, ApiVersionsRequest[4](client_software_name="t",
                                                    client_software_version="1"),
                        session, correlation_id=1, conn=conn)
    assert not request.served and out[8:10] == struct.pack(">h", UNSUPPORTED_VERSION)
    client, final = authenticate(fake, session, conn)       # ApiVersions v3, then SASL
    assert final.error_code == 0 and session.principal == ALICE
    assert not session.closing


def test_apiversions_twice_closes_the_connection():
    fake, session, conn = sasl_fake(), sasl_session(), Connection()
    wire_ask(fake, ApiVersionsRequest[3](client_software_name="t",
                                         client_software_version="1"), session, conn)
    with pytest.raises(ProtocolError):
        send(fake, ApiVersionsRequest[3](client_software_name="t",
                                         client_software_version="1"), session, conn=conn)


@pytest.mark.parametrize("version", versions(17))
def test_sasl_handshake_without_sasl_is_34_and_the_connection_stays(version):
    # KafkaApis.handleSaslHandshakeRequest: ILLEGAL_SASL_STATE, answered like any request.
    fake, conn = sasl_fake(), Connection()
    session = Session(listener="PLAINTEXT")
    resp = wire_ask(fake, SaslHandshakeRequest[version](mechanism=MECHANISM), session, conn)
    assert (resp.error_code, resp.mechanisms) == (ILLEGAL_SASL_STATE, [])
    assert not session.closing
    md = wire_ask(fake, metadata_request(12, ["orders"]), session, conn)
    assert md.topics[0].error_code == 0


def test_sasl_authenticate_without_sasl_is_34():
    fake, session = sasl_fake(), Session(listener="PLAINTEXT")
    resp = wire_ask(fake, SaslAuthenticateRequest[2](auth_bytes=b"n,,n=alice,r=abc"), session)
    assert (resp.error_code, bytes(resp.auth_bytes)) == (ILLEGAL_SASL_STATE, b"")
    assert not session.closing


# -- the ACL APIs ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(29))
def test_acl_apis_without_an_authorizer_are_security_disabled(version):
    fake = fresh_fake()
    fake.acls.append(acl(Res.TOPIC, "orders", Op.READ))
    for context in ("PLAINTEXT", Session(listener="PLAINTEXT", tls_principal=ALICE)):
        described = ask(fake, _describe_acls(version), context)
        assert (described.error_code, described.error_message, described.resources) == (
            SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
        created = ask(fake, _create_acls(version, ACL_READ, ACL_READ), context)
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (SECURITY_DISABLED, "No Authorizer is configured.")] * 2
        deleted = ask(fake, _delete_acls(version), context)
        assert [(r.error_code, r.error_message, r.matching_acls)
                for r in deleted.filter_results] == [
            (SECURITY_DISABLED, "No Authorizer is configured.", [])]
    assert fake.calls == [] and len(fake.acls) == 1


def admin_session(bindings=()) -> Session:
    return session_for(bindings, principal="User:admin", super_users=["User:admin"])


@pytest.mark.parametrize("version", versions(30, 1))    # v0 names no pattern type: LITERAL
def test_create_acls_refuses_invalid_bindings_per_item_and_writes_the_valid_ones(version):
    fake = fresh_fake()
    prefixed = {**ACL_READ, "resource_name": "ord", "resource_pattern_type": 4,
                "permission_type": 2}
    creations = [
        ACL_READ,
        {**ACL_READ, "resource_type": 4, "resource_name": "not-the-cluster"},
        {**ACL_READ, "resource_type": 1},                            # ANY
        {**ACL_READ, "resource_name": ""},
        {**ACL_READ, "operation": 0},                                # UNKNOWN
        {**ACL_READ, "resource_type": 99},                           # not a type at all
        prefixed,
    ]
    resp = ask(fake, _create_acls(version, *creations), admin_session())
    assert [r.error_code for r in resp.results] == [0, 42, 42, 42, 42, 42, 0]
    assert resp.results[1].error_message == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert resp.results[0].error_message is None
    assert fake.acls == [
        acl(Res.TOPIC, "orders", Op.READ),
        acl(Res.TOPIC, "ord", Op.READ, perm=Perm.DENY, pattern=Pat.PREFIXED)]
    assert [len(c["bindings"]) for c in fake.calls_of("create_acls")] == [2]


def test_create_acls_with_nothing_valid_writes_nothing():
    fake = fresh_fake()
    resp = ask(fake, _create_acls(3, {**ACL_READ, "resource_name": ""}), admin_session())
    assert [r.error_code for r in resp.results] == [42]
    assert fake.calls_of("create_acls") == [] and fake.acls == []


BINDINGS = [
    acl(Res.TOPIC, "orders", Op.READ),
    acl(Res.TOPIC, "orders", Op.WRITE, principal=BOB, host="10.1.1.1"),
    acl(Res.TOPIC, "ord", Op.DESCRIBE, pattern=Pat.PREFIXED),
    acl(Res.GROUP, "g1", Op.READ, perm=Perm.DENY),
]


def described(resp) -> dict:
    return {(r.resource_type, r.resource_name, r.pattern_type): sorted(
        (a.principal, a.host, a.operation, a.permission_type) for a in r.acls)
        for r in resp.resources}


@pytest.mark.parametrize("version", versions(29, 1))    # v0 filters LITERAL patterns only
def test_describe_acls_answers_the_authorizers_bindings_grouped_per_resource(version):
    fake = fresh_fake()
    session = admin_session(BINDINGS)
    resp = ask(fake, _describe_acls(version), session)
    assert resp.error_code == 0 and resp.error_message is None
    assert len(resp.resources) == 3
    assert described(resp) == {
        (2, "orders", 3): [(ALICE, "*", 3, 3), (BOB, "10.1.1.1", 4, 3)],
        (2, "ord", 4): [(ALICE, "*", 8, 3)],
        (3, "g1", 3): [(ALICE, "*", 3, 2)]}
    only_topics = ask(fake, _describe_acls(version, resource_type_filter=2,
                                           principal_filter=ALICE), session)
    assert described(only_topics) == {(2, "orders", 3): [(ALICE, "*", 3, 3)],
                                      (2, "ord", 4): [(ALICE, "*", 8, 3)]}
    # MATCH: every pattern that applies to the topic "orders"
    matching = ask(fake, _describe_acls(version, resource_type_filter=2,
                                        resource_name_filter="orders",
                                        pattern_type_filter=2), session)
    assert set(described(matching)) == {(2, "orders", 3), (2, "ord", 4)}
    assert fake.calls == []


@pytest.mark.parametrize("version", versions(31))
def test_delete_acls_answers_the_removed_bindings_per_filter(version):
    fake = fresh_fake()
    fake.acls.extend(BINDINGS)
    flt = dict(ACL_ANY)
    resp = ask(fake, _delete_acls(version, {**flt, "resource_type_filter": 3},
                                  {**flt, "resource_type_filter": 2, "principal_filter": BOB},
                                  {**flt, "resource_type_filter": 5}),
               admin_session(BINDINGS))
    got = [(r.error_code, sorted((m.resource_type, m.resource_name, m.principal,
                                  m.operation, m.permission_type, m.error_code)
                                 for m in r.matching_acls)) for r in resp.filter_results]
    assert got == [(0, [(3, "g1", ALICE, 3, 2, 0)]),
                   (0, [(2, "orders", BOB, 4, 3, 0)]),
                   (0, [])]
    assert fake.acls == [BINDINGS[0], BINDINGS[2]]
    assert [m.host for m in resp.filter_results[1].matching_acls] == ["10.1.1.1"]


@pytest.mark.parametrize("field_name", ["resource_type_filter", "pattern_type_filter",
                                        "operation", "permission_type"])
def test_an_unknown_enum_value_in_a_filter_is_an_invalid_request(field_name):
    fake = fresh_fake()
    fake.acls.extend(BINDINGS)
    session = admin_session(BINDINGS)
    resp = ask(fake, _describe_acls(3, **{field_name: 0}), session)
    assert (resp.error_code, resp.resources) == (INVALID_REQUEST, [])
    resp = ask(fake, _delete_acls(3, {**ACL_ANY, field_name: 0},
                                  {**ACL_ANY, "resource_type_filter": 3}), session)
    assert [(r.error_code, len(r.matching_acls)) for r in resp.filter_results] == [
        (INVALID_REQUEST, 0), (0, 1)]
    assert fake.calls_of("delete_acls")[0]["filters"][0].resource_type == Res.GROUP
    assert len(fake.acls) == 3


def test_acl_apis_need_cluster_describe_and_alter():
    fake = fresh_fake()
    describe_only = session_for([cluster_acl(Op.DESCRIBE)])
    assert ask(fake, _describe_acls(3), describe_only).error_code == 0
    assert ask(fake, _create_acls(3), describe_only).results[0].error_code == 31
    assert ask(fake, _delete_acls(3), describe_only).filter_results[0].error_code == 31
    alter = session_for([cluster_acl(Op.ALTER)])          # Alter implies Describe
    assert ask(fake, _describe_acls(3), alter).error_code == 0
    assert fake.calls == []
