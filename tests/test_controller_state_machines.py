"""Partition and replica state machines against an in-memory store and a recording channel."""

import pytest

from controller.context import (ControllerContext, PartitionReplica as PR, ReplicaAssignment,
                                TopicPartition as TP)
from controller.partition_state_machine import Election, PartitionStateMachine, Strategy
from controller.replica_state_machine import ReplicaStateMachine
from controller.requests import (LeaderAndIsrRequest, RequestBatch, StopReplicaRequest,
                                 UpdateMetadataRequest)
from controller.states import PartitionState as P, ReplicaState as R
from controller.store_api import ControllerMovedError
from controller.layout import BrokerRegistration, LeaderIsrAndControllerEpoch as LI
from replicas.errors import EligibleLeadersNotAvailable
from tests.fakes import InMemoryStore, RecordingChannel

pytestmark = pytest.mark.unit


class Harness:
    def __init__(self, live=(5, 6), epoch=1):
        self.ctx = ControllerContext(epoch=epoch)
        for b in live:
            self.ctx.live_brokers[b] = BrokerRegistration(b, "127.0.0.1", 9000 + b, epoch=b * 10)
        self.store = InMemoryStore()
        self.batch = RequestBatch(controller_id=100, context=self.ctx)
        self.psm = PartitionStateMachine(self.ctx, self.batch, self.store)
        self.rsm = ReplicaStateMachine(self.ctx, self.batch, self.store)
        self.channel = RecordingChannel()

    def topic(self, name, assignment, leadership=None):
        self.store.topics.add(name)
        for p, replicas in assignment.items():
            tp = TP(name, p)
            self.ctx.set_assignment(tp, ReplicaAssignment(tuple(replicas)))
            if leadership and p in leadership:
                leader, isr, leader_epoch = leadership[p]
                state = LI(leader, leader_epoch, tuple(isr), self.ctx.epoch, 0)
                self.store.states[(name, p)] = (state, 0)
                self.ctx.leadership[tp] = state
                self.ctx.partition_states[tp] = P.ONLINE
                for r in replicas:
                    self.ctx.replica_states[PR(name, p, r)] = R.ONLINE

    def send(self):
        self.batch.send(self.channel)
        sent = list(self.channel.sent)
        self.channel.clear()
        return sent

    def stored(self, topic, p):
        return self.store.states[(topic, p)][0]


def of_kind(sent, kind):
    return {b: r for b, r in sent if isinstance(r, kind)}


def test_new_partitions_go_online_with_first_live_replica():
    h = Harness(live=(1, 2, 3))
    h.topic("t", {0: [3, 1, 2], 1: [4, 2, 1], 2: [4, 7]})
    tps = [TP("t", 0), TP("t", 1), TP("t", 2)]
    h.psm.handle_state_changes(tps, P.NEW)
    results = h.psm.handle_state_changes(tps, P.ONLINE)
    assert (h.stored("t", 0).leader, h.stored("t", 0).isr, h.stored("t", 0).leader_epoch) == (3, (3, 1, 2), 0)
    assert (h.stored("t", 1).leader, h.stored("t", 1).isr) == (2, (2, 1))
    assert isinstance(results[TP("t", 2)], EligibleLeadersNotAvailable)
    assert h.ctx.partition_states[TP("t", 2)] == P.NEW
    assert h.ctx.partition_states[TP("t", 0)] == P.ONLINE
    sent = h.send()
    lai = of_kind(sent, LeaderAndIsrRequest)
    assert sorted(lai) == [1, 2, 3]
    assert all(s.is_new for r in lai.values() for s in r.partition_states)
    assert sorted(of_kind(sent, UpdateMetadataRequest)) == [1, 2, 3]


def test_existing_state_znode_keeps_the_partition_new():
    h = Harness(live=(1,))
    h.topic("t", {0: [1]})
    h.store.states[("t", 0)] = (LI(1, 3, (1,), 1, 0), 0)
    h.psm.handle_state_changes([TP("t", 0)], P.NEW)
    h.psm.handle_state_changes([TP("t", 0)], P.ONLINE)
    assert h.ctx.partition_states[TP("t", 0)] == P.NEW
    assert h.stored("t", 0).leader_epoch == 3


