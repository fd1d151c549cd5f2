"""The chaos checker (rayka/chaos/): history file, disk readers, and every invariant rule.

Every violation kind has a history (or a disk tree) that triggers exactly that kind, next to
a clean one that triggers none, so no rule can pass vacuously. Disk trees are real partition
dirs written by replicas.log.Log as a leader and its followers.
"""

from __future__ import annotations

import json
import threading

import pytest

from rayka.chaos import disk
from rayka.chaos.checker import Verdict, Violation, check, percentile
from rayka.chaos.history import History, load_history
from replicas import records
from replicas.log import Log, LogConfig

pytestmark = pytest.mark.unit
NO_GROUP = {n: "no consumer group in the run" for n in (7, 8, 9)}
NO_GROUP.update({n: "no transactions in the run" for n in range(10, 16)})
NO_GROUP.update({n: "no share group in the run" for n in (16, 17, 18)})

SMALL = LogConfig(segment_bytes=400, index_interval_bytes=128)


# -- history builder ------------------------------------------------------------------------------
class Hist:
    def __init__(self):
        self.lines: list[dict] = []
        self.t = 0.0

    def add(self, type_, f, **fields) -> dict:
        self.t += 10.0
        self.lines.append({"type": type_, "f": f, "time_ms": self.t, **fields})
        return self.lines[-1]


# (process, value, partition): offsets follow from the order on each partition.
SENDS = [(0, "a0", 0), (1, "b0", 0), (0, "a1", 1), (1, "b1", 1), (0, "a2", 0), (1, "b2", 1),
         (0, "a3", 0), (1, "b3", 0)]


def clean_history() -> list[dict]:
    """Two partitions, two producers, faults, samples; p0 = a0 b0 a2 a3 b3, p1 = a1 b1 b2 b8."""
    h = Hist()
    h.add("info", "meta", topic="t", partitions=2, replication_factor=3, min_isr=2, seed=7)
    h.add("ok", "zk-sample", partition=0, leader=1, leader_epoch=0, isr=[1, 2, 3])
    h.add("ok", "zk-sample", partition=1, leader=2, leader_epoch=0, isr=[1, 2, 3])
    h.add("ok", "controller-sample", controller_id=1, epoch=1)
    h.add("ok", "hw-sample", partition=0, broker=1, leader_epoch=0, high_watermark=1)
    h.add("info", "fault", id=1, kind="kill-broker", phase="start", target="broker-1",
          partition=0)
    final: list[tuple[int, int, str]] = []
    next_offset = {0: 0, 1: 0}
    for process, value, p in SENDS:
        h.add("invoke", "send", process=process, value=value)
        h.add("ok", "send", process=process, value=value, partition=p, offset=next_offset[p])
        final.append((p, next_offset[p], value))
        next_offset[p] += 1
        if value == "a1":
            h.add("info", "fault", id=1, kind="kill-broker", phase="end", target="broker-1",
                  partition=0)
            h.add("ok", "zk-sample", partition=0, leader=2, leader_epoch=1, isr=[2, 3])
            h.add("ok", "hw-sample", partition=0, broker=1, leader_epoch=0, high_watermark=2)
            h.add("ok", "hw-sample", partition=0, broker=1, leader_epoch=0, high_watermark=2)
            h.add("ok", "hw-sample", partition=0, broker=2, leader_epoch=1, high_watermark=0)
            h.add("info", "fault", id=2, kind="kill-controller", phase="start",
                  target="controller-1", partition=None)
            h.add("ok", "controller-sample", controller_id=2, epoch=2)
    h.add("ok", "hw-sample", partition=0, broker=2, leader_epoch=1, high_watermark=3)
    h.add("invoke", "send", process=1, value="b8")          # indeterminate, but written
    h.add("info", "send", process=1, value="b8", error="RequestTimedOut")
    final.append((1, next_offset[1], "b8"))
    next_offset[1] += 1
    h.add("invoke", "send", process=0, value="a9")          # indeterminate, not written
    h.add("info", "send", process=0, value="a9", error="RequestTimedOut")
    h.add("invoke", "send", process=1, value="b9")          # definitely not written
    h.add("fail", "send", process=1, value="b9", error="InvalidTopic")
    h.add("ok", "read", process=100, partition=1, offset=0, value="a1")
    h.add("ok", "read", process=100, partition=1, offset=1, value="b1")
    h.add("ok", "read", process=100, partition=1, offset=1, value="b1")   # re-read: fine
    for p, off, value in final:
        h.add("ok", "final-read", partition=p, offset=off, value=value)
    h.add("ok", "final-read", partition=0, offset=0, value="a0")         # re-fetch: counted once
    for p in (0, 1):
        h.add("ok", "final-hw", partition=p, log_start_offset=0, high_watermark=next_offset[p],
              isr=[1, 2, 3], leader=2)
    return h.lines


