"""ReplicaManager under seeded random failures (tests/replication_harness.py): kills,
cut-off brokers, controller-style elections, writes to stale leaders and idempotent retries.
Checks: no acknowledged batch lost, nothing duplicated, dense offsets, logs byte-identical
up to the HW, consumers below the HW, a leader's HW never moving back.
"""

from __future__ import annotations

import random

import pytest

from replicas import records
from tests.replication_harness import Cluster

pytestmark = pytest.mark.unit

ALL = -1


class _Producer:
    """One idempotent producer, one batch in flight, retrying the same sequence."""

    def __init__(self):
        self.seq, self.batch_no = 0, 0
        self.current: tuple[int, list[bytes]] | None = None       # (first seq, values)
        self.inflight: tuple[int, int] | None = None               # (broker, pending id)
        self.acked: dict[int, tuple[int, list[bytes]]] = {}        # batch no -> (base, values)
        self.sent: dict[bytes, int] = {}                           # value -> batch no

    def next_batch(self, rng) -> tuple[int, list[bytes]]:
        if self.current is None:
            n = rng.randint(1, 4)
            values = [b"b%04d-%d" % (self.batch_no, i) for i in range(n)]
            self.current = (self.seq, values)
            for v in values:
                self.sent[v] = self.batch_no
        return self.current

    def ack(self, base: int) -> None:
        first_seq, values = self.current
        self.acked[self.batch_no] = (base, values)
        self.seq += len(values)
        self.batch_no += 1
        self.current = self.inflight = None


def _elect_offline(cluster, tp) -> None:
    """The controller's offline election + replica-offline handling (Kafka's
    ReplicaStateMachine.scala, PartitionLeaderElectionAlgorithms.scala)."""
    lead = cluster.leadership[tp]
    live = [r for r in lead.replicas if r not in cluster.down]
    if lead.leader in cluster.down or lead.leader < 0:
        candidates = [r for r in lead.replicas if r in lead.isr and r in live]
        if not candidates and lead.leader < 0:
            return
        if candidates:
            lead.leader = candidates[0]
            lead.isr = tuple(r for r in lead.isr if r in live)
        else:
            lead.leader = -1                     # the last ISR member is kept
    elif any(r in cluster.down for r in lead.isr) and len(lead.isr) > 1:
        lead.isr = tuple(r for r in lead.isr if r in live) or lead.isr
    else:
        return
    lead.leader_epoch += 1
    lead.zk_version += 1
    cluster.send_leader_and_isr(tp)


def _check_consumer_view(cluster, tp) -> None:
    lead = cluster.leadership[tp]
    if lead.leader < 0 or lead.leader in cluster.down:
        return
    rm = cluster.brokers[lead.leader]
    got = rm.fetch(tp, 0, 1 << 20, current_leader_epoch=lead.leader_epoch)
    if got.error == 0 and got.records:
        offsets = [r.offset for r in records.decode_records(got.records)]
        assert max(offsets) < got.high_watermark


