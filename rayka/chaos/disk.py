"""Read-only views of brokers' data dirs for the chaos checker (Kafka's record and log formats).

Layout: `<data_root>/broker-<id>/` per broker, holding `<topic>-<partition>/` partition dirs
(20-digit `<base_offset>.log` segments, `leader-epoch-checkpoint`) and `controller-epochs.log`.

Rules:
- Nothing here writes, locks, renames or truncates: the checker may run while a broker still
  has the files open, and must never "repair" the evidence.
- Only the stdlib: a batch is parsed from its 61-byte RecordBatch v2 header (BaseOffset i64,
  Length i32, PartitionLeaderEpoch i32, Magic i8, CRC u32, Attributes i16, LastOffsetDelta
  i32, ...); its size is 12 + Length. CRCs are NOT checked: a corrupt byte must show up
  as bytes that differ between replicas, not as a silently shorter log.
- `control_offsets`: the offsets of control batches (attribute bit 5: Kafka's transaction
  markers), which hold no record a consumer returns.
- `read_batches` walks the segments in base-offset order and stops at the first torn or
  structurally impossible batch (short header, Length too small or past the end of the
  file, magic != 2, negative LastOffsetDelta); nothing after that point is returned, later
  segments included, because a broker's recovery would cut the log there too.
- Checkpoint files: line 1 version (0), line 2 entry count, then the entries; a missing
  file is no entries; a wrong version, count or a malformed entry raises ValueError.
- `controller-epochs.log` is appended to: one `<epoch> <controller_id>` line per controller
  epoch a broker obeyed. A last line without its "\\n" is a torn append and is ignored
  (it may be a truncated number); a malformed complete line raises ValueError.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

HEADER = struct.Struct(">qiibIhi")      # BaseOffset .. LastOffsetDelta: the fields used here
HEADER_SIZE = 61                         # the whole v2 header
LOG_OVERHEAD = 12                        # BaseOffset + Length are not counted by Length
MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2
CONTROL_FLAG = 0x20                      # Attributes bit 5: a control batch (a marker)
ATTRIBUTES_AT = 21                       # BaseOffset 8, Length 4, Epoch 4, Magic 1, CRC 4
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CONTROLLER_EPOCHS = "controller-epochs.log"
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_BROKER_DIR = re.compile(r"^broker-(\d+)$")

Batch = tuple[int, int, bytes]           # (base_offset, last_offset, the batch's bytes)


def segment_files(partition_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(base offset, path) of every `.log` segment, in base-offset order."""
    directory = Path(partition_dir)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), directory / name) for name in os.listdir(directory)
             if (m := _SEGMENT.match(name))]
    return sorted(found)


def parse_batches(data: bytes) -> tuple[list[Batch], int]:
    """Whole batches at the start of `data` and the number of bytes they cover."""
    out: list[Batch] = []
    position, end = 0, len(data)
    while end - position >= HEADER_SIZE:
        base, length, _epoch, magic, _crc, _attrs, delta = HEADER.unpack_from(data, position)
        size = LOG_OVERHEAD + length
        if length < MIN_LENGTH or magic != MAGIC or delta < 0 or position + size > end:
            break
        out.append((base, base + delta, bytes(data[position:position + size])))
        position += size
    return out, position


def read_batches(partition_dir: str | os.PathLike) -> list[Batch]:
    """Every batch of a partition dir's segments, in order; stops at a torn tail."""
    batches: list[Batch] = []
    for _base, path in segment_files(partition_dir):
        data = path.read_bytes()
        parsed, used = parse_batches(data)
        batches.extend(parsed)
        if used != len(data):
            break
    return batches


def control_offsets(partition_dir: str | os.PathLike) -> set[int]:
    """The offsets of the partition's control batches (transaction markers)."""
    out: set[int] = set()
    for base, last, data in read_batches(partition_dir):
        if struct.unpack_from(">h", data, ATTRIBUTES_AT)[0] & CONTROL_FLAG:
            out.update(range(base, last + 1))
    return out


def _checkpoint_lines(path: Path) -> list[str] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise ValueError(f"{path}: expected a version line and a count line")
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError:
        raise ValueError(f"{path}: version/count lines are not integers") from None
    if version != 0:
        raise ValueError(f"{path}: unsupported version {version}")
    if count != len(lines) - 2:
        raise ValueError(f"{path}: count says {count} entries, file has {len(lines) - 2}")
    return lines[2:]


def _int_pair(line: str, path: Path, number: int) -> tuple[int, int]:
    fields = line.split(" ")
    try:
        a, b = fields
        return int(a), int(b)
    except ValueError:
        raise ValueError(f"{path} line {number}: malformed entry {line!r}") from None


def leader_epoch_entries(partition_dir: str | os.PathLike) -> list[tuple[int, int]]:
    """(epoch, start_offset) entries of the partition's `leader-epoch-checkpoint`."""
    path = Path(partition_dir) / LEADER_EPOCH_CHECKPOINT
    lines = _checkpoint_lines(path)
    if lines is None:
        return []
    return [_int_pair(line, path, n) for n, line in enumerate(lines, start=3)]


def controller_epochs(broker_dir: str | os.PathLike) -> list[tuple[int, int]]:
    """(epoch, controller_id) lines of the broker's `controller-epochs.log` ([] if none)."""
    path = Path(broker_dir) / CONTROLLER_EPOCHS
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    lines.pop()      # "" after the final "\n", or a torn last append: ignored either way
    return [_int_pair(line, path, n) for n, line in enumerate(lines, start=1) if line.strip()]


def broker_dirs(data_root: str | os.PathLike) -> list[tuple[int, Path]]:
    """(broker id, path) of every `broker-<id>` dir under `data_root`, by id."""
    root = Path(data_root)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), root / name) for name in os.listdir(root)
             if (m := _BROKER_DIR.match(name)) and (root / name).is_dir()]
    return sorted(found)


def partition_dirs(broker_dir: str | os.PathLike, topic: str) -> list[tuple[int, Path]]:
    """(partition, path) of the topic's partition dirs in one broker dir, by partition."""
    directory = Path(broker_dir)
    if not directory.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)$")
    found = [(int(m.group(1)), directory / name) for name in os.listdir(directory)
             if (m := pattern.match(name)) and (directory / name).is_dir()]
    return sorted(found)


def partition_dir(data_root: str | os.PathLike, broker: int, topic: str, partition: int) -> Path:
    return Path(data_root) / f"broker-{broker}" / f"{topic}-{partition}"