def test_kafka_offline_replica_example():
    """replicas [5,6], leader 5, ISR [5,6]; 5 goes offline → leader -1, ISR [6], epoch+1,
    LeaderAndIsr to 6 only, StopReplica(delete=false) to 5."""
    h = Harness(live=(5, 6))
    h.topic("t", {0: [5, 6]}, {0: (5, [5, 6], 4)})
    del h.ctx.live_brokers[5]
    h.rsm.handle_state_changes([PR("t", 0, 5)], R.OFFLINE)
    state = h.stored("t", 0)
    assert (state.leader, state.isr, state.leader_epoch, state.zk_version) == (-1, (6,), 5, 1)
    assert h.ctx.leadership[TP("t", 0)] == state
    sent = h.send()
    assert list(of_kind(sent, LeaderAndIsrRequest)) == [6]
    stop = of_kind(sent, StopReplicaRequest)
    assert list(stop) == [5] and stop[5].partitions[0].delete is False
    assert h.ctx.replica_states[PR("t", 0, 5)] == R.OFFLINE


def test_last_isr_member_is_kept_when_it_dies():
    h = Harness(live=(5, 6))
    h.topic("t", {0: [5, 6]}, {0: (5, [5], 2)})
    del h.ctx.live_brokers[5]
    h.rsm.handle_state_changes([PR("t", 0, 5)], R.OFFLINE)
    assert (h.stored("t", 0).leader, h.stored("t", 0).isr) == (-1, (5,))


def test_broker_failure_elects_from_isr_then_stops_the_dead_replica():
    h = Harness(live=(1, 2, 3))
    h.topic("t", {0: [1, 2, 3]}, {0: (1, [1, 2, 3], 0)})
    del h.ctx.live_brokers[1]
    h.psm.handle_state_changes([TP("t", 0)], P.OFFLINE)
    h.psm.trigger_online_state_change()
    h.rsm.handle_state_changes([PR("t", 0, 1)], R.OFFLINE)
    state = h.stored("t", 0)
    assert (state.leader, state.isr, state.leader_epoch) == (2, (2, 3), 1)
    sent = h.send()
    assert sorted(of_kind(sent, LeaderAndIsrRequest)) == [2, 3]
    assert h.ctx.partition_states[TP("t", 0)] == P.ONLINE


def test_controlled_shutdown_example():
    """controlled shutdown of 5, replicas [5,6], ISR [5,6] → leader 6, ISR [6],
    LeaderAndIsr to BOTH 5 and 6."""
    h = Harness(live=(5, 6))
    h.topic("t", {0: [5, 6]}, {0: (5, [5, 6], 0)})
    h.ctx.shutting_down.add(5)
    h.psm.handle_state_changes([TP("t", 0)], P.ONLINE, Election(Strategy.CONTROLLED_SHUTDOWN))
    assert (h.stored("t", 0).leader, h.stored("t", 0).isr) == (6, (6,))
    assert sorted(of_kind(h.send(), LeaderAndIsrRequest)) == [5, 6]


@pytest.mark.parametrize("config, expected_leader", [({}, None),
                                                     ({"unclean.leader.election.enable": "true"}, 5)])
def test_unclean_election_follows_topic_config(config, expected_leader):
    """leader 6, ISR [6], replicas [6,5], live {5} → leader 5, ISR [5] only if allowed."""
    h = Harness(live=(5,))
    h.topic("t", {0: [6, 5]}, {0: (6, [6], 3)})
    h.ctx.topic_configs["t"] = config
    h.ctx.partition_states[TP("t", 0)] = P.OFFLINE
    results = h.psm.trigger_online_state_change()
    if expected_leader is None:
        assert isinstance(results[TP("t", 0)], EligibleLeadersNotAvailable)
        assert h.ctx.partition_states[TP("t", 0)] == P.OFFLINE
        assert h.stored("t", 0).leader_epoch == 3
    else:
        assert (h.stored("t", 0).leader, h.stored("t", 0).isr) == (5, (5,))
        assert h.psm.unclean_elections == 1


