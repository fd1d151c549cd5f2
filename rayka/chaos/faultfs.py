"""A disk-fault layer for tests and chaos, like Jepsen's LazyFS: a FUSE passthrough of a source
directory onto a mount point, run as its own process, whose faults the harness switches from
outside over a unix-domain socket.

    python -m rayka.chaos.faultfs serve --source DIR --mount DIR --control SOCKET

`FaultFs.start(source, mount, control)` spawns that process and waits until the mount is live;
its methods send the control commands (JSON lines: {"op": ...} in, {"ok", "result"|"error"}
out; `call(control, op, **args)` sends one from anywhere); `stop()` ends the process by pid
and makes sure the mount is gone.

Faults
- mode "eio": every operation fails with EIO, except those that only give resources back
  (forget, close, releasedir), which nothing could report. Pages the kernel already caches
  are still read, as from a real failing disk.
- mode "enospc": every operation that takes space (write, a growing truncate, create, mkdir,
  mknod, symlink, link) fails with ENOSPC; reads, renames and deletes go on.
- space limit N bytes: the total apparent size (st_size, holes count) of the regular files
  under the source may not exceed N; it is summed when the limit is set, then kept by the
  operations through the mount. A write that would pass N writes what fits (a short write,
  as a filling disk does; the kernel may also split one write(2) into several requests),
  and fails with ENOSPC when nothing fits; a growing truncate past N fails whole. Nothing is
  ever written past the limit; deleting or shrinking files gives space back.
- freeze: every operation waits (a hung disk) until thaw or a power loss.
- power loss: every file goes back to its last durable content (the model below).

Page-cache model
- Data written to a file becomes durable when that file is fsynced or fdatasynced, through any
  of its descriptors (Linux flushes the inode, not the descriptor), or when written through a
  descriptor opened with O_SYNC or O_DSYNC, which makes the whole file durable (kinder than
  Linux, which promises only that write). close() makes nothing durable: close does not flush
  on Linux. Nor do sync(2) and syncfs(2): they never reach a FUSE daemon.
- Truncation (truncate, ftruncate, open with O_TRUNC) is data, undone like a write.
- Metadata operations (create, mkdir, mknod, symlink, link, rename, unlink, rmdir, chmod,
  chown, utime) are durable at once, as a journaling file system with ordered data tends to
  make them: no name is ever lost or brought back. So a file created and never fsynced
  survives a power loss empty; a file written as tmp + fsync + rename keeps its new content;
  a renamed file whose data was never fsynced keeps its new name and loses the data. For
  renames this is kinder than real hardware, where a crash can lose a rename whose directory
  was not fsynced (LazyFS's cache, too, holds file data only).
- A power loss reverts every file to its last durable content: bytes past the durable size
  are cut, bytes below it that were overwritten or truncated away get their durable bytes
  back (a file that shrank grows back), and an unlinked file stays unlinked.
- Writes pass through to the source at once, so reads need no merging. An undo log makes the
  power loss possible: for each file with unsynced changes, its durable size and, kept once,
  the durable bytes of every range below that size changed since (appends need none). A file
  with no undo entry is durable as it is; its entry goes at fsync, or when its last name is
  unlinked (then the file is gone for good). Durability belongs to the file, keyed by the
  source's (st_dev, st_ino), so renames and hard links need no bookkeeping.
- Caches: writes are write-through (no FUSE writeback cache, which would keep dirty pages in
  the kernel, to be written after the revert). The kernel keeps file pages across opens, so
  reads stay fast, and a power loss invalidates the kernel's pages and attributes of every
  reverted file before it answers, so a process started afterwards reads the reverted bytes.

Power loss while processes write
- FUSE operations and control commands run one at a time on one trio event loop, and no
  handler yields once past the freeze gate: a revert never interleaves with an operation.
- The harness calls freeze(), SIGKILLs the processes using the mount (by pid), calls
  power_loss(), waits for them to exit, and restarts them; `FaultFs.power_loss(kill=pids)`
  does all of it. An operation held by the freeze when the power goes fails with EIO (it
  belongs to the world before), and so does every later operation that reaches faultfs on a
  handle opened before (reads the kernel serves from its cache never reach it).

Rules
- While mounted, the source changes only through the mount: the kernel caches what it saw,
  and the undo log knows only what passed through.
- The serve process is foreground; SIGTERM or SIGINT releases what it holds and unmounts.
  stop() terminates it by pid, waits, and if the mount is still there (a killed process)
  unmounts with `fusermount3 -u -z`, else `umount -l`. Nothing is ever killed by name.
- One thread by design (the atomicity above): a pyfuse3 request costs tens of microseconds of
  Python, so throughput is bounded by requests per second; writes arrive in requests of up to
  1 MiB (libfuse's maximum), reads are served from the kernel cache once read.
"""

