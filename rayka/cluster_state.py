"""Where a named rayka cluster lives: its state file, written by `rayka start`.

Rules:
- One file per cluster name, `$RAYKA_HOME/clusters/<name>.json` (default ~/.rayka): the Ray
  address, whether rayka owns that Ray head (a private head it started and stops by pid),
  the head's pid, log file, dashboard URL and Ray token file.
- A private head runs with Ray's token authentication and a token of its own,
  `$RAYKA_HOME/clusters/<name>-ray-token` (0600, made at its start): two clusters and the
  user's own Ray (`~/.ray/auth_token`, never read, written or removed by rayka) never share
  one. `ray_auth_env` is what a process joining that head sets (Ray's RAY_AUTH_MODE and
  RAY_AUTH_TOKEN_PATH); a head rayka does not own keeps Ray's own rules.
- Written atomically (tmp + rename); a missing file means "not started by `rayka start`".
- The CLI and `rayka.connect(name)` read it to find the cluster's Ray, so several clusters
  (each with its own private head) and a Ray the user runs can share one machine: nothing
  depends on Ray's own `ray_current_cluster` record, which names whichever head started last.
- No Ray import here: the CLI reads it before deciding whether Ray is needed.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from dataclasses import asdict, dataclass, fields

__all__ = ["ClusterState", "home_dir", "state_path", "token_path", "load_state",
           "save_state", "remove_state", "ray_address_file", "ray_auth_env", "use_ray_auth", "new_token"]


@dataclass
class ClusterState:
    name: str
    ray_address: str
    owned: bool = False
    pid: int | None = None
    log_file: str | None = None
    dashboard: str | None = None
    token_file: str | None = None


def home_dir() -> str:
    return os.environ.get("RAYKA_HOME") or os.path.join(os.path.expanduser("~"), ".rayka")


def state_path(name: str) -> str:
    return os.path.join(home_dir(), "clusters", f"{name}.json")


def token_path(name: str) -> str:
    return os.path.join(home_dir(), "clusters", f"{name}-ray-token")


def new_token(name: str) -> str:
    """A fresh Ray token for cluster `name`'s private head, written 0600 (replacing the
    one an earlier head of that name left); its path."""
    path = token_path(name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))      # Ray's own generator: 256 bits as hex
    os.replace(tmp, path)
    return path


def ray_auth_env(state: ClusterState | None) -> dict[str, str]:
    """The environment a process needs to join `state`'s Ray: token mode and the cluster's
    own token for a private head; nothing for a Ray rayka does not own."""
    if state is None or not state.owned or not state.token_file:
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": state.token_file}


def use_ray_auth(state: ClusterState | None, env=None) -> None:
    """Put `ray_auth_env(state)` into `env` (this process's environment by default), before
    Ray reads it; RAY_AUTH_TOKEN goes, since Ray prefers it over the token file."""
    env = os.environ if env is None else env
    wanted = ray_auth_env(state)
    if wanted:
        env.pop("RAY_AUTH_TOKEN", None)
        env.update(wanted)


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
    """Forget cluster `name`: its state file and its private head's token."""
    for path in (state_path(name), token_path(name)):
        try:
            os.remove(path)
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
