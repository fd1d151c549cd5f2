"""Security znodes against the real ZooKeeper 3.8 server: a secured session's ACLs (digest
identity may write, the world may only read, SCRAM credentials unreadable), SCRAM users and
Kafka's ACL znodes written with their change notifications (actors/security.py over
controller/zookeeper/store.py), conditional writes, and a broker-side reload of
users and ACLs driven by the notifications (BrokerSecurity, no Ray)."""

from __future__ import annotations

import json
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from actors import security_store as security
from actors.security import BrokerSecurity, SecurityConfig
from controller.layout import CONFIG_CHANGES
from controller.zookeeper.store import BadVersion, ZkStoreError
from protocol.security import acl as a
from protocol.security import acl_znodes as znodes
from protocol.security.credentials import decode_user_config, verify_password
from tests.zk_helpers import wait_until

pytestmark = pytest.mark.zk
AUTH = "rayka:s3cret"


def read_binding(user, name, op=a.AclOperation.READ, pattern=a.PatternType.LITERAL,
                 permission=a.AclPermissionType.ALLOW):
    return a.AclBinding(a.ResourcePattern(a.ResourceType.TOPIC, name, pattern),
                        a.AccessControlEntry(f"User:{user}", "*", op, permission))


@pytest.fixture
def outsider(zk_server):
    zk = KazooClient(hosts=zk_server.connect_string)
    zk.start(10)
    yield zk
    zk.stop()
    zk.close()


def test_a_secured_store_locks_its_znodes_against_other_identities(stores, outsider):
    store = stores(auth=AUTH)
    store.create_topic("t", {0: [1]})
    security.add_user(store, "alice", "pw")
    security.create_acls(store, [read_binding("alice", "t")])
    root = store.root
    assert outsider.get(f"{root}/brokers/topics/t")[0]          # the world may read ...
    for write in (lambda: outsider.set(f"{root}/brokers/topics/t", b"{}"),
                  lambda: outsider.create(f"{root}/brokers/topics/u", b"{}"),
                  lambda: outsider.create(f"{root}/controller", b"{}"),
                  lambda: outsider.delete(f"{root}/brokers/topics/t"),
                  lambda: outsider.create(f"{root}/config/users/mallory", b"{}"),
                  lambda: outsider.set(f"{root}/kafka-acl/Topic/t", b"{}"),
                  lambda: outsider.get(f"{root}/config/users/alice")):   # ... not credentials
        with pytest.raises(NoAuthError):
            write()
    other = stores(auth="someone:else")      # another identity sharing the ensemble
    with pytest.raises(ZkStoreError, match="NoAuth"):
        other.create_topic("u", {0: [1]})
    assert store.get_topics() == {"t"}


def test_other_clusters_can_still_share_the_ensemble(stores):
    stores(auth=AUTH)
    neighbour = stores(cluster="neighbour-" + AUTH.split(":")[0], auth="other:pw")
    neighbour.create_topic("n", {0: [1]})                  # /rayka stays open to all
    assert neighbour.get_topics() == {"n"}


