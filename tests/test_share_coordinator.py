"""The share coordinator (share/coordinator.py) and its `__share_group_state` records
(share/records.py): reads and writes answered only after their append, leader and state
epoch fencing, ownership, and a coordinator rebuilt from what another one appended holding
the same states (a hypothesis property)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from replicas.errors import ErrorCode as E
from share import coordinator as sc
from share.partition import StateBatch
from share.records import (SNAPSHOT, ShareKey, ShareState, apply_update, decode_key,
                           decode_value, encode_key, encode_snapshot, java_hash, partition_for)

pytestmark = pytest.mark.unit
KEY = ShareKey("g", "AAAAAAAAAAAAAAAAAAAAAQ", 3)


class Driver:
    """A coordinator owning every partition, its appends kept as the log."""

    def __init__(self, partitions: int = 4):
        self.c = sc.ShareCoordinator(partitions, lambda: 1000)
        self.log: dict[int, list] = {}
        self.answers: dict = {}
        self.held: list = []
        self.rid = 0
        for p in range(partitions):
            self.c.process(sc.LoadPartition(p, ()))

    def send(self, event, hold: bool = False) -> None:
        for effect in self.c.process(event):
            if isinstance(effect, sc.Respond):
                self.answers[effect.request_id] = effect.result
            elif hold:
                self.held.append(effect)
            else:
                self.log.setdefault(effect.partition, []).extend(
                    (r.key, r.value) for r in effect.records)
                self.send(sc.AppendDone(effect.token))

    def ask(self, make, hold: bool = False):
        self.rid += 1
        self.send(make(self.rid), hold)
        return self.answers.get(self.rid)


def state(leader_epoch=1, start=10, state_epoch=0, batches=(StateBatch(10, 12, 0, 1),)):
    return ShareState(state_epoch, leader_epoch, start, tuple(batches))


def test_java_string_hash_and_the_key_partition():
    assert java_hash("hello") == 99162322 and java_hash("") == 0
    assert java_hash("polygenelubricants") == -2**31          # Utils.abs maps it to 0
    assert 0 <= partition_for(KEY, 50) < 50


def test_records_round_trip():
    raw = encode_key(KEY, SNAPSHOT)
    assert decode_key(raw) == (SNAPSHOT, KEY)
    s = ShareState(2, 5, 100, (StateBatch(100, 104, 2, 1), StateBatch(105, 105, 0, 3)), 7)
    assert decode_value(SNAPSHOT, encode_snapshot(s, 1234)) == s


def test_an_update_replaces_the_offsets_it_covers_and_may_move_the_start():
    base = state(batches=(StateBatch(10, 14, 0, 1),))
    update = ShareState(-1, 2, 12, (StateBatch(13, 13, 2, 1),))
    got = apply_update(base, update)
    assert got.start_offset == 12 and got.leader_epoch == 2
    assert got.batches == (StateBatch(12, 12, 0, 1), StateBatch(13, 13, 2, 1),
                           StateBatch(14, 14, 0, 1))


def test_a_write_is_answered_after_its_append_and_read_back():
    d = Driver()
    assert d.ask(lambda r: sc.ReadState(r, KEY, 1)) == sc.StateAnswer()       # never written
    assert d.ask(lambda r: sc.WriteState(r, KEY, state()), hold=True) is None  # parked
    d.send(sc.AppendDone(d.held.pop().token))
    assert d.answers[d.rid].error == E.NONE
    got = d.ask(lambda r: sc.ReadState(r, KEY, 1))
    assert (got.error, got.state.start_offset, got.state.batches) == \
        (E.NONE, 10, (StateBatch(10, 12, 0, 1),))


@pytest.mark.parametrize("event, error", [
    (lambda r: sc.WriteState(r, KEY, state(leader_epoch=1)), E.FENCED_LEADER_EPOCH),
    (lambda r: sc.ReadState(r, KEY, 1), E.FENCED_LEADER_EPOCH),
    (lambda r: sc.WriteState(r, KEY, state(leader_epoch=2, state_epoch=0)),
     E.FENCED_STATE_EPOCH),
    (lambda r: sc.WriteState(r, KEY, state(leader_epoch=3, state_epoch=1)), E.NONE),
])
def test_old_leaders_and_old_state_epochs_are_fenced(event, error):
    d = Driver()
    d.ask(lambda r: sc.WriteState(r, KEY, state(leader_epoch=2, state_epoch=1)))
    assert d.ask(event).error == error


def test_a_new_leaders_read_fences_the_old_one_at_once():
    d = Driver()
    d.ask(lambda r: sc.WriteState(r, KEY, state(leader_epoch=1)))
    assert d.ask(lambda r: sc.ReadState(r, KEY, 2)).state.leader_epoch == 2
    assert d.ask(lambda r: sc.WriteState(r, KEY, state(leader_epoch=1))).error == \
        E.FENCED_LEADER_EPOCH


def test_ownership_loading_and_failed_appends():
    d = Driver()
    p = d.c.partition_for(KEY)
    d.send(sc.UnloadPartition(p))
    assert d.ask(lambda r: sc.ReadState(r, KEY, 1)).error == E.NOT_COORDINATOR
    d.send(sc.BeginLoad(p))
    assert d.ask(lambda r: sc.ReadState(r, KEY, 1)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    d.send(sc.LoadPartition(p, ()))
    d.ask(lambda r: sc.WriteState(r, KEY, state()), hold=True)
    d.send(sc.AppendDone(d.held.pop().token, E.NOT_ENOUGH_REPLICAS))
    assert d.answers[d.rid].error == E.COORDINATOR_NOT_AVAILABLE
    assert d.ask(lambda r: sc.ReadState(r, KEY, 1)).state is None     # nothing stored


def test_a_summary_reads_without_fencing_and_leaves_out_keys_never_written():
    d = Driver()
    other = ShareKey("g", "AAAAAAAAAAAAAAAAAAAAAQ", 0)
    elsewhere = ShareKey("h", "AAAAAAAAAAAAAAAAAAAAAQ", 3)
    d.ask(lambda r: sc.WriteState(r, KEY, state(leader_epoch=2)))
    d.ask(lambda r: sc.WriteState(r, elsewhere, state()))
    appended = sum(len(v) for v in d.log.values())
    got = d.ask(lambda r: sc.ReadSummary(r, "g", (KEY, other)))
    assert [(k, s.start_offset, s.leader_epoch) for k, s in got.summaries] == [(KEY, 10, 2)]
    assert d.ask(lambda r: sc.ReadSummary(r, "g")).summaries == got.summaries    # all of g
    assert sum(len(v) for v in d.log.values()) == appended          # nothing written
    assert d.ask(lambda r: sc.WriteState(r, KEY, state(leader_epoch=2))).error == E.NONE
    d.send(sc.BeginLoad(d.c.partition_for(other)))
    assert d.ask(lambda r: sc.ReadSummary(r, "g")).error == E.COORDINATOR_LOAD_IN_PROGRESS


keys = st.builds(ShareKey, st.sampled_from(["g", "h"]), st.just("AAAAAAAAAAAAAAAAAAAAAQ"),
                 st.integers(0, 3))
batches = st.lists(st.builds(lambda f, n, s, c: StateBatch(f, f + n, s, c),
                             st.integers(0, 50), st.integers(0, 5), st.sampled_from([0, 2, 4]),
                             st.integers(0, 5)), max_size=3)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("write"), keys, st.integers(0, 3), st.integers(0, 60), batches),
    st.tuples(st.just("read"), keys, st.integers(0, 3)),
    st.tuples(st.just("delete"), keys)), max_size=25))
def test_a_coordinator_rebuilt_from_the_log_holds_the_same_states(script):
    d = Driver()
    for op in script:
        if op[0] == "write":
            _, key, epoch, start, bs = op
            d.ask(lambda r: sc.WriteState(r, key, ShareState(0, epoch, start, tuple(bs))))
        elif op[0] == "read":
            d.ask(lambda r: sc.ReadState(r, op[1], op[2]))
        else:
            d.ask(lambda r: sc.DeleteState(r, op[1]))
    again = sc.ShareCoordinator(4, lambda: 0)
    for p in range(4):
        again.process(sc.LoadPartition(p, tuple(d.log.get(p, ()))))
    assert {k: (s.leader_epoch, s.start_offset, s.batches) for k, s in again.states.items()} \
        == {k: (s.leader_epoch, s.start_offset, s.batches) for k, s in d.c.states.items()}
