"""tests/memory_zk.py: the in-memory ZooKeeper ensemble and store, and the controller running
over it without a thread (no ZooKeeper, no sleeps: everything is driven by deliver/run)."""

from __future__ import annotations

import json
import threading

import pytest

from controller import events as ev
from controller.controller import Controller
from controller.requests import LeaderAndIsrRequest
from controller.store_api import (AdminOperationInProgress, BadVersion, BrokerIdInUse,
                                  ControllerMovedError, NodeExists, NoNode, ZkUnavailable)
from controller.layout import (BrokerRegistration, LeaderIsrAndControllerEpoch,
                               TopicAssignment, encode_controller, encode_partition_list,
                               encode_reassignment, encode_topic_config)
from controller.scheduler import ManualScheduler
from replicas.errors import InvalidConfig, InvalidTopic, TopicAlreadyExists, UnknownTopicOrPartition
from tests.fakes import RecordingChannel
from tests.memory_zk import MemoryZk, MemoryZkStore, Op, SimLoop, settle

pytestmark = pytest.mark.unit

ROOT = "/rayka/sim"


def lisr(leader, epoch, isr, ce=1):
    return LeaderIsrAndControllerEpoch(leader, epoch, tuple(isr), ce)


@pytest.fixture
def zk():
    return MemoryZk()


@pytest.fixture
def stores(zk):
    def make(cluster="sim"):
        return MemoryZkStore(zk, cluster).start()
    return make


def raw(zk, path):
    return zk.nodes[ROOT + path].data


class Inbox(list):
    __hash__ = object.__hash__                      # usable as a state listener (dict key)

    def __call__(self, value):
        self.append(value)


# -- election and fencing --------------------------------------------------------------------------
def test_election_epoch_one_then_two_after_the_controller_session_closes(zk, stores):
    a, b = stores(), stores()
    e1 = a.elect_controller(1)
    assert (e1.epoch, e1.epoch_zk_version, e1.controller_id, e1.session_id) == (1, 1, 1, a.session_id)
    assert raw(zk, "/controller_epoch") == b"1"
    assert zk.nodes[ROOT + "/controller"].owner == a.session_id
    with pytest.raises(ControllerMovedError) as info:
        b.elect_controller(2)
    assert info.value.controller_id == 1
    with pytest.raises(ControllerMovedError):       # Kafka: a second attempt is "moved" too
        a.elect_controller(1)
    assert a.get_controller_epoch() == (1, 1) and b.delete_controller_if_ours() is False
    a.close()
    assert b.get_controller() is None
    with pytest.raises(ZkUnavailable):
        a.get_controller()
    e2 = b.elect_controller(2)
    assert (e2.epoch, e2.epoch_zk_version, b.get_controller()) == (2, 2, 2)
    assert b.resign() is True and b.get_controller() is None


def test_fenced_writer_of_an_old_election_writes_nothing(zk, stores):
    old, new = stores(), stores()
    old.create_topic("t", {p: [1, 2] for p in range(4)})
    e1 = old.elect_controller(1)
    zombie = old.fenced(e1)
    zombie.create_partition_states("t", {p: lisr(1, 0, [1, 2]) for p in range(2)})
    assert old.resign() is True
    e2 = new.elect_controller(2)
    before = zk.dump()
    for call in (lambda: zombie.update_partition_states({("t", 0): (lisr(2, 1, [2]), 0)}),
                 lambda: zombie.create_partition_states("t", {2: lisr(1, 0, [1, 2])}),
                 lambda: zombie.set_topic_assignment(TopicAssignment("t", {0: (9,)})),
                 lambda: zombie.delete_topic_znodes("t"),
                 lambda: zombie.set_reassign_partitions({("t", 0): [2]}),
                 lambda: zombie.delete_controller(),
                 lambda: zombie.delete_isr_change_notifications(["isr_change_0000000000"]),
                 zombie.verify):
        with pytest.raises(ControllerMovedError) as info:
            call()
        assert info.value.controller_id == 2
    assert zk.dump() == before
    assert new.fenced(e2).update_partition_states({("t", 0): (lisr(2, 1, [2], ce=2), 0)}) == {("t", 0): 1}
    assert new.get_partition_state("t", 0) == LeaderIsrAndControllerEpoch(2, 1, (2,), 2, 1)


