"""The chaos checker on a compacted run (meta compact_keys): records superseded by a later
record of their key may vanish, replicas are compared by their last value per key. Disk
trees are real partition dirs: a leader's Log, its followers, the leader's cleaner."""

from __future__ import annotations

import pytest

from rayka.chaos.checker import check
from rayka.chaos.history import key_of
from replicas import records
from replicas.cleaner import CleanerPolicy, run_clean
from replicas.cleaner_manager import CleanerManager
from replicas.log import Log, LogConfig
from tests.test_chaos_checker import Hist

pytestmark = pytest.mark.unit
KEYS = 4
COMPACT = LogConfig(segment_bytes=400, index_interval_bytes=128, cleaner=CleanerPolicy(True))


def put(log, values, epoch=0):
    for i in range(0, len(values), 2):
        chunk = values[i:i + 2]
        log.append_as_leader(records.build_batch(
            [v.encode() for v in chunk], keys=[key_of(v, KEYS).encode() for v in chunk],
            timestamps_ms=1000), leader_epoch=epoch)


def contents(log):
    return [(r.offset, r.value.decode()) for chunk in log.iter_reads(log.log_start_offset)
            for r in records.decode_records(chunk)]


def tree(root, values, clean=(1,), tamper=None):
    """Broker 1 leads; 2 and 3 replicate; the brokers in `clean` compact. `tamper`: broker 3
    writes its own log instead, with that (index, value) changed. Returns broker 1's log."""
    logs = {b: Log(root / f"broker-{b}" / "t-0", COMPACT) for b in (1, 2, 3)}
    put(logs[1], values)
    for chunk in logs[1].iter_reads(0):
        logs[2].append_as_follower(chunk)
    if tamper is None:
        for chunk in logs[1].iter_reads(0):
            logs[3].append_as_follower(chunk)
    else:
        changed = list(values)
        changed[tamper[0]] = tamper[1]
        put(logs[3], changed)
    for b in clean:
        manager = CleanerManager(root / f"broker-{b}")
        job = manager.grab([(("t", 0), logs[b], logs[b].log_end_offset)], 10_000)
        assert job is not None
        assert manager.finish(job, run_clean(job.plan), [(("t", 0), logs[b], 0)])
    final = contents(logs[1])
    for log in logs.values():
        log.close()
    return final


def history(values, final, extra_acked=()):
    h = Hist()
    h.add("info", "meta", topic="t", partitions=1, replication_factor=3, min_isr=2, seed=0,
          compact_keys=KEYS)
    for off, value in list(enumerate(values)) + list(extra_acked):
        h.add("invoke", "send", process=0, value=value)
        h.add("ok", "send", process=0, value=value, partition=0, offset=off)
    h.add("ok", "read", process=100, partition=0, offset=0, value=values[0])
    for off, value in final:
        h.add("ok", "final-read", partition=0, offset=off, value=value)
    h.add("ok", "final-hw", partition=0, log_start_offset=0, high_watermark=len(values),
          isr=[1, 2, 3], leader=1)
    return h.lines


VALUES = [f"p0-{n}" for n in range(60)]


def test_a_compacted_run_with_replicas_cleaned_apart_is_clean(tmp_path):
    final = tree(tmp_path, VALUES, clean=(1,))               # 2 and 3 not cleaned yet
    assert len(final) < len(VALUES)                          # the cleaner removed records
    verdict = check(history(VALUES, final), str(tmp_path))
    assert verdict.ok, verdict.table()


def test_a_vanished_record_without_a_later_one_of_its_key_is_lost(tmp_path):
    final = tree(tmp_path, VALUES)
    last_of_k1 = max(off for off, v in final if key_of(v, KEYS) == "k1")
    dropped = [(o, v) for o, v in final if o != last_of_k1]   # the survivor of k1 gone too
    kinds = check(history(VALUES, dropped), str(tmp_path)).kinds()
    assert kinds["lost"] == 1 and kinds["read-uncommitted"] == 0


def test_a_moved_record_is_still_moved(tmp_path):
    final = tree(tmp_path, VALUES)
    off, value = final[0]
    moved = [(o, v) for o, v in final[1:]] + [(len(VALUES) + 5, value)]
    kinds = check(history(VALUES, moved), str(tmp_path)).kinds()
    assert kinds["moved"] == 1


def test_the_record_at_hw_minus_one_must_be_there(tmp_path):
    final = tree(tmp_path, VALUES)
    kinds = check(history(VALUES, final[:-1]), str(tmp_path)).kinds()
    assert kinds["gap"] == 1


def test_a_replica_whose_last_value_of_a_key_differs_diverged(tmp_path):
    final = tree(tmp_path, VALUES, clean=(1, 3), tamper=(57, "p0-97"))   # still key k1
    verdict = check(history(VALUES, final), str(tmp_path))
    assert verdict.kinds()["replica-diverged"] == 1, verdict.table()
    assert "broker 3" in [v for v in verdict.violations if v.kind == "replica-diverged"][0].detail
