"""Security on a real rayka cluster (real Ray, the real ZooKeeper, unmodified librdkafka):
a SASL_SSL listener with SCRAM users, Kafka's ACLs checked on every request, and the
cluster's znodes locked by ZooKeeper digest ACLs.

One broker (RF 1) with two listeners, PLAINTEXT and SASL_SSL, an AclAuthorizer, super user
User:admin, and `zookeeper_auth`: every rayka ZooKeeper session authenticates and the
cluster's znodes are writable by that identity only."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

import rayka
from protocol.security import acl as a
from rayka.client.admin import wait_for
from rayka.console_process import start_console
from tests.certs import make_certs
from tests.console_browser import Browser
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)
from tests.wire import client_hello, closed, read_frame

pytestmark = pytest.mark.ray
TIMEOUT_S = 60
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret",
             "carol": "carol-secret"}
ZK_AUTH = "rayka:zk-secret"


@pytest.fixture(scope="module")
def secured(ray_session, tmp_path_factory):
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin", "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
              "zookeeper_auth": ZK_AUTH, "offsets.topic.replication.factor": 1,
              **certs.broker_config()}
    c = rayka.start_local(name=f"s{uuid.uuid4().hex[:8]}", brokers=1, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")), **config)
    admin = c.admin()
    for user, password in PASSWORDS.items():
        admin.add_user(user, password)
    c.admin().create_topic("sec-ok", 1, 1)
    c.admin().create_topic("sec-deny", 1, 1)
    assert admin.create_acls([
        binding("alice", a.ResourceType.TOPIC, "sec-ok", a.AclOperation.WRITE),
        binding("alice", a.ResourceType.TOPIC, "sec-ok", a.AclOperation.READ),
        binding("alice", a.ResourceType.GROUP, "alice-", a.AclOperation.READ,
                pattern=a.PatternType.PREFIXED),
        binding("bob", a.ResourceType.TOPIC, "sec-ok", a.AclOperation.READ),
        # carol may write every topic starting "sec-" ... but is denied one of them
        binding("carol", a.ResourceType.TOPIC, "sec-", a.AclOperation.WRITE,
                pattern=a.PatternType.PREFIXED),
        binding("carol", a.ResourceType.TOPIC, "sec-deny", a.AclOperation.WRITE,
                permission=a.AclPermissionType.DENY),
    ]) == [(0, None)] * 6
    yield c, certs
    c.shutdown()


def binding(user, rtype, name, op, pattern=a.PatternType.LITERAL,
            permission=a.AclPermissionType.ALLOW):
    return a.AclBinding(a.ResourcePattern(rtype, name, pattern),
                        a.AccessControlEntry(f"User:{user}", "*", op, permission))


def client_config(cluster, certs, user, password=None, mechanism="SCRAM-SHA-256") -> dict:
    return {"bootstrap.servers": cluster.bootstrap_servers("SASL_SSL"),
            "security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password or PASSWORDS[user],
            "ssl.ca.location": str(certs.ca), "socket.timeout.ms": 10000}


def end_offset(cluster, topic) -> int:
    return cluster.consumer().end_offsets([(topic, 0)])[(topic, 0)]


def produce(config, topic, n) -> list:
    """Delivery reports of n records: [(error or None, offset)]."""
    reports = []
    p = Producer({**config, "acks": "all", "enable.idempotence": False,
                  "message.timeout.ms": 20000})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(),
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    p.flush(30)
    return reports


def test_scram_sasl_ssl_produces_and_consumes_with_librdkafka(secured):
    cluster, certs = secured
    before = end_offset(cluster, "sec-ok")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        reports = produce(client_config(cluster, certs, "alice", mechanism=mechanism),
                          "sec-ok", 50)
        assert len(reports) == 50 and all(err is None for err, _ in reports), reports[:3]
    assert end_offset(cluster, "sec-ok") == before + 100
    c = Consumer({**client_config(cluster, certs, "alice"), "group.id": "alice-readers",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["sec-ok"])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < before + 100:         # consume(n) waits for n records or its timeout
        assert time.monotonic() < deadline, f"only {len(got)} records consumed"
        for m in c.consume(before + 100 - len(got), timeout=1):
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got[before:before + 50] == [f"v{i}".encode() for i in range(50)]


def test_a_wrong_password_is_sasl_authentication_failed(secured):
    cluster, certs = secured
    errors = []
    p = Producer({**client_config(cluster, certs, "alice", password="not-it"),
                  "error_cb": errors.append})
    wait_for(lambda: p.poll(0.2) is not None and errors, TIMEOUT_S, "an authentication error")
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()
    # on the wire: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED (58), then closes
    host, port = cluster.bootstrap_servers("SASL_SSL").split(",")[0].rsplit(":", 1)
    with certs.client_context().wrap_socket(socket.create_connection((host, int(port)), 10),
                                            server_hostname=host) as s:
        code, mechanisms = sasl_handshake(s, "PLAIN")
        assert code == 33 and "SCRAM-SHA-256" in mechanisms     # UNSUPPORTED_SASL_MECHANISM
        assert closed(s)


def test_a_principal_without_write_gets_topic_authorization_failed(secured):
    cluster, certs = secured
    before = end_offset(cluster, "sec-ok")
    reports = produce(client_config(cluster, certs, "bob"), "sec-ok", 5)
    assert [err.code() for err, _ in reports] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 5
    assert end_offset(cluster, "sec-ok") == before             # nothing appended


def test_deny_beats_allow(secured):
    cluster, certs = secured
    ok_before, deny_before = end_offset(cluster, "sec-ok"), end_offset(cluster, "sec-deny")
    config = client_config(cluster, certs, "carol")
    assert all(err is None for err, _ in produce(config, "sec-ok", 3))
    denied = produce(config, "sec-deny", 3)
    assert [err.code() for err, _ in denied] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    assert end_offset(cluster, "sec-ok") == ok_before + 3
    assert end_offset(cluster, "sec-deny") == deny_before


def test_metadata_lists_only_what_the_principal_may_describe(secured):
    cluster, certs = secured
    c = Consumer({**client_config(cluster, certs, "bob"), "group.id": "x"})
    topics = set(c.list_topics(timeout=TIMEOUT_S).topics)
    c.close()
    assert topics == {"sec-ok"}
    admin_view = Consumer({**client_config(cluster, certs, "admin"), "group.id": "x"})
    assert {"sec-ok", "sec-deny"} <= set(admin_view.list_topics(timeout=TIMEOUT_S).topics)
    admin_view.close()


def test_acl_apis_over_the_wire_need_cluster_alter(secured):
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, AdminClient, ResourcePatternType,
                                       ResourceType)
    cluster, certs = secured
    new = AclBinding(ResourceType.TOPIC, "wire-acl", ResourcePatternType.LITERAL, "User:dave",
                     "*", AclOperation.READ, AclPermissionType.ALLOW)
    as_bob = AdminClient(client_config(cluster, certs, "bob"))
    with pytest.raises(KafkaException) as err:
        as_bob.create_acls([new])[new].result(TIMEOUT_S)
    assert err.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    as_admin = AdminClient(client_config(cluster, certs, "admin"))
    assert as_admin.create_acls([new])[new].result(TIMEOUT_S) is None
    flt = AclBindingFilter(ResourceType.TOPIC, "wire-acl", ResourcePatternType.LITERAL,
                           None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert [b.entry.principal for b in cluster.admin().list_acls(_native(flt))] == ["User:dave"]

    def described():
        return as_admin.describe_acls(flt).result(TIMEOUT_S)
    assert wait_for(lambda: [b.principal for b in described()] == ["User:dave"], TIMEOUT_S,
                    "the broker's authorizer sees the new ACL")
    deleted = as_admin.delete_acls([flt])[flt].result(TIMEOUT_S)
    assert [b.principal for b in deleted] == ["User:dave"]
    assert cluster.admin().list_acls(_native(flt)) == []


def _native(flt):
    return topic_filter(flt.name)


def topic_filter(name: str):
    return a.AclBindingFilter(a.ResourceType.TOPIC, name, a.PatternType.LITERAL, None, None,
                              a.AclOperation.ANY, a.AclPermissionType.ANY)


def test_a_plaintext_client_cannot_use_the_sasl_ssl_listener(secured):
    cluster, certs = secured
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers("SASL_SSL"), "group.id": "p",
                  "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        c.list_topics(timeout=5)
    c.close()
    # and an unauthenticated PLAINTEXT principal (User:ANONYMOUS) is authorised for nothing
    anon = Producer({"bootstrap.servers": cluster.bootstrap_servers("PLAINTEXT")})
    md = anon.list_topics(timeout=TIMEOUT_S)
    assert "sec-ok" not in md.topics
    # the broker still serves authenticated clients
    assert all(err is None for err, _ in produce(client_config(cluster, certs, "alice"),
                                                 "sec-ok", 1))


def test_garbage_and_truncated_handshakes_close_only_their_connection(secured):
    cluster, certs = secured
    host, port = cluster.bootstrap_servers("SASL_SSL").split(",")[0].rsplit(":", 1)
    hello = client_hello(certs.client_context(), host)
    api_versions = _frame(18, 0, b"")                  # plaintext Kafka on a TLS port
    for junk in (b"\x00" * 64, bytes(range(256)), hello[:20], hello[: len(hello) // 2],
                 hello + b"\xff" * 100, api_versions, b"\x16\x03\x01\xff\xff" + b"x" * 40):
        with socket.create_connection((host, int(port)), 10) as s:
            s.sendall(junk)
            if junk in (hello[:20], hello[: len(hello) // 2]):
                s.shutdown(socket.SHUT_WR)          # truncated: the client gives up writing
            assert closed(s, 15), junk[:20]
    # after TLS, a garbage SASL token ends that connection too
    with certs.client_context().wrap_socket(socket.create_connection((host, int(port)), 10),
                                            server_hostname=host) as s:
        assert sasl_handshake(s, "SCRAM-SHA-256")[0] == 0
        token = b"\xde\xad\xbe\xef" * 10            # compact bytes: varint length + 1
        s.sendall(_frame(36, 2, bytes([len(token) + 1]) + token + b"\x00"))
        frame = read_frame(s)
        assert struct.unpack_from(">h", frame, 5)[0] == 58       # SASL_AUTHENTICATION_FAILED
        assert closed(s)
    assert all(err is None for err, _ in produce(client_config(cluster, certs, "alice"),
                                                 "sec-ok", 1))


def test_zookeeper_refuses_changes_without_raykas_credentials(secured):
    cluster, _certs = secured
    zk = KazooClient(hosts=cluster.zookeeper)
    zk.start(10)
    try:
        root = cluster.store.root
        assert zk.exists(f"{root}/controller") and zk.get(f"{root}/brokers/ids")
        for action in (lambda: zk.set(f"{root}/controller", b"{}"),
                       lambda: zk.delete(f"{root}/controller"),
                       lambda: zk.create(f"{root}/brokers/ids/99", b"{}"),
                       lambda: zk.create(f"{root}/brokers/topics/evil", b"{}"),
                       lambda: zk.create(f"{root}/config/topics/evil", b"{}"),
                       lambda: zk.set(f"{root}/config/topics/sec-ok", b"{}"),
                       lambda: zk.create(f"{root}/kafka-acl/Topic/sec-ok2", b"{}"),
                       lambda: zk.get(f"{root}/config/users/alice")):   # not even readable
            with pytest.raises(NoAuthError):
                action()
    finally:
        zk.stop()
        zk.close()
    assert cluster.admin().list_topics()          # rayka itself still writes and reads


def test_users_and_acls_from_the_cli(secured, tmp_path, capsys):
    from rayka.cli import build_parser
    from rayka.ops import security_cli
    cluster, _certs = secured
    secret = tmp_path / "pw"
    secret.write_text("erin-secret\n")
    parse = build_parser().parse_args
    assert security_cli.run_users(parse(["users", "add", "erin", "--password-file",
                                         str(secret)]), cluster) == 0
    assert security_cli.run_users(parse(["users", "list"]), cluster) == 0
    assert "erin\tSCRAM-SHA-256,SCRAM-SHA-512" in capsys.readouterr().out
    assert security_cli.run_acls(parse(["acls", "add", "--allow-principal", "User:erin",
                                        "--operation", "Read", "--operation", "Describe",
                                        "--topic", "cli-t"]), cluster) == 0
    security_cli.run_acls(parse(["acls", "list", "--topic", "cli-t"]), cluster)
    out = capsys.readouterr().out
    assert "Allow User:erin READ from * on TOPIC:LITERAL:cli-t" in out and "DESCRIBE" in out
    security_cli.run_acls(parse(["acls", "remove", "--topic", "cli-t"]), cluster)
    assert cluster.admin().list_acls(topic_filter("cli-t")) == []
    assert security_cli.run_users(parse(["users", "delete", "erin"]), cluster) == 0
    assert "erin" not in cluster.admin().list_users()


# -- raw Kafka frames over TLS ------------------------------------------------------------------
def _frame(api_key: int, version: int, body: bytes, correlation_id: int = 5) -> bytes:
    client = b"rayka-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    if version >= 2 and api_key == 36:
        header += b"\x00"                          # flexible: empty tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def sasl_handshake(s, mechanism: str) -> tuple[int, list[str]]:
    raw = mechanism.encode()
    s.sendall(_frame(17, 1, struct.pack(">h", len(raw)) + raw))
    frame = read_frame(s)
    code, count = struct.unpack_from(">hi", frame, 4)
    out, off = [], 10
    for _ in range(count):
        n = struct.unpack_from(">h", frame, off)[0]
        out.append(frame[off + 2: off + 2 + n].decode())
        off += 2 + n
    return code, out


def test_kcat_and_kafka_python_over_sasl_ssl(secured):
    import subprocess
    from kafka import KafkaConsumer, TopicPartition
    cluster, certs = secured
    bootstrap = cluster.bootstrap_servers("SASL_SSL")
    before = end_offset(cluster, "sec-ok")
    sasl = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
            "-X", "sasl.username=alice", "-X", f"sasl.password={PASSWORDS['alice']}",
            "-X", f"ssl.ca.location={certs.ca}"]
    lines = "".join(f"kcat-{i}\n" for i in range(20))
    done = subprocess.run(["kcat", "-b", bootstrap, *sasl, "-P", "-t", "sec-ok", "-p", "0"],
                          input=lines.encode(), capture_output=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr.decode()[-500:]
    assert end_offset(cluster, "sec-ok") == before + 20
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), security_protocol="SASL_SSL",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                             sasl_plain_password=PASSWORDS["alice"], ssl_cafile=str(certs.ca),
                             enable_auto_commit=False, consumer_timeout_ms=20000)
    tp = TopicPartition("sec-ok", 0)
    consumer.assign([tp])
    consumer.seek(tp, before)
    got = [m.value for _, m in zip(range(20), consumer)]
    consumer.close()
    assert got == [f"kcat-{i}".encode() for i in range(20)]


def test_the_console_writes_as_its_principal_and_shows_what_the_acls_refuse(secured, tmp_path):
    """The console's actions go over SASL_SSL as the principal of its --command-config:
    bob (READ on sec-ok only) is refused a topic creation and a config change with Kafka's
    error on the page; the super user's console creates the topic."""
    import ray
    c, certs = secured

    def console_as(user):
        props = tmp_path / f"{user}.properties"
        props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                         f"sasl.username={user}\nsasl.password={PASSWORDS[user]}\n"
                         f"ssl.ca.location={certs.ca}\n")
        return start_console(c.name, ray.get_runtime_context().gcs_address, extra_args=(
            "--allow-writes", "--listener", "SASL_SSL", "--command-config", str(props),
            "--interval-s", "1"))

    def create_topic(browser, name):
        browser.open("/topics")
        browser.fill("#create-name", name)
        browser.fill("#create-partitions", "1")
        browser.fill("#create-rf", "1")
        browser.click("#create-submit")

    bob = console_as("bob")
    browser = Browser(bob.url)
    try:
        # bob's console shows what bob may describe (READ on sec-ok implies DESCRIBE)
        browser.open("/topics")
        browser.wait(lambda b: "sec-ok" in b.text("#topics") and b.text("#principal") == "User:bob",
                     TIMEOUT_S, "sec-ok listed for User:bob")
        assert "sec-deny" not in browser.text("#topics")
        browser.open("/topics/sec-deny")
        browser.wait(lambda b: "TOPIC_AUTHORIZATION_FAILED (29)" in b.text("#error"),
                     TIMEOUT_S, "sec-deny refused to bob")
        create_topic(browser, "bob-made")
        browser.wait(lambda b: "TOPIC_AUTHORIZATION_FAILED (29)" in b.text("#outcome"),
                     TIMEOUT_S, "bob refused a topic creation")
        browser.open("/topics/sec-ok")
        browser.fill("#alter-input", "retention.ms=1000")
        browser.click("#alter-submit")
        browser.wait(lambda b: "TOPIC_AUTHORIZATION_FAILED (29)" in b.text("#outcome"),
                     TIMEOUT_S, "bob refused a config change")
        assert "bob-made" not in c.admin().list_topics()
        assert "retention.ms" not in c.admin().topic_config("sec-ok")
    finally:
        browser.close()
        bob.stop()
    admin = console_as("admin")
    browser = Browser(admin.url)
    try:
        create_topic(browser, "admin-made")
        browser.wait(lambda b: "created topic admin-made" in b.text("#outcome"), TIMEOUT_S,
                     "the super user's creation")
        assert "admin-made" in c.admin().list_topics()
    finally:
        browser.close()
        admin.stop()
        c.admin().delete_topic("admin-made")