def test_partition_state_writes_report_per_item_outcomes(zk, stores):
    s = stores()
    s.create_topic("t", {p: [1, 2] for p in range(5)})
    w = s.fenced(s.elect_controller(1))
    assert w.create_partition_states("t", {1: lisr(1, 0, [1, 2])}) == {1: lisr(1, 0, [1, 2]).with_version(0)}
    before = raw(zk, "/brokers/topics/t/partitions/1/state")
    res = w.create_partition_states("t", {p: lisr(2, 3, [2]) for p in range(5)})
    assert isinstance(res[1], NodeExists) and res[1].path == "/brokers/topics/t/partitions/1/state"
    assert all(res[p] == lisr(2, 3, [2]).with_version(0) for p in (0, 2, 3, 4))
    assert raw(zk, "/brokers/topics/t/partitions/1/state") == before
    ghost = w.create_partition_states("ghost", {0: lisr(1, 0, [1])})
    assert isinstance(ghost[0], NoNode) and ROOT + "/brokers/topics/ghost" not in zk.nodes

    assert w.update_partition_states({("t", 2): (lisr(2, 4, [2]), 0)}) == {("t", 2): 1}
    res = w.update_partition_states({("t", p): (lisr(1, 5, [1]), 0) for p in range(5)}
                                    | {("t", 9): (lisr(1, 5, [1]), 0)})
    assert isinstance(res[("t", 2)], BadVersion) and res[("t", 2)].path.endswith("/2/state")
    assert isinstance(res[("t", 9)], NoNode)
    assert {tp: v for tp, v in res.items() if tp[1] not in (2, 9)} == {
        ("t", 0): 1, ("t", 1): 1, ("t", 3): 1, ("t", 4): 1}
    assert s.get_partition_state("t", 2) == LeaderIsrAndControllerEpoch(2, 4, (2,), 1, 1)
    assert ROOT + "/brokers/topics/t/partitions/9" not in zk.nodes
    assert w.set_topic_assignment(TopicAssignment("t", {0: (1,)}), expected_version=0) == 1
    with pytest.raises(BadVersion):
        w.set_topic_assignment(TopicAssignment("t", {0: (2,)}), expected_version=0)
    with pytest.raises(NoNode):
        w.set_topic_assignment(TopicAssignment("gone", {0: (1,)}))


# -- watches and sessions ---------------------------------------------------------------------------
def test_watches_run_only_on_deliver_and_in_order(zk, stores):
    s, other = stores(), stores()
    order = []
    s.watch_broker_ids(lambda v: order.append(("brokers", v)))
    s.watch_controller(lambda v: order.append(("controller", v)))
    s.watch_topic_assignment("t", lambda v: order.append(("t", v and sorted(v.partitions))))
    s.watch_topic_config("t", lambda v: order.append(("config", v)))
    assert order == []
    assert zk.deliver() == 4
    assert order == [("brokers", set()), ("controller", None), ("t", None), ("config", None)]
    order.clear()
    other.register_broker(BrokerRegistration(1, "h", 1))
    e = other.elect_controller(9)
    s.create_topic("t", {0: [1]}, {"retention.ms": 1})
    assert order == [] and zk.deliver() == 4
    # create_topic writes the config first, then the topic (one transaction, in op order)
    assert order == [("brokers", {1}), ("controller", 9), ("config", {"retention.ms": "1"}),
                     ("t", [0])]
    order.clear()
    other.register_broker(BrokerRegistration(2, "h", 2))     # coalesced with the next change
    other.register_broker(BrokerRegistration(3, "h", 3))
    other.fenced(e).set_topic_assignment(TopicAssignment("t", {0: (1,), 1: (1,)}))
    s.set_topic_config("t", {"retention.ms": 2})
    assert zk.deliver() == 3
    assert order == [("brokers", {1, 2, 3}), ("t", [0, 1]), ("config", {"retention.ms": "2"})]
    order.clear()
    w = s.watch_topics(lambda v: order.append(("topics", v)))
    w.cancel()
    other.fenced(e).delete_topic_znodes("t")
    assert zk.deliver() == 2 and order == [("t", None), ("config", None)]
    assert zk.deliver() == 0


