"""One log segment: a `.log` file of whole record batches, its sparse `.index`, its
`.timeindex` (replicas/time_index.py) and its `.txnindex` (replicas/txn_index.py).

Rules (Kafka's record and log formats, Kafka's LogSegment/OffsetIndex):
- Files are named by the segment's base offset, zero-padded to 20 digits.
- The `.log` holds whole RecordBatch v2 batches back to back, offsets rising (dense, except
  where the cleaner removed whole batches of a compacted log).
- The `.index` holds 8-byte big-endian entries (4-byte offset relative to the base,
  4-byte file position). An entry is added before a batch once more than
  `index_interval_bytes` were appended since the last entry (Kafka's rule); it names the
  batch's last offset and its position, so a lookup of X starts at the greatest entry
  ≤ X and scans batch headers forward from there.
- The index is derived data: if it is missing or inconsistent it is rebuilt from the
  `.log`; a recovered segment always gets a fresh one.
- No method reads the clock; fsync happens only in flush().
- Timestamps for retention, rolling and the time index: the largest batch max timestamp
  (and the last offset of the batch that carried it) and the first batch's max timestamp
  (Kafka's rollingBasedTimestamp), kept current by appends; for a segment opened from disk
  they are read once from its batch headers, for a recovered or truncated one at once.
- The time index gets an entry whenever the offset index does, and a last one when the
  segment is rolled (`on_become_inactive`) or recovered. A segment with no timestamp (all -1) counts
  as old as its file's modification time, as Kafka's largestTimestamp.
- The `.txnindex` cannot be rebuilt from the segment alone (it needs the producer state
  at the segment's start): the segment loads it, truncates it with the log and deletes it
  with the log; the log decides when it is stale and rebuilds it (replicas/log.py).
- At most one open file per segment, the `.log`, and only while the broker's LRU of open
  files (replicas/open_files.py) keeps it. The indexes live in memory and their files are
  opened only to be read at load, written (one pwrite per appended batch set that adds
  entries, a truncate, a rebuild) or fsynced, then closed (Kafka keeps every file open and
  asks for a high ulimit).
- Reads mostly continue where the last one ended (a follower or consumer at the log end), so
  the segment remembers a few batch boundaries, offset → position (where appends began and
  where reads stopped): a fetch at such an offset reads one header instead of scanning
  from the sparse index. A truncation forgets them.
- The active segment keeps the bytes of its last append (at most TAIL_BYTES) while they
  are its last bytes: `tail_read` answers a read that would return exactly them (a
  follower or a consumer at the log end, most reads at low rates) from memory, with no
  header lookup, no pread and no CRC check again (they were validated before they were
  written, and a later change to the file under the broker, a disk fault, cannot reach
  them). A truncation, a recovery, a roll or closing drops them.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from replicas import records
from replicas.errors import CorruptRecord, KafkaStorageError
from replicas.open_files import UNBOUNDED, OpenFiles, briefly_open
from replicas.control import CONTROL_FLAG
from replicas.time_index import TimeIndex
from replicas.txn_index import TransactionIndex

INDEX_ENTRY = struct.Struct(">ii")
BOUNDARY_HINTS = 32
TAIL_BYTES = 8192           # a larger append is read back from the file
MAX_RELATIVE_OFFSET = 2**31 - 1


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Outcome of validating a segment's bytes from some position on."""

    valid_bytes: int        # file size after which everything is torn or corrupt
    next_offset: int        # offset after the last valid batch
    error: str | None       # why the scan stopped early, None if the file was clean
    epochs: tuple[tuple[int, int], ...] = ()   # (leader epoch, base offset) where one begins
    control_batches: int = 0                   # control batches among the valid ones


