"""Where the `rayka` command finds Ray: a given address, or a private Ray head it owns.

Rules:
- `rayka start --address <addr>` (or RAY_ADDRESS) uses a Ray cluster someone else runs
  (`ray up`, `ray start`): rayka only records the address and never stops that Ray.
- Without an address, `rayka start` runs its OWN Ray head: `ray start --head --block` as a
  child in a new session (so it survives the CLI), its output in a log file next to the
  state file. `ray start --block` stops every Ray process it started when it gets SIGTERM,
  so `rayka stop` ends that head by its pid (and process group, if SIGTERM is not enough):
  never by name, never `ray stop`.
- Ports: a private head never fails because a port it did not ask for is taken. The GCS,
  Ray client server, dashboard agents, runtime-env agent and metrics export get free
  ports; the dashboard gets Ray's 8265 when it is free, else a free port. So a second
  cluster (`rayka start --name B`) gets its own private head beside A's, and a Ray the
  user runs (`ray start --head` on 6379 and 8265) is left alone. A start that fails on a
  taken port or on Ray's own startup wait (RETRYABLE_START) is tried once more with fresh
  ports, after the failed one's processes (its session) are stopped by pid.
- `ray start` records its head in Ray's `ray_current_cluster` file, which a plain
  `ray.init()` (or `address="auto"`) of the user's then joins. A private head puts back
  what that file held before it started (the user's own head stays the one they join);
  rayka finds its heads through its state files, never through that file.
- One state file per cluster name, `$RAYKA_HOME/clusters/<name>.json` (default
  ~/.rayka, rayka/cluster_state.py): the Ray address, whether rayka owns that head, its pid and
  dashboard. Every other command (and `rayka.connect(name)`) reads it to know where to
  connect; `--address` overrides it.
- Ray 2.60's `ray start` turns token authentication on and wants a token, which a HOME
  where Ray never ran lacks. A private head gets a token of its own, made at its start
  (rayka/cluster_state.py `new_token`: `$RAYKA_HOME/clusters/<name>-ray-token`), through
  RAY_AUTH_TOKEN_PATH; `connect_ray` (every CLI command) and `rayka.connect(name)` join it
  with that token. The user's `~/.ray/auth_token` is never read, written or removed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from controller.zookeeper.server import free_ports
from rayka.cluster_state import (ClusterState, home_dir, load_state, new_token,
                                 ray_address_file, remove_state, save_state, state_path,
                                 use_ray_auth)
from rayka.errors import RayUnavailable
from rayka.ops.procs import family, pid_alive, stop_pids

RAY_START_TIMEOUT_S = 90.0
RAY_STOP_TIMEOUT_S = 30.0
POLL_S = 0.1


class RayHeadError(RayUnavailable):
    """Ray could not be started, reached or stopped (a one-line CLI error). `retryable`: a
    start that failed in one of the ways of RETRYABLE_START (found anywhere in its log)."""

    retryable = False


__all__ = ["ClusterState", "RayHeadError", "start_head", "stop_head", "connect_ray",
           "load_state", "save_state", "remove_state", "state_path", "home_dir"]
DEFAULT_DASHBOARD_PORT = 8265


def port_is_free(port: int) -> bool:
    """Nobody listens on `port` (any address): a server's bind (SO_REUSEADDR) would work."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def head_ports(dashboard: bool) -> dict[str, int]:
    """The ports a private head asks for: every one free, the dashboard on 8265 if it is."""
    names = ("port", "ray-client-server-port", "dashboard-agent-listen-port",
             "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port",
             "dashboard-port")
    ports = dict(zip(names, free_ports(len(names))))
    if not dashboard:
        del ports["dashboard-port"]
    elif port_is_free(DEFAULT_DASHBOARD_PORT):
        ports["dashboard-port"] = DEFAULT_DASHBOARD_PORT
    return ports


# `ray start` output (lower case) of a start worth another try with fresh ports: a port taken
# between our check and Ray's bind (Ray's own check says "already occupied", a bind says
# "address already in use"; the dashboard's 8265 is the one other Rays want too), or a raylet
# that did not register in Ray's own startup wait while the machine's 2 cores were busy
# starting another cluster's brokers
RETRYABLE_START = ("timed out during startup", "already in use", "already occupied")
START_ATTEMPTS = 3