def test_children_watch_survives_parent_deletion(zk, stores):
    s = stores()
    seen = Inbox()
    s.watch_topic_deletions(seen)
    zk.deliver()
    zk.multi(None, ROOT, [Op("delete", "/admin/delete_topics")])
    zk.deliver()
    s.start()                                        # re-creates Kafka's persistent parents
    s.create_topic("t", {0: [1]})
    s.request_topic_deletion("t")
    zk.deliver()
    assert seen == [set(), set(), {"t"}]


def test_expiry_deletes_ephemerals_then_lost_then_connected_with_a_new_session(zk, stores):
    a, watcher = stores(), stores()
    states, brokers, seen_by_a = Inbox(), Inbox(), Inbox()
    a.add_state_listener(states)
    watcher.watch_broker_ids(brokers)
    a.watch_broker_ids(seen_by_a)
    epoch1 = a.register_broker(BrokerRegistration(1, "h", 1))
    a.elect_controller(1)
    zk.deliver()
    assert brokers == [{1}] and seen_by_a == [{1}]
    old = a.session_id
    zk.expire(a)
    assert states == [] and watcher.get_controller() is None and watcher.get_broker_ids() == set()
    with pytest.raises(ZkUnavailable):
        a.get_broker_ids()
    zk.deliver()
    assert states == ["LOST"] and brokers == [{1}, set()] and seen_by_a == [{1}]
    new_id = zk.reconnect(a)
    zk.deliver()
    assert states == ["LOST", "CONNECTED"] and new_id == a.session_id != old
    assert seen_by_a == [{1}, set()]              # its watch re-read the changed value
    epoch2 = a.register_broker(BrokerRegistration(1, "h", 1))
    assert epoch2 > epoch1 and a.get_broker(1).epoch == epoch2
    zk.deliver()
    assert brokers[-1] == {1}


def test_broker_registration_epoch_and_id_in_use(zk, stores):
    a, b = stores(), stores()
    e1 = a.register_broker(BrokerRegistration(1, "h", 1, node_id="a"))
    assert e1 == zk.nodes[ROOT + "/brokers/ids/1"].czxid
    assert a.register_broker(BrokerRegistration(1, "h", 1)) == e1     # ours: accepted
    with pytest.raises(BrokerIdInUse):
        b.register_broker(BrokerRegistration(1, "h", 2, node_id="b"))
    a.close()
    e2 = b.register_broker(BrokerRegistration(1, "h", 2, node_id="b"))
    assert e2 > e1 and b.get_brokers()[1].node_id == "b" and b.get_brokers()[1].epoch == e2


def test_fail_next_writes_applies_nothing(zk, stores):
    s = stores()
    zk.fail_next_writes(s, 2)
    before = zk.dump()
    with pytest.raises(ZkUnavailable):
        s.create_topic("t", {0: [1]})
    with pytest.raises(ZkUnavailable):
        s.elect_controller(1)
    assert zk.dump() == before and s.get_topics() == set()   # reads are unaffected
    s.create_topic("t", {0: [1]})
    assert s.get_topics() == {"t"}


