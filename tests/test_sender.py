"""rayka.client.sender.SendQueues (the producer's in-flight rules, pure) and
rayka.client.futures (RecordFuture, MetadataRun): tables of answers, plus a seeded
simulation of a leader that checks sequences like Kafka's, against which any schedule of
sends, reorderings and failures must deliver every batch once, in order."""

from __future__ import annotations

import random
import threading
from concurrent.futures import TimeoutError, as_completed, wait

import pytest
from hypothesis import given, settings, strategies as st

from rayka.client import futures
from rayka.client.accumulator import RecordAccumulator
from rayka.client.futures import MetadataRun, RecordFuture, on_delivery_callback
from rayka.client.sender import OUT_OF_ORDER_SEQUENCE, SendQueues
from rayka.client.types import RecordMetadata

pytestmark = pytest.mark.unit
TP = ("t", 0)
NOT_LEADER, TOO_LARGE = 6, 10


def drained(n: int, records: int = 2, tp=TP, producer_id: int = 7) -> list:
    acc = RecordAccumulator(1 << 20, 0, lambda: 0, producer_id, 0)
    for _ in range(n):
        acc.append_many(tp, [b"v"] * records)
    return acc.drain(ready_only=False)


def queues(batches, max_in_flight=5, known=True, **kw) -> SendQueues:
    """`known`: a batch of ours already landed on these partitions (pipelining allowed)."""
    q = SendQueues(max_in_flight, retry_backoff_ms=100, **kw)
    for b in batches:
        q.add(b, 0)
        if known:
            q._confirmed.add(b.tp)
    return q


def test_one_at_a_time_until_the_first_batch_of_a_partition_lands():
    a, b, c = batches = drained(3)
    q = queues(batches, known=False)
    assert q.sendable(0) == [a]           # the leader would take b first at any sequence
    assert q.on_answer(a, NOT_LEADER, 1).kind == "retry"
    assert q.sendable(200) == [a]
    assert q.on_answer(a, 0, 201).kind == "done"
    assert q.sendable(201) == [b, c]


# -- sending -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, limit, first", [(3, 5, 3), (7, 5, 5), (4, 1, 1)])
def test_up_to_max_in_flight_per_partition_in_sequence_order(n, limit, first):
    batches = drained(n)
    q = queues(batches, limit)
    sent = q.sendable(0)
    assert sent == batches[:first]
    assert q.sendable(0) == []                 # nothing more until answers come
    assert q.on_answer(sent[0], 0, 1).kind == "done"
    assert q.sendable(1) == batches[first:first + 1]


def test_full_and_busy_partitions():
    q = queues(drained(5) + drained(1, tp=("t", 1)))
    assert q.full() == {TP} and q.busy() == {TP, ("t", 1)}


def test_a_retriable_error_retries_the_head_alone_after_the_backoff():
    a, b, c = batches = drained(3)
    q = queues(batches)
    assert q.sendable(0) == batches
    assert q.on_answer(a, NOT_LEADER, 10) == futures_outcome("retry", NOT_LEADER)
    assert q.sendable(50) == []                # b, c still in flight: nothing goes
    assert q.on_answer(b, OUT_OF_ORDER_SEQUENCE, 20).kind == "retry"   # a gap: not final
    assert q.on_answer(c, OUT_OF_ORDER_SEQUENCE, 20).kind == "retry"
    assert q.sendable(50) == []                # backoff
    assert q.sendable(200) == [a]              # retrying: the head, alone
    assert q.sendable(200) == []
    assert q.on_answer(a, 0, 210).kind == "done"
    assert q.sendable(210) == [b, c]           # pipelining again, in order


def futures_outcome(kind, code=0, rewind=0):
    from rayka.client.sender import Outcome
    return Outcome(kind, code, rewind)


def test_out_of_order_at_the_head_with_its_own_sequence_is_final():
    (a,) = batches = drained(1)
    q = queues(batches)
    q.sendable(0)
    assert q.on_answer(a, OUT_OF_ORDER_SEQUENCE, 1) == futures_outcome("failed", 45)
    assert q.pending() == 0