def find(history, **match) -> dict:
    hits = [e for e in history if all(e.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (match, hits)
    return hits[0]


def later(history, type_, f, **fields):
    history.append({"type": type_, "f": f, "time_ms": history[-1]["time_ms"] + 10, **fields})


def m_lost(h):
    later(h, "invoke", "send", process=2, value="c0")
    later(h, "ok", "send", process=2, value="c0", partition=0, offset=99)


def m_moved(h):
    find(h, f="send", type="ok", value="b3")["offset"] = 7


def m_duplicate(h):
    later(h, "ok", "final-read", partition=0, offset=5, value="a0")
    find(h, f="final-hw", partition=0)["high_watermark"] = 6


def m_duplicate_offset(h):
    later(h, "ok", "final-read", partition=1, offset=3, value="a9")


def m_gap(h):
    find(h, f="final-hw", partition=1)["high_watermark"] = 5


def m_gap_extra(h):
    find(h, f="final-hw", partition=0)["high_watermark"] = 4


def m_gap_no_hw(h):
    h.remove(find(h, f="final-hw", partition=1))


def m_reordered(h):
    find(h, f="send", type="ok", value="a0")["offset"] = 2
    find(h, f="send", type="ok", value="a2")["offset"] = 0
    find(h, f="final-read", value="a2")["offset"] = 0
    for e in h:
        if e["f"] == "final-read" and e["value"] == "a0":
            e["offset"] = 2


def m_phantom(h):
    later(h, "ok", "final-read", partition=0, offset=5, value="zz")
    find(h, f="final-hw", partition=0)["high_watermark"] = 6


def m_read_above_hw(h):
    later(h, "ok", "read", process=100, partition=1, offset=4, value="a9")


def m_read_wrong_value(h):
    later(h, "ok", "read", process=100, partition=1, offset=0, value="b1")


def m_epoch_regressed(h):
    later(h, "ok", "zk-sample", partition=0, leader=1, leader_epoch=0, isr=[1, 2])


def m_hw_regressed(h):
    later(h, "ok", "hw-sample", partition=0, broker=1, leader_epoch=0, high_watermark=1)


def m_two_controllers(h):
    later(h, "ok", "controller-sample", controller_id=3, epoch=2)


MUTATIONS = [
    (m_lost, 1, "lost"), (m_moved, 1, "moved"),
    (m_duplicate, 2, "duplicate"), (m_duplicate_offset, 2, "duplicate"),
    (m_gap, 2, "gap"), (m_gap_extra, 2, "gap"), (m_gap_no_hw, 2, "gap"),
    (m_reordered, 2, "reordered"), (m_phantom, 2, "phantom"),
    (m_read_above_hw, 6, "read-uncommitted"), (m_read_wrong_value, 6, "read-uncommitted"),
    (m_epoch_regressed, 5, "epoch-regressed"), (m_hw_regressed, 5, "hw-regressed"),
    (m_two_controllers, 4, "two-controllers"),
]


def test_clean_history_has_no_violation():
    verdict = check(clean_history())
    assert verdict.violations == [] and verdict.ok
    s = verdict.stats
    assert (s["invoked"], s["acknowledged"], s["failed"], s["indeterminate"]) == (11, 8, 1, 2)
    assert (s["reads"], s["final_records"], s["lost"], s["duplicated"]) == (3, 9, 0, 0)
    assert s["faults_by_kind"] == {"kill-broker": 1, "kill-controller": 1}
    assert s["skipped"] == {3: "no data_root", **NO_GROUP}


@pytest.mark.parametrize("mutate,invariant,kind", MUTATIONS,
                         ids=[f"{m.__name__[2:]}" for m, _, _ in MUTATIONS])
def test_each_rule_fires_alone(mutate, invariant, kind):
    history = clean_history()
    mutate(history)
    verdict = check(history)
    assert not verdict.ok
    assert {(v.invariant, v.kind) for v in verdict.violations} == {(invariant, kind)}, \
        verdict.violations


def test_lost_and_duplicated_are_counted():
    history = clean_history()
    m_lost(history)
    m_duplicate(history)
    stats = check(history).stats
    assert (stats["lost"], stats["duplicated"]) == (1, 1)


def test_reorder_needs_invoke_order_not_ack_order():
    """Acks arriving out of invoke order are fine while the offsets follow invoke order."""
    history = clean_history()
    a0 = find(history, f="send", type="ok", value="a0")
    history.remove(a0)
    history.append({**a0, "time_ms": history[-1]["time_ms"] + 10})
    assert check(history).ok


def test_samples_are_ordered_by_time_not_by_file_position():
    history = clean_history()
    later(history, "ok", "zk-sample", partition=1, leader=2, leader_epoch=0, isr=[2])
    history[-1]["time_ms"] = 1.0      # older than every other sample of partition 1
    assert check(history).ok
    history[-1]["time_ms"] = 1e9
    later(history, "ok", "zk-sample", partition=1, leader=2, leader_epoch=3, isr=[2])
    history[-1]["time_ms"] = 5.0
    assert {v.kind for v in check(history).violations} == {"epoch-regressed"}


def test_fail_that_was_written_is_reported_in_stats():
    history = clean_history()
    later(history, "ok", "final-read", partition=1, offset=4, value="b9")
    find(history, f="final-hw", partition=1)["high_watermark"] = 5
    verdict = check(history)
    assert verdict.ok and verdict.stats["failed_but_present"] == 1


def test_history_line_missing_a_field_is_an_error():
    history = clean_history()
    del find(history, f="send", type="ok", value="a0")["offset"]
    with pytest.raises(ValueError, match="offset"):
        check(history)


# -- failover statistics ----------------------------------------------------------------------------
def test_failover_is_first_ack_after_the_fault_on_its_partition():
    h = Hist()
    h.add("info", "meta", topic="t", partitions=2, replication_factor=3, min_isr=2, seed=1)
    h.add("info", "fault", id=1, kind="kill-broker", phase="start", target="b1", partition=0)  # t=20
    for value, p in (("x1", 1), ("x2", 0)):                      # acks at 40 (p1), 60 (p0)
        h.add("invoke", "send", process=0, value=value)
        h.add("ok", "send", process=0, value=value, partition=p, offset=0)
    h.add("info", "fault", id=2, kind="kill-controller", phase="start", target="c", partition=None)
    h.add("invoke", "send", process=0, value="x3")               # t=80
    h.add("ok", "send", process=0, value="x3", partition=1, offset=1)   # t=90: 20 ms after
    h.add("info", "fault", id=3, kind="kill-broker", phase="start", target="b2", partition=1)
    for p, values in ((0, ["x2"]), (1, ["x1", "x3"])):
        for off, v in enumerate(values):
            h.add("ok", "final-read", partition=p, offset=off, value=v)
        h.add("ok", "final-hw", partition=p, log_start_offset=0, high_watermark=len(values),
              isr=[1, 2], leader=1)
    verdict = check(h.lines)
    assert verdict.ok, verdict.violations
    fo = verdict.stats["failover_ms"]
    assert fo["by_kind"] == {"kill-broker": [40.0], "kill-controller": [20.0]}
    assert (fo["p50"], fo["p99"], fo["no_ack_after"]) == (20.0, 40.0, 1)


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50, 99, 100)


# -- verdict rendering --------------------------------------------------------------------------------
def test_table_and_json():
    history = clean_history()
    m_lost(history)
    verdict = check(history)
    text = verdict.table()
    assert "FAILED" in text and "lost=1" in text and "SKIPPED" in text
    assert all(name in text for name in ("acknowledged", "kill-broker", "p50", "p99"))
    for n, status in ((1, "FAIL"), (2, "PASS"), (3, "SKIPPED"), (4, "PASS"), (5, "PASS"),
                      (6, "PASS")):
        rows = [[c.strip() for c in line.split("│")] for line in text.splitlines()]
        assert any(len(r) > 3 and r[1] == str(n) and r[3].startswith(status) for r in rows), \
            (n, status, text)
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["ok"] is False
    assert data["violations"] == [{"invariant": 1, "kind": "lost", "detail": verdict.violations[0].detail}]
    assert "PASS" in check(clean_history()).table()
    assert Verdict().ok and Verdict([Violation(1, "lost", "x")]).ok is False


# -- history file --------------------------------------------------------------------------------------
def test_history_roundtrip_with_injected_clock(tmp_path):
    ticks = iter([1.0, 2.5, 4.0])
    path = tmp_path / "h.jsonl"
    with History(path, clock=lambda: next(ticks)) as h:
        h.record("info", "meta", topic="t", partitions=1)
        h.record("invoke", "send", process=0, value="é-0")
        h.record("ok", "send", process=0, value="é-0", partition=0, offset=3)
    assert load_history(path) == [
        {"type": "info", "f": "meta", "time_ms": 1.0, "topic": "t", "partitions": 1},
        {"type": "invoke", "f": "send", "time_ms": 2.5, "process": 0, "value": "é-0"},
        {"type": "ok", "f": "send", "time_ms": 4.0, "process": 0, "value": "é-0",
         "partition": 0, "offset": 3}]


def test_history_lines_are_on_disk_before_close(tmp_path):
    h = History(tmp_path / "h.jsonl")
    h.record("ok", "read", partition=0, offset=1, value="v")
    assert load_history(tmp_path / "h.jsonl")[0]["value"] == "v"     # flushed, not closed
    assert isinstance(load_history(tmp_path / "h.jsonl")[0]["time_ms"], float)
    with pytest.raises(ValueError, match="reserved"):
        h.record("ok", "read", time_ms=5)
    h.close()
    with pytest.raises(ValueError):
        h.record("ok", "read")


def test_history_is_thread_safe(tmp_path):
    h = History(tmp_path / "h.jsonl")

    def writer(process):
        for i in range(300):
            h.record("invoke", "send", process=process, value=f"p{process}-{i}" + "x" * 200)
    threads = [threading.Thread(target=writer, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.close()
    lines = load_history(tmp_path / "h.jsonl")
    assert len(lines) == 2400 and len({e["value"] for e in lines}) == 2400
    times = [e["time_ms"] for e in lines]
    assert times == sorted(times)


def test_load_history_tolerates_only_a_torn_last_line(tmp_path):
    path = tmp_path / "h.jsonl"
    good = json.dumps({"type": "ok", "f": "read", "time_ms": 1.0})
    path.write_bytes((good + "\n" + good + "\n" + '{"type": "ok", "f": "re').encode())
    assert len(load_history(path)) == 2
    path.write_bytes((good + "\n").encode() + '{"v": "é'.encode()[:-1])    # torn inside UTF-8
    assert len(load_history(path)) == 1
    path.write_text(good + "\n{torn\n" + good + "\n")
    with pytest.raises(ValueError, match="line 2"):
        load_history(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="object"):
        load_history(path)


# -- disk readers ------------------------------------------------------------------------------------
def batch(values, ts=1000, **kw):
    return records.build_batch([v.encode() for v in values], timestamps_ms=ts, **kw)


def build_replicas(root, brokers=(1, 2, 3), topic="t", n_batches=12):
    """Broker brokers[0] leads epoch 0 then epoch 1; the others replicate everything."""
    logs = {b: Log(root / f"broker-{b}" / f"{topic}-0", SMALL) for b in brokers}
    leader = logs[brokers[0]]
    for i in range(n_batches):
        leader.append_as_leader(batch([f"v{i}-{j}" for j in range(3)]), leader_epoch=i // 6)
    for b in brokers[1:]:
        for chunk in leader.iter_reads(0):
            logs[b].append_as_follower(chunk)
    values = [(r.offset, r.value.decode()) for chunk in leader.iter_reads(0)
              for r in records.decode_records(chunk)]
    assert len(leader.segments) > 2
    for log in logs.values():
        log.close()
    return values


def disk_history(values, isr=(1, 2, 3), leader=1, hw=None, topic="t"):
    hw = len(values) if hw is None else hw
    h = Hist()
    h.add("info", "meta", topic=topic, partitions=1, replication_factor=3, min_isr=2, seed=0)
    for off, value in values[:hw]:
        h.add("invoke", "send", process=0, value=value)
        h.add("ok", "send", process=0, value=value, partition=0, offset=off)
    for off, value in values[:hw]:
        h.add("ok", "final-read", partition=0, offset=off, value=value)
    h.add("ok", "final-hw", partition=0, log_start_offset=0, high_watermark=hw,
          isr=list(isr), leader=leader)
    return h.lines


def first_segment(root, broker):
    return root / f"broker-{broker}" / "t-0" / f"{0:020d}.log"


def flip(path, position):
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_read_batches_parses_segments_in_order_and_stops_at_a_torn_tail(tmp_path):
    values = build_replicas(tmp_path, brokers=(1,))
    pdir = tmp_path / "broker-1" / "t-0"
    batches = disk.read_batches(pdir)
    assert [(b, last) for b, last, _ in batches] == [(3 * i, 3 * i + 2) for i in range(12)]
    assert all(len(data) == 12 + int.from_bytes(data[8:12], "big") for _, _, data in batches)
    assert len(disk.segment_files(pdir)) > 2 and values[-1][0] == 35
    segments = [p for _, p in disk.segment_files(pdir)]
    middle = segments[1]
    middle.write_bytes(middle.read_bytes()[:-5])             # torn tail in a middle segment
    torn = disk.read_batches(pdir)
    assert batches[:len(torn)] == torn and len(torn) < len(batches)
    assert torn[-1][1] + 1 == int(segments[2].name[:20]) - 3
    assert disk.read_batches(tmp_path / "nowhere") == []


def test_checkpoint_and_controller_file_readers(tmp_path):
    build_replicas(tmp_path, brokers=(1,))
    assert disk.leader_epoch_entries(tmp_path / "broker-1" / "t-0") == [(0, 0), (1, 18)]
    assert disk.leader_epoch_entries(tmp_path / "none") == []
    assert disk.controller_epochs(tmp_path / "broker-1") == []
    (tmp_path / "broker-1" / "controller-epochs.log").write_text("1 1\n2 3\n3 1")  # torn last
    assert disk.controller_epochs(tmp_path / "broker-1") == [(1, 1), (2, 3)]
    assert [b for b, _ in disk.broker_dirs(tmp_path)] == [1]
    assert [p for p, _ in disk.partition_dirs(tmp_path / "broker-1", "t")] == [0]
    (tmp_path / "broker-1" / "t-0" / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")
    with pytest.raises(ValueError, match="count"):
        disk.leader_epoch_entries(tmp_path / "broker-1" / "t-0")


# -- invariant 3: replicas on disk -------------------------------------------------------------------
def _flip_below_hw(root):
    size = len(disk.read_batches(root / "broker-2" / "t-0")[0][2])
    flip(first_segment(root, 2), size - 1)                   # a record byte of batch 0


def _flip_header_epoch(root):
    flip(first_segment(root, 3), 13)                          # PartitionLeaderEpoch, no CRC


def _tear_broker3_tail(root):
    last = disk.segment_files(root / "broker-3" / "t-0")[-1][1]
    last.write_bytes(last.read_bytes()[:-7])


def _drop_broker3_segment(root):
    disk.segment_files(root / "broker-3" / "t-0")[0][1].unlink()


def _delete_broker3(root):
    import shutil
    shutil.rmtree(root / "broker-3" / "t-0")


DISK_CASES = [
    ("identical", lambda root: None, {}, set()),
    ("flip-below-hw", _flip_below_hw, {}, {"replica-diverged"}),
    ("flip-leader-epoch-field", _flip_header_epoch, {}, {"replica-diverged"}),
    ("torn-tail", _tear_broker3_tail, {}, {"replica-short"}),
    ("missing-first-segment", _drop_broker3_segment, {}, {"replica-short"}),
    ("missing-replica", _delete_broker3, {}, {"replica-short"}),
    ("flip-outside-isr", _flip_header_epoch, {"isr": (1, 2)}, set()),
    ("torn-above-hw", _tear_broker3_tail, {"hw": 33}, set()),
    ("leader-not-in-isr", _flip_below_hw, {"isr": (2, 3), "leader": 1}, {"replica-diverged"}),
]


@pytest.mark.parametrize("mutate,kw,kinds", [c[1:] for c in DISK_CASES],
                         ids=[c[0] for c in DISK_CASES])
def test_replicas_byte_identical_up_to_the_hw(tmp_path, mutate, kw, kinds):
    values = build_replicas(tmp_path)
    mutate(tmp_path)
    verdict = check(disk_history(values, **kw), data_root=str(tmp_path))
    assert {v.kind for v in verdict.violations} == kinds, verdict.violations
    assert verdict.stats["skipped"] == NO_GROUP


def test_diverged_replica_is_missed_without_data_root(tmp_path):
    values = build_replicas(tmp_path)
    _flip_below_hw(tmp_path)
    assert check(disk_history(values)).ok


def test_different_batch_boundaries_diverge(tmp_path):
    """Same offsets and records, batched differently: not byte-identical."""
    for broker, sizes in ((1, (3, 3)), (2, (2, 4))):
        seg = tmp_path / f"broker-{broker}" / "t-0" / f"{0:020d}.log"
        seg.parent.mkdir(parents=True)
        data, off = b"", 0
        for n in sizes:
            data += bytes(batch([f"r{off + j}" for j in range(n)], base_offset=off))
            off += n
        seg.write_bytes(data)
    values = [(i, f"r{i}") for i in range(6)]
    verdict = check(disk_history(values, isr=(1, 2)), data_root=str(tmp_path))
    assert {v.kind for v in verdict.violations} == {"replica-diverged"}
    # the reference lacking the start: broker 2's first batch overlaps the reference's batch
    (tmp_path / "broker-1" / "t-0" / f"{0:020d}.log").write_bytes(
        bytes(batch(["r3", "r4", "r5"], base_offset=3)))
    kinds = {v.kind for v in check(disk_history(values, isr=(1, 2)), data_root=str(tmp_path)).violations}
    assert kinds == {"replica-short", "replica-diverged"}


# -- invariant 5 on disk: leader-epoch-checkpoint -------------------------------------------------------
@pytest.mark.parametrize("text,kinds", [
    (None, set()),
    ("0\n2\n0 0\n1 0\n", set()),                      # equal start offsets: allowed by the rule
    ("0\n2\n1 0\n1 18\n", {"epoch-cache-regressed"}),  # epoch not strictly increasing
    ("0\n2\n2 0\n1 18\n", {"epoch-cache-regressed"}),
    ("0\n2\n0 18\n1 3\n", {"epoch-cache-regressed"}),  # start offset going back
    ("0\n3\n0 0\n1 18\n", {"epoch-cache-unreadable"}),
    ("1\n1\n0 0\n", {"epoch-cache-unreadable"}),
])
def test_leader_epoch_checkpoint_regression(tmp_path, text, kinds):
    values = build_replicas(tmp_path)
    if text is not None:
        (tmp_path / "broker-2" / "t-0" / "leader-epoch-checkpoint").write_text(text)
    verdict = check(disk_history(values), data_root=str(tmp_path))
    assert {v.kind for v in verdict.violations} == kinds, verdict.violations


# -- invariant 4 on disk: controller-epochs.log ---------------------------------------------------------
def empty_run() -> list[dict]:
    h = Hist()
    h.add("info", "meta", topic="t", partitions=1, replication_factor=3, min_isr=2, seed=0)
    h.add("ok", "final-hw", partition=0, log_start_offset=0, high_watermark=0, isr=[1, 2],
          leader=1)
    return h.lines


@pytest.mark.parametrize("files,samples,kinds", [
    ({1: "1 1\n2 1\n", 2: "2 1\n3 2\n"}, [(2, 3)], set()),
    ({1: "1 1\n2 1\n", 2: "2 3\n"}, [], {"two-controllers"}),
    ({1: "2 1\n", 2: "2 3"}, [], set()),                     # torn append: ignored
    ({1: "2 1\n"}, [(3, 2)], {"two-controllers"}),           # file against a ZK sample
    ({1: "2 1\nxx\n"}, [], {"controller-log-unreadable"}),
])
def test_controller_epochs_files(tmp_path, files, samples, kinds):
    for broker, text in files.items():
        (tmp_path / f"broker-{broker}").mkdir()
        (tmp_path / f"broker-{broker}" / "controller-epochs.log").write_text(text)
    history = empty_run()
    for controller, epoch in samples:
        later(history, "ok", "controller-sample", controller_id=controller, epoch=epoch)
    verdict = check(history, data_root=str(tmp_path))
    assert {v.kind for v in verdict.violations} == kinds, verdict.violations
    assert all(v.invariant == 4 for v in verdict.violations)


# -- consumer groups (invariants 7-9, rayka/chaos/group_checker.py) -----------------------------
def group_history(mutate=None) -> list[dict]:
    """The clean history plus a group that read every acknowledged record and caught up."""
    lines = clean_history()
    h = Hist()
    h.t = max(e["time_ms"] for e in lines)
    h.add("ok", "group-assign", member="m1", generation=1, partitions=[0, 1])
    h.add("ok", "group-committed-sample", offsets={"0": 2})
    h.add("ok", "group-assign", member="m1", generation=2, partitions=[0])
    h.add("ok", "group-assign", member="m2", generation=2, partitions=[1])
    for e in [e for e in lines if e["f"] == "send" and e["type"] == "ok"]:
        h.add("ok", "group-read", member="m1", generation=2, partition=e["partition"],
              offset=e["offset"], value=e["value"])
    h.add("ok", "group-committed-sample", offsets={"0": 5, "1": 4})
    h.add("ok", "group-final", committed={"0": 5, "1": 5}, ends={"0": 5, "1": 5})
    if mutate:
        mutate(h.lines)
    return lines + h.lines


def _regress(lines):
    lines.append({"type": "ok", "f": "group-committed-sample", "time_ms": 1e9, "offsets": {"0": 3}})


def _two_owners(lines):
    lines.append({"type": "ok", "f": "group-assign", "time_ms": 1e9, "member": "m3",
                  "generation": 2, "partitions": [1]})


def _unread(lines):
    lines[:] = [e for e in lines if not (e["f"] == "group-read" and e["value"] == "b3")]


def _behind(lines):
    lines[-1]["committed"] = {"0": 5, "1": 3}


@pytest.mark.parametrize("mutate,kinds", [
    (None, set()), (_regress, {"committed-regressed"}), (_two_owners, {"two-owners"}),
    (_unread, {"unconsumed"}), (_behind, {"not-caught-up"}),
], ids=["clean", "committed-regressed", "two-owners", "unconsumed", "not-caught-up"])
def test_group_invariants(mutate, kinds):
    verdict = check(group_history(mutate))
    assert {v.kind for v in verdict.violations} == kinds, verdict.violations
    assert 7 not in verdict.stats["skipped"] and verdict.stats["group_generations"] == 2
    # a member re-reading after a rebalance is not a violation (at least once)
    assert check(group_history(lambda ls: ls.insert(4, dict(ls[4], member="m2")))).ok \
        or mutate is not None


# -- share groups (invariants 16-18, rayka/chaos/share_checker.py) --------------------------------
def share_history(mutate=None) -> list[dict]:
    """The clean history plus a share group that accepted every acknowledged record once;
    one record delivered twice (its first member died with it)."""
    lines = clean_history()
    h = Hist()
    h.t = max(e["time_ms"] for e in lines)
    sent = [e for e in lines if e["f"] == "send" and e["type"] == "ok"]
    h.add("ok", "share-acquire", member="s1", partition=sent[0]["partition"],
          offset=sent[0]["offset"], delivery_count=1)
    for e in sent:
        n = 2 if e is sent[0] else 1
        h.add("ok", "share-acquire", member="s2", partition=e["partition"], offset=e["offset"],
              delivery_count=n)
        h.add("ok", "share-ack", member="s2", partition=e["partition"], offset=e["offset"],
              delivery_count=n, error=0)
    h.add("ok", "share-final", settled=len(sent))
    if mutate:
        mutate(h.lines)
    return lines + h.lines


def _accepted_twice(lines):
    first = next(e for e in lines if e["f"] == "share-ack")
    lines.append(dict(first, member="s3", time_ms=1e9))


def _never_accepted(lines):
    last = [e for e in lines if e["f"] == "share-ack"][-1]
    lines.remove(last)


def _unanswered(lines):
    last = [e for e in lines if e["f"] == "share-ack"][-1]
    last.update(type="info", error=7)       # the broker died: it may have written it


def _over_the_limit(lines):
    first = next(e for e in lines if e["f"] == "share-acquire")
    lines.append(dict(first, delivery_count=6, time_ms=1e9))


def _unfinished(lines):
    lines.pop()


@pytest.mark.parametrize("mutate,kinds", [
    (None, set()), (_accepted_twice, {"accepted-twice"}),
    (_never_accepted, {"share-unconsumed"}), (_unanswered, set()),
    (_over_the_limit, {"delivery-limit"}), (_unfinished, {"share-not-finished"}),
], ids=["clean", "accepted-twice", "share-unconsumed", "unanswered", "delivery-limit",
        "not-finished"])
def test_share_group_invariants(mutate, kinds):
    verdict = check(share_history(mutate))
    assert {v.kind for v in verdict.violations} == kinds, verdict.violations
    assert 16 not in verdict.stats["skipped"] and verdict.stats["share_redelivered"] >= 1

