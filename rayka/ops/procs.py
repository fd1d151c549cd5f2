"""Processes by pid: is one still running, which processes make up its tree, stopping a tree.
The one place rayka asks these questions (the CLI, `rayka zookeeper`, the chaos injector,
the benchmark runner and the tests all call here).

Rules:
- Processes are only ever addressed by pid; nothing here looks a process up by name.
- A pid runs while it exists and is neither a zombie nor dead (`/proc/<pid>/stat` state
  Z/X); our own exited child is reaped on the way (also when it exits between the two
  looks: a child seen a zombie is reaped before the answer); a pid owned by another user
  (PermissionError) counts as running.
- A tree (`family`) is a root pid, its descendants and whatever still sits in its process
  group or session, read from /proc at the time of the call; the caller never belongs to it.
- Stopping (`stop_pids`) is SIGTERM, a grace period, then SIGKILL for what is left; pids
  that vanished or belong to another user are skipped, never an error.
- Home: rayka/ops (operating processes), at or below every caller: rayka.ops itself,
  rayka.cli, rayka.chaos and bench/ (the import rooms only point down). The ZooKeeper
  launcher in a lower room (controller/zookeeper/server.py) holds its JVM as a `Popen` child
  and asks `Popen`, never a bare pid, so it needs none of this; a lower room that came to
  need it would move this module down to that room, not import upward.
- Stdlib only, so importing it costs nothing (the bench runner's children import it).
"""

from __future__ import annotations

import collections
import os
import signal
import time

__all__ = ["pid_alive", "family", "stop_pids"]

_POLL_S = 0.1


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:     # our own child, exited: reaped now
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            # the state follows the parenthesised command name, which may hold spaces
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state not in ("Z", "X"):
        return True
    try:        # our own child may have exited since the first waitpid: reap it too
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return False


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgid, sid) for every process now visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
        table[int(entry)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def family(root: int) -> set[int]:
    """`root`, its descendants, and whatever still sits in its process group or session."""
    table = _proc_table()
    found = {p for p, (_, pgid, sid) in table.items() if pgid == root or sid == root}
    if root in table:
        found.add(root)
    children = collections.defaultdict(list)
    for p, (ppid, _, _) in table.items():
        children[ppid].append(p)
    stack = list(found)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in found:
                found.add(c)
                stack.append(c)
    found.discard(os.getpid())
    return found


def stop_pids(pids: set[int], grace_s: float = 10.0) -> list[int]:
    """SIGTERM each pid, SIGKILL what is left after `grace_s`; returns the pids signalled."""
    signalled = []
    for p in sorted(pids):
        try:
            os.kill(p, signal.SIGTERM)
            signalled.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    running = set(signalled)
    while running and time.monotonic() < deadline:
        running = {p for p in running if pid_alive(p)}
        time.sleep(_POLL_S)
    for p in running:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return signalled
