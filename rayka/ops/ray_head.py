"""Where the `rayka` command finds Ray: a given address, or a private Ray head it owns.

Rules:
- `rayka start --address <addr>` (or RAY_ADDRESS) uses a Ray cluster someone else runs
  (`ray up`, `ray start`): rayka only records the address and never stops that Ray.
- Without an address, `rayka start` runs its OWN Ray head: `ray start --head --block` as a
  child in a new session (so it survives the CLI), its output in a log file next to the
  state file. `ray start --block` stops every Ray process it started when it gets SIGTERM,
  so `rayka stop` ends that head by its pid (and process group, if SIGTERM is not enough):
  never by name, never `ray stop`.
- One state file per cluster name, `$RAYKA_HOME/clusters/<name>.json` (default
  ~/.rayka): the Ray address, whether rayka owns that head, its pid. Every other command
  reads it to know where to connect; `--address` overrides it.
- Ray 2.60's `ray start` turns token authentication on (token in ~/.ray/auth_token); a
  driver must then run with RAY_AUTH_MODE=token, which `connect_ray` sets for heads rayka
  owns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from controller.zookeeper.server import free_port
from rayka.errors import RayUnavailable
from rayka.ops.procs import pid_alive

RAY_START_TIMEOUT_S = 90.0
RAY_STOP_TIMEOUT_S = 30.0
POLL_S = 0.1


class RayHeadError(RayUnavailable):
    """Ray could not be started, reached or stopped (a one-line CLI error)."""


@dataclass
class ClusterState:
    name: str
    ray_address: str
    owned: bool = False
    pid: int | None = None
    log_file: str | None = None


def home_dir() -> str:
    return os.environ.get("RAYKA_HOME") or os.path.join(os.path.expanduser("~"), ".rayka")


def state_path(name: str) -> str:
    return os.path.join(home_dir(), "clusters", f"{name}.json")


def load_state(name: str) -> ClusterState | None:
    try:
        with open(state_path(name)) as f:
            return ClusterState(**json.load(f))
    except FileNotFoundError:
        return None


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


def start_head(name: str, num_cpus: int | None = None, dashboard: bool = True) -> ClusterState:
    """Start a private Ray head for cluster `name` and return its state (saved); with Ray's
    dashboard on 127.0.0.1 (8265, or the next free port) unless `dashboard` is False."""
    port = free_port()
    log_file = os.path.join(home_dir(), "clusters", f"{name}-ray.log")
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    cmd = [ray_bin, "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
           f"--include-dashboard={'true' if dashboard else 'false'}", "--dashboard-host=127.0.0.1",
           "--disable-usage-stats"]
    if num_cpus is not None:
        cmd.append(f"--num-cpus={num_cpus}")
    env = dict(os.environ, RAY_AUTH_MODE="token")
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    state = ClusterState(name, f"127.0.0.1:{port}", owned=True, pid=proc.pid, log_file=log_file)
    deadline = time.monotonic() + RAY_START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RayHeadError(f"ray start exited with {proc.returncode}: {_tail(log_file)}")
        if "block forever" in _read(log_file):  # `ray start --block` prints this once up
            break
        if time.monotonic() > deadline:
            stop_head(state)
            raise RayHeadError(f"Ray head not up after {RAY_START_TIMEOUT_S:.0f} s; see {log_file}")
        time.sleep(POLL_S)  # poll interval of a deadline loop
    save_state(state)
    return state


def stop_head(state: ClusterState) -> None:
    """Stop a Ray head rayka owns, by its pid: SIGTERM, then SIGKILL to its process group."""
    if not state.owned or not pid_alive(state.pid):
        return
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + RAY_STOP_TIMEOUT_S
    while pid_alive(state.pid) and time.monotonic() < deadline:
        time.sleep(POLL_S)  # poll interval of a deadline loop
    if pid_alive(state.pid):
        try:
            os.killpg(state.pid, signal.SIGKILL)   # the head's own session (start_new_session)
        except ProcessLookupError:
            pass
    _forget_current_cluster(state.ray_address)


def _forget_current_cluster(address: str) -> None:
    """`ray start` leaves /tmp/ray/ray_current_cluster behind; a later plain `ray.init()`
    would try to join the dead head. Remove it only if it names our head's port."""
    from rayka.cluster import ray_address_file
    path = ray_address_file()
    try:
        with open(path) as f:
            current = f.read().strip()
        if current.rsplit(":", 1)[-1] == address.rsplit(":", 1)[-1]:
            os.remove(path)
    except (FileNotFoundError, PermissionError):
        pass


def connect_ray(address: str, owned: bool, namespace: str | None = None) -> None:
    if owned:   # read by Ray when it is imported, so before the import
        os.environ["RAY_AUTH_MODE"] = "token"
    from rayka.cluster import ensure_ray
    try:
        ensure_ray(address, namespace=namespace, logging_level="ERROR", log_to_driver=False)
    except RayUnavailable as exc:
        raise RayHeadError(str(exc)) from None


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _tail(path: str) -> str:
    lines = [ln for ln in _read(path).splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"
