"""Share-group offsets as an admin sees them (share/offsets.py): the lag, what a describe
lists, which partitions an alteration or a deletion touches and what it refuses."""

from __future__ import annotations

import pytest

from replicas.errors import ErrorCode as E
from share import offsets as so
from share.partition import RecordState as S
from share.partition import StateBatch
from share.records import ShareState

pytestmark = pytest.mark.unit
TOPICS = {"t": ("ID-t", 2), "u": ("ID-u", 1)}


def state(start, *batches):
    return ShareState(0, 3, start, tuple(StateBatch(*b) for b in batches))


@pytest.mark.parametrize("hwm, st, expected", [
    (100, state(40), 60),                                            # nothing in flight
    (100, state(40, (40, 49, S.ACKNOWLEDGED, 1)), 50),               # settled: not lag
    (100, state(40, (40, 44, S.AVAILABLE, 1), (45, 49, S.ARCHIVED, 5)), 55),
    (100, state(40, (30, 44, S.ACKNOWLEDGED, 1)), 55),               # the part past the SPSO
    (100, state(40, (10, 20, S.ACKNOWLEDGED, 1)), 60),               # wholly below the SPSO
    (40, state(40), 0),
    (-1, state(40), -1),                                             # high watermark unknown
    (100, state(-1), -1),                                            # never initialized
    (100, None, -1),
])
def test_lag_counts_what_is_past_the_spso_and_not_settled(hwm, st, expected):
    assert so.lag(hwm, st) == expected


def test_describe_asked_partitions_and_absent_ones():
    stored = {("t", 0): state(5, (5, 6, S.ACKNOWLEDGED, 1))}
    got = so.describe({"t": [0, 1], "gone": [0]}, TOPICS, stored, {("t", 0): 10})
    assert got == (
        so.TopicOffsets("t", "ID-t", (so.PartitionOffset(0, 5, 3, 3), so.PartitionOffset(1))),
        so.TopicOffsets("gone", None, (so.PartitionOffset(0),)))


def test_describe_all_lists_stored_partitions_of_existing_topics_sorted():
    stored = {("u", 0): state(1), ("t", 1): state(2), ("t", 0): state(3), ("gone", 0): state(4)}
    got = so.describe(None, TOPICS, stored, {})
    assert [(t.topic, [(p.partition, p.start_offset, p.lag) for p in t.partitions])
            for t in got] == [("t", [(0, 3, -1), (1, 2, -1)]), ("u", [(0, 1, -1)])]


def test_an_alteration_refuses_partitions_that_do_not_exist():
    targets, errors = so.plan_alter({"t": {0: 7, 2: 7}, "gone": {0: 1}}, TOPICS)
    assert targets == {("t", 0): 7}
    assert errors == {("t", 2): E.UNKNOWN_TOPIC_OR_PARTITION,
                      ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_deletion_takes_whole_topics_with_state_and_refuses_the_rest():
    targets, refused = so.plan_delete(["t", "u", "gone"], TOPICS, {"t"})
    assert targets == [("t", 0), ("t", 1)]
    assert refused == [
        so.TopicOutcome("u", "ID-u", E.UNKNOWN_TOPIC_OR_PARTITION, so.NO_STATE_MESSAGE),
        so.TopicOutcome("gone", None, E.UNKNOWN_TOPIC_OR_PARTITION, so.UNKNOWN_MESSAGE)]