def start_head(name: str, num_cpus: int | None = None, dashboard: bool = True) -> ClusterState:
    """Start a private Ray head for cluster `name` and return its state (saved); with Ray's
    dashboard on 127.0.0.1 (8265, or a free port) unless `dashboard` is False. A start that
    fails in one of the ways of RETRYABLE_START is tried once more with fresh ports."""
    for attempt in range(START_ATTEMPTS):
        try:
            return _start_head_once(name, num_cpus, dashboard)
        except RayHeadError as exc:
            if attempt + 1 == START_ATTEMPTS or not exc.retryable:
                raise
    raise AssertionError("unreachable")


def _start_head_once(name: str, num_cpus: int | None, dashboard: bool) -> ClusterState:
    ports = head_ports(dashboard)
    log_file = os.path.join(home_dir(), "clusters", f"{name}-ray.log")
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    cmd = [ray_bin, "start", "--head", "--block", "--node-ip-address=127.0.0.1",
           f"--include-dashboard={'true' if dashboard else 'false'}", "--dashboard-host=127.0.0.1",
           "--disable-usage-stats"] + [f"--{k}={v}" for k, v in ports.items()]
    if num_cpus is not None:
        cmd.append(f"--num-cpus={num_cpus}")
    state = ClusterState(name, f"127.0.0.1:{ports['port']}", owned=True, log_file=log_file,
                         dashboard=f"http://127.0.0.1:{ports['dashboard-port']}"
                         if dashboard else None, token_file=new_token(name))
    env = dict(os.environ)
    use_ray_auth(state, env)
    recorded = _read(ray_address_file())
    with open(log_file, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    state.pid = proc.pid
    deadline = time.monotonic() + RAY_START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            stop_pids(family(proc.pid))     # what the failed start left in its session
            _restore_current_cluster(recorded, state.ray_address)
            _remove(state.token_file)
            error = RayHeadError(f"ray start exited with {proc.returncode}: {_tail(log_file)}")
            error.retryable = _retryable(_read(log_file))
            raise error
        if "block forever" in _read(log_file):  # `ray start --block` prints this once up
            break
        if time.monotonic() > deadline:
            stop_head(state)
            _restore_current_cluster(recorded, state.ray_address)
            _remove(state.token_file)
            raise RayHeadError(f"Ray head not up after {RAY_START_TIMEOUT_S:.0f} s; see {log_file}")
        time.sleep(POLL_S)  # poll interval of a deadline loop
    _restore_current_cluster(recorded, state.ray_address)
    save_state(state)
    return state


def _retryable(log: str) -> bool:
    text = log.lower()
    return any(s in text for s in RETRYABLE_START)


def _restore_current_cluster(recorded: str, ours: str) -> None:
    """Put back what Ray's `ray_current_cluster` held before our `ray start` wrote our head
    there (nothing: remove ours), so the user's `ray.init()` keeps finding their own Ray."""
    path = ray_address_file()
    if _read(path).strip().rsplit(":", 1)[-1] != ours.rsplit(":", 1)[-1]:
        return                                  # not ours (yet, or any more): leave it
    try:
        if recorded.strip():
            with open(path + ".rayka-tmp", "w") as f:
                f.write(recorded)
            os.replace(path + ".rayka-tmp", path)
        else:
            os.remove(path)
    except OSError:
        pass


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
    path = ray_address_file()
    try:
        with open(path) as f:
            current = f.read().strip()
        if current.rsplit(":", 1)[-1] == address.rsplit(":", 1)[-1]:
            os.remove(path)
    except (FileNotFoundError, PermissionError):
        pass


def recorded_head_alive() -> str | None:
    """The head Ray's `ray_current_cluster` names when something answers there (a Ray the
    user runs, or another cluster's private head), else None."""
    address = _read(ray_address_file()).strip()
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return None
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), 1.0):
            return address
    except OSError:
        return None


def connected_address() -> str | None:
    """The GCS address of the Ray this process joined."""
    import ray
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:      # not connected, or a Ray client connection
        return None


def connect_ray(address: str, state: ClusterState | None, namespace: str | None = None) -> None:
    """Join the Ray at `address`; with the token of `state`'s head when rayka owns it."""
    from rayka.cluster import ensure_ray, use_head_token
    use_head_token(state if state is not None and state.ray_address == address else None)
    try:
        ensure_ray(address, namespace=namespace, logging_level="ERROR", log_to_driver=False)
    except RayUnavailable as exc:
        raise RayHeadError(str(exc)) from None


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _tail(path: str) -> str:
    lines = [ln for ln in _read(path).splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"