@pytest.mark.parametrize("seed", range(16))
def test_random_failures_never_lose_or_duplicate_acknowledged_writes(tmp_path, seed):
    """Seeded kills, cut-offs, elections, zombie writes, idempotent retries;
    rayka/chaos/checker.py's invariants 1-3, 5, 6.
    Odd seeds checkpoint HWs lazily (every 5 s): a restart then loads an older HW."""
    rng = random.Random(seed)
    cluster = Cluster(tmp_path, lag_ms=3_000, hw_checkpoint_interval_ms=5_000 * (seed % 2))
    tp = cluster.create("chaos", config={"min.insync.replicas": "2", "segment.bytes": "600"})
    producer = _Producer()
    hw_seen: dict[tuple[int, int], int] = {}
    for _step in range(90):
        action = rng.random()
        lead = cluster.leadership[tp]
        if action < 0.35:                                     # produce (sometimes to a zombie)
            if producer.inflight is None:
                target = lead.leader if rng.random() < 0.85 else rng.choice(cluster.broker_ids)
                if target >= 0 and target not in cluster.dead:
                    first_seq, values = producer.next_batch(rng)
                    buf = records.build_batch(values, timestamps_ms=0, producer_id=1,
                                              producer_epoch=0, base_sequence=first_seq)
                    r = cluster.brokers[target].append(tp, bytes(buf), ALL, 2_000)
                    cluster.apply(target, r.effects)
                    if r.error == 0 and r.pending_id is None:
                        producer.ack(r.base_offset)
                    elif r.error == 0:
                        producer.inflight = (target, r.pending_id)
        elif action < 0.70:                                   # some fetcher round trips
            for key in rng.sample(sorted(cluster.fetching), k=len(cluster.fetching)):
                if rng.random() < 0.7:
                    cluster.fetch_once(*key)
        elif action < 0.82:                                   # time passes
            cluster.clock.advance(rng.choice([100, 1_000, 3_500]))
            for b in cluster.broker_ids:
                if b not in cluster.dead:
                    cluster.tick(b)
        elif action < 0.92:                                   # a broker fails
            if not cluster.down:
                victim = rng.choice(cluster.broker_ids)
                if rng.random() < 0.5:
                    cluster.kill(victim)
                    if producer.inflight and producer.inflight[0] == victim:
                        producer.inflight = None              # the connection died
                else:
                    cluster.down.add(victim)                  # cut off, still running
                _elect_offline(cluster, tp)
        else:                                                 # the failed broker returns
            for b in sorted(cluster.down):
                if b in cluster.dead:
                    cluster.revive(b)
                cluster.down.discard(b)
                lead = cluster.leadership[tp]
                if lead.leader < 0:
                    _elect_offline(cluster, tp)
                else:
                    cluster.send_leader_and_isr(tp, to=(b,))
        # answers to the producer
        if producer.inflight is not None:
            b, pid = producer.inflight
            done = cluster.done.get((b, pid))
            if done is not None:
                if done.error == 0:
                    producer.ack(done.base_offset)
                else:
                    producer.inflight = None
        _check_consumer_view(cluster, tp)
        lead = cluster.leadership[tp]
        if lead.leader >= 0 and lead.leader not in cluster.down:
            hw = cluster.brokers[lead.leader].partition_info(tp)["high_watermark"]
            key = (lead.leader, lead.leader_epoch)
            assert hw >= hw_seen.get(key, 0), "HW moved back on a leader"
            hw_seen[key] = hw
    # heal: everyone back, settle replication and ISR
    for b in sorted(cluster.down):
        if b in cluster.dead:
            cluster.revive(b)
        cluster.down.discard(b)
    _elect_offline(cluster, tp)
    cluster.send_leader_and_isr(tp, to=tuple(b for b in cluster.broker_ids
                                             if b != cluster.leadership[tp].leader))
    for _ in range(4):
        cluster.replicate()
        cluster.clock.advance(100)
        cluster.tick(cluster.leadership[tp].leader)
    lead = cluster.leadership[tp]
    leader = cluster.brokers[lead.leader]
    hw = leader.partition_info(tp)["high_watermark"]
    assert hw == leader.log(tp).log_end_offset and sorted(lead.isr) == [1, 2, 3]
    assert len({cluster.log_bytes(b, tp, hw) for b in lead.isr}) == 1       # invariant 3
    stored = records.decode_records(cluster.log_bytes(lead.leader, tp, hw))
    assert [r.offset for r in stored] == list(range(hw))                    # dense offsets
    at = {r.offset: r.value for r in stored}
    for base, values in producer.acked.values():                            # invariant 1
        assert [at.get(base + i) for i in range(len(values))] == values
    counts: dict[bytes, int] = {}
    for r in stored:
        counts[r.value] = counts.get(r.value, 0) + 1
    assert all(c == 1 for c in counts.values())                             # invariant 2
