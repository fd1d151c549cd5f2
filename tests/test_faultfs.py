"""rayka/chaos/faultfs.py on a real FUSE mount (no mocks): passthrough, EIO and ENOSPC faults,
and power losses that must leave every file with exactly its last fsynced content, read by a
new process (no stale kernel cache), checked against a reference model on random sequences.
Each test starts its own faultfs process under tmp_path and stops it by pid."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rayka.chaos.faultfs import FaultFs, is_mounted

pytestmark = [
    pytest.mark.disk,
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse on this machine"),
    pytest.mark.timeout(120),
]


@pytest.fixture
def ffs(tmp_path):
    (tmp_path / "src").mkdir()
    fs = FaultFs.start(tmp_path / "src", tmp_path / "mnt", tmp_path / "ctl")
    try:
        yield fs
    finally:
        fs.stop()
        assert not is_mounted(fs.mount)


def write_file(path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_in_new_process(*paths) -> list[bytes | None]:
    """What a process started after the power loss reads (its own opens, its own stat)."""
    code = textwrap.dedent("""
        import os, sys
        for p in sys.argv[1:]:
            if not os.path.exists(p):
                print("-")
                continue
            data = open(p, "rb").read()
            assert os.stat(p).st_size == len(data), (p, os.stat(p).st_size, len(data))
            print("=" + data.hex())
    """)
    out = subprocess.run([sys.executable, "-c", code, *map(str, paths)], check=True,
                         capture_output=True, text=True, timeout=30).stdout.split()
    return [None if line == "-" else bytes.fromhex(line[1:]) for line in out]


def errno_of(fn, *args) -> int | None:
    try:
        fn(*args)
    except OSError as exc:
        return exc.errno
    return None


def test_passthrough(ffs):
    m, src = ffs.mount, ffs.source
    write_file(m / "a", b"hello", sync=False)
    assert (src / "a").read_bytes() == b"hello"         # writes reach the source at once
    (m / "d").mkdir()
    os.rename(m / "a", m / "d" / "b")
    assert os.listdir(m) == ["d"] and os.listdir(m / "d") == ["b"]
    assert (m / "d" / "b").read_bytes() == b"hello"
    os.rename(m / "d", m / "e")                           # names below a renamed directory
    with open(m / "e" / "b", "ab") as f:                  # O_APPEND: the kernel's offsets
        f.write(b" world")
    assert (m / "e" / "b").read_bytes() == b"hello world"
    os.link(m / "e" / "b", m / "c")
    os.symlink("e/b", m / "s")
    assert (m / "s").read_bytes() == b"hello world" and os.stat(m / "c").st_nlink == 2
    os.truncate(m / "c", 5)
    assert (src / "e" / "b").read_bytes() == b"hello"
    for name in ("c", "s", "e/b"):
        os.unlink(m / name)
    os.rmdir(m / "e")
    assert os.listdir(m) == [] and os.listdir(src) == []


def test_eio_then_ok(ffs):
    (ffs.source / "f").write_bytes(b"A" * 10_000)
    fd = os.open(ffs.mount / "f", os.O_RDWR)
    try:
        ffs.set_mode("eio")
        assert errno_of(os.open, ffs.mount / "f", os.O_RDONLY) == errno.EIO
        assert errno_of(os.pread, fd, 10, 4096) == errno.EIO
        assert errno_of(os.pwrite, fd, b"B" * 10, 0) == errno.EIO
        assert errno_of(os.fsync, fd) == errno.EIO
        assert errno_of(os.listdir, ffs.mount) == errno.EIO
        ffs.set_mode("ok")
        assert os.pread(fd, 10, 0) == b"A" * 10             # the failed write wrote nothing
        os.pwrite(fd, b"B", 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert (ffs.mount / "f").read_bytes() == b"B" + b"A" * 9_999
    assert ffs.stats()["injected_errors"] >= 5


def test_space_limit_and_enospc_mode(ffs):
    m = ffs.mount
    (ffs.source / "old").write_bytes(b"o" * 1000)
    assert ffs.set_space_limit(11_000) == 1000               # the total under the source
    fd = os.open(m / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, b"x" * 8000, 0) == 8000
        assert errno_of(os.ftruncate, fd, 50_000) == errno.ENOSPC
        assert os.pwrite(fd, b"y" * 4000, 8000) == 2000      # a short write up to the limit
        assert errno_of(os.pwrite, fd, b"z" * 10, 10_000) == errno.ENOSPC
        assert os.fstat(fd).st_size == 10_000                # nothing past the limit
        assert (ffs.source / "f").stat().st_size == 10_000
        assert os.pread(fd, 20_000, 0) == b"x" * 8000 + b"y" * 2000   # reads go on
        assert os.pwrite(fd, b"w", 50) == 1                  # overwrites take no room
        os.unlink(m / "old")                                 # deleting gives space back
        assert os.pwrite(fd, b"w" * 1000, 10_000) == 1000
        assert os.statvfs(m).f_bavail == 0
        ffs.set_space_limit(None)
        assert os.pwrite(fd, b"v" * 100_000, 11_000) == 100_000
        ffs.set_mode("enospc")
        assert errno_of(os.pwrite, fd, b"u", 0) == errno.ENOSPC
        assert errno_of(os.open, m / "new", os.O_WRONLY | os.O_CREAT, 0o644) == errno.ENOSPC
        assert errno_of(os.mkdir, m / "dir") == errno.ENOSPC
        assert os.pread(fd, 1, 0) == b"x"
    finally:
        os.close(fd)
    os.unlink(m / "f")                                       # deletes work on a full disk
    ffs.set_mode("ok")
    write_file(m / "new", b"ok", sync=True)
    assert ffs.set_space_limit(None, headroom=10) == 2       # the total now, plus 10 bytes
    assert ffs.stats()["space_limit"] == 12
    write_file(m / "more", b"m" * 10, sync=True)
    assert errno_of(lambda: write_file(m / "full", b"f", sync=True)) == errno.ENOSPC


def test_power_loss_keeps_exactly_the_synced_content(ffs):
    m = ffs.mount
    write_file(m / "synced", b"S" * 5000, sync=True)
    write_file(m / "never", b"N" * 3000, sync=False)
    write_file(m / "old", b"old", sync=True)
    write_file(m / "tmp", b"new content", sync=True)
    os.rename(m / "tmp", m / "old")                          # tmp + fsync + rename
    write_file(m / "tmp2", b"unsynced", sync=False)
    os.rename(m / "tmp2", m / "renamed")                     # a name without its data
    fd = os.open(m / "log", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, b"a" * 10_000, 0)
    os.fsync(fd)
    os.close(fd)                                             # through another descriptor:
    fd = os.open(m / "log", os.O_RDWR)
    os.pwrite(fd, b"b" * 3000, 10_000)                       # an unsynced tail
    os.pwrite(fd, b"c" * 100, 500)                           # an overwritten range
    os.ftruncate(fd, 9000)                                   # shrunk below the synced size
    os.pwrite(fd, b"d" * 10, 8990)
    assert os.pread(fd, 20_000, 0) == b"a" * 500 + b"c" * 100 + b"a" * 8390 + b"d" * 10
    # Fresh attributes and pages of the unsynced bytes in the kernel's caches: only the
    # invalidation that the power loss sends can make a new process see past them.
    assert (m / "never").read_bytes() == b"N" * 3000
    assert [os.stat(m / n).st_size for n in ("never", "renamed", "log")] == [3000, 8, 9000]
    result = ffs.power_loss()
    assert result["files_reverted"] == 3                     # never, renamed, log
    assert result["bytes_dropped"] == 3000 + 8 + 1000 + 100 + 10
    names = ["synced", "never", "old", "renamed", "log", "tmp", "tmp2"]
    expected = [b"S" * 5000, b"", b"new content", b"", b"a" * 10_000, None, None]
    assert read_in_new_process(*(m / n for n in names)) == expected
    # A handle from before the loss: whatever reaches faultfs fails (reads the kernel serves
    # from pages cached since, the reverted ones, need not).
    assert errno_of(os.pwrite, fd, b"e", 0) == errno.EIO
    assert errno_of(os.fsync, fd) == errno.EIO
    os.close(fd)
    assert [(m / n).read_bytes() if (m / n).exists() else None for n in names] == expected
    assert ffs.stats()["dirty_files"] == 0


def test_power_loss_while_a_process_writes(ffs):
    """Writes race the kill; the file must end at exactly one of the writer's fsync points,
    never before the last one it reported, never between two."""
    code = textwrap.dedent("""
        import os, sys
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
        off = 0
        for i in range(1_000_000):
            off += os.pwrite(fd, bytes([i % 251]) * 4096, off)
            if i % 8 == 7:
                os.fsync(fd)
                print(off, flush=True)
    """)
    writer = subprocess.Popen([sys.executable, "-c", code, str(ffs.mount / "seg")],
                              stdout=subprocess.PIPE, text=True)
    reported = [int(writer.stdout.readline()) for _ in range(20)]
    ffs.power_loss(kill=[writer.pid])
    writer.wait(timeout=30)
    reported += [int(line) for line in writer.stdout.read().split()]
    writer.stdout.close()
    data = read_in_new_process(ffs.mount / "seg")[0]
    assert len(data) % (8 * 4096) == 0 and len(data) >= reported[-1]
    assert data == b"".join(bytes([i % 251]) * 4096 for i in range(len(data) // 4096))


def test_freeze_holds_operations_until_thaw(ffs):
    write_file(ffs.mount / "f", b"x", sync=True)
    ffs.freeze()
    reader = subprocess.Popen([sys.executable, "-c",
                               f"print(open({str(ffs.mount / 'f')!r}).read())"],
                              stdout=subprocess.PIPE, text=True)
    with pytest.raises(subprocess.TimeoutExpired):
        reader.wait(timeout=0.5)
    assert ffs.stats()["frozen"]
    ffs.thaw()
    assert reader.communicate(timeout=30)[0] == "x\n"


def held_ops_reach(ffs, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while ffs.stats()["held_ops"] < n:
        assert time.monotonic() < deadline, f"fewer than {n} operations held: {ffs.stats()}"
        time.sleep(0.01)


def test_power_loss_fails_only_the_killed_processes_held_operations(ffs):
    """A restarted process may reach the mount between the kill and the revert: its held
    stat and read must wait and then see the reverted file (no size or page from before,
    no EIO), while the killed process's held operation, made by a thread other than its
    main one (the kernel sends thread ids), fails with the power."""
    m = ffs.mount
    write_file(m / "f", b"durable", sync=True)
    fd = os.open(m / "f", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"+unsynced")
    os.close(fd)
    assert (m / "f").read_bytes() == b"durable+unsynced"      # pages and size now cached
    killed_code = textwrap.dedent("""
        import os, sys, threading
        def run():
            for i in range(1_000_000):
                os.mkdir(os.path.join(sys.argv[1], f"d{i}"))
                if i == 0:
                    print("ready", flush=True)
        threading.Thread(target=run).start()
    """)
    (m / "sub").mkdir()             # a mkdir locks its parent: not the reader's
    killed = subprocess.Popen([sys.executable, "-c", killed_code, str(m / "sub")],
                              stdout=subprocess.PIPE, text=True)
    assert killed.stdout.readline() == "ready\n"
    ffs.freeze()
    held_ops_reach(ffs, 1)                        # the killed process's next mkdir
    reader_code = "import os, sys; print(os.stat(sys.argv[1]).st_size, open(sys.argv[1]).read())"
    reader = subprocess.Popen([sys.executable, "-c", reader_code, str(m / "f")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held_ops_reach(ffs, 2)                        # the restarted one's stat waits too
    ffs.power_loss(kill=[killed.pid])
    out, err = reader.communicate(timeout=30)
    assert (reader.returncode, out, err) == (0, "7 durable\n", "")
    assert killed.wait(timeout=30) == -signal.SIGKILL
    killed.stdout.close()
    stats = ffs.stats()
    assert stats["failed_by_power_loss"] >= 1 and stats["held_ops"] == 0, stats
    assert read_in_new_process(m / "f") == [b"durable"]


def test_stop_unmounts_after_the_process_was_killed(tmp_path):
    (tmp_path / "src").mkdir()
    fs = FaultFs.start(tmp_path / "src", tmp_path / "mnt", tmp_path / "ctl")
    os.kill(fs.pid, signal.SIGKILL)
    fs.proc.wait(timeout=30)
    assert is_mounted(fs.mount)                              # a dead mount stays behind
    fs.stop()
    assert not is_mounted(fs.mount)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sequences_match_the_reference_model(ffs, seed):
    """pwrite, ftruncate, fsync, reopen (O_TRUNC too) and rename over on three files; after
    each round a power loss must leave every file with its last synced content."""
    rnd = random.Random(seed)
    m = ffs.mount
    names = ["a", "b", "c"]
    current: dict[str, bytearray] = {}
    synced: dict[str, bytes] = {}
    for name in names:
        write_file(m / name, b"", sync=True)
        current[name], synced[name] = bytearray(), b""
    for _ in range(12):
        fds = {name: os.open(m / name, os.O_RDWR) for name in names}
        for _ in range(60):
            name = rnd.choice(names)
            action = rnd.choices(["write", "truncate", "fsync", "reopen", "rename"],
                                 [10, 2, 2, 1, 1])[0]
            cur = current[name]
            if action == "write":
                off = rnd.randrange(0, 70_000)
                data = rnd.randbytes(rnd.randrange(1, 9000))
                os.pwrite(fds[name], data, off)
                cur.extend(bytes(max(0, off - len(cur))))
                cur[off:off + len(data)] = data
            elif action == "truncate":
                size = rnd.randrange(0, 70_000)
                os.ftruncate(fds[name], size)
                del cur[size:]
                cur.extend(bytes(size - len(cur)))
            elif action == "fsync":
                (os.fdatasync if rnd.random() < 0.5 else os.fsync)(fds[name])
                synced[name] = bytes(cur)
            elif action == "reopen":
                os.close(fds[name])
                trunc = os.O_TRUNC if rnd.random() < 0.3 else 0
                fds[name] = os.open(m / name, os.O_RDWR | trunc)
                if trunc:
                    cur.clear()
            else:
                other = rnd.choice([n for n in names if n != name])
                os.close(fds[other])
                os.rename(m / name, m / other)               # the file moves, data and all
                current[other], synced[other] = cur, synced[name]
                fds[other] = fds[name]
                write_file(m / name, b"", sync=True)
                current[name], synced[name] = bytearray(), b""
                fds[name] = os.open(m / name, os.O_RDWR)
        for name in names:
            assert os.pread(fds[name], 200_000, 0) == bytes(current[name])
            os.close(fds[name])
        ffs.power_loss()
        got = read_in_new_process(*(m / n for n in names))
        assert got == [synced[n] for n in names]
        for name in names:
            current[name] = bytearray(synced[name])
