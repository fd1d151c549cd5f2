"""rayka/ops/procs.py on real processes of this test (sleep, python): when a pid counts as
running, which processes make up a tree, and stopping a tree by pid with SIGKILL for what
ignores SIGTERM. Every process started here is stopped by its pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rayka.ops.procs import family, pid_alive, stop_pids

pytestmark = pytest.mark.unit


def wait_until(cond, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def python(code: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            text=True, **popen)


def kill(pids) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def test_nothing_is_not_running():
    assert not pid_alive(None) and not pid_alive(0)


def test_our_child_runs_until_it_exits_and_is_reaped_on_the_way():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert pid_alive(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        assert wait_until(lambda: not pid_alive(proc.pid))
        with pytest.raises(ChildProcessError):          # pid_alive reaped it
            os.waitpid(proc.pid, os.WNOHANG)
    finally:
        kill([proc.pid])
        proc.wait(10)


def test_a_zombie_that_is_not_our_child_is_not_running():
    # the parent never reaps its exited child: a zombie this process cannot reap
    parent = python("""
        import os, time
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        print(pid, flush=True)
        time.sleep(30)
    """)
    try:
        zombie = int(parent.stdout.readline())
        assert wait_until(lambda: not pid_alive(zombie))
        assert os.path.exists(f"/proc/{zombie}")        # still in the table, as a zombie
        assert pid_alive(parent.pid)
    finally:
        kill([parent.pid])
        parent.wait(10)


def test_family_holds_descendants_and_the_session_but_never_the_caller():
    # root leads a session; one child stays in it, one grandchild leaves it (own session)
    root = python("""
        import subprocess, time
        a = subprocess.Popen(["sleep", "30"])
        b = subprocess.Popen(["sleep", "30"], start_new_session=True)
        print(a.pid, b.pid, flush=True)
        time.sleep(30)
    """, start_new_session=True)
    try:
        a, b = map(int, root.stdout.readline().split())
        found = family(root.pid)
        assert {root.pid, a, b} <= found and os.getpid() not in found
        assert family(os.getpid()) >= {root.pid, a, b}
        assert os.getpid() not in family(os.getpid())
    finally:
        kill(family(root.pid))
        root.wait(10)


def test_stop_pids_terms_then_kills_what_ignores_sigterm():
    stubborn = python("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(30)
    """)
    polite = subprocess.Popen(["sleep", "30"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        assert stubborn.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        signalled = stop_pids({stubborn.pid, polite.pid, gone.pid}, grace_s=0.5)
        assert sorted(signalled) == sorted([stubborn.pid, polite.pid])  # the reaped one: skipped
        assert not pid_alive(polite.pid)
        assert stubborn.wait(5) == -signal.SIGKILL
        assert time.monotonic() - t0 >= 0.5                # the grace period was given
    finally:
        kill([stubborn.pid, polite.pid])
        stubborn.wait(10)
        polite.wait(10)
