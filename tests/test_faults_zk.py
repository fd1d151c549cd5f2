"""Fault plumbing on the REAL ZooKeeper (no Ray): a forced server-side session expiry through
``controller.zookeeper.store.expire_session``, a read whose connection drops (through
tests.tcp_relay), and the ensemble faults (leader kill, restart,
rejoin) through ``controller.zookeeper.server.ZooKeeperEnsemble`` and the FaultInjector's zk_* methods.

Synchronisation is poll-with-deadline (tests.zk_helpers.wait_until), never a sleep."""

from __future__ import annotations

import threading
import time

import pytest

from controller.layout import BrokerRegistration, TopicAssignment
from controller.zookeeper.store import ZkStore, ZkUnavailable, expire_session
from rayka.chaos.faults import FaultInjector
from controller.zookeeper.server import free_port
from tests.tcp_relay import TcpRelay
from tests.zk_helpers import SESSION_S, wait_until

pytestmark = pytest.mark.zk


class States:
    """Session states forwarded by a ZkStore listener (from kazoo's thread)."""

    def __init__(self):
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, state: str) -> None:
        with self._lock:
            self.seen.append(state)

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.seen)


def registered(store, broker_id) -> int:
    return store.register_broker(BrokerRegistration(broker_id, "127.0.0.1", 0,
                                                    actor_name=f"broker-{broker_id}"), wait_s=5)


def owner(client, store, broker_id):
    stat = client.exists(f"{store.root}/brokers/ids/{broker_id}")
    return None if stat is None else stat.ephemeralOwner


def test_session_credentials_and_forced_expiry(stores, zk_server, zk_client):
    store = stores()
    states = States()
    store.add_state_listener(states)
    registered(store, 1)
    session_id, password = store.session_credentials()
    assert session_id == store.session_id and isinstance(password, bytes) and password
    assert owner(zk_client, store, 1) == session_id

    expire_session(zk_server.connect_string, session_id, password)

    # the server ended the session: its ephemeral is gone at once (not after a timeout) ...
    wait_until(lambda: owner(zk_client, store, 1) is None, 10, "the ephemeral deleted")
    # ... and the owner saw LOST, then reconnected on a NEW session
    wait_until(lambda: "LOST" in states.snapshot(), 15, "LOST")
    wait_until(lambda: store.connected and store.session_id not in (None, session_id), 15,
               "a new session")
    seen = states.snapshot()
    assert "CONNECTED" in seen[seen.index("LOST"):]
    assert store.session_credentials()[0] != session_id
    # the new session works: the broker can register again, with a larger epoch (czxid)
    assert store.get_broker(1) is None
    epoch = registered(store, 1)
    assert owner(zk_client, store, 1) == store.session_id and epoch > 0


def test_expire_session_of_an_unreachable_server_raises_zk_unavailable():
    with pytest.raises(ZkUnavailable):
        expire_session(f"127.0.0.1:{free_port()}", 0x1234, b"\0" * 16, timeout_s=1.0)


def test_kill_ensemble_leader_keeps_the_session_and_the_killed_server_rejoins(
        zk_ensemble, cluster):
    ensemble = zk_ensemble
    injector = FaultInjector(None, ensemble=ensemble)   # zk_* faults need no rayka cluster
    store = ZkStore(ensemble.connect_string, cluster, session_timeout_s=SESSION_S).start()
    try:
        states = States()
        store.add_state_listener(states)
        registered(store, 7)
        session_id = store.session_id
        old_leader = ensemble.leader()

        what = injector.zk_kill_leader()
        assert what["kind"] == "zk_kill_leader" and what["server"] == old_leader
        assert what["target"] == f"zk-{old_leader}" and what["partition"] is None
        assert not ensemble.servers[old_leader].is_running()

        new_leader = ensemble.leader(timeout_s=30)        # the two survivors elect one
        assert new_leader != old_leader
        wait_until(lambda: store.connected, 30, "the client reconnected")
        assert store.session_id == session_id and "LOST" not in states.snapshot()
        assert store.get_broker(7) is not None            # the ephemeral survived
        assert store.client.exists(f"{store.root}/brokers/ids/7").ephemeralOwner == session_id
        store.create_topic("after-leader-kill", {0: [7]})  # and the quorum takes writes
        assert store.get_topic_assignment("after-leader-kill").partitions == {0: (7,)}

        back = injector.zk_restart_server(old_leader)      # killed: nothing to stop, start
        assert back["server"] == old_leader and ensemble.servers[old_leader].is_running()
        wait_until(lambda: ensemble.servers[old_leader].mode() == "follower", 30,
                   "the restarted server following")
        assert ensemble.leader() == new_leader

        # a graceful stop/start of a follower: it rejoins on the same ports and data dir
        follower = next(i for i in range(3) if i != new_leader)
        injector.zk_stop_server(follower)
        assert ensemble.modes()[follower] is None
        store.create_topic("while-follower-down", {0: [7]})
        injector.zk_start_server(follower)
        wait_until(lambda: ensemble.servers[follower].mode() == "follower", 30,
                   "the follower back")
        wait_until(lambda: sorted(m for m in ensemble.modes()) ==
                   ["follower", "follower", "leader"], 30, "a full ensemble")
        assert store.session_id == session_id and "LOST" not in states.snapshot()
        assert {"after-leader-kill", "while-follower-down"} <= store.get_topics()
    finally:
        store.close()
        for i, server in enumerate(ensemble.servers):    # leave the module's ensemble whole
            if not server.is_running():
                ensemble.start_server(i)


def test_ensemble_faults_need_an_ensemble():
    with pytest.raises(RuntimeError):
        FaultInjector(None).zk_kill_leader()