def test_a_refused_batch_gives_its_sequences_back_to_the_later_ones():
    a, b, c = batches = drained(3, records=4)
    b._encoded = b"old"
    q = queues(batches)
    q.sendable(0)
    assert [x.base_sequence for x in batches] == [0, 4, 8]
    assert q.on_answer(a, TOO_LARGE, 1) == futures_outcome("failed", TOO_LARGE, rewind=4)
    assert [b.base_sequence, c.base_sequence] == [0, 4] and b._encoded is None
    # b was sent as 4-7: the leader answers the gap OUT_OF_ORDER, retriable (renumbered)
    assert q.on_answer(b, OUT_OF_ORDER_SEQUENCE, 2).kind == "retry"


def test_only_batches_after_a_refused_one_are_renumbered():
    a, b, c = batches = drained(3, records=2)
    q = queues(batches)
    q.sendable(0)
    assert q.on_answer(a, NOT_LEADER, 1).kind == "retry"      # a: written? unknown
    assert q.on_answer(b, TOO_LARGE, 2).rewind == 2
    assert [a.base_sequence, c.base_sequence] == [0, 2]       # a keeps its own


def test_retrying_ends_when_the_head_succeeds_not_a_later_batch():
    a, b, c, d = batches = drained(4)
    q = queues(batches, 3)
    assert q.sendable(0) == [a, b, c]
    assert q.on_answer(a, 7, 1).kind == "retry"       # timed out: maybe written
    assert q.on_answer(b, 0, 2).kind == "done"        # so a was written after all
    assert q.sendable(200) == []                      # c in flight: still retrying
    assert q.on_answer(c, 0, 3).kind == "done"
    assert q.sendable(200) == [a]                     # the head alone, never d beside it
    assert q.on_answer(a, 0, 201).kind == "done"
    assert q.sendable(201) == [d]


def test_delivery_timeout_and_retries_bound_the_retries():
    (a,) = drained(1)
    q = queues([a], delivery_timeout_ms=1_000)
    q.sendable(0)
    assert q.on_answer(a, NOT_LEADER, 500).kind == "retry"
    q.sendable(700)
    assert q.on_answer(a, NOT_LEADER, 1_001) == futures_outcome("failed", NOT_LEADER)
    (b,) = drained(1)
    q = queues([b], retries=0)
    q.sendable(0)
    assert q.on_answer(b, NOT_LEADER, 1).kind == "failed"


def test_unsend_backs_off_without_retry_mode():
    a, b = batches = drained(2)
    q = queues(batches)
    assert q.sendable(0) == [a, b]
    q.unsend(a, 0)
    q.unsend(b, 0)
    assert q.sendable(50) == [] and q.sendable(100) == [a, b]


# -- a seeded leader -----------------------------------------------------------------------------------
class SequenceLeader:
    """Kafka's idempotent append for one producer and partition: duplicates of the last 5
    batches answered with their offsets, a gap OUT_OF_ORDER_SEQUENCE (an unknown producer
    starts anywhere), refused batches (too large) never written."""

    def __init__(self):
        self.log, self.batches = [], []      # written values; (first seq, last seq, offset)

    def append(self, batch, refuse: bool) -> tuple[int, int | None]:
        first = batch.base_sequence
        last = first + batch.record_count - 1
        for f, l, offset in self.batches[-5:]:
            if (f, l) == (first, last):
                return 0, offset
        # an unknown producer may start at any sequence (Kafka: its state may have been
        # lost to retention), so a first batch overtaken by its successor is accepted late
        if self.batches and first != self.batches[-1][1] + 1:
            return OUT_OF_ORDER_SEQUENCE, None
        if refuse:
            return TOO_LARGE, None
        offset = len(self.log)
        self.batches.append((first, last, offset))
        self.log.extend(batch.values)
        return 0, offset


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 5), st.integers(1, 30))
def test_any_schedule_delivers_each_batch_once_in_order(seed, max_in_flight, n):
    """Requests reach the leader in any order and their answers come back in any order
    (Ray may start one caller's calls out of order; answers are collected per round)."""
    rng = random.Random(seed)
    acc = RecordAccumulator(1 << 20, 0, lambda: 0, 7, 0)
    for i in range(n):
        acc.append_many(TP, [b"%d-%d" % (i, j) for j in range(rng.randint(1, 3))])
    batches = acc.drain(ready_only=False)
    q = SendQueues(max_in_flight, retry_backoff_ms=0)
    for b in batches:
        q.add(b, 0)
    leader, flying, answered, outcomes, now = SequenceLeader(), [], [], {}, 0
    refused = {i for i in range(n) if rng.random() < 0.1}
    while q.pending():
        now += 1
        flying += q.sendable(now)
        assert len(flying) + len(answered) <= max_in_flight
        if flying and (not answered or rng.random() < 0.5):   # a request reaches the leader
            batch = flying.pop(rng.randrange(len(flying)))
            index = batches.index(batch)
            luck = rng.random()
            if luck < 0.1:
                code = NOT_LEADER                              # lost on the way
            else:
                code, _ = leader.append(batch, refuse=index in refused)
                if luck < 0.2:
                    code = 7                                   # written, the answer lost
            answered.append((batch, code))
            continue
        batch, code = answered.pop(rng.randrange(len(answered)))   # an answer comes back
        outcome = q.on_answer(batch, code, now)
        if outcome.kind != "retry":
            outcomes[batches.index(batch)] = outcome.kind
        if outcome.rewind:
            acc.rewind_sequence(TP, outcome.rewind)
    assert outcomes == {i: "failed" if i in refused else "done" for i in range(n)}
    # every written batch once, in send order, and nothing of a refused one
    assert leader.log == [v for i, b in enumerate(batches) if i not in refused for v in b.values]


