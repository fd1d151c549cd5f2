"""The broker's LRU of open segment files (replicas/open_files.py): many logs, few
descriptors, nothing lost when a descriptor is closed under a log."""

import os

import pytest

from replicas import records
from replicas.errors import KafkaStorageError
from replicas.log import Log, LogConfig
from replicas.open_files import OpenFiles

pytestmark = pytest.mark.unit


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_two_hundred_logs_through_eight_descriptors(tmp_path):
    files = OpenFiles(limit=8)
    before = open_fds()
    logs = [Log(tmp_path / f"t-{i}", LogConfig(segment_bytes=400), files=files)
            for i in range(200)]
    for round_ in range(5):
        for i, log in enumerate(logs):
            log.append_as_leader(records.build_batch([b"%d-%d" % (i, round_) * 20],
                                                     timestamps_ms=1), leader_epoch=0)
            assert len(files) <= 8 and open_fds() - before <= 8
    for log in logs:
        log.flush()                                   # fsync through fresh descriptors
    assert files.evicted > 900 and open_fds() - before <= 8
    for i, log in enumerate(logs):
        got = records.decode_records(b"".join(log.iter_reads(0)))
        assert [r.value for r in got] == [b"%d-%d" % (i, r) * 20 for r in range(5)]
        log.close()
    assert len(files) == 0 and open_fds() == before
    again = Log(tmp_path / "t-7", LogConfig(segment_bytes=400), recovery_point=5, files=files)
    assert again.log_end_offset == 5 and again.recovery.clean


def test_a_closed_segment_refuses_use_instead_of_reopening(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(), files=OpenFiles(limit=2))
    log.append_as_leader(records.build_batch([b"x"], timestamps_ms=1), leader_epoch=0)
    segment = log.segments[0]
    log.close()
    with pytest.raises(KafkaStorageError):
        segment.read(0, 100, None)


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError):
        OpenFiles(limit=0)
