"""A disk-fault layer for tests and chaos, like Jepsen's LazyFS: a FUSE passthrough of a source
directory onto a mount point, run as its own process, whose faults the harness switches from
outside over a unix-domain socket.

    python -m rayka.chaos.faultfs serve --source DIR --mount DIR --control SOCKET

`FaultFs.start(source, mount, control)` spawns that process and waits until the mount is live;
its methods send the control commands (JSON lines: {"op": ...} in, {"ok", "result"|"error"}
out; `call(control, op, **args)` sends one from anywhere); `stop()` ends the process by pid
and makes sure the mount is gone. This module is the harness's side (no pyfuse3 needed to
import it); the file system itself is rayka/chaos/faultfs_server.py.

Faults
- mode "eio": every operation fails with EIO, except those that only give resources back
  (forget, close, releasedir), which nothing could report. Pages the kernel already caches
  are still read, as from a real failing disk.
- mode "enospc": every operation that takes space (write, a growing truncate, create, mkdir,
  mknod, symlink, link) fails with ENOSPC; reads, renames and deletes go on.
- space limit N bytes (or "headroom" H: N is the total now plus H, a disk about to be
  full): the total apparent size (st_size, holes count) of the regular files
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
  power_loss(killed=those pids), waits for them to exit, and restarts them;
  `FaultFs.power_loss(kill=pids)` does all of it, `power_loss_together` over several
  mounts at once (every mount frozen before any process dies).
- freeze() also makes the kernel forget the cached attributes of every file a power loss
  would change, so a stat waits at the gate instead of seeing a size from before.
- The power loss keeps the gate shut from the revert until the kernel has forgotten the
  pages and attributes of every reverted file, then thaws. Held operations that belong to
  the world before fail with EIO at the revert, at once: those of a killed process's
  threads (FUSE requests carry the caller's thread id; killed threads wait for our answer,
  so they are still in /proc/<pid>/task), those on a file handle opened before, and, when
  power_loss names no killed process, every operation held since before the revert. The
  others (a restarted process that reached the mount during the freeze) wait for the thaw
  and see only reverted files: never content from before, never a spurious EIO.
- Every later operation that reaches faultfs on a handle opened before fails with EIO too
  (reads the kernel serves from its cache never reach it), so a killed process's write in
  flight never lands after the revert.

Rules
- While mounted, the source changes only through the mount: the kernel caches what it saw,
  and the undo log knows only what passed through.
- The serve process is foreground; SIGTERM or SIGINT releases what it holds and unmounts.
  stop() terminates it by pid, waits, and if the mount is still there (a killed process)
  unmounts with `fusermount3 -u -z`, else `umount -l`. Nothing is ever killed by name.
- One thread by design (the atomicity above, faultfs_server.py): a pyfuse3 request costs
  tens of microseconds of Python, so throughput is bounded by requests per second; writes
  arrive in requests of up to 1 MiB (libfuse's maximum), reads are served from the kernel
  cache once read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


class FaultFsError(RuntimeError):
    """The serve process refused a command or could not start."""


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

    def set_space_limit(self, limit: int | None, *, headroom: int | None = None) -> int:
        """Cap the total apparent size of the files under the source at `limit`, or at the
        total now plus `headroom` (None for both: no cap); the total now."""
        return self.call("set_space_limit", limit=limit, headroom=headroom)["space_used"]

    def freeze(self) -> None:
        """Every operation waits until thaw() or power_loss(): a hung disk."""
        self.call("freeze")

    def thaw(self) -> None:
        self.call("thaw")

    def power_loss(self, kill=(), timeout: float = 30.0) -> dict:
        """Drop every unsynced write: {files_reverted, bytes_dropped, generation}. With `kill`
        (pids of the processes using the mount): freeze, SIGKILL them, revert, and wait until
        they are gone, so none of their writes lands after the revert; operations of other
        processes held meanwhile (one started since, say) go on after it."""
        return power_loss_together([self], kill, timeout)[0]

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


def power_loss_together(filesystems, kill=(), timeout: float = 30.0) -> list[dict]:
    """One power loss over several mounts (one machine's disks, or every machine of a
    cluster at once): every mount frozen, then the `kill` pids SIGKILLed, then every mount
    reverted (and thawed), then wait until those processes are gone. FaultFs.power_loss's
    results, in the order of `filesystems`."""
    pids = [int(p) for p in kill]
    if pids:
        for fs in filesystems:
            fs.freeze()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    results = [fs.call("power_loss", timeout=timeout, killed=pids if pids else None)
               for fs in filesystems]
    deadline = time.monotonic() + timeout
    while not all(_process_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise FaultFsError(f"processes still alive after the power loss: {pids}")
        time.sleep(0.01)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rayka.chaos.faultfs",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="mount SOURCE on MOUNT and serve in the foreground")
    for name in ("--source", "--mount", "--control"):
        s.add_argument(name, required=True)
    s.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    from rayka.chaos.faultfs_server import serve     # pyfuse3 and trio: the server's alone
    return serve(args.source, args.mount, args.control, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
