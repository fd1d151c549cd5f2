"""The controller's side of a log directory failure (KIP-112, Kafka's ZooKeeper mode:
KafkaController.processLogDirEventNotification / onBrokerLogDirFailure /
handleLeaderAndIsrResponse / onReplicasBecomeOffline, ControllerContext.isReplicaOnline),
driven through the in-memory ZooKeeper (tests/memory_zk.py) with brokers as plain sessions
and their LeaderAndIsr answers as controller events."""

from __future__ import annotations

import pytest

from controller import events as ev
from controller.context import (ControllerContext, PartitionReplica as PR, ReplicaAssignment,
                                TopicPartition as TP)
from controller.controller import Controller, ControllerConfig
from controller.layout import (LOG_DIR_EVENT_NOTIFICATION, PERSISTENT_PATHS, BrokerRegistration,
                               LeaderIsrAndControllerEpoch, decode_log_dir_event, dumps,
                               encode_log_dir_event, log_dir_event_path)
from controller.rebalance import can_preferred_lead
from controller.requests import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from controller.scheduler import ManualScheduler
from controller.states import PartitionState as P, ReplicaState as R
from controller.store_api import ControllerMovedError
from replicas.dispatch import handler_name
from replicas.errors import IneligibleReplica
from tests.fakes import AnsweringChannel
from tests.memory_zk import MemoryZk, MemoryZkStore, registered_broker, Op, SimLoop, settle

pytestmark = pytest.mark.unit

CLUSTER = "logdirs"
STORAGE = 56        # KAFKA_STORAGE_ERROR


class Cluster:
    """One controller (id 100) over the in-memory ZooKeeper; brokers are sessions that
    register; every request is recorded and StopReplica(delete) answered (AnsweringChannel)."""

    def __init__(self, brokers=(1, 2, 3), start=True):
        self.zk = MemoryZk()
        self.admin = MemoryZkStore(self.zk, CLUSTER).start()
        self.channel = AnsweringChannel()
        self.brokers: dict[int, MemoryZkStore] = {}
        self.c: Controller | None = None
        for b in brokers:
            self.broker_up(b)
        if start:
            self.start_controller(100)

    def start_controller(self, cid: int) -> Controller:
        store = MemoryZkStore(self.zk, CLUSTER).start()
        c = Controller(cid, store, self.channel, lambda: 0,
                       ControllerConfig(auto_leader_rebalance_enable=False),
                       scheduler=ManualScheduler(0))
        c.loop = SimLoop(c.process, name=f"controller-{cid}")
        self.channel.controllers[cid] = c
        self.c = c.start()
        self.settle()
        assert c.is_active
        return c

    def settle(self) -> None:
        settle(self.zk, self.c.loop) if self.c is not None else self.zk.deliver()

    def broker_up(self, b: int) -> None:
        self.brokers[b] = registered_broker(self.zk, CLUSTER, b)
        self.settle()

    def bounce(self, b: int) -> None:
        """The broker restarts: its session expires, it registers again (newer epoch)."""
        store = self.brokers[b]
        self.zk.expire(store)
        self.zk.reconnect(store)
        store.register_broker(BrokerRegistration(b, "127.0.0.1", 9000 + b, node_id=f"n{b}",
                                                 actor_name=f"broker-{b}"))
        self.settle()

    def topic(self, name: str, assignment: dict, config: dict | None = None) -> None:
        self.admin.create_topic(name, assignment, config)
        self.settle()

    def answer(self, broker: int, errors: dict) -> None:
        """The broker's answer to a LeaderAndIsr, partition → error code."""
        self.c.loop.put(ev.LeaderAndIsrResponse(broker, errors))
        self.settle()

    def state(self, topic: str, p: int) -> LeaderIsrAndControllerEpoch:
        return self.admin.get_partition_state(topic, p)

    def take(self) -> list[tuple[int, object]]:
        sent = list(self.channel.sent)
        self.channel.clear()
        return sent


def leader_and_isr(sent) -> dict[int, set[TP]]:
    out: dict[int, set[TP]] = {}
    for b, r in sent:
        if isinstance(r, LeaderAndIsrRequest):
            out.setdefault(b, set()).update(s.tp for s in r.partition_states)
    return out


def stop_replica(sent) -> dict[int, set[tuple[TP, bool]]]:
    out: dict[int, set[tuple[TP, bool]]] = {}
    for b, r in sent:
        if isinstance(r, StopReplicaRequest):
            out.setdefault(b, set()).update((TP(p.topic, p.partition), p.delete)
                                            for p in r.partitions)
    return out


