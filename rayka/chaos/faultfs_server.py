"""The file system of rayka/chaos/faultfs.py, run in its own process (`python -m
rayka.chaos.faultfs serve`): a pyfuse3 passthrough of a source directory with the faults,
the page-cache model and the power loss that faultfs.py's docstring specifies, switched by
control commands on a unix-domain socket.

Rules:
- One thread, one trio event loop, by design: FUSE operations and control commands run one
  at a time, and no handler yields once past the gate (`_op`), so a revert never
  interleaves with an operation. A pyfuse3 request costs tens of microseconds of Python.
- Every handler answers the kernel with an errno, never another exception (that would end
  pyfuse3's main loop); forget, flush, release and releasedir pass no gate: they give
  resources back, and nothing could report their failure.
- Only what passed through the mount is known: the undo log, the space used, the inodes.
- SIGTERM or SIGINT releases what it holds (held operations answer EIO) and unmounts.
"""

from __future__ import annotations

import bisect
import errno
import json
import logging
import os
import signal
import socket
import stat
from collections import Counter
from dataclasses import dataclass, field

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


def _thread_of(tid: int, pids) -> bool:
    """Whether thread `tid` (a FUSE request's caller: the kernel sends thread ids) belongs
    to one of the processes `pids`, or no longer exists (nobody waits for its answer)."""
    if not os.path.exists(f"/proc/{tid}"):
        return True
    return any(os.path.exists(f"/proc/{pid}/task/{tid}") for pid in pids)


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


def _op(kind: str, *, gated: bool = True, fh_arg: int | None = None):
    """A FUSE handler around a plain method: count it, pass the gate (freeze, stop, eio), then
    run the method without yielding, and turn every error into an errno for the kernel
    (anything else than FUSEError would end pyfuse3's main loop). `fh_arg`: the position of
    the file handle among the method's arguments, if it takes one."""
    def wrap(method):
        async def handler(self, *args):
            self.ops[kind] += 1
            if gated:
                if self.frozen:
                    await self.held_at_gate(args, fh_arg)
                if self.stopping:
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
        self.frozen = False
        self.wake = trio.Event()            # set (and replaced) at every thaw and power loss
        self.killed: frozenset[int] | None = None   # the last power loss's killed pids
        self.held = 0                       # operations waiting at the gate now
        self.loss_pending = False           # reverted, not yet thawed
        self.failed_by_loss = 0             # held operations a power loss failed
        self.stopping = False
        self.ops: Counter[str] = Counter()
        self.injected = 0
        self.power_losses = 0
        self.root = os.geteuid() == 0

    # -- the gate --------------------------------------------------------------------------------
    async def held_at_gate(self, args: tuple, fh_arg: int | None) -> None:
        """Wait while frozen. After a power loss (from the revert until the thaw) a held
        operation fails (EIO) if it belongs to the world before: its caller was killed with
        the power, or it uses a file handle opened before, or the power loss named no killed
        process and it arrived before the revert (then nothing else tells them apart). Those
        are answered at once, before the kernel's caches are invalidated (a held write keeps
        its pages locked); the others go on after the thaw, on the reverted files."""
        ctx = args[-1] if args and isinstance(args[-1], pyfuse3.RequestContext) else None
        caller = ctx.pid if ctx is not None else 0      # a thread id; 0: the kernel's own
        fh = args[fh_arg] if fh_arg is not None else None
        generation = self.generation
        while self.frozen:
            if ((self.loss_pending or generation != self.generation)
                    and self.from_before(caller, fh, generation != self.generation)):
                self.failed_by_loss += 1
                raise FUSEError(errno.EIO)
            generation = self.generation
            self.held += 1
            try:
                await self.wake.wait()
            finally:
                self.held -= 1

    def from_before(self, caller: int, fh: int | None, arrived_before: bool) -> bool:
        """Whether a held operation belongs to the world before the last power loss."""
        if self.killed is None:
            return arrived_before
        if fh is not None:
            h = self.handles.get(fh)
            if h is not None and h.generation != self.generation:
                return True
        return caller > 0 and _thread_of(caller, self.killed)

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

    @_op("setattr", fh_arg=3)
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

    @_op("read", fh_arg=0)
    def read(self, fh, off, size):
        return os.pread(self.handle(fh).fd, size, off)

    @_op("write", fh_arg=0)
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

    @_op("fsync", fh_arg=0)
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

    def set_space_limit(self, limit: int | None, headroom: int | None = None) -> dict:
        """A cap of `limit` bytes, or of the total now plus `headroom` (a disk about to be
        full, decided without a write slipping in between); both None: no cap."""
        for name, value in (("space limit", limit), ("headroom", headroom)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a byte count >= 0 or null, not {value!r}")
        if limit is not None and headroom is not None:
            raise ValueError("a space limit or a headroom, not both")
        capped = limit is not None or headroom is not None
        self.used = self.total_size() if capped else 0
        self.limit = self.used + headroom if headroom is not None else limit
        return {"space_limit": self.limit, "space_used": self.used}

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
        self.frozen = True
        return {"frozen": True}

    def thaw(self) -> dict:
        self.frozen = self.loss_pending = False
        self.wake_held()
        return {"frozen": False}

    def wake_held(self) -> None:
        self.wake.set()
        self.wake = trio.Event()

    def dirty_inodes(self) -> list[int]:
        """The kernel's inode numbers of the files a power loss would change."""
        return [self.by_key[key] for key in self.undo if key in self.by_key]

    def revert_all(self, killed=None) -> tuple[dict, list[int]]:
        """The power loss itself: every file back to its durable content, without yielding;
        `killed`: the pids killed with it (None: unknown). Held operations are woken to
        learn whether they belong to the world before; the gate stays shut."""
        self.generation += 1
        self.power_losses += 1
        self.killed = None if killed is None else frozenset(int(p) for p in killed)
        self.loss_pending = True
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
        self.wake_held()
        return {"files_reverted": files, "bytes_dropped": dropped,
                "generation": self.generation}, inos

    @staticmethod
    def invalidate(inos: list[int], attr_only: bool = False) -> None:
        for ino in inos:
            try:
                pyfuse3.invalidate_inode(ino, attr_only=attr_only)
            except OSError:
                pass                        # the kernel already forgot it: nothing cached

    def stats(self) -> dict:
        return {"mode": self.mode, "frozen": self.frozen, "held_ops": self.held,
                "failed_by_power_loss": self.failed_by_loss,
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
            # Shut until the kernel forgot the old content: nothing may read it meanwhile.
            self.freeze()
            result, inos = self.revert_all(request.get("killed"))
            # In a thread: the kernel waits for pages locked by held requests of the world
            # before, which the woken gate answers meanwhile.
            await trio.to_thread.run_sync(self.invalidate, inos)
            self.thaw()
            return result
        if op == "freeze":
            result = self.freeze()
            # Cached sizes of files a power loss may change would be served without asking
            # us; forgotten, every stat from now on waits at the gate.
            await trio.to_thread.run_sync(self.invalidate, self.dirty_inodes(), True)
            return result
        simple = {"ping": lambda: {"pid": os.getpid()},
                  "thaw": self.thaw, "stats": self.stats,
                  "set_mode": lambda: self.set_mode(request.get("mode")),
                  "set_space_limit": lambda: self.set_space_limit(request.get("limit"),
                                                                  request.get("headroom"))}
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