def test_conflicting_write_is_retried_on_fresh_state():
    h = Harness(live=(1, 2, 3))
    h.topic("t", {0: [1, 2, 3]}, {0: (1, [1, 2, 3], 0)})
    h.store.bump_behind_our_back("t", 0, isr=(1, 3))   # e.g. an ISR shrink we have not seen
    h.ctx.live_brokers.pop(1)
    h.psm.handle_state_changes([TP("t", 0)], P.OFFLINE)
    h.psm.trigger_online_state_change()
    state = h.stored("t", 0)
    assert (state.leader, state.isr, state.zk_version) == (3, (3,), 2)


def test_fenced_controller_writes_nothing():
    h = Harness(live=(1, 2))
    h.topic("t", {0: [1, 2]}, {0: (1, [1, 2], 0)})
    h.store.epoch_zk_version += 1          # a newer controller won
    h.ctx.live_brokers.pop(1)
    h.psm.handle_state_changes([TP("t", 0)], P.OFFLINE)
    with pytest.raises(ControllerMovedError):
        h.psm.trigger_online_state_change()
    assert h.stored("t", 0) == LI(1, 0, (1, 2), 1, 0)


def test_invalid_transitions_change_nothing():
    h = Harness(live=(1,))
    h.topic("t", {0: [1]})
    h.psm.handle_state_changes([TP("t", 0)], P.ONLINE)      # NonExistent → Online: invalid
    assert TP("t", 0) not in h.ctx.partition_states and not h.store.states
    h.rsm.handle_state_changes([PR("t", 0, 1)], R.DELETION_STARTED)
    assert PR("t", 0, 1) not in h.ctx.replica_states
    assert h.batch.empty


def test_startup_classifies_and_elects():
    h = Harness(live=(1, 2))
    h.topic("a", {0: [1, 2]}, {0: (1, [1, 2], 0)})        # leader live → Online
    h.topic("b", {0: [3, 2]}, {0: (3, [3, 2], 7)})        # leader dead → Offline → elected
    h.topic("c", {0: [2, 1]})                              # no state → New → initialized
    h.ctx.partition_states.clear()
    h.ctx.replica_states.clear()
    h.rsm.startup()
    h.psm.startup()
    assert h.ctx.partition_states == {TP("a", 0): P.ONLINE, TP("b", 0): P.ONLINE, TP("c", 0): P.ONLINE}
    # replica startup first (Kafka's order): dead 3 leaves the ISR (epoch 8, leader -1),
    # then partition startup elects 2 (epoch 9)
    assert (h.stored("b", 0).leader, h.stored("b", 0).leader_epoch) == (2, 9)
    assert (h.stored("c", 0).leader, h.stored("c", 0).isr) == (2, (2, 1))
    assert h.ctx.replica_states[PR("b", 0, 3)] == R.OFFLINE
    assert h.ctx.replica_states[PR("a", 0, 1)] == R.ONLINE


def test_replica_deletion_lifecycle():
    h = Harness(live=(1, 2))
    h.topic("t", {0: [1, 2]}, {0: (1, [1, 2], 0)})
    h.ctx.topics_to_delete.add("t")
    replicas = [PR("t", 0, 1), PR("t", 0, 2)]
    h.rsm.handle_state_changes(replicas, R.OFFLINE)
    h.rsm.handle_state_changes(replicas, R.DELETION_STARTED)
    sent = h.send()
    assert not of_kind(sent, LeaderAndIsrRequest)       # topic being deleted
    stops = [p for b, r in sent if isinstance(r, StopReplicaRequest) for p in r.partitions]
    assert any(p.delete for p in stops)
    h.rsm.handle_state_changes(replicas, R.DELETION_SUCCESSFUL)
    h.rsm.handle_state_changes(replicas, R.NON_EXISTENT)
    assert h.ctx.replicas(TP("t", 0)) == ()
    assert not h.ctx.replica_states
