"""A segment's `.txnindex` (Kafka's TransactionIndex): the aborted transactions whose ABORT
marker lies in the segment, for read_committed fetches and the cleaner.

Rules (Kafka 3.8 storage/.../log/TransactionIndex.java, AbortedTxn.java, LogSegment.java):
- File `<base offset, 20 digits>.txnindex`, created only when the first entry is written
  (a segment without aborted transactions has none). Entries are AbortedTxn, 34 bytes
  big-endian: int16 version (0), int64 producer id, int64 first offset, int64 last offset
  (the marker's offset), int64 last stable offset (the LSO when the marker was written:
  the first offset of the earliest other transaction then still open, or the marker + 1).
- Entries are appended in marker order: a last offset not greater than the previous entry's
  is refused (ValueError, Kafka's IllegalArgumentException).
- `collect_aborted(fetch_offset, upper_bound)`: the entries overlapping [fetch_offset,
  upper_bound) (last offset >= fetch_offset and first offset < upper_bound), and whether the
  search is complete: it stops at the first entry whose last stable offset is at or past
  upper_bound (every transaction aborted after it started at or past that offset).
- `truncate_to(offset)` drops entries whose last offset is at or past `offset`; `reset`
  drops all of them. Derived data: `load` refuses (returns False, keeps nothing) a file
  that is not a whole number of entries, has an unknown version, an entry whose last offset
  is below the segment's base (Kafka's sanityCheck) or at or past its next offset, a first
  offset after its last, or last offsets that do not rise; the log then rebuilds it from
  the producer state.
- Like the other indexes, the file is opened only to be read at load, to be written, or to
  be fsynced; the entries live in memory (a segment holds few aborted transactions).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from replicas.open_files import briefly_open

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size
assert ENTRY_SIZE == 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ENTRY.pack(VERSION, *self)


def parse_entries(raw: bytes) -> list[AbortedTxn] | None:
    """The entries of a whole file; None if it is not a whole number of version-0 entries."""
    if len(raw) % ENTRY_SIZE:
        return None
    out = []
    for version, *fields in ENTRY.iter_unpack(raw):
        if version != VERSION:
            return None
        out.append(AbortedTxn(*fields))
    return out


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int):
        self.path, self.base_offset = path, base_offset
        self._entries: list[AbortedTxn] = []
        self.dirty = False

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    @property
    def last_offset(self) -> int | None:
        return self._entries[-1].last_offset if self._entries else None

    def load(self, next_offset: int) -> bool:
        """Read the file (absent: no entries); False, nothing kept, if it is not sane."""
        self._entries = []
        if not self.path.exists():
            return True
        with briefly_open(self.path) as fd:
            raw = os.pread(fd, os.fstat(fd).st_size, 0)
        entries = parse_entries(raw)
        if entries is None:
            return False
        last = None
        for e in entries:
            if e.last_offset < self.base_offset or e.last_offset >= next_offset \
                    or e.first_offset > e.last_offset \
                    or (last is not None and e.last_offset <= last):
                return False
            last = e.last_offset
        self._entries = entries
        return True

    def append(self, txn: AbortedTxn) -> None:
        """Write one entry at the end of the file (Kafka's TransactionIndex.append)."""
        last = self.last_offset
        if last is not None and txn.last_offset <= last:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} does not follow "
                             f"the one ending at {last} in {self.path}")
        with briefly_open(self.path) as fd:
            os.pwrite(fd, txn.to_bytes(), len(self._entries) * ENTRY_SIZE)
        self._entries.append(txn)
        self.dirty = True

    def collect_aborted(self, fetch_offset: int, upper_bound: int
                        ) -> tuple[list[AbortedTxn], bool]:
        """(entries overlapping [fetch_offset, upper_bound), search complete?)."""
        out = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        keep = len(self._entries)
        while keep and self._entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep < len(self._entries):
            del self._entries[keep:]
            self._rewrite()

    def reset(self) -> None:
        """No entries (Kafka's reset: the file is emptied, not removed)."""
        self._entries = []
        if self.path.exists():
            self._rewrite()

    def replace(self, entries: list[AbortedTxn]) -> None:
        """The file holds exactly `entries` (a rebuild from the producer state)."""
        if not entries and not self.path.exists():
            self._entries = []
            return
        self._entries = list(entries)
        self._rewrite()

    def _rewrite(self) -> None:
        with briefly_open(self.path) as fd:
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"".join(e.to_bytes() for e in self._entries), 0)
        self.dirty = True

    def fsync(self) -> None:
        if self.dirty and self.path.exists():
            with briefly_open(self.path) as fd:
                os.fsync(fd)
        self.dirty = False

    def rename_to(self, path: Path) -> None:
        """Move the file (if any) to `path`; the index lives there from now on."""
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self._entries = []
        self.path.unlink(missing_ok=True)
