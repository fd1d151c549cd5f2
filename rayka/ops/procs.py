"""Is a process still running? One answer for every place rayka waits on a pid.

Rules: a pid runs while it exists and is neither a zombie nor dead (`/proc/<pid>/stat`
state Z/X); our own exited child is reaped on the way; a pid owned by another user
(PermissionError) counts as running. Processes are only ever addressed by pid.
"""

from __future__ import annotations

import os


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
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True