def offline_replicas(sent) -> dict[TP, tuple[int, ...]]:
    """The last UpdateMetadata's offline_replicas per partition."""
    out: dict[TP, tuple[int, ...]] = {}
    for _, r in sent:
        if isinstance(r, UpdateMetadataRequest):
            out.update((s.tp, s.offline_replicas) for s in r.partition_states)
    return out


# -- layout ---------------------------------------------------------------------------------------
def test_notice_round_trip_is_kafkas_bytes():
    assert encode_log_dir_event(7) == b'{"version":1,"broker":7,"event":1}'
    assert decode_log_dir_event(encode_log_dir_event(7)) == 7
    assert log_dir_event_path("log_dir_event_0000000003") == \
        "/log_dir_event_notification/log_dir_event_0000000003"
    assert LOG_DIR_EVENT_NOTIFICATION in PERSISTENT_PATHS
    with pytest.raises(ValueError, match="not a log dir event"):
        log_dir_event_path("isr_change_0000000003")


@pytest.mark.parametrize("data, words", [
    (dumps({"version": 2, "broker": 1, "event": 1}), "version 2 is not supported"),
    (dumps({"broker": 1, "event": 1}), "version None"),
    (dumps({"version": 1, "broker": 1, "event": 2}), "event 2 is unknown"),
    (dumps({"version": 1, "event": 1}), "names no broker"),
    (dumps({"version": 1, "broker": "1", "event": 1}), "names no broker"),
    (b"{nope", "not JSON"),
    (dumps([1]), "version None"),
])
def test_notices_of_another_shape_are_rejected(data, words):
    with pytest.raises(ValueError, match=words):
        decode_log_dir_event(data)


# -- ControllerContext.is_replica_online ------------------------------------------------------------
def _context() -> ControllerContext:
    ctx = ControllerContext(epoch=1)
    for b in (1, 2, 3):
        ctx.live_brokers[b] = BrokerRegistration(b, "h", 9000 + b, epoch=b)
    ctx.shutting_down = {3}
    ctx.replicas_on_offline_dirs = {2: {TP("t", 0)}, 3: {TP("t", 1)}}
    return ctx


@pytest.mark.parametrize("broker, tp, shutting_too, online", [
    (1, ("t", 0), False, True),
    (2, ("t", 0), False, False),         # offline dir
    (2, ("t", 0), True, False),
    (2, ("t", 1), False, True),          # another partition of the same broker
    (2, TP("t", 1), False, True),
    (3, ("t", 0), False, False),         # shutting down
    (3, ("t", 0), True, True),
    (3, ("t", 1), True, False),          # shutting down AND offline dir
    (4, ("t", 0), True, False),          # not registered
])
def test_is_replica_online(broker, tp, shutting_too, online):
    assert _context().is_replica_online(broker, tp, include_shutting_down=shutting_too) is online


def test_offline_dirs_decide_preferred_leadership_and_leave_with_their_topic():
    ctx = _context()
    ctx.set_assignment(TP("t", 0), ReplicaAssignment((2, 1)))
    ctx.set_assignment(TP("t", 1), ReplicaAssignment((2, 1)))
    for p in (0, 1):
        ctx.leadership[TP("t", p)] = LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1, 0)
    assert (can_preferred_lead(ctx, TP("t", 0)), can_preferred_lead(ctx, TP("t", 1))) == (False, True)
    ctx.remove_topic("t")
    assert ctx.replicas_on_offline_dirs == {}


def test_every_event_has_a_handler():
    assert [e.__name__ for e in ev.EVENTS if not hasattr(Controller, handler_name(e))] == []
    assert ev.LogDirEventNotification in ev.EVENTS


# -- the notice ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("named, asked", [
    ([1], {1: {TP("t", 0), TP("t", 1)}}),
    ([1, 3, 1], {1: {TP("t", 0), TP("t", 1)}, 3: {TP("t", 0), TP("t", 1), TP("t", 2)}}),
    ([9], {}),                           # not a live broker: nothing to ask
])
def test_a_notice_asks_the_broker_about_every_replica_and_is_deleted(named, asked):
    w = Cluster()
    w.topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 2]})
    w.topic("gone", {0: [1, 2]})
    w.channel.unreachable = {1, 2}                  # the deletion stays under way
    w.admin.request_topic_deletion("gone")
    w.settle()
    epochs = {tp: w.state(*tp).leader_epoch for tp in (TP("t", 0), TP("t", 1), TP("t", 2))}
    w.take()
    names = [w.brokers[1].propagate_log_dir_event(b) for b in named]
    assert all(n.startswith("log_dir_event_") and len(n) == len("log_dir_event_") + 10
               for n in names)
    w.settle()
    sent = w.take()
    assert leader_and_isr(sent) == asked
    assert {tp: w.state(*tp).leader_epoch for tp in epochs} == epochs   # a question, no election
    assert not stop_replica(sent)
    assert w.admin.get_log_dir_event_notifications() == []