# -- RecordFuture and MetadataRun ------------------------------------------------------------------------
def completed(batch, base=None, error=None):
    batch.base_offset, batch.error = base, error
    futures.complete([batch])


def test_record_future_resolves_from_its_batch():
    (batch,) = drained(1, records=3)
    f0, f2, bulk = RecordFuture(batch, 0), RecordFuture(batch, 2), RecordFuture(batch, None)
    assert not f0.done() and f0.running() and not f0.cancel()
    with pytest.raises(TimeoutError):
        f0.result(timeout=0.01)
    completed(batch, base=40)
    assert f0.done() and f2.result() == RecordMetadata("t", 0, 42)
    assert bulk.result() == [RecordMetadata("t", 0, o) for o in (40, 41, 42)]
    assert f0.exception() is None


def test_record_future_failure_callbacks_and_waiters():
    (batch,) = drained(1, records=2)
    f = RecordFuture(batch, 1)
    seen, reports = [], []
    f.add_done_callback(lambda fut: seen.append(fut.exception()))
    batch.watchers.append((f, on_delivery_callback(lambda err, md: reports.append((err, md)))))
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(f.exception(timeout=10)))
    waiter.start()
    error = RuntimeError("refused")
    completed(batch, error=error)
    waiter.join(10)
    assert seen == [error] and woke == [error] and reports == [(error, None)]
    with pytest.raises(RuntimeError):
        f.result()
    late = []
    f.add_done_callback(late.append)             # already done: called at once
    assert late == [f]


def test_record_futures_work_with_concurrent_futures_wait_and_as_completed():
    (a,) = drained(1)
    (b,) = drained(1, tp=("t", 1))
    fa, fb = RecordFuture(a, 0), RecordFuture(b, 1)
    done, pending = wait([fa, fb], timeout=0.01)
    assert not done and pending == {fa, fb}
    threading.Timer(0.05, completed, (a,), {"base": 5}).start()
    threading.Timer(0.10, completed, (b,), {"base": 9}).start()
    assert [f.result() for f in as_completed([fa, fb], timeout=10)] == [
        RecordMetadata("t", 0, 5), RecordMetadata("t", 1, 10)]
    assert wait([fa, fb], timeout=1).not_done == set()


def test_metadata_run_is_a_lazy_sequence():
    run = MetadataRun([("t", 0, 10, 2), ("t", 1, 0, 3)])
    expected = [RecordMetadata("t", 0, 10), RecordMetadata("t", 0, 11)] + [
        RecordMetadata("t", 1, o) for o in range(3)]
    assert len(run) == 5 and list(run) == expected and run == expected
    assert run[0] == expected[0] and run[-1] == expected[-1] and run[1:3] == expected[1:3]
    assert run[2] == RecordMetadata("t", 1, 0)
    assert MetadataRun.concat([run, MetadataRun([("u", 0, 1, 1)])])[-1] == RecordMetadata("u", 0, 1)
    assert run != expected[:-1] and MetadataRun([]) == []
    with pytest.raises(IndexError):
        run[5]
