"""Compaction of transactional data (replicas/cleaner.py's CleanedTransactions, Kafka's
LogCleaner rules): aborted data goes whatever its keys, committed data compacts as usual,
markers stay while data of their transaction does and go past the delete horizon, the
cleaned `.txnindex` follows, the cleanable range stops at the last stable offset, and a
kill between the index swap and the log swap loses nothing."""

from __future__ import annotations

import pytest

from replicas import records
from replicas.cleaner import CleanerPolicy, run_clean, swap_in_txn_index
from replicas.cleaner_manager import CleanerManager
from replicas.control import CONTROL_FLAG
from replicas.log import Log, LogConfig
from replicas.producer_log import ProducerLog

pytestmark = pytest.mark.unit
A, B = 11, 22


def compacted(tmp_path, **kw) -> Log:
    return Log(tmp_path / "t-0", LogConfig(segment_bytes=500, index_interval_bytes=100,
                                           cleaner=CleanerPolicy(True, **kw)))


class Writer:
    def __init__(self, log: Log):
        self.plog = ProducerLog(log, verification_enabled=False)
        self.seq = {A: 0, B: 0}
        self.ts = 1_000

    def put(self, key: bytes, value: bytes, pid: int = -1) -> int:
        self.ts += 10
        buf = records.build_batch([value], keys=[key], timestamps_ms=self.ts, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1,
                                  base_sequence=self.seq[pid] if pid >= 0 else -1,
                                  transactional=pid >= 0)
        if pid >= 0:
            self.seq[pid] += 1
        return self.plog.append_as_leader(buf, 0).first_offset

    def end(self, pid: int, commit: bool) -> int:
        self.ts += 10
        return self.plog.append_marker(pid, 0, commit, 0, 0, self.ts).first_offset


def contents(log: Log):
    data = b"".join(log.iter_reads(log.log_start_offset))
    markers = [h.base_offset for h in records.iter_headers(data) if h.attributes & CONTROL_FLAG]
    return [(r.offset, r.key, r.value) for r in records.decode_records(data)
            if r.offset not in markers], markers


def clean(log: Log, writer: Writer, manager: CleanerManager, now_ms: int = 10**9):
    hw = log.log_end_offset
    logs = [(("t", 0), log, writer.plog.last_stable_offset(hw))]
    job = manager.grab(logs, now_ms)
    assert job is not None
    stats = run_clean(job.plan)
    assert manager.finish(job, stats, logs)
    return job


def test_aborted_data_goes_markers_stay_while_their_data_does(tmp_path):
    log = compacted(tmp_path, delete_retention_ms=0)
    w = Writer(log)
    w.put(b"k1", b"plain-1")
    aborted_first = w.put(b"k1", b"A-aborted", A)         # the latest k1 of the dirty part...
    w.put(b"k2", b"B-1", B)
    abort_at = w.end(A, False)
    commit_at = w.end(B, True)
    for i in range(12):                                    # roll segments past the markers
        w.put(b"f%d" % (i % 3), b"filler-%d" % i)
    assert log.collect_aborted(0, log.log_end_offset)[0].first_offset == aborted_first
    manager = CleanerManager(tmp_path)
    job = clean(log, w, manager)
    assert job.plan.aborted and job.plan.aborted[0].last_offset == abort_at
    kept, markers = contents(log)
    values = [v for _, _, v in kept]
    # ...yet aborted data never counts: plain-1 survives as k1's value, A's record is gone
    assert b"A-aborted" not in values and b"plain-1" in values and b"B-1" in values
    assert markers == [abort_at, commit_at]                # their data was seen this pass
    [entry] = log.collect_aborted(0, log.log_end_offset)   # and the index keeps the ABORT's
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (A, aborted_first,
                                                                          abort_at)
    # later writes: B's value is overwritten, a second pass runs past the delete horizon
    w.put(b"k2", b"plain-2")
    for i in range(12):
        w.put(b"f%d" % (i % 3), b"again-%d" % i)
    clean(log, w, manager)
    kept, markers = contents(log)
    assert b"B-1" not in [v for _, _, v in kept]
    # no data of A's was left: its marker and index entry go; B's batch was still read in
    # this pass (emptied by the newer k2), so its COMMIT stays one more pass
    assert markers == [commit_at] and log.collect_aborted(0, log.log_end_offset) == []
    assert not list(log.dir.glob("*.txnindex"))
    for i in range(12):
        w.put(b"f%d" % (i % 3), b"third-%d" % i)
    clean(log, w, manager)
    kept, markers = contents(log)
    assert markers == [] and [v for _, k, v in kept if k == b"k1"] == [b"plain-1"]


def test_markers_are_kept_before_the_delete_horizon(tmp_path):
    log = compacted(tmp_path, delete_retention_ms=10**8)
    w = Writer(log)
    w.put(b"k", b"A", A)
    abort_at = w.end(A, False)
    for i in range(12):
        w.put(b"f%d" % (i % 3), b"filler-%d" % i)
    manager = CleanerManager(tmp_path)
    clean(log, w, manager)
    for i in range(12):
        w.put(b"f%d" % (i % 3), b"again-%d" % i)
    clean(log, w, manager)
    kept, markers = contents(log)
    assert markers == [abort_at] and not [v for _, _, v in kept if v == b"A"]
    assert log.collect_aborted(0, log.log_end_offset) == []   # no data left to filter


def test_the_cleanable_range_stops_at_the_last_stable_offset(tmp_path):
    log = compacted(tmp_path)
    w = Writer(log)
    for i in range(6):
        w.put(b"k%d" % (i % 2), b"early-%d" % i)
    open_at = w.put(b"k0", b"open", A)                     # never completed
    for i in range(20):
        w.put(b"k%d" % (i % 2), b"late-%d" % i)
    job = clean(log, w, CleanerManager(tmp_path))
    assert job.plan.end <= open_at
    kept, _ = contents(log)
    assert (open_at, b"k0", b"open") in kept


def test_a_kill_between_the_index_swap_and_the_log_swap(tmp_path):
    log = compacted(tmp_path, delete_retention_ms=0)
    w = Writer(log)
    first = w.put(b"k", b"A", A)
    abort_at = w.end(A, False)
    for i in range(12):
        w.put(b"f%d" % (i % 3), b"filler-%d" % i)
    hw = log.log_end_offset
    manager = CleanerManager(tmp_path)
    job = manager.grab([(("t", 0), log, w.plog.last_stable_offset(hw))], 10**9)
    stats = run_clean(job.plan)
    base, cleaned = stats.cleaned[0]
    segment = log.segments[0]
    swap_in_txn_index(cleaned, segment.txn_index.path)      # the index went in, then the kill
    log.close()
    again = Log(tmp_path / "t-0", log.config, recovery_point=hw)      # segment 0 trusted
    [entry] = again.collect_aborted(0, again.log_end_offset)
    assert (entry.first_offset, entry.last_offset) == (first, abort_at)
    assert (first, b"k", b"A") in contents(again)[0]       # the old log: data and entry both
    assert not list(again.dir.glob("*.cleaned"))
