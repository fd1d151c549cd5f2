"""A consumer reads a group's committed offsets stable (KIP-447), on a real cluster: right after
commit_transaction returns, the transaction's offsets may still be pending in the group
coordinator (its markers are written after EndTxn is answered); Consumer.committed must
wait for them instead of answering the offsets from before the transaction, or an
exactly-once application that rewinds or restarts re-processes what it committed (the
chaos pipeline's duplicates, rayka/chaos/txns.py)."""

from __future__ import annotations

import uuid

import pytest

import rayka
from tests.ray_cluster import ray_session  # noqa: F401  (fixture)

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster(ray_session, tmp_path_factory):
    c = rayka.start_local(name=f"s{uuid.uuid4().hex[:8]}", brokers=3, controllers=1,
                          data_dir=str(tmp_path_factory.mktemp("rayka")),
                          include_dashboard=False, transaction_state_log_num_partitions=4,
                          offsets_topic_num_partitions=4)
    yield c
    c.shutdown()


def test_committed_right_after_a_transaction_commits_is_its_offset(cluster):
    src, dst = f"src{uuid.uuid4().hex[:6]}", f"dst{uuid.uuid4().hex[:6]}"
    for t in (src, dst):
        cluster.admin().create_topic(t, 1, 3, {"min.insync.replicas": 2})
    producer = cluster.producer(transactional_id=f"stable-{src}")
    producer.init_transactions()
    group = f"g-{src}"
    reader = cluster.consumer(group_id=group, enable_auto_commit=False,
                              isolation_level="read_committed")
    stale = []
    for n in range(1, 41):
        producer.begin_transaction()
        producer.send(dst, b"%d" % n, partition=0)
        producer.send_offsets_to_transaction({(src, 0): n}, group)
        producer.commit_transaction()
        got = reader.committed((src, 0))
        if got != n:
            stale.append((n, got))
    assert stale == []
    # a new member's starting position is the stable offset too
    producer.begin_transaction()
    producer.send(dst, b"last", partition=0)
    producer.send_offsets_to_transaction({(src, 0): 41}, group)
    producer.commit_transaction()
    member = cluster.consumer(group_id=group, enable_auto_commit=False,
                              isolation_level="read_committed")
    member.assign([(src, 0)])
    assert member.position((src, 0)) == 41
    member.close()
    reader.close()
    producer.close()