# -- admin API and bytes ------------------------------------------------------------------------------
def test_znodes_are_byte_identical_to_the_layout_codecs(zk, stores):
    s = stores()
    election = s.elect_controller(7)
    assert raw(zk, "/controller") == encode_controller(7, json.loads(raw(zk, "/controller"))["timestamp"])
    reg = BrokerRegistration(3, "10.0.0.5", 9092, rack="r1", node_id="abc", actor_name="b-3",
                             timestamp_ms=1700000000123)
    epoch = s.register_broker(reg)
    assert raw(zk, "/brokers/ids/3") == reg.to_json()
    assert s.get_broker(3) == BrokerRegistration(3, "10.0.0.5", 9092, "r1", "abc", "b-3",
                                                 1700000000123, epoch)
    ta = s.create_topic("orders", {0: [1, 2, 3], 10: [3, 1, 2]}, {"retention.ms": 1000,
                                                                  "unclean.leader.election.enable": False})
    assert raw(zk, "/brokers/topics/orders") == ta.to_json()
    assert json.loads(raw(zk, "/brokers/topics/orders"))["partitions"] == {"0": [1, 2, 3], "10": [3, 1, 2]}
    assert raw(zk, "/config/topics/orders") == encode_topic_config(
        {"retention.ms": 1000, "unclean.leader.election.enable": False})
    w = s.fenced(election)
    w.create_partition_states("orders", {0: lisr(1, 0, [1, 2, 3])})
    assert raw(zk, "/brokers/topics/orders/partitions/0/state") == lisr(1, 0, [1, 2, 3]).to_json()
    assert raw(zk, "/brokers/topics/orders/partitions/0/state") == \
        b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1,2,3]}'
    assert s.request_topic_deletion("orders") is True and raw(zk, "/admin/delete_topics/orders") == b""
    s.request_reassignment({("orders", 0): [3, 2, 1]})
    assert raw(zk, "/admin/reassign_partitions") == encode_reassignment({("orders", 0): [3, 2, 1]})
    s.request_preferred_election([("orders", 1), ("orders", 0)])
    assert raw(zk, "/admin/preferred_replica_election") == encode_partition_list(
        [("orders", 0), ("orders", 1)])
    name = s.create_isr_change_notification([("orders", 0)])
    assert name == "isr_change_0000000000"
    assert raw(zk, f"/isr_change_notification/{name}") == encode_partition_list([("orders", 0)])
    assert raw(zk, "/controller_epoch") == b"1"


def test_admin_requests_and_their_errors(zk, stores):
    s = stores()
    with pytest.raises(UnknownTopicOrPartition):
        s.request_topic_deletion("nope")
    with pytest.raises(UnknownTopicOrPartition):
        s.set_topic_config("nope", {"retention.ms": 1})
    with pytest.raises(InvalidTopic):
        s.create_topic("bad/name", {0: [1]})
    with pytest.raises(InvalidConfig):
        s.create_topic("t", {0: [1, 2]}, {"no.such.key": "1"})
    s.create_topic("t", {0: [1, 2]}, {"min.insync.replicas": "1"})
    with pytest.raises(InvalidConfig):
        s.set_topic_config("t", {"min.insync.replicas": 0})
    assert s.get_topic_config("t") == {"min.insync.replicas": "1"}
    with pytest.raises(TopicAlreadyExists):
        s.create_topic("t", {0: [3]})
    assert s.request_topic_deletion("t") is True and s.request_topic_deletion("t") is False
    with pytest.raises(TopicAlreadyExists):
        s.create_topic("t", {0: [1]})
    assert s.get_topic_deletions() == {"t"}
    s.request_reassignment({("t", 0): [2, 1]})
    with pytest.raises(AdminOperationInProgress):
        s.request_reassignment({("t", 0): [3]})
    assert s.get_reassignment() == {("t", 0): (2, 1)}
    s.request_preferred_election([("t", 0)])
    with pytest.raises(AdminOperationInProgress):
        s.request_preferred_election([("t", 0)])
    w = s.fenced(s.elect_controller(1))
    assert w.set_reassign_partitions({("t", 0): [1]}) is True and s.get_reassignment() == {("t", 0): (1,)}
    assert w.set_reassign_partitions({}) is True and w.delete_reassign_partitions() is False
    assert w.delete_preferred_election() is True and s.get_preferred_election() == set()
    names = [s.create_isr_change_notification([("t", 0)]),
             s.create_isr_change_notification([("t", 1), ("u", 0)])]
    assert s.get_isr_change_notifications() == sorted(names)
    assert s.read_isr_change_notifications(names) == {("t", 0), ("t", 1), ("u", 0)}
    assert w.delete_isr_change_notifications(names + ["isr_change_9999999999"]) == 2
    w.create_partition_states("t", {0: lisr(1, 0, [1, 2])})
    assert w.delete_topic_znodes("t") == 6 and w.delete_topic_znodes("t") == 0
    s.create_topic("k", {0: [1]})
    s.request_topic_deletion("k")
    assert w.delete_topic_marker("k") is True and w.delete_topic_marker("k") is False
    assert s.get_topic_deletions() == set() and s.get_topics() == {"k"}
    assert s.get_topic_config("t") is None
    assert w.delete_controller() is True and s.get_controller() is None


