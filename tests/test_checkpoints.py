"""Checkpoint files match Kafka's text format byte for byte (Kafka's record and log formats)."""

import os

import pytest

from replicas import checkpoints
from replicas.errors import KafkaStorageError

pytestmark = pytest.mark.unit


def test_leader_epoch_checkpoint_bytes(tmp_path):
    cp = checkpoints.leader_epoch_checkpoint(tmp_path)
    cp.write([(0, 0), (3, 120), (7, 4500)])
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n3\n0 0\n3 120\n7 4500\n"
    assert cp.read() == [(0, 0), (3, 120), (7, 4500)]


def test_offset_checkpoints_bytes_and_names(tmp_path):
    hw = checkpoints.replication_offset_checkpoint(tmp_path)
    rp = checkpoints.recovery_point_checkpoint(tmp_path)
    hw.write({("clicks", 1): 42, ("clicks", 0): 7, ("a.b_c-d", 11): 0})
    rp.write({})
    assert (tmp_path / "replication-offset-checkpoint").read_bytes() == \
        b"0\n3\na.b_c-d 11 0\nclicks 0 7\nclicks 1 42\n"
    assert (tmp_path / "recovery-point-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert hw.read() == {("clicks", 1): 42, ("clicks", 0): 7, ("a.b_c-d", 11): 0}
    assert rp.read() == {}


def test_missing_file_reads_empty(tmp_path):
    assert checkpoints.leader_epoch_checkpoint(tmp_path).read() == []


@pytest.mark.parametrize("content, words", [
    (b"1\n0\n", "unsupported version 1"),
    (b"0\n2\n0 0\n", "count says 2 entries, file has 1"),
    (b"0\n1\n0 0\n5 9\n", "count says 1 entries, file has 2"),
    (b"0\n1\nzero 0\n", "malformed entry"),
    (b"0\n1\n0 0 0\n", "malformed entry"),
    (b"x\n0\n", "expected an integer"),
    (b"0\n", "version line and a count line"),
])
def test_bad_files_raise_a_clear_error(tmp_path, content, words):
    (tmp_path / "leader-epoch-checkpoint").write_bytes(content)
    with pytest.raises(KafkaStorageError, match=words) as info:
        checkpoints.leader_epoch_checkpoint(tmp_path).read()
    assert "leader-epoch-checkpoint" in str(info.value) and info.value.code == 56


def test_duplicate_partition_is_rejected(tmp_path):
    (tmp_path / "replication-offset-checkpoint").write_bytes(b"0\n2\nt 0 1\nt 0 2\n")
    with pytest.raises(KafkaStorageError, match="twice"):
        checkpoints.replication_offset_checkpoint(tmp_path).read()


def test_write_replaces_atomically_and_leaves_no_tmp(tmp_path, monkeypatch):
    cp = checkpoints.leader_epoch_checkpoint(tmp_path)
    cp.write([(1, 10)])
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    cp.write([(1, 10), (2, 20)])
    assert len(synced) == 2  # the tmp file, then the directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader-epoch-checkpoint"]
    assert cp.read() == [(1, 10), (2, 20)]