from __future__ import annotations

import argparse
import bisect
import errno
import json
import logging
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyfuse3
import trio
from pyfuse3 import FUSEError

log = logging.getLogger("rayka.chaos.faultfs")

MODES = ("ok", "eio", "enospc")
# Names and attributes change only through us, and a power loss invalidates what it reverts,
# so the kernel may cache them; a short timeout bounds the damage of a change behind our back.
CACHE_TIMEOUT = 1.0
# The kernel hands us O_APPEND offsets itself, and durability is ours to model: these open
# flags are ours to act on, never the source descriptor's.
_STRIPPED = (os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_DIRECT | os.O_SYNC
             | os.O_DSYNC | getattr(os, "O_NOCTTY", 0))
_SYNC_FLAGS = os.O_SYNC | os.O_DSYNC
MAX_CONTROL_LINE = 1 << 16


class FaultFsError(RuntimeError):
    """The serve process refused a command or could not start."""


# -- the undo log ------------------------------------------------------------------------------
class _Undo:
    """Unsynced changes of one file: its durable size and the durable bytes of the ranges below
    that size changed since, as disjoint, non-touching intervals sorted by start."""

    __slots__ = ("fd", "synced", "starts", "chunks")

    def __init__(self, fd: int, synced: int):
        self.fd = fd                    # our own O_RDWR descriptor: survives renames and closes
        self.synced = synced
        self.starts: list[int] = []
        self.chunks: list[bytearray] = []

    def _read(self, lo: int, hi: int) -> bytes:
        data = os.pread(self.fd, hi - lo, lo)
        # Below the durable size every byte not yet kept exists (a shrink keeps what it cuts).
        return data + bytes(hi - lo - len(data))

    def keep(self, lo: int, hi: int) -> None:
        """Keep the durable bytes of [lo, hi) below the durable size not kept yet; call it
        before the range changes."""
        hi = min(hi, self.synced)
        if lo >= hi:
            return
        starts, chunks = self.starts, self.chunks
        i = bisect.bisect_right(starts, lo) - 1
        if i < 0 or starts[i] + len(chunks[i]) < lo:
            i += 1
        j = i
        while j < len(starts) and starts[j] <= hi:
            j += 1
        if i == j:
            starts.insert(i, lo)
            chunks.insert(i, bytearray(self._read(lo, hi)))
            return
        start = min(starts[i], lo)
        # Extending the first interval in place keeps a long sequential overwrite linear.
        merged = chunks[i] if starts[i] <= lo else bytearray(self._read(lo, starts[i])) + chunks[i]
        end = start + len(merged)
        for k in range(i + 1, j):
            merged += self._read(end, starts[k])
            merged += chunks[k]
            end = starts[k] + len(chunks[k])
        if end < hi:
            merged += self._read(end, hi)
        starts[i:j] = [start]
        chunks[i:j] = [merged]

    def kept_bytes(self) -> int:
        return sum(len(c) for c in self.chunks)

    def revert(self) -> tuple[int, int]:
        """Put the durable content back; (bytes undone, size before)."""
        size = os.fstat(self.fd).st_size
        os.ftruncate(self.fd, self.synced)
        for start, chunk in zip(self.starts, self.chunks):
            view, off = memoryview(chunk), start
            while view:
                n = os.pwrite(self.fd, view, off)
                view, off = view[n:], off + n
        return max(0, size - self.synced) + self.kept_bytes(), size


# -- the file system ---------------------------------------------------------------------------
@dataclass
class _Node:
    """An inode the kernel knows, named by (parent inode, name) links so that renaming a
    directory renames everything under it."""
    ino: int
    key: tuple[int, int]
    links: set[tuple[int, str]] = field(default_factory=set)
    lookups: int = 0
    fds: set[int] = field(default_factory=set)


@dataclass
class _Handle:
    fd: int
    ino: int
    key: tuple[int, int]
    generation: int
    sync: bool


