"""Compaction (replicas/cleaner.py, cleaner_manager.py, Log.swap_cleaned): planning as a
table, the log after cleaning against a naive per-key reference, tombstones and the delete
horizon, gaps replicated to a follower, and kills in the middle of a swap."""

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record import MemoryRecords

from replicas import records
from replicas.cleaner import CleanerPolicy, SegmentView, plan_cleaning, run_clean
from replicas.cleaner_manager import CleanerManager
from replicas.errors import InvalidRecord, RecordValidationError
from replicas.log import Log, LogConfig

pytestmark = pytest.mark.unit
COMPACT = CleanerPolicy(compact=True)
DAY = 86_400_000


def view(base, nxt, size, largest=1000, first=1000):
    return SegmentView(base, nxt, size, largest, first, None)


SEGS = [view(0, 10, 100, 1000), view(10, 20, 100, 2000), view(20, 30, 100, 3000),
        view(30, 35, 50, 4000)]                                      # the last is active


@pytest.mark.parametrize("case, segments, start, ckpt, hw, now, policy, want", [
    ("not compacted", SEGS, 0, None, 35, 0, CleanerPolicy(), None),
    ("only the active segment", SEGS[-1:], 30, None, 35, 0, COMPACT, None),
    ("all dirty: the non-active segments", SEGS, 0, None, 35, 0, COMPACT, (0, 30, 1.0)),
    ("the HW stops the range", SEGS, 0, None, 25, 0, COMPACT, (0, 20, 1.0)),
    ("half dirty is not more than 0.5", SEGS, 0, 20, 35, 0, CleanerPolicy(True), None),
    ("a third clean: 2/3 > 0.5", SEGS, 0, 10, 35, 0, COMPACT, (10, 30, 2 / 3)),
    ("a lower ratio threshold", SEGS, 0, 20, 35, 0, CleanerPolicy(True, 0.3), (20, 30, 1 / 3)),
    ("nothing dirty", SEGS, 0, 30, 35, 0, COMPACT, None),
    ("min lag keeps young segments out", SEGS, 0, None, 35, 3500,
     CleanerPolicy(True, min_compaction_lag_ms=1000), (0, 20, 1.0)),
    ("max lag forces a clean", SEGS, 0, 20, 35, 10_000,
     CleanerPolicy(True, max_compaction_lag_ms=5000), (20, 30, 1 / 3)),
    ("a checkpoint below the log start", SEGS, 10, 0, 35, 0, COMPACT, (10, 30, 2 / 3)),
])
def test_plan(case, segments, start, ckpt, hw, now, policy, want):
    plan = plan_cleaning(segments, start, ckpt, hw, now, policy)
    got = None if plan is None else (plan.first_dirty, plan.end, plan.dirty_ratio)
    assert got == (None if want is None else pytest.approx(want)), case


def test_the_delete_horizon_is_the_last_clean_segment_minus_delete_retention():
    plan = plan_cleaning(SEGS, 0, 10, 35, 0, CleanerPolicy(True, delete_retention_ms=600))
    assert plan.delete_horizon_ms == 1000 - 600
    assert plan_cleaning(SEGS, 0, None, 35, 0, COMPACT).delete_horizon_ms < -DAY


# -- logs ------------------------------------------------------------------------------------------
def compacted(tmp_path, name="t-0", **kw):
    return Log(tmp_path / name, LogConfig(segment_bytes=600, index_interval_bytes=100,
                                          cleaner=CleanerPolicy(True, **kw)))


def put(log, pairs, ts=1000, epoch=0):
    """Append (key, value) pairs, two per batch."""
    for i in range(0, len(pairs), 2):
        chunk = pairs[i:i + 2]
        log.append_as_leader(records.build_batch([v for _, v in chunk], keys=[k for k, _ in chunk],
                                                 timestamps_ms=ts), leader_epoch=epoch)


def everything(log):
    return records.decode_records(b"".join(log.iter_reads(log.log_start_offset)))


def clean(log, manager, now_ms=10_000, hw=None):
    logs = [(("t", 0), log, log.log_end_offset if hw is None else hw)]
    job = manager.grab(logs, now_ms)
    if job is None:
        return None
    stats = run_clean(job.plan)
    assert manager.finish(job, stats, logs)
    return job, stats


def test_cleaning_keeps_the_last_value_of_every_key_at_its_offset(tmp_path):
    log = compacted(tmp_path)
    pairs = [(b"k%d" % (i % 7), b"v%03d" % i) for i in range(120)]
    put(log, pairs)
    before = {r.offset: (r.key, r.value) for r in everything(log)}
    manager = CleanerManager(tmp_path)
    job, stats = clean(log, manager)
    end = job.plan.end
    after = everything(log)
    last = {}
    for off in sorted(before):
        if off < end:
            last[before[off][0]] = off
    kept_below = {r.offset for r in after if r.offset < end}
    assert kept_below == set(last.values())                  # exactly the last per key
    assert all(before[r.offset] == (r.key, r.value) for r in after)     # offsets unchanged
    assert [r.offset for r in after if r.offset >= end] == [o for o in sorted(before) if o >= end]
    assert stats.records_dropped == end - len(kept_below)
    assert manager.first_dirty[("t", 0)] == end
    assert CleanerManager(tmp_path).first_dirty == {("t", 0): end}      # checkpointed
    for seg in log.segments:                                  # an independent reader
        parsed = MemoryRecords(seg.log_path.read_bytes())
        while parsed.has_next():
            assert parsed.next_batch().validate_crc()
    assert clean(log, manager) is None                        # nothing dirty any more
    log.close()
    again = compacted(tmp_path)                                # gaps survive a reopen
    assert [(r.offset, r.value) for r in everything(again)] == [(r.offset, r.value) for r in after]


