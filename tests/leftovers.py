"""What a KILLED test run leaves behind, and how the next run clears it (by pid only).

A run that ends normally stops everything it started. A run killed half-way (SIGKILL, a
CI timeout) cannot: Ray instances and ZooKeeper servers started by the pytest process die
with it (Ray's fate sharing; the launcher's PR_SET_PDEATHSIG), but two kinds of processes
are started to outlive their starter on purpose and are left running:
- private Ray heads of `rayka start` (tests/test_cli.py: `ray start --head --block` in its
  own session), recorded in `<RAYKA_HOME>/clusters/<name>.json`;
- `rayka zookeeper start --daemon` servers (tests/test_zookeeper_cli.py), recorded in their
  pid files.
Both record their pid under the session's pytest base temp. Each session writes its own
pid to `<basetemp>/rayka-session.pid`; at start, a session looks at the other base temps
of this user, and for those whose session pid is no longer running it stops the recorded
processes that are still running AND still what the record says (a `ray start` head, a
ZooKeeper JVM) — never by name, never another live session's.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from rayka.ops.procs import pid_alive

SESSION_FILE = "rayka-session.pid"


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _dead_sessions(root: Path, own: Path) -> list[Path]:
    out = []
    for base in sorted(root.glob("pytest-*")):
        marker = base / SESSION_FILE
        if base == own or not marker.exists():
            continue
        try:
            pid = int(marker.read_text().strip())
        except (OSError, ValueError):
            continue
        if not pid_alive(pid):
            out.append(base)
    return out


def _leftovers(base: Path) -> list[tuple[int, str]]:
    found = []
    for state in base.rglob("clusters/*.json"):
        try:
            s = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        pid = s.get("pid")
        if s.get("owned") and pid and pid_alive(pid) and b"ray" in _cmdline(pid) \
                and b"--head" in _cmdline(pid):
            found.append((pid, f"Ray head {s.get('ray_address')} ({state})"))
    for pid_file in base.rglob("*.pid"):
        if pid_file.name == SESSION_FILE:
            continue
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        if pid_alive(pid) and b"QuorumPeerMain" in _cmdline(pid):
            found.append((pid, f"ZooKeeper ({pid_file})"))
    return found


def sweep(basetemp: Path, say=print) -> list[str]:
    """Mark this session, then stop what dead sessions left running; what was stopped."""
    basetemp.mkdir(parents=True, exist_ok=True)
    (basetemp / SESSION_FILE).write_text(str(os.getpid()))
    stopped = []
    for base in _dead_sessions(basetemp.parent, basetemp):
        for pid, what in _leftovers(base):
            try:
                # a Ray head started with start_new_session leads its own process group
                os.killpg(pid, signal.SIGTERM) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGTERM)
                stopped.append(f"{what} pid {pid}")
            except (ProcessLookupError, PermissionError):
                continue
        (base / SESSION_FILE).unlink(missing_ok=True)
    for line in stopped:
        say(f"rayka tests: stopped a killed run's leftover {line}")
    return stopped
