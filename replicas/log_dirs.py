"""A broker's log directories: Kafka's `log.dirs`, KIP-112's offline directories and the
choice of a directory for a new log (LogManager, LogDirFailureChannel).

Rules:
- One or more directories, in the order given. Each holds partition dirs and its own
  `replication-offset-checkpoint`, `recovery-point-offset-checkpoint`,
  `log-start-offset-checkpoint` and `cleaner-offset-checkpoint`, naming only its own
  partitions (Kafka keeps them per directory), so one directory's failure never stops the
  checkpoints of the others.
- A new log goes to the online directory holding the fewest logs, ties to the first given
  (Kafka's LogManager.nextLogDirs).
- A directory goes offline at the first I/O error (any OSError: ENOSPC, EIO, EROFS, ...)
  met while reading or writing anything in it, or a corrupt batch found on a read, and
  stays offline for the life of the process: only a restart (with the fault gone) brings
  it back, as in Kafka. `fail` answers whether it was online until then (the failure is
  news to report).
- A directory that cannot be created or listed at startup starts offline.
- A directory is identified by its path as given, resolved to an absolute path.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from replicas.checkpoints import (OffsetCheckpoint, log_start_offset_checkpoint,
                                  recovery_point_checkpoint, replication_offset_checkpoint)
from replicas.cleaner_manager import CleanerManager


def describe_os_error(exc: BaseException) -> str:
    """One line for an I/O failure: the errno's name and what failed ("ENOSPC: No space
    left on device: '/data/t-0/00000000000000000000.log'")."""
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        where = f": {exc.filename!r}" if exc.filename else ""
        return f"{name}: {exc.strerror or os.strerror(exc.errno)}{where}"
    return f"{type(exc).__name__}: {exc}"


@dataclass(eq=False)
class LogDir:
    path: Path
    online: bool = True
    error: str = ""                       # why it went offline
    hw_file: OffsetCheckpoint | None = field(default=None, repr=False)
    recovery_file: OffsetCheckpoint | None = field(default=None, repr=False)
    log_start_file: OffsetCheckpoint | None = field(default=None, repr=False)
    cleaner: CleanerManager | None = field(default=None, repr=False)

    def open(self) -> None:
        """Create the directory if needed and read what it keeps; OSError if it cannot."""
        self.path.mkdir(parents=True, exist_ok=True)
        os.listdir(self.path)
        self.hw_file = replication_offset_checkpoint(self.path)
        self.recovery_file = recovery_point_checkpoint(self.path)
        self.log_start_file = log_start_offset_checkpoint(self.path)
        self.cleaner = CleanerManager(self.path)

    def fail(self, reason: str) -> bool:
        """Offline from now on; True if it was online until this call."""
        was = self.online
        if was:
            self.online, self.error = False, reason
        return was


class LogDirs:
    def __init__(self, paths):
        seen: dict[Path, LogDir] = {}
        for p in paths:
            path = Path(os.path.abspath(p))
            seen.setdefault(path, LogDir(path))
        if not seen:
            raise ValueError("log.dirs names no directory")
        self.all: list[LogDir] = list(seen.values())

    def open(self) -> dict[LogDir, str]:
        """Open every directory; those that fail go offline: {dir: reason}."""
        failed = {}
        for d in self.all:
            try:
                d.open()
            except OSError as exc:
                d.fail(describe_os_error(exc))
                failed[d] = d.error
        return failed

    @property
    def online(self) -> list[LogDir]:
        return [d for d in self.all if d.online]

    @property
    def offline(self) -> list[LogDir]:
        return [d for d in self.all if not d.online]

    def next_dir(self, logs_per_dir: dict[LogDir, int]) -> LogDir | None:
        """The online directory for a new log (fewest logs, first given on a tie), or None
        when every directory is offline."""
        online = self.online
        if not online:
            return None
        return min(online, key=lambda d: (logs_per_dir.get(d, 0), self.all.index(d)))