def test_failover_deletes_pending_notices_and_asks_every_replica_anyway():
    w = Cluster(start=False)
    w.admin.create_topic("t", {0: [1, 2]})
    w.brokers[1].propagate_log_dir_event(1)
    w.start_controller(100)
    assert w.admin.get_log_dir_event_notifications() == []
    sent = w.take()
    assert leader_and_isr(sent) == {1: {TP("t", 0)}, 2: {TP("t", 0)}}
    # asked once, by the failover: the notice was not processed on top of it
    assert [b for b, r in sent if isinstance(r, LeaderAndIsrRequest)].count(1) == 1


# -- the answers ------------------------------------------------------------------------------------
def test_storage_errors_move_leadership_and_shrink_the_isr():
    w = Cluster()
    w.topic("t", {0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 2]})
    before = {p: w.state("t", p) for p in (0, 1, 2)}
    assert (before[0].leader, before[1].leader) == (1, 2)
    w.take()
    w.answer(1, {("t", 0): STORAGE, ("t", 1): STORAGE})
    sent = w.take()
    led, followed = w.state("t", 0), w.state("t", 1)
    assert (led.leader, led.isr, led.leader_epoch) == (2, (2, 3), before[0].leader_epoch + 1)
    assert (followed.leader, followed.isr, followed.leader_epoch) == \
        (2, (2, 3), before[1].leader_epoch + 1)
    assert w.state("t", 2) == before[2]
    assert w.c.ctx.leadership[TP("t", 0)] == led
    assert w.c.ctx.partition_states[TP("t", 0)] == P.ONLINE
    assert w.c.ctx.replicas_on_offline_dirs == {1: {TP("t", 0), TP("t", 1)}}
    assert stop_replica(sent) == {1: {(TP("t", 0), False), (TP("t", 1), False)}}
    asked = leader_and_isr(sent)
    assert 1 not in asked and asked[2] == {TP("t", 0), TP("t", 1)}
    assert offline_replicas(sent) == {TP("t", 0): (1,), TP("t", 1): (1,)}

    w.answer(1, {("t", 0): STORAGE, ("t", 2): 0})     # nothing new: nothing happens
    assert w.take() == [] and w.state("t", 0) == led

    # the leader may not bring the offline replica back into the ISR
    replies = []
    proposal = LeaderIsrAndControllerEpoch(2, followed.leader_epoch, (2, 3, 1), w.c.ctx.epoch,
                                           followed.zk_version)
    w.c.loop.put(ev.AlterPartition(2, w.c.ctx.broker_epoch(2), {("t", 1): proposal},
                                   reply=replies.append))
    w.settle()
    assert isinstance(replies[0][("t", 1)], IneligibleReplica)
    assert w.state("t", 1) == followed


@pytest.mark.parametrize("unclean, leader, isr, partition_state", [
    ("false", -1, (1,), P.OFFLINE),
    ("true", 2, (2,), P.ONLINE),
])
def test_the_only_isr_member_on_an_offline_dir(unclean, leader, isr, partition_state):
    w = Cluster(brokers=(1, 3))
    w.topic("solo", {0: [1, 2]}, {"unclean.leader.election.enable": unclean})
    w.broker_up(2)                                  # joins after: ISR stays [1]
    assert w.state("solo", 0).isr == (1,)
    epoch = w.state("solo", 0).leader_epoch
    w.take()
    w.answer(1, {("solo", 0): STORAGE})
    state = w.state("solo", 0)
    assert (state.leader, state.isr) == (leader, isr) and state.leader_epoch > epoch
    assert w.c.ctx.partition_states[TP("solo", 0)] == partition_state
    assert w.c.ctx.offline_partition_count() == (1 if leader < 0 else 0)
    assert offline_replicas(w.take())[TP("solo", 0)] == (1,)
    if leader < 0:                                  # the restarted broker leads again
        w.bounce(1)
        assert (w.state("solo", 0).leader, w.state("solo", 0).isr) == (1, (1,))
        assert w.c.ctx.partition_states[TP("solo", 0)] == P.ONLINE


def test_a_none_answer_brings_the_replica_back():
    w = Cluster()
    w.topic("t", {0: [1, 2], 1: [2, 1]})
    w.answer(1, {("t", 0): STORAGE, ("t", 1): STORAGE})
    w.answer(1, {("t", 0): 0})
    assert w.c.ctx.replicas_on_offline_dirs == {1: {TP("t", 1)}}
    assert w.c.ctx.is_replica_online(1, TP("t", 0))
    w.answer(1, {("t", 1): 0})
    assert w.c.ctx.replicas_on_offline_dirs == {}


