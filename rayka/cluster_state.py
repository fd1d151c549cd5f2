"""Where a named rayka cluster lives: its state file, written by `rayka start`.

Rules:
- One file per cluster name, `$RAYKA_HOME/clusters/<name>.json` (default ~/.rayka): the Ray
  address, whether rayka owns that Ray head (a private head it started and stops by pid),
  the head's pid, log file and dashboard URL.
- Written atomically (tmp + rename); a missing file means "not started by `rayka start`".
- The CLI and `rayka.connect(name)` read it to find the cluster's Ray, so several clusters
  (each with its own private head) and a Ray the user runs can share one machine: nothing
  depends on Ray's own `ray_current_cluster` record, which names whichever head started last.
- No Ray import here: the CLI reads it before deciding whether Ray is needed.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, fields

__all__ = ["ClusterState", "home_dir", "state_path", "load_state", "save_state",
           "remove_state", "ray_address_file"]


@dataclass
class ClusterState:
    name: str
    ray_address: str
    owned: bool = False
    pid: int | None = None
    log_file: str | None = None
    dashboard: str | None = None


def home_dir() -> str:
    return os.environ.get("RAYKA_HOME") or os.path.join(os.path.expanduser("~"), ".rayka")


def state_path(name: str) -> str:
    return os.path.join(home_dir(), "clusters", f"{name}.json")


def load_state(name: str) -> ClusterState | None:
    try:
        with open(state_path(name)) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    known = {f.name for f in fields(ClusterState)}
    return ClusterState(**{k: v for k, v in data.items() if k in known})


def save_state(state: ClusterState) -> None:
    path = state_path(state.name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(asdict(state), f)
    os.replace(path + ".tmp", path)


def remove_state(name: str) -> None:
    try:
        os.remove(state_path(name))
    except FileNotFoundError:
        pass


def ray_address_file() -> str:
    """Where `ray start` (and ray.cluster_utils) record the latest head: Ray's own rule."""
    if os.environ.get("RAY_TMPDIR"):
        tmp = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and os.environ.get("TMPDIR"):
        tmp = os.environ["TMPDIR"]
    else:
        tmp = "/tmp"
    return os.path.join(tmp, "ray", "ray_current_cluster")