# -- the controller, without its thread ----------------------------------------------------------------
def sim_controller(zk, cid, channel):
    store = MemoryZkStore(zk, "sim").start()
    c = Controller(cid, store, channel, lambda: 1_000, scheduler=ManualScheduler())
    c.loop = SimLoop(c.process, name=f"controller-{cid}")
    store.add_state_listener(c._on_session_state)
    c.loop.put(ev.Startup())
    return c


def test_controller_over_memory_zk_creates_partition_states(zk, stores):
    threads = threading.active_count()
    channel = RecordingChannel()
    c = sim_controller(zk, 1, channel)
    settle(zk, c.loop)
    assert c.is_active and c.ctx.epoch == 1 and c.failovers_completed == 1
    brokers = [stores() for _ in range(3)]
    for b, s in enumerate(brokers, start=1):
        s.register_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b))
    admin = stores()
    admin.create_topic("clicks", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    settle(zk, c.loop)
    states = c.store.get_partition_states()
    assert {tp: (st.leader, st.isr, st.controller_epoch) for tp, st in states.items()} == {
        ("clicks", 0): (1, (1, 2, 3), 1), ("clicks", 1): (2, (2, 3, 1), 1),
        ("clicks", 2): (3, (3, 1, 2), 1)}
    new_lai = {(b, s.partition) for b, r in channel.sent if isinstance(r, LeaderAndIsrRequest)
               for s in r.partition_states if s.is_new}
    assert new_lai == {(b, p) for p in range(3) for b in (1, 2, 3)}

    brokers[0].close()                                      # broker 1 dies
    settle(zk, c.loop)
    s0 = c.store.get_partition_state("clicks", 0)
    assert (s0.leader, s0.isr, s0.leader_epoch) == (2, (2, 3), 1)
    assert c.loop.errors == [] and zk.callback_errors == []
    assert threading.active_count() == threads            # no thread was started


def test_controller_failover_on_session_expiry(zk, stores):
    channel = RecordingChannel()
    c1 = sim_controller(zk, 1, channel)
    settle(zk, c1.loop)
    c2 = sim_controller(zk, 2, channel)
    broker = stores()
    broker.register_broker(BrokerRegistration(1, "h", 1))
    stores().create_topic("t", {0: [1]})
    settle(zk, c1.loop, c2.loop)
    assert c1.is_active and not c2.is_active and c2.active_controller_id == 1

    zk.expire(c1.store)
    settle(zk, c1.loop, c2.loop)
    assert c2.is_active and c2.ctx.epoch == 2 and not c1.is_active
    assert c2.ctx.leadership[("t", 0)].leader == 1
    zk.reconnect(c1.store)
    settle(zk, c1.loop, c2.loop)
    assert not c1.is_active and c1.active_controller_id == 2 and c2.is_active
    assert c1.loop.errors == [] and c2.loop.errors == [] and zk.callback_errors == []


def test_sim_loop_expire_clears_the_queue_and_puts_expire_first():
    seen = []
    loop = SimLoop(seen.append)
    loop.put(ev.BrokerChange())
    loop.put(ev.TopicChange())
    loop.expire()
    loop.put(ev.Reelect())
    assert loop.queue_size() == 2 and loop.idle()
    assert loop.run() == 2 and seen == [ev.Expire(), ev.Reelect()] and loop.run() == 0
    loop.shutdown()
    loop.put(ev.Startup())
    assert seen[-1] == ev.Shutdown() and loop.queue_size() == 0 and loop.processed == 3
