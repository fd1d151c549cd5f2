"""Dirty machines: what earlier Ray work leaves behind must not stop rayka from starting.

A killed `ray start` or test run leaves Ray's record of the latest head
(`<tmp>/ray/ray_current_cluster`) naming a dead address; a plain `ray.init()` then waits
on it for minutes. Each test plants such a record, in a private RAY_TMPDIR (Ray's own
switch for where that record lives) so the machine's real /tmp/ray is never touched, and
runs rayka in a subprocess as a user would: `rayka.start_local()` and `rayka demo` start
within their usual time, `connect` and the CLI fail fast naming the dead address. The
start_local run also shows Ray's own tools working on the cluster: the dashboard is on
and `ray.util.state.list_actors()` lists the brokers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from controller.zookeeper.server import free_port

pytestmark = pytest.mark.ray
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAYKA = os.path.join(os.path.dirname(sys.executable), "rayka")


@pytest.fixture
def stale_env(tmp_path):
    # short: Ray puts unix sockets under RAY_TMPDIR (a 107-byte path limit)
    root = tempfile.mkdtemp(prefix="rk", dir="/tmp")
    os.makedirs(os.path.join(root, "ray"))
    dead = f"127.0.0.1:{free_port()}"          # nothing listens there
    with open(os.path.join(root, "ray", "ray_current_cluster"), "w") as f:
        f.write(dead + "\n")
    env = dict(os.environ, RAY_TMPDIR=root, RAYKA_HOME=str(tmp_path / "home"))
    for var in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        env.pop(var, None)
    try:
        yield env, dead
    finally:
        shutil.rmtree(root, ignore_errors=True)


START_LOCAL = """
import json, time, rayka
from ray.util.state import list_actors
from rayka.cluster import dashboard_url
t = time.monotonic()
c = rayka.start_local(name="dirty", brokers=3, controllers=1)
up = time.monotonic() - t
alive = list_actors(filters=[("ray_namespace", "=", "rayka-dirty"), ("state", "=", "ALIVE")])
print(json.dumps({"up_s": up, "actors": sorted(a.name for a in alive),
                  "dashboard": dashboard_url()}), flush=True)
c.shutdown()
"""


def test_start_local_starts_fresh_and_ray_tools_see_the_brokers(stale_env):
    env, _dead = stale_env
    proc = subprocess.run([sys.executable, "-c", START_LOCAL], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"broker-1", "broker-2", "broker-3", "controller-1001"} <= set(out["actors"])
    assert out["dashboard"].startswith("http://127.0.0.1:")
    assert out["up_s"] < 90          # usual: ~15 s here; the stale record used to hang it


CONNECT = """
import time, rayka
t = time.monotonic()
try:
    rayka.connect("anything")
except Exception as exc:
    print(type(exc).__name__, round(time.monotonic() - t, 1), exc, flush=True)
"""


def test_connect_and_the_cli_fail_fast_naming_the_dead_address(stale_env):
    env, dead = stale_env
    proc = subprocess.run([sys.executable, "-c", CONNECT], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    kind, seconds, message = proc.stdout.strip().split(" ", 2)
    assert kind == "RayUnavailable" and dead in message and "ray_current_cluster" in message
    assert float(seconds) < 30
    t0 = time.monotonic()
    cli = subprocess.run([RAYKA, "status", "--address", "auto"], env=env, capture_output=True,
                         text=True, timeout=120)
    lines = [ln for ln in cli.stderr.splitlines() if ln.startswith("rayka: ")]
    assert cli.returncode == 1 and len(lines) == 1 and dead in lines[0], cli.stderr
    assert time.monotonic() - t0 < 60


def test_rayka_demo_starts_within_its_usual_time(stale_env):
    env, _dead = stale_env
    proc = subprocess.run([RAYKA, "demo", "--log-only", "--records", "3000",
                           "--partitions", "2"], env=env, capture_output=True, text=True,
                          timeout=400)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    up = re.search(r"cluster up in ([\d.]+) s", output)
    assert up and float(up.group(1)) < 90, output[-3000:]
    assert "Ray dashboard: http://127.0.0.1:" in output