class Segment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int = 4096,
                 files: OpenFiles = UNBOUNDED):
        self.base_offset = base_offset
        self.log_path = directory / segment_name(base_offset, ".log")
        self.index_path = directory / segment_name(base_offset, ".index")
        self.index_interval_bytes = index_interval_bytes
        self._files = files
        self._closed = False
        with self._index_file():
            pass                                # the .index exists from the start
        self.time_index = TimeIndex(directory / segment_name(base_offset, ".timeindex"),
                                    base_offset)
        self.txn_index = TransactionIndex(directory / segment_name(base_offset, ".txnindex"),
                                          base_offset)
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset
        self._index_offsets: list[int] = []     # relative last offsets
        self._index_positions: list[int] = []
        self._bytes_since_index = 0
        self._boundaries: dict[int, int] = {}   # batch base offset → position (hints)
        # the last append while it ends the file: (first base offset, last batch's base
        # offset, end position, its bytes, whether it is one batch); None when not kept
        self._tail: tuple[int, int, int, bytes, bool] | None = None
        self.dirty = False
        self._data_synced = -1                   # the .log's size when last fdatasynced
        self.created_ms: int | None = None       # set by the log from its clock
        # (first batch max timestamp or None, largest max timestamp, last offset of its
        # batch); None = not read from the headers yet
        self._timestamps: tuple[int | None, int, int] | None = \
            (None, -1, -1) if self.size == 0 else None

    # -- loading ---------------------------------------------------------------------
    def load_trusted(self, next_offset: int) -> bool:
        """Open a segment below the recovery point: trust the .log, reuse a sane .index and
        .timeindex; False when its .txnindex is not sane (the log rebuilds it)."""
        self.next_offset = next_offset
        txn_ok = self.txn_index.load(next_offset)
        with self._index_file() as fd:
            raw = os.pread(fd, os.fstat(fd).st_size, 0)
        usable = len(raw) - len(raw) % INDEX_ENTRY.size
        offsets, positions = [], []
        for rel, pos in INDEX_ENTRY.iter_unpack(raw[:usable]):
            if (offsets and (rel <= offsets[-1] or pos <= positions[-1])) or pos >= self.size \
                    or rel < 0 or self.base_offset + rel >= next_offset:
                self.rebuild_index()
                return txn_ok
            offsets.append(rel)
            positions.append(pos)
        if usable != len(raw) or not self.time_index.load(next_offset):
            self.rebuild_index()
            return txn_ok
        self._index_offsets, self._index_positions = offsets, positions
        self._bytes_since_index = self.size - (positions[-1] if positions else 0)
        return txn_ok

    def recover(self, max_batch_bytes: int | None = None) -> ScanResult:
        """Validate every batch (header, CRC, rising offsets); cut the file at the first bad
        one; rebuild the offset and time indexes (the log sees to the `.txnindex`)."""
        result = self.scan(max_batch_bytes)
        self._tail = None
        if result.valid_bytes < self.size:
            os.ftruncate(self._fd, result.valid_bytes)
            self.size = result.valid_bytes
            self.dirty = True
        self.next_offset = result.next_offset
        self.rebuild_index()
        return result

    def scan(self, max_batch_bytes: int | None = None) -> ScanResult:
        position, expected, controls = 0, self.base_offset, 0
        epochs: list[tuple[int, int]] = []
        while position < self.size:
            head = os.pread(self._fd, records.HEADER_SIZE, position)
            try:
                header = records.read_header(head)._replace(position=position)
                records.check_header(header, self.size - position, max_batch_bytes)
                body = os.pread(self._fd, header.size, position)
                actual = records.crc_of(body, 0, header.size)
                if actual != header.crc:
                    raise CorruptRecord(f"CRC-32C mismatch in batch at offset {header.base_offset}")
                if header.base_offset < expected:       # gaps: a compacted log
                    raise CorruptRecord(
                        f"batch base offset {header.base_offset}, expected >= {expected}")
            except CorruptRecord as exc:
                return ScanResult(position, expected, f"{self.log_path.name}: {exc.message}",
                                  tuple(epochs), controls)
            if header.partition_leader_epoch >= 0 and (
                    not epochs or header.partition_leader_epoch > epochs[-1][0]):
                epochs.append((header.partition_leader_epoch, header.base_offset))
            controls += bool(header.attributes & CONTROL_FLAG)
            position += header.size
            expected = header.next_offset
        return ScanResult(position, expected, None, tuple(epochs), controls)

    def rebuild_index(self) -> None:
        """Both indexes and the timestamps from the `.log` (Kafka's LogSegment.recover)."""
        self._boundaries.clear()
        self._index_offsets, self._index_positions = [], []
        self._bytes_since_index = 0
        self.time_index.clear()
        self._timestamps = (None, -1, -1)
        for header in self.headers_from(0):
            self._track(header)
            if self._maybe_index(header.last_offset, header.position, header.size):
                self.time_index.maybe_append(*self._timestamps[1:])
        self.time_index.maybe_append(*self._timestamps[1:])
        entries = b"".join(INDEX_ENTRY.pack(o, p)
                           for o, p in zip(self._index_offsets, self._index_positions))
        with self._index_file() as fd:
            os.ftruncate(fd, 0)
            os.pwrite(fd, entries, 0)
        self.time_index.rewrite()
        self.dirty = True

    # -- appending -------------------------------------------------------------------
    def append(self, buf, headers: list[records.BatchHeader], first_offset: int,
               assigned: bool = False) -> None:
        """Write validated batches that start at `first_offset` at the end of the file.

        `headers` may predate offset assignment (a leader append), so offsets are counted
        from `first_offset`; `assigned` headers (a follower's) carry their real offsets.
        """
        start = self.size
        index_bytes, time_bytes = bytearray(), bytearray()
        offset = first_offset
        last_base = first_offset
        self._known_timestamps()
        for header in headers:
            last_base = header.base_offset if assigned else offset
            offset = last_base + header.last_offset_delta + 1
            self._track(header, offset - 1)
            entry = self._maybe_index(offset - 1, start + header.position, header.size)
            if entry:
                index_bytes += entry
                time_bytes += self.time_index.maybe_append(*self._timestamps[1:])
        _write_all(self._fd, buf, start)
        if headers:
            self._remember(headers[0].base_offset if assigned else first_offset, start)
        if index_bytes:
            with self._index_file() as fd:
                _write_all(fd, index_bytes, len(self._index_offsets) * INDEX_ENTRY.size
                           - len(index_bytes))
            self.time_index.write(bytes(time_bytes))
        self.size = start + len(buf)
        self.next_offset = offset
        self.dirty = True
        if headers:
            first = headers[0].base_offset if assigned else first_offset
            self._tail = (first, last_base, self.size, bytes(buf), len(headers) == 1) \
                if len(buf) <= TAIL_BYTES else None

    def tail_read(self, offset: int, max_bytes: int, max_offset: int | None) -> bytes | None:
        """What `read(offset, max_bytes, max_offset)` would return, from the last append's
        bytes kept in memory (module rules), when it would return exactly them; else None."""
        tail = self._tail
        if tail is None or tail[0] != offset or tail[2] != self.size or self._closed:
            return None
        if (max_offset is not None and tail[1] >= max_offset) or \
                (len(tail[3]) > max_bytes and not tail[4]):
            return None
        return tail[3]

    def on_become_inactive(self) -> None:
        """The segment was rolled: its last time-index entry (Kafka's skipFullCheck)."""
        self._tail = None
        self.time_index.write(self.time_index.maybe_append(*self._known_timestamps()[1:]))

    def _maybe_index(self, last_offset: int, position: int, size: int) -> bytes:
        """Kafka's rule for one batch; returns the 8 bytes of a new entry, or b""."""
        entry = b""
        if self._bytes_since_index > self.index_interval_bytes:
            entry = self._add_index_entry(last_offset, position)
        self._bytes_since_index += size
        return entry

    def _add_index_entry(self, last_offset: int, position: int) -> bytes:
        rel = last_offset - self.base_offset
        self._index_offsets.append(rel)
        self._index_positions.append(position)
        self._bytes_since_index = 0
        return INDEX_ENTRY.pack(rel, position)

    def fits(self, batch_bytes: int, next_offset: int, segment_bytes: int) -> bool:
        """False when the batch must go to a new segment (size or relative-offset limit)."""
        if self.size == 0:
            return True
        return (self.size + batch_bytes <= segment_bytes
                and next_offset - 1 - self.base_offset <= MAX_RELATIVE_OFFSET)

    # -- timestamps --------------------------------------------------------------------
    def _track(self, header: records.BatchHeader, last_offset: int | None = None) -> None:
        """Fold one batch into the known timestamps (`last_offset`: its real last offset
        when the header predates offset assignment)."""
        first, largest, at = self._timestamps
        if header.max_timestamp > largest:
            largest = header.max_timestamp
            at = header.last_offset if last_offset is None else last_offset
        self._timestamps = (header.max_timestamp if first is None else first, largest, at)

    def _known_timestamps(self) -> tuple[int | None, int, int]:
        if self._timestamps is None:
            self._timestamps = (None, -1, -1)
            for header in self.headers_from(0):
                self._track(header)
        return self._timestamps

    def position_for_timestamp(self, timestamp: int) -> int:
        """Where a search for the first record at or after `timestamp` may start."""
        return self.find_position(self.time_index.lookup(timestamp))[0]

    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp, -1 when no batch has one."""
        return self._known_timestamps()[1]

    @property
    def largest_timestamp(self) -> int:
        """Kafka's LogSegment.largestTimestamp (see module rules)."""
        largest = self._known_timestamps()[1]
        if largest >= 0:
            return largest
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    @property
    def rolling_timestamp(self) -> int | None:
        """The first batch's max timestamp (None for an empty segment)."""
        return self._known_timestamps()[0]

    # -- reading ---------------------------------------------------------------------
    def headers_from(self, position: int):
        """Every batch header from byte `position` on, reading headers only (no records)."""
        while position + records.HEADER_SIZE <= self.size:
            header = records.read_header(os.pread(self._fd, records.HEADER_SIZE, position))
            yield header._replace(position=position)
            position += header.size

    def _remember(self, offset: int, position: int) -> None:
        hints = self._boundaries
        if len(hints) >= BOUNDARY_HINTS:
            del hints[next(iter(hints))]            # the oldest
        hints[offset] = position

    def find_position(self, offset: int) -> tuple[int, records.BatchHeader | None]:
        """Position and header of the first batch whose last offset ≥ `offset`."""
        position = self._boundaries.get(offset)
        if position is not None and position + records.HEADER_SIZE <= self.size:
            header = records.read_header(os.pread(self._fd, records.HEADER_SIZE, position))
            if header.base_offset == offset:
                return position, header._replace(position=position)
        i = bisect.bisect_right(self._index_offsets, offset - self.base_offset) - 1
        start = self._index_positions[i] if i >= 0 else 0
        for header in self.headers_from(start):
            if header.last_offset >= offset:
                return header.position, header
        return self.size, None

    def read_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def read(self, offset: int, max_bytes: int, max_offset: int | None) -> bytes:
        """Whole batches from the one holding `offset`, at least one batch (Kafka's
        minOneMessage), at most `max_bytes` otherwise, none starting at or past `max_offset`."""
        position, first = self.find_position(offset)
        if first is None or (max_offset is not None and first.base_offset >= max_offset):
            return b""
        want = min(max(max_bytes, first.size), self.size - position)
        chunk = self.read_bytes(position, want)
        cut, next_offset = 0, None
        for header in records.iter_headers(chunk):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            cut, next_offset = header.position + header.size, header.last_offset + 1
        if next_offset is not None and position + cut < self.size:
            self._remember(next_offset, position + cut)
        return chunk[:cut] if cut < len(chunk) else chunk

    # -- shrinking and lifecycle -------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset ≥ `offset`; returns bytes removed."""
        position, first_dropped = self.find_position(offset)
        if first_dropped is None:
            return 0
        removed = self.size - position
        self._boundaries.clear()
        self._tail = None
        os.ftruncate(self._fd, position)
        self.size = position
        # Offsets are dense, so the first dropped batch starts where the kept data ends.
        self.next_offset = first_dropped.base_offset
        keep = bisect.bisect_left(self._index_positions, position)
        del self._index_offsets[keep:], self._index_positions[keep:]
        with self._index_file() as fd:
            os.ftruncate(fd, keep * INDEX_ENTRY.size)
        self._bytes_since_index = position - (self._index_positions[-1] if keep else 0)
        self.dirty = True
        self.time_index.truncate_to(self.next_offset)
        self.txn_index.truncate_to(self.next_offset)
        self._timestamps = None
        self._known_timestamps()
        return removed

    def sync_data(self) -> None:
        """fdatasync the .log alone when it changed since (log.flush.before.ack: the data
        must be on disk; its indexes are rebuilt by recovery past the recovery point)."""
        if self.size != self._data_synced:
            os.fdatasync(self._fd)
            self._data_synced = self.size

    def file_paths(self) -> tuple[Path, ...]:
        return (self.log_path, self.index_path, self.time_index.path, self.txn_index.path)

    def mark_synced(self) -> None:
        """Its files were fsynced by path (replicas/log.py `fsync_files`), no write since."""
        self._data_synced = self.size
        self.dirty = False

    def flush(self) -> None:
        if self.dirty:
            os.fsync(self._fd)
            self._data_synced = self.size
            with self._index_file() as fd:   # fsync covers writes made through any fd
                os.fsync(fd)
            self.time_index.fsync()
            self.dirty = False
        self.txn_index.fsync()

    def _index_file(self):
        return briefly_open(self.index_path)

    @property
    def _fd(self) -> int:
        if self._closed:
            raise KafkaStorageError(f"segment {self.log_path} is closed")
        return self._files.fd(self, self.log_path)

    def close(self) -> None:
        self._closed = True
        self._tail = None
        self._files.close(self)

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path):
            path.unlink(missing_ok=True)
        self.time_index.delete()
        self.txn_index.delete()


def _write_all(fd: int, data, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written