def relayed_store(relay, cluster, session_timeout_s=SESSION_S) -> ZkStore:
    return ZkStore(f"127.0.0.1:{relay.port}", cluster,
                   session_timeout_s=session_timeout_s).start()


def read_in_flight_when_cut(relay, store, read, marker: bytes):
    """Run `read` on a thread with the server's answers held back until the request
    (recognised by `marker`, bytes of its path) has gone out, then cut the connection:
    the read is in flight when its connection drops. Its outcome: ("ok", value) or
    ("error", exception)."""
    outcome = []

    def run():
        try:
            outcome.append(("ok", read()))
        except Exception as e:   # the outcome under test
            outcome.append(("error", e))
    relay.hold_answers()
    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    wait_until(lambda: marker in relay.sent(), 10, "the read sent")
    relay.cut()
    reader.join(timeout=3 * SESSION_S)
    assert outcome, "the read neither returned nor raised"
    return outcome[0]


def test_a_read_whose_connection_drops_is_sent_again_in_the_same_session(
        stores, zk_server, cluster):
    stores().create_topic("before-the-cut", {0: [1]})
    relay = TcpRelay("127.0.0.1", zk_server.port).start()
    store = relayed_store(relay, cluster)
    try:
        session_id = store.session_id
        kind, value = read_in_flight_when_cut(relay, store, store.get_topics,
                                              b"/brokers/topics")
        assert (kind, value) == ("ok", {"before-the-cut"})
        assert relay.accepted == 2 and store.session_id == session_id
    finally:
        store.close()
        relay.close()


def test_a_read_raises_zk_unavailable_when_no_reconnection_comes_within_the_session_timeout(
        zk_server, cluster):
    relay = TcpRelay("127.0.0.1", zk_server.port).start()
    store = relayed_store(relay, cluster, session_timeout_s=2.0)
    try:
        relay.refuse(True)
        t0 = time.monotonic()
        kind, error = read_in_flight_when_cut(relay, store, store.get_topics,
                                              b"/brokers/topics")
        assert kind == "error" and isinstance(error, ZkUnavailable), error
        assert "get_topics" in str(error) and "ConnectionLoss" in str(error)
        assert f"127.0.0.1:{relay.port}" in str(error)           # which ZooKeeper
        assert 2.0 <= time.monotonic() - t0 < 2.0 + SESSION_S
    finally:
        store.close()
        relay.close()


def test_a_fenced_write_whose_zookeeper_stays_away_raises_zk_unavailable(zk_server, cluster):
    """A controller's fenced write made while kazoo reconnects to a ZooKeeper that stays
    out of reach is ZkUnavailable naming that ZooKeeper after the session timeout (the
    controller then moves itself, controller/controller.py), not a wait for ever (kazoo
    queues such a request until a connection comes) nor an error raised while making the
    error. The session expires meanwhile, so the write never lands."""
    relay = TcpRelay("127.0.0.1", zk_server.port).start()
    store = relayed_store(relay, cluster, session_timeout_s=2.0)
    try:
        writer = store.fenced(store.elect_controller(1))
        relay.refuse(True)
        relay.cut()
        wait_until(lambda: not store.connected, 10, "kazoo sees the connection gone")
        t0 = time.monotonic()
        with pytest.raises(ZkUnavailable) as got:
            writer.set_topic_assignment(TopicAssignment("gone", {0: (1,)}))
        assert 2.0 <= time.monotonic() - t0 < 2.0 + SESSION_S
        assert "set_topic_assignment" in str(got.value)
        assert "KazooTimeoutError" in str(got.value)
        assert f"127.0.0.1:{relay.port}" in str(got.value)       # which ZooKeeper
        with ZkStore(zk_server.connect_string, cluster).start() as direct:
            wait_until(lambda: direct.get_controller() is None, 10,
                       "the cut-off session expired (its /controller gone)")
            relay.refuse(False)
            wait_until(lambda: store.connected, 10, "kazoo reconnects in a new session")
            assert direct.get_topics() == set()
    finally:
        store.close()
        relay.close()


def test_a_start_whose_connection_drops_while_it_creates_the_chroot_completes(zk_server):
    """A ZooKeeper connection dropped (a busy machine's late pings) while a store starts
    does not fail the start: its ensure_path calls are sent again in the same session."""
    from kazoo.client import KazooClient
    relay = TcpRelay("127.0.0.1", zk_server.port).start()
    client = KazooClient(hosts=f"127.0.0.1:{relay.port}", timeout=SESSION_S,
                         connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
    client.start(timeout=10)
    cluster = f"start-cut-{free_port()}"
    store = ZkStore(cluster=cluster, client=client)
    session_id = client.client_id[0]
    outcome = []

    def start():
        try:
            outcome.append(("ok", store.start()))
        except Exception as e:   # the outcome under test
            outcome.append(("error", e))
    try:
        relay.hold_answers()
        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        wait_until(lambda: cluster.encode() in relay.sent(), 10, "the chroot's request sent")
        relay.cut()
        starter.join(timeout=3 * SESSION_S)
        assert outcome and outcome[0][0] == "ok", outcome
        assert relay.accepted == 2 and client.client_id[0] == session_id
        assert client.exists(f"{store.root}/brokers/ids") is not None
    finally:
        store.close()
        client.stop()
        client.close()
        relay.close()


def test_every_read_of_the_store_is_sent_again_after_a_connection_loss():
    reads = {name for name in dir(ZkStore) if name.startswith(("get_", "read_"))
             and not name.startswith("get_or_create_")}
    assert {"get_topics", "get_brokers", "get_controller", "read_tree"} <= reads
    assert {r for r in reads if not getattr(getattr(ZkStore, r), "resends_reads", False)} == set()
    assert not getattr(ZkStore.create_topic, "resends_reads", False)   # a write's outcome is unknown