def test_tombstones_stay_until_the_clean_part_is_delete_retention_newer(tmp_path):
    log = compacted(tmp_path, delete_retention_ms=DAY)
    put(log, [(b"a", b"1"), (b"b", b"1")] * 6, ts=1000)
    put(log, [(b"a", None), (b"c", b"1")] * 3, ts=2000)        # a is deleted
    put(log, [(b"d", b"%d" % i) for i in range(12)], ts=3000)
    manager = CleanerManager(tmp_path)
    clean(log, manager)
    state = {r.key: r.value for r in everything(log)}
    assert state[b"a"] is None                                 # the delete is still visible
    put(log, [(b"e", b"%d" % i) for i in range(40)], ts=2000 + 2 * DAY)   # time passes
    assert clean(log, manager) is not None   # the e segments are clean now: newer by 2 days
    put(log, [(b"f", b"%d" % i) for i in range(40)], ts=3000 + 2 * DAY)
    assert clean(log, manager) is not None
    assert b"a" not in {r.key for r in everything(log)}        # the tombstone expired
    assert {r.key for r in everything(log)} >= {b"b", b"c", b"d", b"e"}


def test_keyless_records_are_refused_on_a_compacted_log(tmp_path):
    log = compacted(tmp_path)
    with pytest.raises(RecordValidationError) as caught:
        log.append_as_leader(records.build_batch([b"x", b"y"], keys=[b"k", None],
                                                 timestamps_ms=1), leader_epoch=0)
    assert caught.value.code == InvalidRecord.code
    assert [i for i, _ in caught.value.record_errors] == [1]      # KIP-467: the keyless one
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_a_follower_replicates_a_cleaned_log_with_its_gaps(tmp_path):
    log = compacted(tmp_path)
    put(log, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(100)])
    clean(log, CleanerManager(tmp_path))
    follower = Log(tmp_path / "f-0", LogConfig(segment_bytes=600))
    for chunk in log.iter_reads(0, chunk_bytes=300):
        follower.append_as_follower(chunk)
    assert follower.log_end_offset == log.log_end_offset
    assert [(r.offset, r.value) for r in everything(follower)] == \
        [(r.offset, r.value) for r in everything(log)]


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_a_kill_in_the_middle_of_a_swap_loses_nothing(tmp_path, stage):
    log = compacted(tmp_path)
    put(log, [(b"k%d" % (i % 5), b"v%d" % i) for i in range(80)])
    before = [(r.offset, r.key, r.value) for r in everything(log)]
    manager = CleanerManager(tmp_path)
    job = manager.grab([(("t", 0), log, log.log_end_offset)], 10_000)
    stats = run_clean(job.plan)
    base, cleaned = stats.cleaned[0]
    if stage == "swap":                                    # renamed, not yet over the .log
        cleaned.rename(cleaned.with_name(cleaned.name.replace(".cleaned", ".swap")))
    for _, other in stats.cleaned[1:]:
        other.unlink()
    log.close()                                            # the broker dies here
    again = compacted(tmp_path)
    got = [(r.offset, r.key, r.value) for r in everything(again)]
    latest = {k: o for o, k, _ in before}
    first_end = job.plan.segments[1].base_offset
    if stage == "cleaned":
        assert got == before                              # that clean never happened
    else:                                                 # the first segment's swap completed
        assert [g for g in got if g[0] >= first_end] == [b for b in before if b[0] >= first_end]
        assert all(latest[k] >= o for o, k, _ in got)
        assert {k for _, k, _ in got} == {k for _, k, _ in before}
    assert not list((tmp_path / "t-0").glob("*.cleaned")) and \
        not list((tmp_path / "t-0").glob("*.swap"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.one_of(st.none(), st.binary(min_size=1, max_size=20))),
                min_size=4, max_size=150))
def test_final_state_per_key_matches_a_dict(tmp_path_factory, writes):
    base = tmp_path_factory.mktemp("c")
    log = compacted(base, delete_retention_ms=0)
    pairs = [(b"k%d" % k, v) for k, v in writes]
    put(log, pairs)
    want = {}
    for k, v in pairs:
        want[k] = v
    clean(log, CleanerManager(base))
    got = {}
    for r in everything(log):
        got[r.key] = r.value
    assert {k: v for k, v in got.items() if v is not None} == \
        {k: v for k, v in want.items() if v is not None}
    offsets = [r.offset for r in everything(log)]
    assert offsets == sorted(set(offsets))
    log.close()
