"""The share-group offsets APIs on the wire (protocol/handlers/share.py over the fake broker,
decoded by kafka-python from Kafka 4.2's schemas): DescribeShareGroupOffsets v0/v1 (the
lag only in v1), AlterShareGroupOffsets echoing every partition asked and spreading a group
error over them, DeleteShareGroupOffsets per topic or the group's error alone."""

from __future__ import annotations

import pytest

from share.group import ShareHeartbeat
from tests.handler_wire import ask, cluster
from tests.protocol_samples import (AlterShareGroupOffsetsRequest,
                                    DeleteShareGroupOffsetsRequest,
                                    DescribeShareGroupOffsetsRequest, TOPIC_IDS)

pytestmark = pytest.mark.unit
_G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
_A = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
_D = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic


def describe(v, topics):
    return DescribeShareGroupOffsetsRequest[v](groups=[_G(group_id="g1", topics=None if
        topics is None else [_G.DescribeShareGroupOffsetsRequestTopic(
            topic_name=t, partitions=ps) for t, ps in topics.items()])])


def alter(offsets):
    return AlterShareGroupOffsetsRequest[0](group_id="g1", topics=[
        _A(topic_name=t, partitions=[_A.AlterShareGroupOffsetsRequestPartition(
            partition_index=p, start_offset=o) for p, o in ps.items()])
        for t, ps in offsets.items()])


def delete(topics):
    return DeleteShareGroupOffsetsRequest[0](group_id="g1",
                                             topics=[_D(topic_name=t) for t in topics])


def rows(resp):
    return {(t.topic_name, p.partition_index): (p.start_offset, p.error_code)
            for t in resp.groups[0].topics for p in t.partitions}


def test_describe_answers_start_offsets_and_v1_the_lag():
    fake = cluster()
    for _ in range(10):
        fake.append(("orders", 0), b"x")
    assert ask(fake, alter({"orders": {0: 4}})).error_code == 0
    v1 = ask(fake, describe(1, {"orders": [0, 1], "gone": [0]}))
    assert rows(v1) == {("orders", 0): (4, 0), ("orders", 1): (-1, 0), ("gone", 0): (-1, 0)}
    lags = {(t.topic_name, p.partition_index): p.lag
            for t in v1.groups[0].topics for p in t.partitions}
    assert lags[("orders", 0)] == fake.partition(("orders", 0)).high_watermark - 4
    assert lags[("orders", 1)] == -1
    ids = {t.topic_name: t.topic_id for t in v1.groups[0].topics}
    assert ids["orders"] == TOPIC_IDS["orders"] and ids["gone"] is None     # the zero UUID
    v0 = ask(fake, describe(0, None))
    assert rows(v0) == {("orders", 0): (4, 0)}
    assert "lag" not in v0.to_dict()["groups"][0]["topics"][0]["partitions"][0]   # v1's


def test_alter_echoes_every_partition_and_spreads_a_group_error():
    fake = cluster()
    got = ask(fake, alter({"orders": {0: 1, 7: 1}, "gone": {0: 1}}))
    assert got.error_code == 0
    assert {(t.topic_name, p.partition_index): (p.error_code, p.error_message)
            for t in got.responses for p in t.partitions} == {
        ("orders", 0): (0, None),
        ("orders", 7): (3, "This server does not host this topic-partition."),
        ("gone", 0): (3, "This server does not host this topic-partition.")}
    fake.share_heartbeat(ShareHeartbeat("g1", "m1", 0, None, ("orders",), "c", ""),
                         fake.topic_partition_counts())
    busy = ask(fake, alter({"orders": {0: 1}}))
    assert (busy.error_code, busy.error_message) == (68, "The group is not empty.")
    assert [(p.error_code, p.error_message) for t in busy.responses for p in t.partitions] \
        == [(68, "The group is not empty.")]


def test_delete_answers_each_topic_or_the_groups_error_alone():
    fake = cluster()
    ask(fake, alter({"orders": {0: 1}}))
    got = ask(fake, delete(["orders", "audit", "gone"]))
    assert (got.error_code, [(t.topic_name, t.error_code, t.error_message)
                             for t in got.responses]) == (0, [
        ("orders", 0, None),
        ("audit", 3, "There is no offset information to delete."),
        ("gone", 3, "This server does not host this topic-partition.")])
    assert rows(ask(fake, describe(1, None))) == {}
    fake.share_heartbeat(ShareHeartbeat("g1", "m1", 0, None, ("orders",), "c", ""),
                         fake.topic_partition_counts())
    busy = ask(fake, delete(["orders"]))
    assert (busy.error_code, busy.responses) == (68, [])
