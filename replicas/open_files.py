"""The open `.log` descriptors of one broker, least recently used closed first.

Rules:
- A segment asks for its descriptor on every read, write, truncate or fsync; the cache
  opens the file when it is not open and, past `limit` open files, closes the least
  recently used one (None: no limit). So a broker with 30,000 replicas stays inside a
  20,000-descriptor limit (the `.index` and `.timeindex` files are never kept open).
- Closing a descriptor loses nothing: written bytes are in the page cache, and an fsync
  through a later descriptor of the same file makes them durable.
- Callers hold the broker's lock (as for every replica-manager call): a descriptor handed
  out is used before anyone else can evict it. The cleaner reads through its own.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict


class OpenFiles:
    def __init__(self, limit: int | None = None):
        if limit is not None and limit < 1:
            raise ValueError("the open-file limit must be at least 1")
        self.limit = limit
        self._lru: OrderedDict[object, int] = OrderedDict()
        self.opened = self.evicted = 0          # counters for metrics and tests

    def __len__(self) -> int:
        return len(self._lru)

    def fd(self, owner, path) -> int:
        fd = self._lru.get(owner)
        if fd is not None:
            self._lru.move_to_end(owner)
            return fd
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._lru[owner] = fd
        self.opened += 1
        while self.limit is not None and len(self._lru) > self.limit:
            _, old = self._lru.popitem(last=False)
            os.close(old)
            self.evicted += 1
        return fd

    def close(self, owner) -> None:
        fd = self._lru.pop(owner, None)
        if fd is not None:
            os.close(fd)


UNBOUNDED = OpenFiles()     # for logs opened outside a broker (tools, tests)


@contextlib.contextmanager
def briefly_open(path):
    """A descriptor of `path` (created if missing) for one read, write or fsync: the index
    files are never kept open."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)
