"""A segment's `.timeindex` (Kafka's TimeIndex): timestamp → offset, for ListOffsets by time.

Rules (Kafka's record and log formats, Kafka's TimeIndex / LogSegment):
- 12-byte big-endian entries: the largest timestamp seen so far in the segment (int64) and
  the offset of the record batch that carried it, relative to the segment's base (int32).
  Timestamps strictly increase along the file; offsets never decrease.
- An entry is considered whenever the segment adds an offset-index entry (every
  `index.interval.bytes`), and once more when the segment stops being the active one (roll)
  or is recovered; it is written only if its timestamp is larger than the last entry's.
- `lookup(t)`: the offset of the last entry whose timestamp is at or below t (the segment's
  base when none is): records before it all have smaller timestamps, so a search for the
  first record at or after t may start there.
- Derived data: a file that is not a whole number of entries, not increasing, or names an
  offset outside the segment is rebuilt from the `.log` by the segment. Truncating the log
  drops entries at or past the new end.
- Like the `.index`, the file is opened only to read it at load, to write, or to fsync.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from replicas.open_files import briefly_open

ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex:
    def __init__(self, path: Path, base_offset: int):
        self.path, self.base_offset = path, base_offset
        self._timestamps: list[int] = []
        self._offsets: list[int] = []           # relative
        with self._file():
            pass                                # exists from the start, as the .index

    def __len__(self) -> int:
        return len(self._timestamps)

    def entries(self) -> list[tuple[int, int]]:
        """(timestamp, absolute offset) pairs, oldest first."""
        return [(t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets)]

    def load(self, next_offset: int) -> bool:
        """Read the file; False (nothing kept) if it is not a sane index of this segment."""
        with self._file() as fd:
            raw = os.pread(fd, os.fstat(fd).st_size, 0)
        if len(raw) % ENTRY.size:
            return False
        timestamps, offsets = [], []
        for ts, rel in ENTRY.iter_unpack(raw):
            if (timestamps and (ts <= timestamps[-1] or rel < offsets[-1])) or rel < 0 \
                    or self.base_offset + rel >= max(next_offset, self.base_offset + 1):
                return False
            timestamps.append(ts)
            offsets.append(rel)
        self._timestamps, self._offsets = timestamps, offsets
        return True

    def maybe_append(self, timestamp: int, offset: int) -> bytes:
        """Add (timestamp, offset) if the timestamp is newer than the last entry's; returns
        the entry's bytes for the caller to write (b"" when nothing was added)."""
        if timestamp <= (self._timestamps[-1] if self._timestamps else NO_TIMESTAMP):
            return b""
        rel = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        return ENTRY.pack(timestamp, rel)

    def write(self, entry_bytes: bytes) -> None:
        """Append entries already added in memory (the file holds every earlier one)."""
        if entry_bytes:
            with self._file() as fd:
                os.pwrite(fd, entry_bytes, len(self._timestamps) * ENTRY.size - len(entry_bytes))

    def rewrite(self) -> None:
        """The file from the entries in memory (after a rebuild or a truncation)."""
        data = b"".join(ENTRY.pack(t, o) for t, o in zip(self._timestamps, self._offsets))
        with self._file() as fd:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)

    def clear(self) -> None:
        self._timestamps, self._offsets = [], []

    def truncate_to(self, offset: int) -> None:
        """Drop entries naming an offset at or past `offset`."""
        keep = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if keep < len(self._offsets):
            del self._timestamps[keep:], self._offsets[keep:]
            self.rewrite()

    def lookup(self, timestamp: int) -> int:
        i = bisect.bisect_right(self._timestamps, timestamp) - 1
        return self.base_offset + (self._offsets[i] if i >= 0 else 0)

    def fsync(self) -> None:
        with self._file() as fd:
            os.fsync(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def _file(self):
        return briefly_open(self.path)