def _op(kind: str, *, gated: bool = True):
    """A FUSE handler around a plain method: count it, pass the gate (freeze, stop, eio), then
    run the method without yielding, and turn every error into an errno for the kernel
    (anything else than FUSEError would end pyfuse3's main loop)."""
    def wrap(method):
        async def handler(self, *args):
            self.ops[kind] += 1
            if gated:
                generation = self.generation
                if not self.thawed.is_set():
                    await self.thawed.wait()
                if self.stopping or generation != self.generation:
                    raise FUSEError(errno.EIO)
                if self.mode == "eio":
                    self.injected += 1
                    raise FUSEError(errno.EIO)
            try:
                return method(self, *args)
            except FUSEError:
                raise
            except OSError as exc:
                raise FUSEError(exc.errno or errno.EIO) from None
            except Exception:
                log.exception("%s failed", kind)
                raise FUSEError(errno.EIO) from None
        handler.__name__ = method.__name__
        return handler
    return wrap


class FaultOps(pyfuse3.Operations):
    enable_writeback_cache = False      # dirty kernel pages would outlive a power loss
    supports_dot_lookup = False         # no NFS export: ".." of the root would leave the source

    def __init__(self, source: str):
        super().__init__()
        self.source = os.path.realpath(source)
        st = os.lstat(self.source)
        root = _Node(pyfuse3.ROOT_INODE, (st.st_dev, st.st_ino), lookups=1)
        self.nodes: dict[int, _Node] = {root.ino: root}
        self.by_key: dict[tuple[int, int], int] = {root.key: root.ino}
        self.next_ino = pyfuse3.ROOT_INODE + 1
        self.handles: dict[int, _Handle] = {}
        self.dirs: dict[int, tuple[int, list[str] | None]] = {}
        self.next_fh = 1
        self.undo: dict[tuple[int, int], _Undo] = {}
        self.mode = "ok"
        self.limit: int | None = None
        self.used = 0
        self.generation = 0
        self.thawed = trio.Event()
        self.thawed.set()
        self.stopping = False
        self.ops: Counter[str] = Counter()
        self.injected = 0
        self.power_losses = 0
        self.root = os.geteuid() == 0

    # -- names -----------------------------------------------------------------------------------
    def path(self, ino: int) -> str:
        if ino == pyfuse3.ROOT_INODE:
            return self.source
        node = self.nodes.get(ino)
        if node is None:
            raise FUSEError(errno.ENOENT)
        for link in list(node.links):
            if link[0] in self.nodes:
                return os.path.join(self.path(link[0]), link[1])
            node.links.discard(link)        # a parent the kernel forgot: that name is stale
        raise FUSEError(errno.ENOENT)

    def child(self, parent: int, name: bytes) -> tuple[str, str]:
        text = os.fsdecode(name)
        return os.path.join(self.path(parent), text), text

    def remember(self, st: os.stat_result, parent: int, name: str, lookups: int = 1) -> _Node:
        key = (st.st_dev, st.st_ino)
        ino = self.by_key.get(key)
        node = self.nodes.get(ino) if ino is not None else None
        if node is None:
            node = _Node(self.next_ino, key)
            self.next_ino += 1
            self.nodes[node.ino] = node
            self.by_key[key] = node.ino
        if name not in (".", ".."):
            if stat.S_ISDIR(st.st_mode):
                node.links = {(parent, name)}
            else:
                node.links.add((parent, name))
        node.lookups += lookups
        return node

    def unlinked(self, st: os.stat_result, parent: int, name: str) -> None:
        """`name` under `parent`, whose stat before the removal was `st`, is gone."""
        key = (st.st_dev, st.st_ino)
        ino = self.by_key.get(key)
        if ino is not None:
            self.nodes[ino].links.discard((parent, name))
        if st.st_nlink <= 1 or stat.S_ISDIR(st.st_mode):
            # The file is gone for good: a recycled inode number must become a new node, and
            # its unsynced data can never come back.
            if ino is not None:
                del self.by_key[key]
            undo = self.undo.pop(key, None)
            if undo is not None:
                os.close(undo.fd)
            if self.limit is not None and stat.S_ISREG(st.st_mode):
                self.used -= st.st_size

    def attrs(self, st: os.stat_result, ino: int) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        for name in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size",
                     "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blksize", "st_blocks"):
            setattr(entry, name, getattr(st, name))
        entry.st_ino = ino
        entry.generation = 0
        entry.entry_timeout = CACHE_TIMEOUT
        entry.attr_timeout = CACHE_TIMEOUT
        return entry

    def stat_node(self, ino: int) -> os.stat_result:
        node = self.nodes.get(ino)
        if node is not None and node.fds:
            return os.fstat(next(iter(node.fds)))       # also an unlinked file still open
        return os.lstat(self.path(ino))

    def entry(self, path: str, parent: int, name: str) -> pyfuse3.EntryAttributes:
        st = os.lstat(path)
        return self.attrs(st, self.remember(st, parent, name).ino)

    def own(self, path: str, ctx) -> None:
        if self.root:
            os.chown(path, ctx.uid, ctx.gid, follow_symlinks=False)

    # -- space and the undo log -------------------------------------------------------------------
    def no_space(self) -> None:
        if self.mode == "enospc":
            self.injected += 1
            raise FUSEError(errno.ENOSPC)

    def room(self, st: os.stat_result, new_size: int) -> int:
        """The size up to which a file of stat `st` may grow towards `new_size` within the
        limit; ENOSPC when it may not grow at all. Unlinked files are no longer under the
        source: they take no room."""
        if self.limit is None or not st.st_nlink or new_size <= st.st_size:
            return new_size
        fits = st.st_size + max(0, self.limit - self.used)
        if fits <= st.st_size:
            self.injected += 1
            raise FUSEError(errno.ENOSPC)
        return min(new_size, fits)

    def undo_for(self, key: tuple[int, int], fd: int) -> _Undo:
        undo = self.undo.get(key)
        if undo is None:
            # Our own read-write descriptor: the caller's may be write-only, or closed later.
            own = os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
            undo = self.undo[key] = _Undo(own, os.fstat(own).st_size)
        return undo

    def truncate(self, key: tuple[int, int], fd: int, size: int) -> None:
        st = os.fstat(fd)
        if size > st.st_size:
            self.no_space()
            if self.room(st, size) < size:
                self.injected += 1
                raise FUSEError(errno.ENOSPC)
        undo = self.undo_for(key, fd)
        undo.keep(size, undo.synced)
        os.ftruncate(undo.fd, size)
        if self.limit is not None and st.st_nlink:
            self.used += size - st.st_size

    def durable(self, key: tuple[int, int]) -> None:
        undo = self.undo.pop(key, None)
        if undo is not None:
            os.close(undo.fd)

    def handle(self, fh: int) -> _Handle:
        h = self.handles.get(fh)
        if h is None or h.generation != self.generation:
            raise FUSEError(errno.EIO)      # opened before the power loss
        return h

    def new_handle(self, fd: int, node: _Node, flags: int) -> pyfuse3.FileInfo:
        st = os.fstat(fd)
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = _Handle(fd, node.ino, (st.st_dev, st.st_ino), self.generation,
                                   bool(flags & _SYNC_FLAGS))
        node.fds.add(fd)
        return pyfuse3.FileInfo(fh=fh, keep_cache=True, direct_io=False)

    # -- FUSE operations ---------------------------------------------------------------------------
    @_op("lookup")
    def lookup(self, parent, name, ctx):
        path, text = self.child(parent, name)
        return self.entry(path, parent, text)

    @_op("forget", gated=False)
    def forget(self, inode_list):
        for ino, count in inode_list:
            node = self.nodes.get(ino)
            if node is None or ino == pyfuse3.ROOT_INODE:
                continue
            node.lookups -= count
            if node.lookups <= 0:
                self.drop(node)

    def drop(self, node: _Node) -> None:
        del self.nodes[node.ino]
        if self.by_key.get(node.key) == node.ino:
            del self.by_key[node.key]

    @_op("getattr")
    def getattr(self, inode, ctx=None):
        return self.attrs(self.stat_node(inode), inode)

    @_op("setattr")
    def setattr(self, inode, attr, fields, fh, ctx):
        h = self.handle(fh) if fh is not None else None
        target = h.fd if h is not None else self.path(inode)
        if fields.update_size:
            if h is not None:
                self.truncate(h.key, h.fd, attr.st_size)
            else:
                fd = os.open(target, os.O_RDWR | os.O_CLOEXEC)
                try:
                    st = os.fstat(fd)
                    self.truncate((st.st_dev, st.st_ino), fd, attr.st_size)
                finally:
                    os.close(fd)
        if fields.update_mode:
            os.chmod(target, stat.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(target, attr.st_uid if fields.update_uid else -1,
                     attr.st_gid if fields.update_gid else -1,
                     **({} if h is not None else {"follow_symlinks": False}))
        if fields.update_atime or fields.update_mtime:
            old = os.fstat(target) if h is not None else os.lstat(target)
            times = (attr.st_atime_ns if fields.update_atime else old.st_atime_ns,
                     attr.st_mtime_ns if fields.update_mtime else old.st_mtime_ns)
            os.utime(target, ns=times, **({} if h is not None else {"follow_symlinks": False}))
        return self.attrs(self.stat_node(inode), inode)

    @_op("readlink")
    def readlink(self, inode, ctx):
        return os.fsencode(os.readlink(self.path(inode)))

    def made(self, parent, name, ctx, make) -> pyfuse3.EntryAttributes:
        self.no_space()
        path, text = self.child(parent, name)
        make(path)
        self.own(path, ctx)
        return self.entry(path, parent, text)

    @_op("mknod")
    def mknod(self, parent, name, mode, rdev, ctx):
        return self.made(parent, name, ctx, lambda path: os.mknod(path, mode & ~ctx.umask, rdev))

    @_op("mkdir")
    def mkdir(self, parent, name, mode, ctx):
        return self.made(parent, name, ctx, lambda path: os.mkdir(path, mode & ~ctx.umask))

    @_op("symlink")
    def symlink(self, parent, name, target, ctx):
        return self.made(parent, name, ctx, lambda path: os.symlink(os.fsdecode(target), path))

    @_op("link")
    def link(self, inode, new_parent, new_name, ctx):
        self.no_space()
        path, text = self.child(new_parent, new_name)
        os.link(self.path(inode), path, follow_symlinks=False)
        return self.entry(path, new_parent, text)

    def removed(self, parent, name, remove) -> None:
        path, text = self.child(parent, name)
        st = os.lstat(path)
        remove(path)
        self.unlinked(st, parent, text)

    @_op("unlink")
    def unlink(self, parent, name, ctx):
        self.removed(parent, name, os.unlink)

    @_op("rmdir")
    def rmdir(self, parent, name, ctx):
        self.removed(parent, name, os.rmdir)

    @_op("rename")
    def rename(self, parent_old, name_old, parent_new, name_new, flags, ctx):
        old, old_text = self.child(parent_old, name_old)
        new, new_text = self.child(parent_new, name_new)
        if flags & ~pyfuse3.RENAME_NOREPLACE:
            raise FUSEError(errno.EINVAL)   # RENAME_EXCHANGE has no os-module call
        st_old = os.lstat(old)
        try:
            st_new = os.lstat(new)
        except FileNotFoundError:
            st_new = None
        if st_new is not None and flags & pyfuse3.RENAME_NOREPLACE:
            raise FUSEError(errno.EEXIST)
        os.rename(old, new)
        key = (st_old.st_dev, st_old.st_ino)
        if st_new is not None and (st_new.st_dev, st_new.st_ino) == key:
            return                          # two names of one file: rename does nothing
        if st_new is not None:
            self.unlinked(st_new, parent_new, new_text)
        ino = self.by_key.get(key)
        if ino is not None:
            node = self.nodes[ino]
            node.links.discard((parent_old, old_text))
            node.links.add((parent_new, new_text))

    @_op("open")
    def open(self, inode, flags, ctx):
        node = self.nodes.get(inode)
        if node is None:
            raise FUSEError(errno.ENOENT)
        path = (self.path(inode) if node.links or not node.fds
                else f"/proc/self/fd/{next(iter(node.fds))}")
        fd = os.open(path, (flags & ~_STRIPPED) | os.O_CLOEXEC)
        try:
            if flags & os.O_TRUNC:
                st = os.fstat(fd)
                if st.st_size:
                    self.truncate((st.st_dev, st.st_ino), fd, 0)
            return self.new_handle(fd, node, flags)
        except BaseException:
            os.close(fd)
            raise

    @_op("create")
    def create(self, parent, name, mode, flags, ctx):
        self.no_space()
        path, text = self.child(parent, name)
        existed = os.path.lexists(path)
        fd = os.open(path, (flags & ~_STRIPPED) | os.O_CREAT | (flags & os.O_EXCL)
                     | os.O_CLOEXEC, mode & ~ctx.umask)
        try:
            if not existed:
                self.own(path, ctx)
            st = os.fstat(fd)
            if flags & os.O_TRUNC and st.st_size:
                self.truncate((st.st_dev, st.st_ino), fd, 0)
                st = os.fstat(fd)
            node = self.remember(st, parent, text)
            return self.new_handle(fd, node, flags), self.attrs(st, node.ino)
        except BaseException:
            os.close(fd)
            raise

    @_op("read")
    def read(self, fh, off, size):
        return os.pread(self.handle(fh).fd, size, off)

    @_op("write")
    def write(self, fh, off, buf):
        h = self.handle(fh)
        self.no_space()
        end = off + len(buf)
        if self.limit is not None:
            st = os.fstat(h.fd)
            end = self.room(st, end)
            if end <= off:
                self.injected += 1
                raise FUSEError(errno.ENOSPC)
            buf = buf[:end - off]
        undo = self.undo_for(h.key, h.fd)
        if off < undo.synced:
            undo.keep(off, end)
        n = os.pwrite(h.fd, buf, off)
        if self.limit is not None and st.st_nlink:
            self.used += max(0, off + n - st.st_size)
        if h.sync:
            os.fdatasync(h.fd)
            self.durable(h.key)
        return n

    @_op("flush", gated=False)
    def flush(self, fh):
        pass                                # close(2) makes nothing durable

    @_op("release", gated=False)
    def release(self, fh):
        h = self.handles.pop(fh, None)
        if h is None:
            return
        node = self.nodes.get(h.ino)
        if node is not None:
            node.fds.discard(h.fd)
        os.close(h.fd)

    @_op("fsync")
    def fsync(self, fh, datasync):
        h = self.handle(fh)
        (os.fdatasync if datasync else os.fsync)(h.fd)
        self.durable(h.key)

    @_op("opendir")
    def opendir(self, inode, ctx):
        if not stat.S_ISDIR(self.stat_node(inode).st_mode):
            raise FUSEError(errno.ENOTDIR)
        fh = self.next_fh
        self.next_fh += 1
        self.dirs[fh] = (inode, None)
        return fh

    @_op("readdir")
    def readdir(self, fh, start_id, token):
        inode, names = self.dirs[fh]
        path = self.path(inode)
        if names is None or start_id == 0:
            # One listing per pass: offsets are indexes into it, so nothing is skipped or
            # listed twice while the directory changes.
            names = sorted(os.listdir(path))
            self.dirs[fh] = (inode, names)
        for index in range(start_id, len(names)):
            name = names[index]
            try:
                st = os.lstat(os.path.join(path, name))
            except FileNotFoundError:
                continue
            node = self.remember(st, inode, name, lookups=0)
            if not pyfuse3.readdir_reply(token, os.fsencode(name), self.attrs(st, node.ino),
                                         index + 1):
                if node.lookups == 0 and not node.fds:
                    self.drop(node)         # the kernel took no reference to it
                break
            node.lookups += 1               # readdirplus: the kernel now holds a lookup

    @_op("releasedir", gated=False)
    def releasedir(self, fh):
        self.dirs.pop(fh, None)

    @_op("fsyncdir")
    def fsyncdir(self, fh, datasync):
        pass                                # names are durable at once

    @_op("statfs")
    def statfs(self, ctx):
        real = os.statvfs(self.source)
        out = pyfuse3.StatvfsData()
        for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                     "f_ffree", "f_favail", "f_namemax"):
            setattr(out, name, getattr(real, name))
        if self.limit is not None:
            out.f_blocks = self.limit // real.f_frsize
            out.f_bfree = out.f_bavail = max(0, self.limit - self.used) // real.f_frsize
        if self.mode == "enospc":
            out.f_bfree = out.f_bavail = 0
        return out

    # -- control ----------------------------------------------------------------------------------
    def set_mode(self, mode: str) -> dict:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        return {"mode": mode}

    def set_space_limit(self, limit: int | None) -> dict:
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise ValueError(f"space limit must be a byte count >= 0 or null, not {limit!r}")
        self.limit = limit
        self.used = self.total_size() if limit is not None else 0
        return {"space_limit": limit, "space_used": self.used}

    def total_size(self) -> int:
        seen, total = set(), 0
        for top, dirs, files in os.walk(self.source):
            for name in files:
                st = os.lstat(os.path.join(top, name))
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
        return total

    def freeze(self) -> dict:
        if self.thawed.is_set():
            self.thawed = trio.Event()
        return {"frozen": True}

    def thaw(self) -> dict:
        self.thawed.set()
        return {"frozen": False}

    def revert_all(self) -> tuple[dict, list[int]]:
        """The power loss itself: every file back to its durable content, without yielding."""
        self.generation += 1
        self.power_losses += 1
        files = dropped = 0
        inos = []
        for key, undo in self.undo.items():
            undone, size = undo.revert()
            if self.limit is not None and os.fstat(undo.fd).st_nlink:
                self.used += undo.synced - size
            os.close(undo.fd)
            files += 1
            dropped += undone
            if key in self.by_key:
                inos.append(self.by_key[key])
        self.undo.clear()
        self.thaw()
        return {"files_reverted": files, "bytes_dropped": dropped,
                "generation": self.generation}, inos

    @staticmethod
    def invalidate(inos: list[int]) -> None:
        for ino in inos:
            try:
                pyfuse3.invalidate_inode(ino, attr_only=False)
            except OSError:
                pass                        # the kernel already forgot it: nothing cached

    def stats(self) -> dict:
        return {"mode": self.mode, "frozen": not self.thawed.is_set(),
                "space_limit": self.limit, "space_used": self.used,
                "dirty_files": len(self.undo),
                "undo_bytes": sum(u.kept_bytes() for u in self.undo.values()),
                "unsynced_tail_bytes": sum(max(0, os.fstat(u.fd).st_size - u.synced)
                                           for u in self.undo.values()),
                "generation": self.generation, "power_losses": self.power_losses,
                "injected_errors": self.injected, "open_handles": len(self.handles),
                "known_inodes": len(self.nodes), "ops": dict(self.ops)}

    async def command(self, request: dict):
        op = request.get("op")
        if op == "power_loss":
            result, inos = self.revert_all()
            # In a thread: the kernel may wait for pages locked by requests we must serve.
            await trio.to_thread.run_sync(self.invalidate, inos)
            return result
        simple = {"ping": lambda: {"pid": os.getpid()}, "freeze": self.freeze,
                  "thaw": self.thaw, "stats": self.stats,
                  "set_mode": lambda: self.set_mode(request.get("mode")),
                  "set_space_limit": lambda: self.set_space_limit(request.get("limit"))}
        if op not in simple:
            raise ValueError(f"unknown command {op!r}")
        return simple[op]()

    async def serve_client(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while not data.endswith(b"\n") and len(data) < MAX_CONTROL_LINE:
                chunk = await stream.receive_some(MAX_CONTROL_LINE)
                if not chunk:
                    break
                data += chunk
            try:
                reply = {"ok": True, "result": await self.command(json.loads(data))}
            except Exception as exc:
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            await stream.send_all(json.dumps(reply).encode() + b"\n")

    async def serve_control(self, control: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        if os.path.exists(control):
            os.unlink(control)
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await sock.bind(control)
        sock.listen(16)
        listener = trio.SocketListener(sock)
        task_status.started()
        async with trio.open_nursery() as nursery:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self.serve_client, stream)

    def stop(self) -> None:
        self.stopping = True
        self.thaw()                         # held operations answer EIO, so the loop can end
        pyfuse3.terminate()

    async def run(self, control: str) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.serve_control, control)
            nursery.start_soon(self.watch_signals)
            await pyfuse3.main(min_tasks=1, max_tasks=64)
            nursery.cancel_scope.cancel()

    async def watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                self.stop()
                return


