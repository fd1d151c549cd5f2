"""Unit tests for replicas/partition_state.py: leader/follower replication rules of one partition."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest
from hypothesis import given, settings, strategies as st

import replicas.partition_state as ps
from replicas.dispatch import handler_name
from replicas.partition_state import (
    ACKS_ALL, FENCED_LEADER_EPOCH, INVALID_REQUIRED_ACKS, NONE, NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
    REQUEST_TIMED_OUT, UNKNOWN_LEADER_EPOCH, UNKNOWN_OFFSET, AlterPartitionResponse,
    BecomeFollower, BecomeLeader, DelayedProduce, FollowerFetched, FollowerFetchResponse,
    FollowerProgress, HighWatermarkChanged, LeaderAppended, PartitionConfig, PartitionState,
    ProduceCompleted, ProposeIsr, RejectedEvent, Role, StopReplica, Tick, TruncationCompleted,
    check_leader_epoch, update_fetch_state,
)

pytestmark = pytest.mark.unit

LAG = 100


def make_leader(replicas=(1, 2, 3), isr=None, min_isr=1, lag=LAG, leo=10, hw=0, epoch=1,
                partition_epoch=0, now=0) -> PartitionState:
    s = PartitionState("t", 0, 1, PartitionConfig(min_isr, lag))
    s.process(BecomeLeader(replicas, replicas if isr is None else isr, epoch, partition_epoch,
                           leo, hw, now))
    return s


def make_follower(leo=20, hw=10, epoch=2) -> PartitionState:
    s = PartitionState("t", 0, 2, PartitionConfig(2, LAG))
    s.process(BecomeFollower(1, epoch, 0, (1, 2, 3), (1, 2, 3), leo, hw, 0))
    return s


def hws(effects):
    return [e.high_watermark for e in effects if isinstance(e, HighWatermarkChanged)]


def proposals(effects):
    return [e for e in effects if isinstance(e, ProposeIsr)]


def completions(effects):
    return [(e.request_id, e.error) for e in effects if isinstance(e, ProduceCompleted)]


def commit(s: PartitionState, effects) -> list:
    """Answer the single ProposeIsr in `effects` the way the controller would on success."""
    [p] = proposals(effects)
    return s.process(AlterPartitionResponse(p.isr, p.leader_epoch, p.partition_epoch + 1))


# ------------------------------------------------------------------ high watermark
def test_hw_is_min_leo_over_leader_and_isr():
    s = make_leader(leo=10)
    assert hws(s.process(FollowerFetched(2, 10, 1))) == []  # 3 still unknown
    assert hws(s.process(FollowerFetched(3, 7, 2))) == [7]
    assert hws(s.process(FollowerFetched(3, 10, 3))) == [10]
    s.process(LeaderAppended(15, 4))
    assert s.high_watermark == 10


def test_hw_never_moves_back_when_a_follower_fetch_offset_regresses():
    s = make_leader(leo=10)
    s.process(FollowerFetched(2, 10, 1))
    s.process(FollowerFetched(3, 10, 1))
    assert s.high_watermark == 10
    assert hws(s.process(FollowerFetched(3, 4, 2))) == []
    assert s.high_watermark == 10
    s.process(LeaderAppended(20, 3))
    s.process(FollowerFetched(2, 20, 3))
    assert s.high_watermark == 10  # 3 (LEO 4) still holds it


@pytest.mark.parametrize("isr, expected_hw", [
    ((1, 2, 3), 0),   # 3 is in the ISR with unknown LEO: blocks
    ((1, 2), 10),     # 3 outside the ISR: does not block
])
def test_hw_blocked_only_by_isr_member_with_unknown_leo(isr, expected_hw):
    s = make_leader(isr=isr, leo=10)
    s.process(FollowerFetched(2, 10, 1))
    assert s.followers[3].log_end_offset == UNKNOWN_OFFSET
    assert s.high_watermark == expected_hw


def test_leader_alone_in_isr_moves_hw_on_append():
    s = make_leader(isr=(1,), leo=10)
    assert s.high_watermark == 10
    assert hws(s.process(LeaderAppended(12, 1))) == [12]


def test_hw_blocked_while_isr_below_min_then_resumes_after_expansion():
    s = make_leader(isr=(1,), min_isr=2, leo=10, hw=5)
    assert hws(s.process(LeaderAppended(12, 1))) == []
    assert s.high_watermark == 5
    effects = s.process(FollowerFetched(2, 12, 2))
    assert proposals(effects) == [ProposeIsr((1, 2), 1, 0)]
    # maximal ISR is {1,2} (both at 12) but the COMMITTED ISR is still below min: no HW
    assert s.maximal_isr == (1, 2) and hws(effects) == [] and s.high_watermark == 5
    assert hws(commit(s, effects)) == [12]
    assert s.isr == (1, 2) and s.partition_epoch == 1


@pytest.mark.parametrize("min_isr, replicas, isr, acks, expected", [
    (2, (1, 2, 3), (1, 2, 3), ACKS_ALL, NONE),
    (2, (1, 2, 3), (1, 2), ACKS_ALL, NONE),
    (2, (1, 2, 3), (1,), ACKS_ALL, NOT_ENOUGH_REPLICAS),
    (2, (1, 2, 3), (1,), 1, NONE),
    (2, (1, 2, 3), (1,), 0, NONE),
    (3, (1, 2), (1, 2), ACKS_ALL, NONE),             # effective min ISR = min(3, RF 2) = 2
    (3, (1, 2), (1,), ACKS_ALL, NOT_ENOUGH_REPLICAS),
    (1, (1,), (1,), ACKS_ALL, NONE),
    (1, (1, 2, 3), (1, 2, 3), 2, INVALID_REQUIRED_ACKS),
])
def test_check_append_uses_min_of_min_isr_and_replication_factor(min_isr, replicas, isr, acks,
                                                                 expected):
    s = make_leader(replicas=replicas, isr=isr, min_isr=min_isr)
    assert s.effective_min_isr == min(min_isr, len(replicas))
    assert s.check_append(acks) == expected


def test_check_append_on_non_leader():
    assert make_follower().check_append(1) == NOT_LEADER_OR_FOLLOWER
    assert PartitionState("t", 0, 1).check_append(ACKS_ALL) == NOT_LEADER_OR_FOLLOWER


def test_hw_gate_uses_effective_min_isr_when_min_isr_exceeds_rf():
    s = make_leader(replicas=(1, 2), isr=(1, 2), min_isr=3, leo=10)
    assert hws(s.process(FollowerFetched(2, 10, 1))) == [10]


def test_pending_shrink_keeps_lagging_member_in_hw_until_committed():
    s = make_leader(leo=20)
    s.process(FollowerFetched(2, 20, 1))
    s.process(FollowerFetched(3, 5, 1))
    assert s.high_watermark == 5
    effects = s.process(Tick(LAG + 1))
    assert proposals(effects) == [ProposeIsr((1, 2), 1, 0)]
    assert s.high_watermark == 5 and s.maximal_isr == (1, 2, 3)
    assert hws(commit(s, effects)) == [20]


def test_pending_expand_holds_hw_and_a_failed_expand_releases_it():
    s = make_leader(isr=(1, 2), leo=10)
    s.process(FollowerFetched(2, 10, 1))
    s.process(LeaderAppended(20, 2))
    effects = s.process(FollowerFetched(3, 10, 3))
    assert proposals(effects) == [ProposeIsr((1, 2, 3), 1, 0)]
    assert hws(s.process(FollowerFetched(2, 20, 4))) == []  # 3 (LEO 10) in the maximal ISR
    effects = s.process(AlterPartitionResponse((), 1, 0, error=FENCED_LEADER_EPOCH))
    assert hws(effects) == [20] and s.isr == (1, 2) and s.proposed_isr is None


# ------------------------------------------------------------------ follower fetch state
P = FollowerProgress


@pytest.mark.parametrize("before, fetch_offset, leader_leo, caught_up, last_leader_leo", [
    # fetch offset >= leader LEO: caught up at this fetch
    (P(-1, 0, 0, -1), 10, 10, 50, 10),
    (P(5, 70, 40, 8), 10, 10, 70, 10),     # max(old, fetch time): never goes back
    # behind now, but reached where the leader was at the previous fetch: caught up then
    (P(5, 10, 40, 8), 9, 12, 40, 12),
    (P(5, 45, 40, 8), 9, 12, 45, 12),      # max(old, last fetch time)
    # behind both: unchanged
    (P(5, 10, 40, 8), 7, 12, 10, 12),
    # last fetch leader LEO only grows
    (P(5, 10, 40, 15), 7, 12, 10, 15),
])
def test_update_fetch_state_table(before, fetch_offset, leader_leo, caught_up, last_leader_leo):
    after = update_fetch_state(before, fetch_offset, 50, leader_leo)
    assert after == P(fetch_offset, caught_up, 50, last_leader_leo)


def test_follower_fetch_goes_through_update_fetch_state():
    s = make_leader(leo=10, now=0)
    s.process(FollowerFetched(2, 4, 30))
    assert s.followers[2] == P(4, 0, 30, 10)
    s.process(LeaderAppended(15, 40))
    s.process(FollowerFetched(2, 10, 60))  # reached the leader LEO seen at the 30 ms fetch
    assert s.followers[2] == P(10, 30, 60, 15)


@pytest.mark.parametrize("re_elected", [False, True])
def test_become_leader_resets_follower_state(re_elected):
    s = make_leader(isr=(1, 2), leo=10, now=5)
    assert s.followers[2] == P(UNKNOWN_OFFSET, 5, 0, UNKNOWN_OFFSET)
    assert s.followers[3] == P(UNKNOWN_OFFSET, 0, 0, UNKNOWN_OFFSET)
    s.process(FollowerFetched(2, 10, 6))
    s.process(FollowerFetched(3, 7, 6))
    if not re_elected:
        s.process(BecomeFollower(2, 2, 1, (1, 2, 3), (1, 2), 10, 10, 7))
    s.process(BecomeLeader((1, 2, 3), (1, 2), 3, 2, 10, 10, 9))
    if re_elected:  # Kafka keeps the LEOs of a re-elected leader's followers
        assert s.followers[2] == P(10, 9, 9, 10) and s.followers[3] == P(7, 0, 0, 10)
    else:
        assert s.followers[2] == P(UNKNOWN_OFFSET, 9, 0, UNKNOWN_OFFSET)
    assert s.leader_epoch_start_offset == 10


# ------------------------------------------------------------------ ISR shrink
def test_isr_shrinks_a_follower_not_caught_up_for_lag_time():
    s = make_leader(leo=10, now=0)
    s.process(FollowerFetched(2, 10, 10))
    assert proposals(s.process(Tick(LAG))) == []          # 100 - 0 <= lag
    effects = s.process(Tick(LAG + 1))
    assert proposals(effects) == [ProposeIsr((1, 2), 1, 0)]  # 3 dropped, 2 kept
    commit(s, effects)
    assert s.isr == (1, 2)


def test_follower_with_leader_leo_never_shrunk():
    s = make_leader(isr=(1, 2), leo=10)
    s.process(FollowerFetched(2, 10, 0))
    assert proposals(s.process(Tick(100 * LAG))) == []


@pytest.mark.parametrize("keeps_up, shrunk", [(True, False), (False, True)])
def test_fetching_follower_behind_at_each_instant_is_shrunk_only_if_not_keeping_up(keeps_up,
                                                                                    shrunk):
    s = make_leader(isr=(1, 2), leo=0, now=0)
    proposed = []
    for i in range(1, 21):  # 1000 ms, far past the 100 ms lag time
        t = i * 50
        s.process(LeaderAppended(i * 10, t))
        # keeps_up: fetches exactly where the leader was at its previous fetch
        s.process(FollowerFetched(2, (i - 1) * 10 if keeps_up else 0, t))
        assert s.followers[2].log_end_offset < s.log_end_offset  # behind right now
        proposed += proposals(s.process(Tick(t + 1)))
    assert (proposed == [ProposeIsr((1,), 1, 0)]) is shrunk
    assert (proposed == []) is (not shrunk)


def test_only_one_alter_partition_in_flight():
    s = make_leader(replicas=(1, 2, 3, 4), isr=(1, 2, 3), leo=10)
    s.process(FollowerFetched(2, 10, 90))
    effects = s.process(Tick(LAG + 1))
    assert proposals(effects) == [ProposeIsr((1, 2), 1, 0)]
    s.process(LeaderAppended(20, LAG + 2))
    assert proposals(s.process(Tick(300))) == []            # 2 now lags too, but one in flight
    assert proposals(s.process(FollowerFetched(4, 20, 301))) == []  # would qualify to expand
    assert s.proposed_isr == (1, 2)
    assert proposals(commit(s, effects)) == []  # expansion is re-checked on 4's next fetch
    assert proposals(s.process(FollowerFetched(4, 20, 302))) == [ProposeIsr((1, 2, 4), 1, 1)]
    assert proposals(s.process(Tick(400))) == []


@pytest.mark.parametrize("response", [
    AlterPartitionResponse((1, 2), 0, 1),   # older leader epoch
    AlterPartitionResponse((1, 2), 2, 1),   # a leader epoch that is not ours
    AlterPartitionResponse((1, 2), 1, -1),  # older partition epoch than we hold
])
def test_stale_alter_partition_responses_ignored(response):
    s = make_leader(leo=10, partition_epoch=0)
    s.process(FollowerFetched(2, 10, 1))
    effects = s.process(Tick(LAG + 1))
    assert s.process(response) == []
    assert s.isr == (1, 2, 3) and s.partition_epoch == 0 and s.proposed_isr == (1, 2)
    commit(s, effects)
    assert s.isr == (1, 2) and s.partition_epoch == 1
    assert s.process(AlterPartitionResponse((1,), 1, 2)) == []  # nothing in flight
    assert s.isr == (1, 2) and s.partition_epoch == 1


def test_error_response_keeps_committed_isr_and_allows_a_new_proposal():
    s = make_leader(leo=10)
    s.process(FollowerFetched(2, 10, 1))
    s.process(Tick(LAG + 1))
    s.process(AlterPartitionResponse((), 1, 0, error=FENCED_LEADER_EPOCH))
    assert s.isr == (1, 2, 3) and s.proposed_isr is None and s.partition_epoch == 0
    assert proposals(s.process(Tick(LAG + 2))) == [ProposeIsr((1, 2), 1, 0)]


def test_success_adopts_the_controllers_isr():
    s = make_leader(leo=10)
    s.process(Tick(LAG + 1))
    s.process(AlterPartitionResponse((1, 3), 1, 4))
    assert s.isr == (1, 3) and s.partition_epoch == 4 and s.proposed_isr is None


# ------------------------------------------------------------------ ISR expand
@pytest.mark.parametrize("epoch_start, hw, advance_hw_to, fetch, expands", [
    (10, 5, None, 4, False),    # below HW and epoch start
    (10, 5, None, 7, False),    # >= HW, < epoch start
    (10, 5, None, 10, True),
    (10, 5, None, 12, True),
    (10, 10, None, 9, False),
    (10, 5, 30, 20, False),     # >= epoch start, < HW
    (10, 5, 30, 30, True),
])
def test_isr_expand_needs_leo_at_least_hw_and_epoch_start(epoch_start, hw, advance_hw_to, fetch,
                                                          expands):
    s = make_leader(isr=(1, 2), leo=epoch_start, hw=hw)
    s.process(LeaderAppended(30, 1))
    if advance_hw_to is not None:
        s.process(FollowerFetched(2, advance_hw_to, 2))
    assert s.high_watermark == (advance_hw_to or hw)
    assert s.leader_epoch_start_offset == epoch_start
    effects = s.process(FollowerFetched(3, fetch, 3))
    assert proposals(effects) == ([ProposeIsr((1, 2, 3), 1, 0)] if expands else [])


# ------------------------------------------------------------------ acks=all
def test_delayed_produce_completes_when_hw_reaches_required_offset():
    s = make_leader(min_isr=2, leo=10)
    s.process(LeaderAppended(15, 1))
    assert s.process(DelayedProduce(7, 15, 1000)) == []
    assert completions(s.process(FollowerFetched(2, 15, 2))) == []
    assert completions(s.process(FollowerFetched(3, 12, 3))) == []
    assert s.high_watermark == 12
    effects = s.process(FollowerFetched(3, 15, 4))
    assert hws(effects) == [15] and completions(effects) == [(7, NONE)]
    assert s.pending_produces == {}


def test_already_satisfied_produce_completes_on_registration():
    s = make_leader(isr=(1,), leo=10)
    assert completions(s.process(DelayedProduce(1, 10, 50))) == [(1, NONE)]


def test_not_enough_replicas_after_append_when_isr_shrank_meanwhile():
    # appended while ISR = {1,2,3}; HW passes the batch; the ISR shrinks to {1} before the
    # produce is put into purgatory (Kafka: append and tryCompleteElseWatch are not atomic).
    s = make_leader(min_isr=2, leo=10)
    assert s.check_append(ACKS_ALL) == NONE
    s.process(LeaderAppended(15, 1))
    s.process(FollowerFetched(2, 15, 1))
    s.process(FollowerFetched(3, 15, 1))
    s.process(LeaderAppended(20, 2))
    commit(s, s.process(Tick(2 + LAG + 1)))
    assert s.isr == (1,) and s.high_watermark == 15
    assert completions(s.process(DelayedProduce(9, 15, 1000))) == [
        (9, NOT_ENOUGH_REPLICAS_AFTER_APPEND)]


def test_delayed_produce_times_out_at_deadline():
    s = make_leader(min_isr=2, leo=10, lag=10_000)
    s.process(LeaderAppended(11, 1))
    s.process(DelayedProduce(3, 11, 500))
    assert completions(s.process(Tick(499))) == []
    assert completions(s.process(Tick(500))) == [(3, REQUEST_TIMED_OUT)]
    assert completions(s.process(Tick(10_000))) == []
    s.process(FollowerFetched(2, 11, 10_001))
    assert completions(s.process(FollowerFetched(3, 11, 10_002))) == []  # answered only once


@pytest.mark.parametrize("event", [
    BecomeFollower(2, 2, 1, (1, 2, 3), (2, 3), 11, 10, 5),
    StopReplica(),
])
def test_pending_produces_fail_when_leadership_is_lost(event):
    s = make_leader(leo=10)
    s.process(LeaderAppended(12, 1))
    s.process(DelayedProduce(1, 11, 1000))
    s.process(DelayedProduce(2, 12, 1000))
    assert completions(s.process(event)) == [(1, NOT_LEADER_OR_FOLLOWER),
                                             (2, NOT_LEADER_OR_FOLLOWER)]
    assert not s.is_leader and s.pending_produces == {}
    assert completions(s.process(DelayedProduce(3, 12, 1000))) == [(3, NOT_LEADER_OR_FOLLOWER)]


def test_jepsen_2013_isr_of_leader_only_cannot_acknowledge_acks_all():
    """RF 3, min ISR 2: followers 2 and 3 are cut off, the ISR shrinks to the leader alone."""
    s = make_leader(min_isr=2, leo=10, lag=LAG)
    s.process(FollowerFetched(2, 10, 1))
    s.process(FollowerFetched(3, 10, 1))
    s.process(LeaderAppended(12, 2))       # appended while the ISR was still {1,2,3}
    s.process(DelayedProduce(1, 12, 10_000))
    effects = s.process(Tick(2 + LAG + 1))
    assert proposals(effects) == [ProposeIsr((1,), 1, 0)]
    effects += commit(s, effects)
    assert s.isr == (1,)
    assert s.check_append(ACKS_ALL) == NOT_ENOUGH_REPLICAS  # new acks=all writes refused
    assert s.check_append(1) == NONE
    for t in range(200, 10_000, 100):      # acks=1 traffic keeps coming; nothing commits
        effects += s.process(LeaderAppended(s.log_end_offset + 1, t))
        effects += s.process(Tick(t + 1))
    effects += s.process(Tick(10_000))
    assert s.high_watermark == 10 and hws(effects) == []
    assert completions(effects) == [(1, REQUEST_TIMED_OUT)]


def test_under_min_isr_write_commits_once_a_follower_rejoins():
    s = make_leader(isr=(1,), min_isr=2, leo=10, hw=10)
    s.process(LeaderAppended(12, 1))
    s.process(DelayedProduce(1, 12, 10_000))
    effects = s.process(FollowerFetched(2, 12, 2))
    assert completions(effects) == []
    assert completions(commit(s, effects)) == [(1, NONE)]


# ------------------------------------------------------------------ follower side
def test_follower_hw_is_min_of_leader_hw_and_own_leo_and_only_grows():
    s = make_follower(leo=20, hw=10)
    assert s.role is Role.FOLLOWER and s.truncation_pending
    assert hws(s.process(TruncationCompleted(20))) == []
    assert hws(s.process(FollowerFetchResponse(25, 22))) == [22]
    assert hws(s.process(FollowerFetchResponse(25, 40))) == [25]
    assert hws(s.process(FollowerFetchResponse(30, 3))) == []   # a lagging new leader's HW
    assert s.high_watermark == 25


def test_kafka_14704_follower_truncates_before_taking_the_leaders_hw():
    """A former leader with uncommitted records 10..20 must not expose them via the new HW."""
    s = make_follower(leo=20, hw=10)
    assert hws(s.process(FollowerFetchResponse(20, 15))) == []
    assert s.high_watermark == 10
    assert hws(s.process(TruncationCompleted(12))) == []
    assert hws(s.process(FollowerFetchResponse(12, 15))) == [12]
    assert hws(s.process(FollowerFetchResponse(16, 15))) == [15]


def test_diverging_fetch_response_defers_hw_until_truncated():
    s = make_follower(leo=20, hw=10)
    s.process(TruncationCompleted(20))
    assert hws(s.process(FollowerFetchResponse(20, 18, diverging=True))) == []
    assert s.truncation_pending
    assert hws(s.process(FollowerFetchResponse(20, 18))) == []
    assert hws(s.process(TruncationCompleted(8))) == [8]      # HW goes down only here
    assert hws(s.process(FollowerFetchResponse(18, 18))) == [18]


def test_follower_leo_moves_back_only_through_truncation():
    s = make_follower(leo=20, hw=10)
    s.process(TruncationCompleted(15))
    with pytest.raises(ValueError):
        s.process(FollowerFetchResponse(14, 10))


def test_become_follower_clamps_hw_to_leo():
    s = PartitionState("t", 0, 2)
    assert s.process(BecomeFollower(1, 1, 0, (1, 2), (1, 2), 5, 9, 0)) == [
        HighWatermarkChanged(5)]


@pytest.mark.parametrize("local, requested, expected", [
    (5, 5, NONE), (5, 4, FENCED_LEADER_EPOCH), (5, 0, FENCED_LEADER_EPOCH),
    (5, 6, UNKNOWN_LEADER_EPOCH), (5, -1, NONE), (0, 0, NONE),
])
def test_check_leader_epoch(local, requested, expected):
    assert check_leader_epoch(local, requested) == expected


# ------------------------------------------------------------------ misuse and shape
@pytest.mark.parametrize("event, code", [
    (FollowerFetched(9, 0, 1), NOT_LEADER_OR_FOLLOWER),   # not a replica
    (FollowerFetched(1, 0, 1), NOT_LEADER_OR_FOLLOWER),   # the leader itself
    (FollowerFetched(2, 11, 1), OFFSET_OUT_OF_RANGE),     # beyond leader LEO
    (FollowerFetchResponse(10, 10), NOT_LEADER_OR_FOLLOWER),
    (TruncationCompleted(5), NOT_LEADER_OR_FOLLOWER),
    (BecomeLeader((1, 2, 3), (1, 2, 3), 0, 0, 10, 0, 1), FENCED_LEADER_EPOCH),
])
def test_leader_rejects_misdirected_events(event, code):
    s = make_leader(leo=10, epoch=1)
    with pytest.raises(RejectedEvent) as info:
        s.process(event)
    assert info.value.code == code


@pytest.mark.parametrize("event", [LeaderAppended(5, 1), FollowerFetched(3, 0, 1)])
def test_follower_rejects_leader_events(event):
    with pytest.raises(RejectedEvent) as info:
        make_follower().process(event)
    assert info.value.code == NOT_LEADER_OR_FOLLOWER


def test_process_rejects_unknown_events_and_every_event_has_a_handler():
    with pytest.raises(TypeError):
        PartitionState("t", 0, 1).process(object())
    for cls in ps.EVENTS:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        assert callable(getattr(PartitionState, handler_name(cls)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        Tick(1).now_ms = 2


def test_module_imports_only_stdlib_and_reads_no_clock():
    source = pathlib.Path(ps.__file__).read_text()
    tree = ast.parse(source)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    # the stdlib, and of rayka only the error table and the event dispatcher
    assert imported <= {"__future__", "dataclasses", "enum", "replicas.dispatch",
                        "replicas.errors"}


# ------------------------------------------------------------------ property
fetch_op = st.tuples(st.just("fetch"), st.sampled_from([2, 3]),
                     st.one_of(st.just(1000), st.integers(0, 1000)))  # 1000 = up to leader LEO
ops_strategy = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5)),
    fetch_op, fetch_op, fetch_op,
    st.tuples(st.just("tick"), st.integers(0, 80)),
    st.tuples(st.just("respond"), st.booleans()),
    st.tuples(st.just("stale")),
    st.tuples(st.just("produce"), st.integers(1, 5), st.integers(1, 300)),
    st.tuples(st.just("reelect")),
), min_size=10, max_size=80)


@settings(max_examples=500, deadline=None)
@given(initial_isr=st.sampled_from([(1,), (1, 2), (1, 3), (1, 2, 3)]),
       min_isr=st.integers(1, 4), lag=st.integers(0, 100), monotone=st.booleans(),
       start_leo=st.integers(0, 5), start_hw=st.integers(0, 5), ops=ops_strategy)
def test_leader_hw_property(initial_isr, min_isr, lag, monotone, start_leo, start_hw, ops):
    start_hw = min(start_hw, start_leo)
    s = PartitionState("t", 0, 1, PartitionConfig(min_isr, lag))
    eff_min = min(min_isr, 3)
    now, epoch, next_id = 0, 1, 0
    leo = {2: UNKNOWN_OFFSET, 3: UNKNOWN_OFFSET}   # model of follower LEOs
    max_seen = dict(leo)
    required, answered = {}, set()
    ref_hw = start_hw
    last_proposal = None

    def run(event):
        nonlocal last_proposal
        hw_now = s.high_watermark
        if isinstance(event, BecomeLeader):  # the HW the caller hands over is the baseline
            hw_now = max(hw_now, event.high_watermark)
        effects = s.process(event)
        for e in effects:
            if isinstance(e, HighWatermarkChanged):
                assert e.high_watermark > hw_now
                hw_now = e.high_watermark
            elif isinstance(e, ProposeIsr):
                last_proposal = e
            elif isinstance(e, ProduceCompleted):
                assert e.request_id not in answered
                answered.add(e.request_id)
                if e.error == NONE:
                    assert hw_now >= required[e.request_id]
                    assert len(s.maximal_isr) >= eff_min
        assert hw_now == s.high_watermark

    run(BecomeLeader((1, 2, 3), initial_isr, epoch, 0, start_leo, start_hw, now))
    for op in ops:
        prev_hw = s.high_watermark
        kind = op[0]
        if kind == "append":
            run(LeaderAppended(s.log_end_offset + op[1], now))
        elif kind == "fetch":
            _, r, x = op
            lo = start_hw if r in initial_isr else 0  # an ISR member holds all committed data
            if monotone:
                lo = max(lo, leo[r])
            offset = lo + x * (s.log_end_offset - lo) // 1000
            run(FollowerFetched(r, offset, now))
            leo[r], max_seen[r] = offset, max(max_seen[r], offset)
        elif kind == "tick":
            now += op[1]
            run(Tick(now))
        elif kind == "respond" and last_proposal is not None:
            p = last_proposal
            run(AlterPartitionResponse(p.isr, p.leader_epoch, p.partition_epoch + 1,
                                       NONE if op[1] else NOT_LEADER_OR_FOLLOWER))
            last_proposal = None
        elif kind == "stale":
            before = (s.isr, s.proposed_isr, s.partition_epoch)
            assert s.process(AlterPartitionResponse((1,), epoch - 1, s.partition_epoch + 1)) == []
            assert (s.isr, s.proposed_isr, s.partition_epoch) == before
        elif kind == "produce":
            if s.check_append(ACKS_ALL) != NONE:
                assert len(s.isr) < eff_min
                continue
            run(LeaderAppended(s.log_end_offset + op[1], now))
            next_id += 1
            required[next_id] = s.log_end_offset
            run(DelayedProduce(next_id, s.log_end_offset, now + op[2]))
        elif kind == "reelect":
            epoch += 1
            last_proposal = None
            run(BecomeLeader((1, 2, 3), s.isr, epoch, s.partition_epoch, s.log_end_offset,
                             s.high_watermark, now))
        # naive reference: min LEO over the maximal ISR, gated by min ISR, clamped monotone
        if len(s.isr) >= eff_min:
            ref_hw = max(ref_hw, min([s.log_end_offset] + [leo[r] for r in s.maximal_isr
                                                           if r != 1]))
        assert s.high_watermark == ref_hw
        assert prev_hw <= s.high_watermark <= s.log_end_offset
        for r in s.isr:
            if r != 1 and leo[r] != UNKNOWN_OFFSET:
                assert s.high_watermark <= max_seen[r]
                if monotone:
                    assert s.high_watermark <= leo[r]
        assert s.proposed_isr is None or last_proposal is not None
