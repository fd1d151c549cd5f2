"""tests/leftovers.py: a killed run's detached processes are stopped by the next run, by pid,
only when their session is dead and the process is still what its record says."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rayka.ops.procs import pid_alive
from tests.leftovers import SESSION_FILE, sweep
from tests.zk_helpers import wait_until

pytestmark = pytest.mark.unit


def stand_in(*argv_tail: str) -> subprocess.Popen:
    """A sleeping process whose command line carries the words the sweeper checks for."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *argv_tail],
                            start_new_session=True)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def session(root, name: str, pid: int, heads=(), zookeepers=()):
    base = root / name
    (base / "home" / "clusters").mkdir(parents=True)
    (base / SESSION_FILE).write_text(str(pid))
    for i, p in enumerate(heads):
        (base / "home" / "clusters" / f"c{i}.json").write_text(json.dumps(
            {"name": f"c{i}", "ray_address": "127.0.0.1:1", "owned": True, "pid": p.pid}))
    for i, p in enumerate(zookeepers):
        (base / f"zk{i}.pid").write_text(str(p.pid))
    return base


def test_a_dead_sessions_heads_and_zookeepers_are_stopped_and_nothing_else(tmp_path):
    head, zk = stand_in("ray", "start", "--head", "--block"), stand_in("QuorumPeerMain")
    unrelated = stand_in("something-else")                  # recorded, but not what it says
    live_head = stand_in("ray", "start", "--head")          # a LIVE session's head
    procs = [head, zk, unrelated, live_head]
    try:
        session(tmp_path, "pytest-1", dead_pid(), heads=[head, unrelated], zookeepers=[zk])
        session(tmp_path, "pytest-2", os.getpid(), heads=[live_head])
        stopped = sweep(tmp_path / "pytest-3", say=lambda _line: None)
        assert len(stopped) == 2 and any("Ray head" in s for s in stopped)
        wait_until(lambda: not pid_alive(head.pid) and not pid_alive(zk.pid), 10,
                   "the dead session's head and ZooKeeper stopped")
        assert pid_alive(unrelated.pid) and pid_alive(live_head.pid)
        assert (tmp_path / "pytest-3" / SESSION_FILE).read_text() == str(os.getpid())
        assert not (tmp_path / "pytest-1" / SESSION_FILE).exists()      # swept once
    finally:
        for p in procs:
            p.kill()
            p.wait()