def serve(source: str, mount: str, control: str, *, debug: bool = False) -> int:
    """Mount `source` on `mount` and serve until SIGTERM/SIGINT or an outside unmount."""
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="faultfs %(levelname)s %(message)s")
    os.umask(0)                             # the modes the kernel sends are final
    ops = FaultOps(source)
    options = set(pyfuse3.default_options) | {"fsname=faultfs", "subtype=faultfs"}
    if ops.root:
        options.add("allow_other")          # brokers may run as other users than the harness
    if debug:
        options.add("debug")
    pyfuse3.init(ops, mount, options)
    try:
        trio.run(ops.run, control)
    finally:
        pyfuse3.close(unmount=True)         # as root: a lazy umount, never blocked by users
        if os.path.exists(control):
            os.unlink(control)
    return 0


# -- the harness's side -------------------------------------------------------------------------
def is_mounted(mount: str | os.PathLike) -> bool:
    """Whether `mount` (an absolute, resolved path) is a mount point now, read from
    /proc/self/mountinfo: a stat would fail with ENOTCONN on a mount whose daemon died."""
    unescape = lambda m: chr(int(m[1], 8))     # noqa: E731  (mountinfo escapes as \ooo)
    with open("/proc/self/mountinfo") as f:
        return any(re.sub(r"\\([0-7]{3})", unescape, line.split()[4]) == os.fspath(mount)
                   for line in f)


