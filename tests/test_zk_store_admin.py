"""controller/zookeeper/store.py against the real ZooKeeper 3.8 server: brokers, topics, scale,
watches, consumer offsets (election and fencing are in test_zk_store.py).

Each test works in its own chroot /rayka/<unique cluster>. Synchronisation is by
threading.Event / queue with timeouts or poll-with-deadline, never by sleeping.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import controller.zookeeper.store as zs
from controller.layout import (BrokerRegistration, LeaderIsrAndControllerEpoch,
                               TopicAssignment)
from controller.zookeeper.store import (AdminOperationInProgress, BadVersion, BrokerIdInUse, NoNode,
                                        ZkStore, ZkUnavailable)
from controller.zookeeper.server import free_port
from tests.zk_helpers import Inbox, raw, exists, expire_session, lisr
from replicas.errors import InvalidConfig, InvalidTopic, TopicAlreadyExists, UnknownTopicOrPartition

pytestmark = pytest.mark.zk

ROOT = Path(__file__).resolve().parent.parent


# -- broker registration ---------------------------------------------------------------------------
def test_broker_registration_waits_out_an_expired_session(stores, zk_server):
    old, new, watcher = stores(), stores(), stores()
    ids = Inbox()
    watcher.watch_broker_ids(ids)
    ids.expect(set())
    old_epoch = old.register_broker(BrokerRegistration(1, "h", 1, node_id="old"), wait_s=5)
    ids.expect({1})
    assert old.register_broker(BrokerRegistration(1, "h", 1), wait_s=1) == old_epoch  # ours
    with pytest.raises(BrokerIdInUse):
        new.register_broker(BrokerRegistration(1, "h", 2, node_id="new"), wait_s=0.3)

    result, done = {}, threading.Event()

    def register():
        result["epoch"] = new.register_broker(BrokerRegistration(1, "h", 2, node_id="new"),
                                              wait_s=20)
        done.set()

    t = threading.Thread(target=register)
    t.start()
    assert not done.is_set()  # cannot finish while the old session's node exists
    assert watcher.get_broker(1).node_id == "old"
    expire_session(zk_server, old)
    assert done.wait(20)
    t.join(5)
    assert result["epoch"] > old_epoch
    brokers = watcher.get_brokers()
    assert brokers[1].node_id == "new" and brokers[1].epoch == result["epoch"]
    assert brokers[1].port == 2


_CRASHER = r"""
import sys, threading
sys.path.insert(0, sys.argv[1])
from controller.zookeeper.store import ZkStore
from controller.layout import BrokerRegistration
s = ZkStore(sys.argv[2], sys.argv[3], session_timeout_s=1.0).start()
epoch = s.register_broker(BrokerRegistration(5, "crashed", 1), wait_s=5)
print(epoch, s.session_id, flush=True)
threading.Event().wait()
"""


def test_broker_registration_after_its_process_was_killed(stores, zk_server, cluster):
    """A SIGKILLed broker process leaves its node until the server expires the session."""
    proc = subprocess.Popen([sys.executable, "-c", _CRASHER, str(ROOT), zk_server.connect_string,
                             cluster], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        old_epoch, old_session = int(line[0]), int(line[1])
        os.kill(proc.pid, signal.SIGKILL)  # by our child's pid
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    s = stores()
    assert s.get_broker(5).host == "crashed"
    assert s.client.exists(s.root + "/brokers/ids/5").ephemeralOwner == old_session
    epoch = s.register_broker(BrokerRegistration(5, "restarted", 2), wait_s=20)
    assert epoch > old_epoch
    assert s.get_brokers()[5] == BrokerRegistration(5, "restarted", 2, timestamp_ms=
                                                    s.get_broker(5).timestamp_ms, epoch=epoch)


# -- topics (admin) ----------------------------------------------------------------------------------
def test_create_topic_twice_and_failed_creates_leave_nothing(stores, zk_client):
    s = stores()
    s.create_topic("t", {0: [1, 2]}, {"min.insync.replicas": "1"})
    before = {p: zk_client.get(s.root + p) for p in ("/brokers/topics/t", "/config/topics/t")}
    with pytest.raises(TopicAlreadyExists):
        s.create_topic("t", {0: [3], 1: [3]}, {"min.insync.replicas": "2"})
    assert {p: zk_client.get(s.root + p) for p in before} == before

    # /brokers/topics/x exists without a config: the failed create must not leave a config
    zk_client.create(s.root + "/brokers/topics/x", b'{"version":3,"partitions":{}}')
    with pytest.raises(TopicAlreadyExists):
        s.create_topic("x", {0: [1]}, {"retention.ms": "1"})
    assert not exists(zk_client, s, "/config/topics/x")

    # a topic being deleted cannot be re-created yet
    s.request_topic_deletion("t")
    with pytest.raises(TopicAlreadyExists):
        s.create_topic("t", {0: [1]})
    with pytest.raises(InvalidTopic):
        s.create_topic("bad/name", {0: [1]})
    assert s.get_topics() == {"t", "x"}


def test_topic_deletion_requests_and_admin_requests(stores, zk_client):
    s = stores()
    with pytest.raises(UnknownTopicOrPartition):
        s.request_topic_deletion("nope")
    assert not exists(zk_client, s, "/admin/delete_topics/nope")
    s.create_topic("t", {0: [1]})
    assert s.request_topic_deletion("t") is True
    assert s.request_topic_deletion("t") is False
    assert s.get_topic_deletions() == {"t"}
    with pytest.raises(UnknownTopicOrPartition):
        s.set_topic_config("nope", {"min.insync.replicas": 1})
    assert not exists(zk_client, s, "/config/topics/nope")
    s.set_topic_config("t", {"min.insync.replicas": 2, "unclean.leader.election.enable": True})
    assert s.get_topic_config("t") == {"min.insync.replicas": "2",
                                       "unclean.leader.election.enable": "true"}
    for bad in ({"x": 1}, {"min.insync.replicas": 0}, {"segment.bytes": "lots"},
                {"unclean.leader.election.enable": "maybe"}, {"cleanup.policy": "shred"}):
        with pytest.raises(InvalidConfig):
            s.set_topic_config("t", bad)
        with pytest.raises(InvalidConfig):
            s.create_topic("fresh", {0: [1]}, bad)
    assert s.get_topic_config("t")["min.insync.replicas"] == "2"
    assert "fresh" not in s.get_topics()

    s.request_reassignment({("t", 0): [2, 1]})
    with pytest.raises(AdminOperationInProgress):
        s.request_reassignment({("t", 0): [3]})
    assert s.get_reassignment() == {("t", 0): (2, 1)}
    s.request_preferred_election([("t", 0)])
    with pytest.raises(AdminOperationInProgress):
        s.request_preferred_election([("t", 0)])
    assert s.get_preferred_election() == {("t", 0)}
    w = s.fenced(s.elect_controller(1))
    assert w.delete_reassign_partitions() is True and w.delete_reassign_partitions() is False
    assert w.delete_preferred_election() is True and s.get_preferred_election() == set()
    names = [s.create_isr_change_notification([("t", 0)]),
             s.create_isr_change_notification([("t", 1), ("u", 0)])]
    assert s.get_isr_change_notifications() == sorted(names)
    assert s.read_isr_change_notifications(names) == {("t", 0), ("t", 1), ("u", 0)}
    assert w.delete_isr_change_notifications(names + ["isr_change_9999999999"]) == 2
    assert s.get_isr_change_notifications() == []


def test_log_dir_event_notices_round_trip(stores, zk_client):
    broker, s = stores(), stores()
    seen = Inbox()
    s.watch_log_dir_event_notifications(seen)
    seen.expect([])
    name = broker.propagate_log_dir_event(3)
    assert name.startswith("log_dir_event_") and len(name[len("log_dir_event_"):]) == 10
    assert raw(zk_client, s, f"/log_dir_event_notification/{name}") == \
        b'{"version":1,"broker":3,"event":1}'
    seen.expect([name])
    zk_client.create(s.root + "/log_dir_event_notification/log_dir_event_9000000000",
                     b'{"version":2,"broker":4,"event":1}')   # skipped: not version 1
    names = s.get_log_dir_event_notifications()
    assert names == [name, "log_dir_event_9000000000"]
    assert s.read_log_dir_event_notifications(names + ["log_dir_event_9999999999"]) == [3]
    zombie = broker.fenced(broker.elect_controller(1))
    assert broker.resign() is True
    w = s.fenced(s.elect_controller(2))
    with pytest.raises(zs.ControllerMovedError):
        zombie.delete_log_dir_event_notifications(names)
    assert w.delete_log_dir_event_notifications(names + ["log_dir_event_9999999999"]) == 2
    seen.expect([])
    assert s.get_log_dir_event_notifications() == []


def test_fenced_topic_deletion_removes_every_znode(stores, zk_client, monkeypatch):
    monkeypatch.setattr(zs, "MAX_OPS_PER_MULTI", 9)  # deletes span many multis, in order
    s = stores()
    s.create_topic("gone", {p: [1] for p in range(10)}, {"retention.bytes": 1})
    s.create_topic("kept", {0: [1]})
    w = s.fenced(s.elect_controller(1))
    w.create_partition_states("gone", {p: lisr(1, 0, [1]) for p in range(10)})
    w.create_partition_states("kept", {0: lisr(1, 0, [1])})
    s.request_topic_deletion("gone")
    assert w.delete_topic_znodes("gone") == 1 + 1 + 10 + 10 + 1 + 1  # topic, partitions, p, state, config, marker
    for p in ("/brokers/topics/gone", "/config/topics/gone", "/admin/delete_topics/gone"):
        assert not exists(zk_client, s, p)
    assert s.get_topics() == {"kept"} and len(s.get_partition_states()) == 1
    assert w.delete_topic_znodes("gone") == 0  # idempotent
    ta = TopicAssignment("kept", {0: (1,), 1: (1,)}, topic_id=s.get_topic_assignment("kept").topic_id)
    assert w.set_topic_assignment(ta) == 1
    assert s.get_topic_assignment("kept") == ta
    with pytest.raises(BadVersion):
        w.set_topic_assignment(ta, expected_version=0)
    with pytest.raises(NoNode):
        w.set_topic_assignment(TopicAssignment("gone", {0: (1,)}))


# -- 10,000 partitions -----------------------------------------------------------------------------
def test_ten_thousand_partition_states(stores, capsys):
    s = stores()
    n = 10_000
    s.create_topic("big", {p: [1, 2, 3] for p in range(n)})
    w = s.fenced(s.elect_controller(1))
    t0 = time.monotonic()
    for start in range(0, n, 2_500):
        res = w.create_partition_states("big", {p: lisr(1 + p % 3, 0, [1, 2, 3])
                                                for p in range(start, start + 2_500)})
        assert all(isinstance(v, LeaderIsrAndControllerEpoch) for v in res.values())
    t_create = time.monotonic() - t0
    t0 = time.monotonic()
    states = s.get_partition_states(["big"])
    t_read = time.monotonic() - t0
    t0 = time.monotonic()
    res = w.update_partition_states({("big", p): (lisr(1, 1, [1]), 0) for p in range(n)})
    t_update = time.monotonic() - t0
    with capsys.disabled():
        print(f"\n[zk_store] 10,000 partition states: create {t_create:.2f} s, "
              f"read {t_read:.2f} s, update {t_update:.2f} s")
    assert len(states) == n
    assert states[("big", 4_321)] == LeaderIsrAndControllerEpoch(1 + 4_321 % 3, 0, (1, 2, 3), 1, 0)
    assert set(res.values()) == {1}
    # how fast: bench/controller_bench.py's load_context_s reads 10,000 states the same way


def test_multi_read_and_plain_reads_agree(stores):
    fast, plain = stores(), stores(multi_read=False)
    n = 2 * zs.MAX_READS_PER_MULTI_READ + 100  # several multiRead batches
    fast.create_topic("t", {p: [1] for p in range(n)})
    w = fast.fenced(fast.elect_controller(1))
    w.create_partition_states("t", {p: lisr(1, p, [1]) for p in range(0, n, 2)})
    fast.client.create(fast.root + "/brokers/topics/t/partitions/1")  # listed, but no state
    a = fast.get_partition_states(["t", "missing"])
    b = plain.get_partition_states(["t", "missing"])
    assert a == b and len(a) == (n + 1) // 2 and a[("t", 42)].leader_epoch == 42
    assert fast._multi_read_ok  # the real 3.8 server answered multiRead
    got = fast._get_many(["/brokers/topics/t", "/nope", "/brokers/topics/t/partitions/0/state"],
                         small=True)
    assert got[1] is None and got[0][0] == fast.client.get(fast.root + "/brokers/topics/t")[0]
    assert got[2][1].version == 0
    assert fast._children_many(["/brokers/topics", "/nope"], small=True) == [["t"], None]
    err = pickle.loads(pickle.dumps(BadVersion("/x")))
    assert isinstance(err, BadVersion) and err.path == "/x"


# -- watches ---------------------------------------------------------------------------------------
def test_watches_forward_changes(stores, zk_client):
    s, other = stores(), stores()
    brokers, controller, topics, deletions = Inbox(), Inbox(), Inbox(), Inbox()
    isr, reassign, preferred, assignment = Inbox(), Inbox(), Inbox(), Inbox()
    s.watch_broker_ids(brokers)
    s.watch_controller(controller)
    s.watch_topics(topics)
    s.watch_topic_deletions(deletions)
    s.watch_isr_change_notifications(isr)
    s.watch_reassignment(reassign)
    s.watch_preferred_election(preferred)
    s.watch_topic_assignment("t", assignment)
    for inbox, initial in ((brokers, set()), (controller, None), (topics, set()),
                           (deletions, set()), (isr, []), (reassign, None), (preferred, None),
                           (assignment, None)):
        inbox.expect(initial)

    other.register_broker(BrokerRegistration(1, "h", 1), wait_s=5)
    brokers.expect({1})
    s.register_broker(BrokerRegistration(2, "h", 2), wait_s=5)
    brokers.expect({1, 2})
    other.elect_controller(9)
    controller.expect(9)
    other.close()  # session closed: broker 1 and /controller vanish
    brokers.expect({2})
    controller.expect(None)
    e = s.elect_controller(3)
    controller.expect(3)

    ta = s.create_topic("t", {0: [2]})
    topics.expect({"t"})
    assignment.expect(ta)
    s.fenced(e).set_topic_assignment(TopicAssignment("t", {0: (2,), 1: (2,)}, topic_id=ta.topic_id))
    assignment.expect(lambda v: v is not None and set(v.partitions) == {0, 1})
    s.request_topic_deletion("t")
    deletions.expect({"t"})
    name = s.create_isr_change_notification([("t", 0)])
    isr.expect([name])
    s.request_reassignment({("t", 0): [2]})
    reassign.expect({("t", 0): (2,)})
    s.request_preferred_election([("t", 0)])
    preferred.expect({("t", 0)})
    s.fenced(e).delete_preferred_election()
    preferred.expect(None)
    s.fenced(e).delete_topic_znodes("t")
    topics.expect(set())
    assignment.expect(None)
    deletions.expect(set())


def test_children_watch_survives_parent_deletion_and_cancel(stores, zk_client):
    s = stores()
    seen, cancelled = Inbox(), Inbox()
    s.watch_broker_ids(seen)
    w = s.watch_broker_ids(cancelled)
    seen.expect(set())
    cancelled.expect(set())
    w.cancel()
    zk_client.delete(s.root + "/brokers/ids")
    seen.expect(set())
    zk_client.create(s.root + "/brokers/ids")
    s.register_broker(BrokerRegistration(4, "h", 4), wait_s=5)
    seen.expect({4})
    assert cancelled.q.empty()  # nothing forwarded after cancel()


def test_state_listener_and_unreachable_server(stores, zk_server):
    s = stores()
    states = Inbox()
    s.add_state_listener(states)
    s.remove_state_listener(states)
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(ZkUnavailable) as info:
        ZkStore(f"127.0.0.1:{port}", "x", connection_timeout_s=1.0).start()
    assert time.monotonic() - t0 < 10 and f"127.0.0.1:{port}" in str(info.value)
    assert states.q.empty()


