"""Controller → broker request batching in Kafka's order (ControllerChannelManager.scala)."""

import pytest

from controller.context import ControllerContext, ReplicaAssignment, TopicPartition as TP
from controller.requests import (EPOCH_DURING_DELETE, LEADER_DURING_DELETE, BatchNotEmpty,
                                 LeaderAndIsrRequest, RequestBatch, StopReplicaRequest,
                                 UpdateMetadataRequest)
from controller.layout import BrokerRegistration, LeaderIsrAndControllerEpoch
from tests.fakes import RecordingChannel

pytestmark = pytest.mark.unit


def context():
    ctx = ControllerContext(epoch=3)
    for b in (1, 2, 3):
        ctx.live_brokers[b] = BrokerRegistration(b, "127.0.0.1", 9000 + b, node_id=f"n{b}",
                                                 actor_name=f"broker-{b}", epoch=100 + b)
    ctx.set_assignment(TP("t", 0), ReplicaAssignment((1, 2, 3)))
    ctx.set_assignment(TP("t", 1), ReplicaAssignment((2, 3, 1)))
    ctx.leadership[TP("t", 0)] = LeaderIsrAndControllerEpoch(1, 4, (1, 2, 3), 3, zk_version=7)
    ctx.leadership[TP("t", 1)] = LeaderIsrAndControllerEpoch(2, 0, (2, 3), 2, zk_version=1)
    return ctx


def test_order_is_leader_and_isr_then_update_metadata_then_stop_replica():
    ctx = context()
    batch = RequestBatch(controller_id=10, context=ctx)
    batch.new_batch()
    batch.add_stop_replica([3], TP("t", 1), delete=False)
    batch.add_leader_and_isr([1, 2], TP("t", 0), (1, 2, 3), is_new=False)
    channel = RecordingChannel()
    batch.send(channel)
    assert channel.kinds() == [
        (1, "LeaderAndIsrRequest"), (2, "LeaderAndIsrRequest"),
        (1, "UpdateMetadataRequest"), (2, "UpdateMetadataRequest"), (3, "UpdateMetadataRequest"),
        (3, "StopReplicaRequest")]
    assert batch.empty
    lai = channel.sent[0][1]
    assert isinstance(lai, LeaderAndIsrRequest)
    assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (10, 3, 101)
    (state,) = lai.partition_states
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version, state.replicas) == \
        (1, 4, (1, 2, 3), 7, (1, 2, 3))
    assert [b.id for b in lai.live_leaders] == [1]
    stop = channel.sent[-1][1]
    assert isinstance(stop, StopReplicaRequest) and stop.partitions[0].leader_epoch == 0
    assert stop.partitions[0].delete is False


def test_is_new_and_delete_are_sticky():
    ctx = context()
    batch = RequestBatch(10, ctx)
    batch.add_leader_and_isr([1], TP("t", 0), (1, 2, 3), is_new=True)
    batch.add_leader_and_isr([1], TP("t", 0), (1, 2, 3), is_new=False)
    batch.add_stop_replica([2], TP("t", 1), delete=True)
    batch.add_stop_replica([2], TP("t", 1), delete=False)
    reqs = dict((type(r).__name__ + str(b), r) for b, r in batch.build())
    assert reqs["LeaderAndIsrRequest1"].partition_states[0].is_new is True
    part = reqs["StopReplicaRequest2"].partitions[0]
    assert part.delete is True and part.leader_epoch == EPOCH_DURING_DELETE


def test_new_batch_refuses_unsent_requests():
    batch = RequestBatch(10, context())
    batch.add_update_metadata([1])
    with pytest.raises(BatchNotEmpty):
        batch.new_batch()


def test_update_metadata_for_all_partitions_marks_deleting_topics_and_offline_replicas():
    ctx = context()
    del ctx.live_brokers[3]
    ctx.topics_to_delete.add("t")
    batch = RequestBatch(10, ctx)
    batch.add_update_metadata([1, 2])
    sent = batch.build()
    assert [b for b, _ in sent] == [1, 2]
    um = sent[0][1]
    assert isinstance(um, UpdateMetadataRequest)
    assert [(s.partition, s.leader, s.offline_replicas) for s in um.partition_states] == \
        [(0, LEADER_DURING_DELETE, (3,)), (1, LEADER_DURING_DELETE, (3,))]
    assert [b.id for b in um.live_brokers] == [1, 2]


def test_partition_states_carry_the_topic_id_and_brokers_learn_it():
    from replicas.metadata_cache import MetadataCache
    ctx = context()
    ctx.topic_ids["t"] = "AAAAAAAAAAAAAAAAAAAAAQ"
    batch = RequestBatch(10, ctx)
    batch.add_leader_and_isr([1], TP("t", 0), (1, 2, 3), is_new=True)
    reqs = dict((type(r).__name__ + str(b), r) for b, r in batch.build())
    assert reqs["LeaderAndIsrRequest1"].partition_states[0].topic_id == "AAAAAAAAAAAAAAAAAAAAAQ"
    update = reqs["UpdateMetadataRequest2"]
    assert {s.topic_id for s in update.partition_states} == {"AAAAAAAAAAAAAAAAAAAAAQ"}
    cache = MetadataCache()
    cache.update(update)
    assert cache.topic_id("t") == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert cache.topic_name("AAAAAAAAAAAAAAAAAAAAAQ") == "t"
    ctx.topics_to_delete.add("t")            # queued for deletion: leader -2, id forgotten
    batch.clear()
    batch.add_update_metadata([2], [TP("t", 0), TP("t", 1)])
    (deleting,) = [r for _, r in batch.build()]
    cache.update(deleting)
    assert cache.topic_id("t") is None and cache.topic_ids() == {}
