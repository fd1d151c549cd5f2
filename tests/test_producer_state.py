"""Idempotent-producer state (replicas/producer_state.py): Kafka's ProducerAppendInfo rules."""

from __future__ import annotations

import pytest

from replicas import records
from replicas.control import COMMIT
from replicas.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber
from replicas.producer_state import (INT32_MAX, NUM_BATCHES_TO_RETAIN, BatchMetadata,
                                     ProducerStateManager, in_sequence)

pytestmark = pytest.mark.unit


def header(n: int = 2, pid: int = 1, epoch: int = 0, seq: int = 0, base_offset: int = 0):
    buf = records.build_batch([b"x"] * n, timestamps_ms=0, producer_id=pid, producer_epoch=epoch,
                              base_sequence=seq, base_offset=base_offset)
    return records.read_header(buf)


def commit(state: ProducerStateManager, headers, first_offset: int):
    append = state.prepare(headers, first_offset)
    assert append.duplicate is None
    state.commit(append)
    return append


def test_in_sequence_wraps_at_int32_max():
    assert in_sequence(4, 5) and not in_sequence(4, 6) and not in_sequence(4, 4)
    assert in_sequence(INT32_MAX, 0)


def test_several_batches_of_one_producer_in_one_buffer():
    state = ProducerStateManager()
    append = commit(state, [header(2, seq=0), header(3, seq=2)], 10)
    assert [u[2] for u in append.updates] == [BatchMetadata(0, 1, 10, 11),
                                              BatchMetadata(2, 4, 12, 14)]
    with pytest.raises(OutOfOrderSequenceNumber):
        state.prepare([header(1, seq=5), header(1, seq=7)], 15)   # the 2nd has a gap
    assert state.entry(1).last_seq == 4                            # nothing changed


def test_duplicates_only_within_the_last_five_batches():
    state = ProducerStateManager()
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        commit(state, [header(1, seq=i)], i)
    dup = state.prepare([header(1, seq=3)], 99).duplicate
    assert dup == BatchMetadata(3, 3, 3, 3)
    with pytest.raises(OutOfOrderSequenceNumber):        # seq 0 is no longer retained
        state.prepare([header(1, seq=0)], 99)
    bumped = state.prepare([header(1, epoch=1, seq=0)], 99)     # same range, new epoch: new data
    assert bumped.duplicate is None and len(bumped.updates) == 1


def test_epochs_and_unknown_producers():
    state = ProducerStateManager()
    commit(state, [header(1, epoch=3, seq=40)], 0)        # unknown producer: any sequence
    with pytest.raises(InvalidProducerEpoch):
        state.prepare([header(1, epoch=2, seq=41)], 1)
    with pytest.raises(OutOfOrderSequenceNumber):
        state.prepare([header(1, epoch=4, seq=41)], 1)    # a new epoch starts at 0
    commit(state, [header(1, epoch=4, seq=0)], 1)
    assert state.entry(1).epoch == 4 and len(state.entry(1).batches) == 1
    with pytest.raises(InvalidProducerEpoch):             # the old epoch's batch is gone
        state.prepare([header(1, epoch=3, seq=40)], 2)


def test_rebuild_from_log_headers_matches_leader_state():
    leader = ProducerStateManager()
    headers = []
    offset = 0
    plan = [(1, 0, 0, 2), (2, 0, 0, 1), (1, 0, 2, 3), (1, 1, 0, 1), (2, 0, 1, 1)]
    for pid, epoch, seq, n in plan:
        h = header(n, pid=pid, epoch=epoch, seq=seq, base_offset=offset)
        commit(leader, [h], offset)
        headers.append(h)
        offset += n
    rebuilt = ProducerStateManager()
    stale_epoch = header(1, pid=1, epoch=0, seq=9, base_offset=offset)    # ignored in replay
    rebuilt.rebuild(headers + [stale_epoch])
    assert rebuilt.loaded and rebuilt.producer_ids == [1, 2]
    for pid in (1, 2):
        assert rebuilt.entry(pid).epoch == leader.entry(pid).epoch
        assert list(rebuilt.entry(pid).batches) == list(leader.entry(pid).batches)
    rebuilt.invalidate()
    assert not rebuilt.loaded and rebuilt.entry(1) is None


def test_batches_without_producer_id_are_ignored():
    state = ProducerStateManager()
    append = state.prepare([header(2, pid=-1, epoch=-1, seq=-1)], 0)
    assert append.duplicate is None and append.updates == ()


def test_last_timestamp_is_the_last_batch_max_timestamp_or_the_last_marker_time():
    """Kafka's ProducerStateEntry.lastTimestamp, which DescribeProducers answers."""
    def stamped(seq: int, ts: int):
        buf = records.build_batch([b"x", b"y"], timestamps_ms=[ts - 5, ts], producer_id=1,
                                  producer_epoch=0, base_sequence=seq, base_offset=seq)
        return records.read_header(buf)

    leader, follower = ProducerStateManager(), ProducerStateManager()
    commit(leader, [stamped(0, 1_000), stamped(2, 2_000)], 0)
    follower.update(stamped(0, 1_000))
    assert leader.entry(1).last_timestamp == 2_000 and follower.entry(1).last_timestamp == 1_000
    leader.apply_marker(1, 0, COMMIT, 0, 4, timestamp=3_000)
    assert leader.entry(1).last_timestamp == 3_000
