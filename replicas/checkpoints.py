"""Kafka's checkpoint files, byte for byte (Kafka's record and log formats).

Rules:
- Text, "\\n" line ends: line 1 the format version, line 2 the entry count, then one entry
  per line with fields separated by single spaces.
- `leader-epoch-checkpoint` (per partition dir): version 0, entries `<epoch> <start_offset>`.
- `replication-offset-checkpoint` (high watermarks), `recovery-point-offset-checkpoint` and
  `log-start-offset-checkpoint` (per data dir): version 0, entries `<topic> <partition>
  <offset>`. The last lists only logs whose start lies inside their first segment (after
  DeleteRecords or a leader's start adopted): otherwise the first segment's base says it.
- A write goes to `<name>.tmp`, is fsynced, renamed over the old file, and the directory
  is fsynced, so a crash leaves either the old or the new file, never half of one.
- Writes to one file are serialised (a lock, as Kafka's CheckpointFile's): a writer may run
  outside the lock that guards the values it writes. A write that names a `generation`
  (the count of snapshots taken, in the order they were taken) at or below the last one
  written is dropped: a snapshot taken before another one that is already on disk.
- A missing file reads as no entries. A version or count mismatch, or a malformed line,
  raises KafkaStorageError naming the file and line: the caller must not guess.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Generic, Iterable, TypeVar

from replicas.errors import KafkaStorageError

T = TypeVar("T")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


def fsync_path(path: Path) -> None:
    """fsync the file or directory `path` names (Linux syncs through a read-only fd)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """tmp + fsync + rename + fsync(dir)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_path(path.parent)


class CheckpointFile(Generic[T]):
    """One checkpoint file with a fixed version and an entry codec."""

    def __init__(self, path: str | os.PathLike, version: int,
                 format_entry: Callable[[T], str], parse_entry: Callable[[list[str]], T]):
        self.path = Path(path)
        self.version = version
        self._format = format_entry
        self._parse = parse_entry
        self._lock = threading.Lock()
        self._generation = -1

    def write(self, entries: Iterable[T], generation: int | None = None) -> None:
        """Write `entries`, unless `generation` is not newer than the last written (rules)."""
        lines = [self._format(entry) for entry in entries]
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        with self._lock:
            if generation is not None:
                if generation <= self._generation:
                    return
                self._generation = generation
            atomic_write(self.path, text.encode("utf-8"))

    def read(self) -> list[T]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2:
            raise self._error(1, "expected a version line and a count line")
        version = self._int(lines[0], 1)
        if version != self.version:
            raise self._error(1, f"unsupported version {version}, expected {self.version}")
        count = self._int(lines[1], 2)
        entries = lines[2:]
        if count != len(entries):
            raise self._error(2, f"count says {count} entries, file has {len(entries)}")
        parsed = []
        for number, line in enumerate(entries, start=3):
            try:
                parsed.append(self._parse(line.split(" ")))
            except (ValueError, IndexError) as exc:
                raise self._error(number, f"malformed entry {line!r} ({exc})") from None
        return parsed

    def _int(self, text: str, line: int) -> int:
        try:
            return int(text)
        except ValueError:
            raise self._error(line, f"expected an integer, got {text!r}") from None

    def _error(self, line: int, why: str) -> KafkaStorageError:
        return KafkaStorageError(f"checkpoint {self.path} line {line}: {why}")


def _parse_epoch_entry(fields: list[str]) -> tuple[int, int]:
    epoch, start_offset = fields  # exactly two fields, or ValueError
    return int(epoch), int(start_offset)


def _parse_offset_entry(fields: list[str]) -> tuple[tuple[str, int], int]:
    topic, partition, offset = fields
    return (topic, int(partition)), int(offset)


def leader_epoch_checkpoint(partition_dir: str | os.PathLike) -> CheckpointFile[tuple[int, int]]:
    return CheckpointFile(Path(partition_dir) / LEADER_EPOCH_CHECKPOINT, 0,
                          lambda e: f"{e[0]} {e[1]}", _parse_epoch_entry)


class OffsetCheckpoint:
    """`replication-offset-checkpoint` / `recovery-point-offset-checkpoint`: (topic, partition) → offset."""

    def __init__(self, path: str | os.PathLike):
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path, 0, lambda e: f"{e[0][0]} {e[0][1]} {e[1]}", _parse_offset_entry)

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: dict[tuple[str, int], int], generation: int | None = None
              ) -> None:
        self._file.write(sorted(offsets.items()), generation)

    def read(self) -> dict[tuple[str, int], int]:
        entries = self._file.read()
        result = dict(entries)
        if len(result) != len(entries):
            raise KafkaStorageError(f"checkpoint {self.path}: a partition appears twice")
        return result


def replication_offset_checkpoint(data_dir: str | os.PathLike) -> OffsetCheckpoint:
    return OffsetCheckpoint(Path(data_dir) / REPLICATION_OFFSET_CHECKPOINT)


def recovery_point_checkpoint(data_dir: str | os.PathLike) -> OffsetCheckpoint:
    return OffsetCheckpoint(Path(data_dir) / RECOVERY_POINT_CHECKPOINT)


def log_start_offset_checkpoint(data_dir: str | os.PathLike) -> OffsetCheckpoint:
    return OffsetCheckpoint(Path(data_dir) / LOG_START_OFFSET_CHECKPOINT)
