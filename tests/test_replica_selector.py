"""replicas/replica_selector.py: Kafka 3.8's RackAwareReplicaSelector and the preferred read
replica a leader names (KIP-392), table-driven, pure."""

from __future__ import annotations

import pytest

from replicas.errors import InvalidConfig
from replicas.replica_selector import (RACK_AWARE, ReplicaView, preferred_read_replica,
                                       rack_aware_select, selector_for)

pytestmark = pytest.mark.unit

LEADER = ReplicaView(1, "r1", 100, 0)


def view(broker_id, rack, leo=100, since_ms=0):
    return ReplicaView(broker_id, rack, leo, since_ms)


@pytest.mark.parametrize("client_rack, followers, chosen", [
    # no rack from the client: the leader
    (None, [view(2, "r2")], 1),
    ("", [view(2, "r2")], 1),
    # nobody in the client's rack: the leader
    ("r9", [view(2, "r2"), view(3, "r3")], 1),
    # the leader is in the client's rack: the leader, even if a follower is too
    ("r1", [view(2, "r1", leo=200)], 1),
    # one follower in the rack
    ("r2", [view(2, "r2"), view(3, "r3")], 2),
    # several: the greatest LEO
    ("r2", [view(2, "r2", leo=90), view(3, "r2", leo=95)], 3),
    # equal LEO: the most recently caught up
    ("r2", [view(2, "r2", since_ms=10), view(3, "r2", since_ms=500)], 2),
    # equal in both: the greatest broker id
    ("r2", [view(2, "r2"), view(3, "r2")], 3),
    # a replica without an endpoint on the client's listener has no rack: never chosen
    ("r2", [view(2, None), view(3, "r3")], 1),
    # racks compare exactly
    ("R2", [view(2, "r2")], 1),
])
def test_rack_aware_selection(client_rack, followers, chosen):
    assert rack_aware_select(client_rack, LEADER, followers).broker_id == chosen


@pytest.mark.parametrize("selector, client_rack, followers, preferred", [
    (None, "r2", [view(2, "r2")], -1),                 # no selector: always the leader
    (RACK_AWARE, "r2", [view(2, "r2")], 2),
    (RACK_AWARE, "r1", [view(2, "r2")], -1),            # the leader chosen: not named
    (RACK_AWARE, "r2", [], -1),                         # no eligible follower
    (RACK_AWARE, None, [view(2, "r2")], -1),
])
def test_preferred_read_replica_names_only_another_broker(selector, client_rack, followers,
                                                          preferred):
    assert preferred_read_replica(selector, client_rack, LEADER, followers) == preferred


def test_a_leader_without_an_endpoint_on_the_listener_is_never_named():
    """Kafka drops a selection whose endpoint is empty (Node.noNode)."""
    leader = view(1, None)
    assert preferred_read_replica(RACK_AWARE, "r2", leader, [view(2, None)]) == -1


@pytest.mark.parametrize("name, selector", [
    (None, None), ("", None), ("  ", None), (RACK_AWARE, RACK_AWARE),
    (f" {RACK_AWARE} ", RACK_AWARE),
])
def test_replica_selector_class_values(name, selector):
    assert selector_for(name) == selector


@pytest.mark.parametrize("name", [
    "org.apache.kafka.common.replica.LeaderSelector",       # a test class in Kafka, not shipped
    "RackAwareReplicaSelector",                             # the class's full name is needed
    "com.example.MySelector",
])
def test_replica_selector_class_kafka_does_not_ship_is_invalid(name):
    with pytest.raises(InvalidConfig, match="replica.selector.class"):
        selector_for(name)