def _process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")              # a zombie holds no file open any more


def call(control: str | os.PathLike, op: str, timeout: float = 30.0, **args):
    """One control command; its result, or FaultFsError."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(os.fspath(control))
        sock.sendall(json.dumps({"op": op, **args}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    if not data:
        raise FaultFsError(f"faultfs closed the control socket on {op!r}")
    reply = json.loads(data)
    if not reply["ok"]:
        raise FaultFsError(reply["error"])
    return reply["result"]


class FaultFs:
    """A running faultfs process, seen from the harness."""

    def __init__(self, proc: subprocess.Popen, source: Path, mount: Path, control: Path,
                 log_path: Path):
        self.proc, self.source, self.mount, self.control = proc, source, mount, control
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(cls, source, mount, control, *, timeout: float = 30.0,
              debug: bool = False) -> FaultFs:
        """Spawn `python -m rayka.chaos.faultfs serve` and wait until the mount answers; its
        stderr goes to `<control>.log`."""
        source, mount, control = (Path(os.path.realpath(p)) for p in (source, mount, control))
        if len(os.fsencode(control)) >= 108:
            raise ValueError(f"control socket path too long for AF_UNIX: {control}")
        mount.mkdir(parents=True, exist_ok=True)
        log_path = control.with_name(control.name + ".log")
        argv = [sys.executable, "-m", "rayka.chaos.faultfs", "serve", "--source", str(source),
                "--mount", str(mount), "--control", str(control)] + (["--debug"] if debug else [])
        with open(log_path, "ab") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        fs = cls(proc, source, mount, control, log_path)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise FaultFsError(f"faultfs exited with {proc.returncode}: {fs.log_tail()}")
            try:
                if call(control, "ping", timeout=2.0)["pid"] == proc.pid and is_mounted(mount):
                    os.stat(mount)          # answered once the kernel's INIT went through
                    return fs
            except OSError:
                pass
            if time.monotonic() > deadline:
                fs.stop()
                raise FaultFsError(f"faultfs not live after {timeout}s: {fs.log_tail()}")
            time.sleep(0.02)

    def log_tail(self, limit: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def call(self, op: str, timeout: float = 30.0, **args):
        return call(self.control, op, timeout, **args)

    def set_mode(self, mode: str) -> None:
        """"ok", "eio" (everything fails with EIO) or "enospc" (nothing takes space)."""
        self.call("set_mode", mode=mode)

    def set_space_limit(self, limit: int | None) -> int:
        """Cap the total apparent size of the files under the source (None: no cap); the
        total now."""
        return self.call("set_space_limit", limit=limit)["space_used"]

    def freeze(self) -> None:
        """Every operation waits until thaw() or power_loss(): a hung disk."""
        self.call("freeze")

    def thaw(self) -> None:
        self.call("thaw")

    def power_loss(self, kill=(), timeout: float = 30.0) -> dict:
        """Drop every unsynced write: {files_reverted, bytes_dropped, generation}. With `kill`
        (pids of the processes using the mount): freeze, SIGKILL them, revert, and wait until
        they are gone, so none of their writes lands after the revert."""
        pids = list(kill)
        if pids:
            self.freeze()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        result = self.call("power_loss", timeout=timeout)
        deadline = time.monotonic() + timeout
        while not all(_process_gone(pid) for pid in pids):
            if time.monotonic() > deadline:
                raise FaultFsError(f"processes still alive after the power loss: {pids}")
            time.sleep(0.01)
        return result

    def stats(self) -> dict:
        return self.call("stats")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM by pid (SIGKILL if it lingers), wait, and make sure the mount is gone."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        for argv in (["fusermount3", "-u", "-z", str(self.mount)],
                     ["umount", "-l", str(self.mount)]):
            if not is_mounted(self.mount):
                break
            if shutil.which(argv[0]):
                subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=timeout, check=False)
        if is_mounted(self.mount):
            raise FaultFsError(f"{self.mount} still mounted after stopping faultfs")

    def __enter__(self) -> FaultFs:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayka.chaos.faultfs",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="mount SOURCE on MOUNT and serve in the foreground")
    for name in ("--source", "--mount", "--control"):
        s.add_argument(name, required=True)
    s.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    return serve(args.source, args.mount, args.control, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