def test_users_are_kafkas_config_users_znodes_with_notifications(stores, zk_client):
    store = stores()
    security.add_user(store, "alice", "pw1", mechanisms=("SCRAM-SHA-256",))
    security.add_user(store, "alice", "pw2", mechanisms=("SCRAM-SHA-512",))   # keeps 256
    data, _ = zk_client.get(f"{store.root}/config/users/alice")
    creds = decode_user_config(data)
    assert json.loads(data)["version"] == 1
    assert verify_password(creds["SCRAM-SHA-256"], "SCRAM-SHA-256", "pw1")
    assert verify_password(creds["SCRAM-SHA-512"], "SCRAM-SHA-512", "pw2")
    notices = zk_client.get_children(f"{store.root}{CONFIG_CHANGES}")
    assert len(notices) == 2 and all(n.startswith("config_change_") for n in notices)
    assert json.loads(zk_client.get(f"{store.root}{CONFIG_CHANGES}/{sorted(notices)[0]}")[0]) \
        == {"version": 2, "entity_path": "users/alice"}
    assert security.list_users(store) == {"alice": ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    assert security.delete_user(store, "alice") and not security.delete_user(store, "alice")
    assert security.list_users(store) == {}


def test_acl_writes_are_conditional_and_merge_with_concurrent_writers(stores):
    store = stores()
    path = znodes.acl_path(a.ResourcePattern(a.ResourceType.TOPIC, "t", a.PatternType.LITERAL))
    security.create_acls(store, [read_binding("alice", "t")])
    _data, version = store.read_znode(path)
    with pytest.raises(BadVersion):                        # a stale version never lands
        store.write_with_notice(path, znodes.encode_acls([]), version - 1,
                                znodes.ACL_CHANGES_LITERAL, znodes.CHANGE_PREFIX, b"x")
    users = [f"u{i}" for i in range(8)]
    threads = [threading.Thread(target=security.create_acls,
                                args=(stores(), [read_binding(u, "t")])) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    got = {b.entry.principal for b in security.list_acls(store)}
    assert got == {"User:alice"} | {f"User:{u}" for u in users}   # no write lost
    removed = security.delete_acls(store, [a.AclBindingFilter(a.ResourceType.TOPIC, "t",
                                                              a.PatternType.LITERAL,
                                                              "User:alice")])
    assert [b.entry.principal for b in removed[0][2]] == ["User:alice"]
    security.delete_acls(store, [a.AclBindingFilter()])
    assert security.list_acls(store) == [] and store.read_znode(path) is None


def test_a_broker_reloads_users_and_acls_from_notifications(stores):
    store, admin = stores(), stores()
    sec = BrokerSecurity(store, SecurityConfig(authorizer=True, super_users=("User:root",)))
    sec.start()
    try:
        auth = sec.authorizer
        assert not auth.authorize("User:alice", "h", a.AclOperation.READ, a.ResourceType.TOPIC, "t")
        assert auth.authorize("User:root", "h", a.AclOperation.READ, a.ResourceType.TOPIC, "t")
        security.create_acls(admin, [read_binding("alice", "t-", pattern=a.PatternType.PREFIXED)])
        wait_until(lambda: auth.authorize("User:alice", "h", a.AclOperation.READ,
                                          a.ResourceType.TOPIC, "t-1"), 10, "the ACL loaded")
        assert auth.authorize("User:alice", "h", a.AclOperation.DESCRIBE, a.ResourceType.TOPIC,
                              "t-2")
        assert sec.credential("SCRAM-SHA-256", "bob") is None
        security.add_user(admin, "bob", "pw")
        wait_until(lambda: sec.credential("SCRAM-SHA-256", "bob") is not None, 10,
                   "bob's credentials loaded")
        assert verify_password(sec.credential("SCRAM-SHA-512", "bob"), "SCRAM-SHA-512", "pw")
    finally:
        sec.stop()


def test_require_auth_drops_sessions_that_did_not_authenticate(tmp_path):
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError
    from controller.zookeeper.store import ZkStore
    from controller.zookeeper.server import free_port
    from rayka.ops.zookeeper_service import build_server
    server, _ = build_server(data_dir=tmp_path / "zk", client_port=free_port(),
                             tick_time_ms=200, require_auth=True)
    server.start()
    try:
        store = ZkStore(server.connect_string, "locked", auth=AUTH).start()
        store.create_topic("t", {0: [1]})
        assert store.get_topics() == {"t"}
        store.close()
        anonymous = KazooClient(hosts=server.connect_string,
                                connection_retry={"max_tries": 1}, timeout=2)
        with pytest.raises((KazooException, KazooTimeoutError)):
            anonymous.start(3)
            anonymous.get_children("/")
        anonymous.stop()
        anonymous.close()
    finally:
        server.stop()
