"""The segmented partition log: appends, reads, truncation, recovery, on-disk format."""

import os
import struct

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record import MemoryRecords

from replicas import records
from replicas.errors import CorruptRecord, OffsetOutOfRange, RecordTooLarge
from replicas.log import Log, LogConfig

pytestmark = pytest.mark.unit

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=256)


def batch(values, ts=1000, **kw):
    return records.build_batch([v if isinstance(v, bytes) else str(v).encode() for v in values],
                               timestamps_ms=ts, **kw)


def values_of(data):
    return [(r.offset, r.value) for r in records.decode_records(data)]


def read_all(log, max_offset=None):
    out, offset = [], log.log_start_offset
    while True:
        data = log.read(offset, 1 << 20, max_offset)
        if not data:
            return out
        got = records.decode_records(data, min_offset=offset)
        out.extend((r.offset, r.value) for r in got)
        offset = got[-1].offset + 1


def kafka_python_view(log_dir):
    """(base offset, leader epoch, crc ok, [record offsets]) per batch, parsed by kafka-python."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".log"):
            parsed = MemoryRecords((log_dir / name).read_bytes())
            while parsed.has_next():
                b = parsed.next_batch()
                out.append((b.base_offset, b.leader_epoch, b.validate_crc(), [r.offset for r in b]))
    return out


def test_segments_parse_with_kafka_python(tmp_path):
    log = Log(tmp_path / "clicks-0", SMALL)
    for i in range(30):
        log.append_as_leader(batch([f"v{i}-{j}" for j in range(5)]), leader_epoch=i // 10)
    log.flush()
    names = sorted(p.name for p in (tmp_path / "clicks-0").iterdir())
    assert len(log.segments) > 3
    assert names[0] == "00000000000000000000.index" and names[1] == "00000000000000000000.log"
    assert all(len(n.split(".")[0]) == 20 for n in names if n.endswith((".log", ".index")))
    view = kafka_python_view(tmp_path / "clicks-0")
    assert [v[0] for v in view] == list(range(0, 150, 5))
    assert [v[1] for v in view] == [i // 10 for i in range(30)]
    assert all(v[2] for v in view)
    assert [o for v in view for o in v[3]] == list(range(150))
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(0, 0), (1, 50), (2, 100)]
    assert (tmp_path / "clicks-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n3\n0 0\n1 50\n2 100\n"


def test_index_is_sparse_8_byte_entries_pointing_at_batches(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    for i in range(40):
        log.append_as_leader(batch([i] * 3), leader_epoch=0)
    log.flush()
    for segment in log.segments:
        raw = segment.index_path.read_bytes()
        assert len(raw) % 8 == 0
        data = segment.log_path.read_bytes()
        entries = list(struct.iter_unpack(">ii", raw))
        assert entries, "each segment of this size must have index entries"
        for rel, pos in entries:
            header = records.read_header(data, pos)
            assert header.base_offset + header.last_offset_delta == segment.base_offset + rel


def test_read_returns_whole_batches_bounded_by_max_offset(tmp_path):
    log = Log(tmp_path / "t-0")
    for i in range(10):
        log.append_as_leader(batch([f"{i}a", f"{i}b"]), leader_epoch=0)
    assert values_of(log.read(5, 1))[0][0] == 4          # the batch holding 5, even past max_bytes
    assert len(records.decode_records(log.read(4, 200))) == 2 * (200 // len(batch(["0a", "0b"])) or 1)
    assert [o for o, _ in read_all(log, max_offset=8)] == list(range(8))
    assert log.read(8, 1 << 20, max_offset=8) == b""
    assert log.read(20, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(21, 100)


def test_rejected_append_changes_nothing(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(max_message_bytes=500))
    log.append_as_leader(batch(["ok"]), leader_epoch=0)
    size = log.size_bytes
    bad = batch(["x", "y"])
    bad[-2] ^= 0x10
    with pytest.raises(CorruptRecord):
        log.append_as_leader(batch(["fine"]) + bad, leader_epoch=0)
    with pytest.raises(RecordTooLarge):
        log.append_as_leader(batch([b"z" * 600]), leader_epoch=0)
    assert (log.log_end_offset, log.size_bytes) == (1, size)


def test_follower_append_continues_at_leo_and_learns_epochs(tmp_path):
    leader = Log(tmp_path / "l" / "t-0")
    follower = Log(tmp_path / "f" / "t-0")
    for epoch in (0, 0, 3, 5):
        leader.append_as_leader(batch(["a", "b"]), leader_epoch=epoch)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.log_end_offset == 8
    assert follower.epoch_cache.entries == leader.epoch_cache.entries
    with pytest.raises(CorruptRecord, match="base offset 0"):
        follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.log_end_offset == 8


def test_truncate_to_drops_batches_and_epochs(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    for i in range(40):
        log.append_as_leader(batch([i] * 4), leader_epoch=i // 10)
    segments_before = len(log.segments)
    log.truncate_to(62)           # mid-batch: the whole batch 60..63 goes
    assert log.log_end_offset == 60
    assert len(log.segments) < segments_before
    assert [o for o, _ in read_all(log)] == list(range(60))
    assert log.epoch_cache.latest_epoch == 1
    log.append_as_leader(batch(["new"]), leader_epoch=7)
    assert read_all(log)[-1] == (60, b"new")
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_cache.entries) == (0, 0, [])


def test_delete_records_before_advances_log_start(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    for i in range(40):
        log.append_as_leader(batch([i] * 4), leader_epoch=i // 10)
    n = len(log.segments)
    log.delete_records_before(100)
    assert log.log_start_offset == 100 and len(log.segments) < n
    assert log.epoch_cache.entries[0].start_offset == 100
    with pytest.raises(OffsetOutOfRange):
        log.read(99)
    assert read_all(log)[0][0] == 100


def test_flush_policy_messages_and_ms(tmp_path):
    log = Log(tmp_path / "a-0", LogConfig(flush_messages=10))
    log.append_as_leader(batch(range(6)), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(range(6)), leader_epoch=0)
    assert log.recovery_point == 12
    now = [0]
    log = Log(tmp_path / "b-0", LogConfig(flush_ms=100), clock_ms=lambda: now[0])
    log.append_as_leader(batch(range(3)), leader_epoch=0)
    now[0] = 99
    assert not log.maybe_flush() and log.recovery_point == 0
    now[0] = 100
    assert log.maybe_flush() and log.recovery_point == 3


def test_reopen_restores_everything(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    for i in range(25):
        log.append_as_leader(batch([i, i + 1]), leader_epoch=i // 5)
    expected, entries = read_all(log), log.epoch_cache.entries
    log.flush()
    rp = log.recovery_point
    log.close()
    again = Log(tmp_path / "t-0", SMALL, recovery_point=rp)
    assert again.recovery.clean
    assert read_all(again) == expected and again.epoch_cache.entries == entries


# -- crash recovery ------------------------------------------------------------------------

def write_log(path, n_batches=40, config=SMALL):
    log = Log(path, config)
    ends = []
    for i in range(n_batches):
        log.append_as_leader(batch([f"r{i}-{j}" for j in range(3)]), leader_epoch=i // 4)
        ends.append(log.log_end_offset)
    log.flush()
    log.close()
    return ends


@given(cut=st.floats(0, 1, exclude_max=True))
@settings(max_examples=60, deadline=None)
def test_cut_at_any_byte_recovers_to_the_last_whole_batch(tmp_path_factory, cut):
    path = tmp_path_factory.mktemp("crash") / "t-0"
    write_log(path)
    last = sorted(path.glob("*.log"))[-1]
    data = last.read_bytes()
    keep = int(cut * len(data))
    last.write_bytes(data[:keep])
    boundaries = [h.position + h.size for h in records.iter_headers(data)]
    whole = [b for b in boundaries if b <= keep]
    log = Log(path, SMALL, recovery_point=0)
    base = int(last.stem)
    assert log.log_end_offset == base + 3 * len(whole)
    assert log.recovery.truncated_bytes == keep - (whole[-1] if whole else 0)
    assert (log.recovery.reason is None) == (keep in whole or keep == 0)
    assert [o for o, _ in read_all(log)] == list(range(log.log_end_offset))
    assert log.epoch_cache.latest_epoch == (-1 if log.log_end_offset == 0
                                            else (log.log_end_offset // 3 - 1) // 4)


@pytest.mark.parametrize("segment_index", [0, 1, -1])
def test_flipped_byte_is_detected_and_the_tail_cut(tmp_path, segment_index):
    path = tmp_path / "t-0"
    write_log(path)
    segment = sorted(path.glob("*.log"))[segment_index]
    data = bytearray(segment.read_bytes())
    headers = list(records.iter_headers(data))
    victim = headers[len(headers) // 2]
    data[victim.position + victim.size - 3] ^= 0x01
    segment.write_bytes(data)
    later = [p.name for p in sorted(path.glob("*.log")) if int(p.stem) > int(segment.stem)]
    log = Log(path, SMALL, recovery_point=0)
    assert "CRC" in log.recovery.reason
    assert log.log_end_offset == victim.base_offset
    assert list(log.recovery.deleted_segments) == later
    assert [o for o, _ in read_all(log)] == list(range(victim.base_offset))
    assert kafka_python_view(path)[-1][2]  # what is left parses and checks out


def test_corrupt_index_of_trusted_segment_is_rebuilt(tmp_path):
    path = tmp_path / "t-0"
    write_log(path)
    first_index = sorted(path.glob("*.index"))[0]
    first_index.write_bytes(b"\xff" * 12)
    log = Log(path, SMALL, recovery_point=10**9)
    assert log.recovery.clean
    assert len(first_index.read_bytes()) % 8 == 0
    assert [o for o, _ in read_all(log)] == list(range(120))


# -- model-based property: random operations against a list --------------------------------

ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 6), st.integers(0, 3)),
    st.tuples(st.just("truncate"), st.integers(0, 60)),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 60), st.integers(1, 400)),
), max_size=40)


@given(ops=ops)
@settings(max_examples=80, deadline=None)
def test_log_matches_a_list_model(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("model") / "t-0"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100)
    log = Log(path, cfg)
    model: list[tuple[int, bytes, int]] = []    # (offset, value, epoch)
    epoch_floor = 0
    for op in ops:
        if op[0] == "append":
            epoch_floor = max(epoch_floor, op[2])
            start = len(model)
            values = [f"{start + i}".encode() for i in range(op[1])]
            info = log.append_as_leader(batch(values), leader_epoch=epoch_floor)
            assert info.first_offset == start
            model.extend([(start + i, v, epoch_floor) for i, v in enumerate(values)])
        elif op[0] == "truncate":
            log.truncate_to(op[1])
            # whole batches go: the log end lands on a batch boundary ≤ op[1]
            assert log.log_end_offset <= max(op[1], 0) or log.log_end_offset == len(model)
            del model[log.log_end_offset:]
        elif op[0] == "reopen":
            log.flush()
            rp = log.recovery_point if op[1] else 0
            log.close()
            log = Log(path, cfg, recovery_point=rp)
            assert log.recovery.clean
        else:
            offset, max_bytes = min(op[1], len(model)), op[2]
            got = values_of(log.read(offset, max_bytes))
            assert all(o == m[0] and v == m[1] for (o, v), m in zip(got, model[got[0][0]:])) if got \
                else offset == len(model)
        assert log.log_end_offset == len(model)
        assert read_all(log) == [(o, v) for o, v, _ in model]
        for o, _, e in model:
            assert log.epoch_cache.epoch_for_offset(o) == e
    log.close()


def test_epochs_not_yet_flushed_are_rederived_by_recovery(tmp_path):
    """A crash after appends in new epochs but before flush: the checkpoint lacks them,
    recovery scans the batches past the recovery point and puts them back."""
    path = tmp_path / "t-0"
    log = Log(path, SMALL)
    for i in range(12):
        log.append_as_leader(batch([f"r{i}-{j}" for j in range(3)]), leader_epoch=i // 4 * 2)
    log.flush()                                  # epochs 0, 2, 4 durable; recovery point 36
    for i in range(12, 16):
        log.append_as_leader(batch([f"r{i}"]), leader_epoch=7)
    log.append_as_leader(batch(["last"]), leader_epoch=9)
    assert (path / "leader-epoch-checkpoint").read_text().split("\n")[1] == "3"
    crashed = Log(path, SMALL, recovery_point=36)     # no close(): the process died
    assert [(e.epoch, e.start_offset) for e in crashed.epoch_cache.entries] == \
        [(0, 0), (2, 12), (4, 24), (7, 36), (9, 40)]
    assert crashed.epoch_cache.end_offset_for(7, crashed.log_end_offset) == (7, 40)


# -- the last append kept in memory (Log.read_tail) --------------------------------------------

def test_read_tail_is_the_last_append_until_the_file_moves_on(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20))
    log.append_as_leader(batch(["a", "b"]), leader_epoch=0)
    log.append_as_leader(batch(["c"]) + batch(["d", "e"]), leader_epoch=0)   # two batches
    on_disk = log.read(2, 1 << 20)
    assert log.read_tail(2, 1 << 20) == on_disk and values_of(on_disk) == [
        (2, b"c"), (3, b"d"), (4, b"e")]
    # not exactly the last append: another offset, a max offset or size that cuts it
    assert log.read_tail(0, 1 << 20) is None
    assert log.read_tail(2, 1 << 20, max_offset=3) is None      # the 2nd batch starts at 3
    assert log.read_tail(2, 1 << 20, max_offset=4) == on_disk
    assert log.read_tail(2, 10) is None                          # two batches over 10 bytes
    log.append_as_leader(batch(["f"]), leader_epoch=0)
    single = log.read(5, 10)                                     # one batch: always whole
    assert log.read_tail(5, 10) == single and log.read_tail(2, 1 << 20) is None
    # a fault changing the file under the broker does not reach the bytes kept
    segment = tmp_path / "t-0" / ("0" * 20 + ".log")
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    assert log.read_tail(5, 1 << 20) == single
    records.validate_batches(single)
    with pytest.raises(CorruptRecord):
        records.validate_batches(log.read(5, 1 << 20))
    log.truncate_to(5)
    assert log.read_tail(5, 1 << 20) is None


def test_read_tail_is_dropped_by_a_roll_a_reopen_and_a_moved_log_start(tmp_path):
    log = Log(tmp_path / "t-0", SMALL)
    log.append_as_leader(batch(["x" * 300]), leader_epoch=0)
    assert log.read_tail(0, 1 << 20) is not None
    log.append_as_leader(batch(["y" * 900]), leader_epoch=0)   # over segment.bytes: a roll
    assert len(log.segments) == 2 and log.read_tail(0, 1 << 20) is None
    assert log.read_tail(1, 1 << 20) == log.read(1, 1 << 20)
    log.delete_records_before(2)
    assert log.read_tail(1, 1 << 20) is None
    log.flush()
    log.close()
    reopened = Log(tmp_path / "t-0", SMALL, recovery_point=2)
    assert reopened.read_tail(1, 1 << 20) is None


tail_ops = st.lists(st.one_of(
    st.tuples(st.just("lead"), st.lists(st.integers(1, 4), min_size=1, max_size=3)),
    st.tuples(st.just("follow"), st.lists(st.integers(1, 4), min_size=1, max_size=3)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("read"), st.integers(0, 40), st.integers(1, 600),
              st.one_of(st.none(), st.integers(0, 40))),
), max_size=30)


@given(ops=tail_ops)
@settings(max_examples=80, deadline=None)
def test_read_tail_answers_only_what_read_answers(tmp_path_factory, ops):
    """Whenever the kept tail answers, it is byte for byte what a read of the file gives."""
    log = Log(tmp_path_factory.mktemp("tail") / "t-0",
              LogConfig(segment_bytes=700, index_interval_bytes=100))
    for op in ops:
        end = log.log_end_offset
        if op[0] in ("lead", "follow"):
            buf, offset = bytearray(), end
            for n in op[1]:        # several batches in one append
                buf += batch([b"v%d" % (offset + i) for i in range(n)], base_offset=offset,
                             partition_leader_epoch=0)
                offset += n
            if op[0] == "lead":
                log.append_as_leader(buf, leader_epoch=0)
            else:
                log.append_as_follower(bytes(buf))
        elif op[0] == "truncate":
            log.truncate_to(op[1])
        else:
            offset = min(op[1], end)
            tail = log.read_tail(offset, op[2], op[3])
            if tail is not None:
                assert tail == log.read(offset, op[2], op[3])
        if end < log.log_end_offset:           # just appended: the tail answers its reader
            assert log.read_tail(end, 1 << 20) == log.read(end, 1 << 20)
    log.close()