def test_a_restart_clears_the_offline_dirs_and_gives_the_replicas_back():
    w = Cluster()
    w.topic("t", {0: [1, 2], 1: [2, 1]})
    w.answer(1, {("t", 0): STORAGE, ("t", 1): STORAGE})
    assert w.state("t", 0).leader == 2
    w.take()
    w.bounce(1)
    assert w.c.ctx.replicas_on_offline_dirs == {}
    epoch = w.c.ctx.broker_epoch(1)
    asked = [(s.tp, r.broker_epoch) for b, r in w.take() if b == 1
             and isinstance(r, LeaderAndIsrRequest) for s in r.partition_states]
    assert {tp for tp, _ in asked} == {TP("t", 0), TP("t", 1)}
    assert {e for _, e in asked} == {epoch}
    assert w.c.ctx.is_replica_online(1, TP("t", 0))


def test_a_new_controller_forgets_the_offline_dirs_and_asks_again():
    w = Cluster()
    w.topic("t", {0: [1, 2]})
    w.answer(1, {("t", 0): STORAGE})
    old = w.c
    w.zk.expire(old.store)                          # it resigns; /controller goes
    settle(w.zk, old.loop)
    w.start_controller(101)
    assert not old.is_active and old.ctx.replicas_on_offline_dirs == {}
    assert w.c.ctx.replicas_on_offline_dirs == {}
    assert TP("t", 0) in leader_and_isr(w.take()).get(1, set())
    w.answer(1, {("t", 0): STORAGE})
    assert w.c.ctx.replicas_on_offline_dirs == {1: {TP("t", 0)}}


@pytest.mark.parametrize("broker_state", ["dead", "failed after answering"])
def test_answers_from_a_broker_that_is_not_live_are_ignored(broker_state):
    w = Cluster()
    w.topic("t", {0: [1, 2]})
    if broker_state == "dead":
        w.brokers.pop(1).close()
        w.settle()
        w.answer(1, {("t", 0): STORAGE})
    else:
        w.answer(1, {("t", 0): STORAGE})
        w.brokers.pop(1).close()
        w.settle()
    assert 1 not in w.c.ctx.replicas_on_offline_dirs


def test_a_replica_of_a_topic_being_deleted_fails_its_deletion_until_restart():
    w = Cluster()
    w.topic("gone", {0: [1, 2]})
    w.channel.unreachable = {1}                     # broker 1's delete is never answered
    w.admin.request_topic_deletion("gone")
    w.settle()
    assert "gone" in w.admin.get_topics()
    assert w.c.ctx.replica_states[PR("gone", 0, 1)] == R.DELETION_STARTED
    w.answer(1, {("gone", 0): STORAGE})
    assert "gone" in w.c.ctx.topics_ineligible_for_deletion
    # failed, then back to Offline for the retry that waits for the broker's restart
    assert w.c.ctx.replica_states[PR("gone", 0, 1)] == R.OFFLINE
    w.channel.unreachable = set()
    w.bounce(1)
    assert "gone" not in w.admin.get_topics() and w.admin.get_topic_deletions() == set()


# -- the fenced delete ------------------------------------------------------------------------------
def test_only_the_current_controller_deletes_notices():
    zk = MemoryZk()
    old, new, broker = (MemoryZkStore(zk, CLUSTER).start() for _ in range(3))
    names = [broker.propagate_log_dir_event(b) for b in (4, 5)]
    assert names == ["log_dir_event_0000000000", "log_dir_event_0000000001"]
    assert broker.read_log_dir_event_notifications(names + ["log_dir_event_0000000009"]) == [4, 5]
    zombie = old.fenced(old.elect_controller(1))
    assert old.resign() is True
    current = new.fenced(new.elect_controller(2))
    with pytest.raises(ControllerMovedError):
        zombie.delete_log_dir_event_notifications(names)
    assert new.get_log_dir_event_notifications() == names
    assert current.delete_log_dir_event_notifications(names + ["log_dir_event_0000000009"]) == 2
    assert new.get_log_dir_event_notifications() == []


def test_a_notice_that_does_not_decode_is_skipped_and_deleted():
    w = Cluster()
    w.topic("t", {0: [1, 2]})
    w.take()
    w.zk.multi(None, w.admin.root, [Op("create", log_dir_event_path("log_dir_event_0000000000"),
                                       dumps({"version": 9, "broker": 2, "event": 1}))])
    w.brokers[1].propagate_log_dir_event(1)
    w.settle()
    assert leader_and_isr(w.take()) == {1: {TP("t", 0)}}
    assert w.admin.get_log_dir_event_notifications() == []
