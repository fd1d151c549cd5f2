"""Dirty machines: what earlier Ray work leaves behind must not stop rayka from starting.

A killed `ray start` or test run leaves Ray's record of the latest head
(`<tmp>/ray/ray_current_cluster`) naming a dead address; a plain `ray.init()` then waits
on it for minutes. Each test plants such a record, in a private RAY_TMPDIR (Ray's own
switch for where that record lives) so the machine's real /tmp/ray is never touched, and
runs rayka in a subprocess as a user would: `rayka.start_local()` and `rayka demo` start
within their usual time, `connect` and the CLI fail fast naming the dead address. The
start_local run also shows Ray's own tools working on the cluster: the dashboard is on
and `ray.util.state.list_actors()` lists the brokers. And machines where Ray already
runs: a user's own `ray start --head` on Ray's default ports, and another rayka cluster
with its private head, beside which a second cluster and a driver's `start_local` start,
serve and stop without touching the others."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from controller.zookeeper.server import free_port
from rayka.ops import ray_head
from rayka.ops.procs import family, pid_alive, stop_pids

pytestmark = pytest.mark.ray
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAYKA = os.path.join(os.path.dirname(sys.executable), "rayka")


@pytest.fixture
def stale_env(tmp_path):
    # short: Ray puts unix sockets under RAY_TMPDIR (a 107-byte path limit)
    root = tempfile.mkdtemp(prefix="rk", dir="/tmp")
    os.makedirs(os.path.join(root, "ray"))
    # Nothing listens there, ever: the port stays bound (never listening) while the test
    # runs, so no process of a test running beside it can take it; a port only found free
    # can be, and then the probe finds a listener and ray.init waits on it.
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{held.getsockname()[1]}"
    with open(os.path.join(root, "ray", "ray_current_cluster"), "w") as f:
        f.write(dead + "\n")
    # a HOME where Ray never ran (no ~/.ray): what a new user, a CI box, a head node has
    home = tmp_path / "user"
    home.mkdir()
    env = dict(os.environ, RAY_TMPDIR=root, RAYKA_HOME=str(tmp_path / "home"), HOME=str(home))
    for var in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN",
                "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    try:
        yield env, dead
    finally:
        held.close()
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


# -- a machine where Ray already runs -----------------------------------------------------------
RAY = os.path.join(os.path.dirname(sys.executable), "ray")
KCAT = "/usr/bin/kcat"


def _cli(env, *args, timeout=240, stdin=None):
    proc = subprocess.run([RAYKA, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, input=stdin)
    assert proc.returncode == 0, \
        f"rayka {' '.join(args)}: {proc.stderr[-3000:]}{_ray_log_tails(env)}"
    return proc


RAY_LOGS = ("raylet.out", "raylet.err", "gcs_server.out", "gcs_server.err")


def _ray_log_tails(env, lines: int = 15) -> str:
    """The last lines of every Ray session's raylet and GCS logs under the test's
    RAY_TMPDIR: what a failed start's message alone does not say (a raylet that closed a
    worker's registration socket says why only there)."""
    out = []
    ray_dir = os.path.join(env.get("RAY_TMPDIR", ""), "ray")
    for session in sorted(glob.glob(os.path.join(ray_dir, "session_2*"))):
        for name in RAY_LOGS:
            try:
                with open(os.path.join(session, "logs", name), errors="replace") as f:
                    tail = f.readlines()[-lines:]
            except OSError:
                continue
            if tail:
                out.append(f"--- {os.path.basename(session)}/logs/{name}\n{''.join(tail)}")
    return "\n" + "\n".join(out) if out else ""


@pytest.fixture
def foreign_ray(stale_env):
    """A Ray the user runs: `ray start --head` on Ray's default GCS port 6379 and its
    dashboard on 8265 (or, when another Ray of this machine holds 8265, on a free port, as
    Ray's own error tells the user to), in the test's RAY_TMPDIR, recorded in its
    `ray_current_cluster`, stopped by pid afterwards. On a machine where something else holds
    6379 already, that something is the foreign occupant (the condition under test is the
    same: Ray's default is busy). Yields the env, the head's pid and its dashboard URL (None
    when the occupant is not ours)."""
    env, _dead = stale_env
    env = dict(env, RAY_AUTH_MODE="token")
    # the user's own token, made as Ray's docs say; rayka must never touch it
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=60)
    holder, dashboard = None, None
    deadline = time.monotonic() + 180
    while ray_head.port_is_free(6379):
        port = 8265 if ray_head.port_is_free(8265) else free_port()
        holder, log = _foreign_head(env, port)
        if holder is not None:
            dashboard = f"http://127.0.0.1:{port}"
            break
        # another Ray of this machine took the port between the check and Ray's bind
        assert "already" in log and time.monotonic() < deadline, log
    try:
        assert not ray_head.port_is_free(6379)
        yield env, (holder.pid if holder else None), dashboard
    finally:
        if holder is not None:
            stop_by_pid(holder.pid)


def _foreign_head(env, dashboard_port: int):
    """`ray start --head --block` on 6379: the running head, or None and its log."""
    log = os.path.join(env["RAY_TMPDIR"], "foreign.log")
    with open(log, "w") as out:
        holder = subprocess.Popen([RAY, "start", "--head", "--block", "--port=6379",
                                   f"--dashboard-port={dashboard_port}",
                                   "--include-dashboard=true", "--disable-usage-stats",
                                   "--num-cpus=1"],
                                  env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    deadline = time.monotonic() + 90
    while "block forever" not in open(log).read():
        if holder.poll() is not None:
            stop_pids(family(holder.pid))     # what the failed start left in its session
            return None, open(log).read()
        assert time.monotonic() < deadline, open(log).read()
        time.sleep(0.2)     # poll interval of a deadline loop
    return holder, ""


def stop_by_pid(pid: int) -> None:
    """`ray start --block` stops what it started on SIGTERM; SIGKILL its group after 30 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)         # poll interval of a deadline loop
    if pid_alive(pid):
        os.killpg(pid, signal.SIGKILL)


SECOND_CLUSTER = """
import json, rayka
c = rayka.start_local(name="driver", brokers=1, controllers=1)
admin = c.admin()
admin.create_topic("local", 1, 1)
p = c.producer(acks="all")
futures = [p.send("local", b"v%d" % i) for i in range(100)]
p.flush(60)
consumer = c.consumer()
consumer.assign([("local", 0)])
got = []
while len(got) < 100:
    got += consumer.poll(timeout_ms=1000)
print(json.dumps({"read": [r.value.decode() for r in got][:3], "count": len(got)}), flush=True)
c.shutdown()
"""
CONNECT_A = """
import json, rayka
a = rayka.connect("a")             # a's private head, found through its state file
print(json.dumps([b.id for b in a.brokers() if b.alive]), flush=True)
"""


def test_a_second_cluster_and_a_foreign_ray_share_the_machine(foreign_ray):
    """With a user's `ray start --head` holding 6379 and 8265 and cluster A up, a second
    `rayka start --name b` starts on its own private head (free ports), serves the native
    API and kcat, and stops without touching A or the user's Ray; `start_local` likewise;
    `--address auto` joins the user's Ray and `rayka stop` leaves that Ray running."""
    env, foreign_pid, foreign_dashboard = foreign_ray
    recorded = open(os.path.join(env["RAY_TMPDIR"], "ray", "ray_current_cluster")).read()
    user_token = os.path.join(env["HOME"], ".ray", "auth_token")
    token_before = open(user_token).read()
    # ZooKeeper's and Kafka's default ports taken too: the embedded ZooKeeper and the
    # listeners take free loopback ports
    held = []
    for port in (2181, 9092):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
            held.append(s)
        except OSError:
            s.close()          # already held by something else: busy either way
    assert not ray_head.port_is_free(2181) and not ray_head.port_is_free(9092)
    one = ["--brokers", "1", "--controllers", "1"]
    started = {}
    try:
        out_a = _cli(env, "start", "--name", "a", *one).stdout
        assert "already running" in out_a and "own private Ray head" in out_a, out_a
        out_b = _cli(env, "start", "--name", "b", *one).stdout
        started = {n: json.load(open(os.path.join(env["RAYKA_HOME"], "clusters", f"{n}.json")))
                   for n in ("a", "b")}
        assert started["a"]["owned"] and started["b"]["owned"]
        assert started["a"]["ray_address"] != started["b"]["ray_address"]
        dashboards = [started["a"]["dashboard"], started["b"]["dashboard"], foreign_dashboard]
        assert all(dashboards[:2]) and len(set(dashboards)) == 3, out_b
        assert f"Ray dashboard {started['b']['dashboard']}" in out_b
        status = _cli(env, "status", "--name", "b").stdout
        assert f"Ray dashboard {started['b']['dashboard']}" in status
        # the user's Ray stays the one a plain ray.init() finds
        assert open(os.path.join(env["RAY_TMPDIR"], "ray", "ray_current_cluster")).read() \
            == recorded

        _cli(env, "topics", "create", "t", "--partitions", "1", "--replication-factor", "1",
             "--name", "b")
        _cli(env, "produce", "t", "--count", "50", "--size", "10", "--no-progress",
             "--name", "b")
        native = _cli(env, "consume", "t", "--max-records", "50", "--name", "b").stdout
        assert len(native.splitlines()) == 50
        bootstrap = _cli(env, "bootstrap-servers", "--name", "b").stdout.strip()
        subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", "t"], input="from-kcat\n",
                       text=True, check=True, timeout=60)
        read = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", "t", "-o", "beginning",
                               "-e", "-q"], capture_output=True, text=True, timeout=60)
        assert read.stdout.splitlines()[-1] == "from-kcat" and len(read.stdout.splitlines()) == 51

        _cli(env, "stop", "--name", "b")
        assert not pid_alive(started["b"]["pid"]) and pid_alive(started["a"]["pid"])
        assert "broker 1  alive" in _cli(env, "status", "--name", "a").stdout
        assert foreign_pid is None or pid_alive(foreign_pid)

        driver = subprocess.run([sys.executable, "-c", SECOND_CLUSTER], env=env, cwd=ROOT,
                                capture_output=True, text=True, timeout=300)
        assert driver.returncode == 0, driver.stderr[-3000:]
        got = json.loads(driver.stdout.strip().splitlines()[-1])
        assert got["count"] == 100 and got["read"] == ["v0", "v1", "v2"]
        other = subprocess.run([sys.executable, "-c", CONNECT_A], env=env, cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
        assert other.returncode == 0 and json.loads(other.stdout.splitlines()[-1]) == [1], \
            other.stderr[-3000:]

        if foreign_pid is not None:        # join the user's Ray; stopping leaves it running
            out_d = _cli(env, "start", "--name", "d", "--address", "auto", *one).stdout
            state_d = json.load(open(os.path.join(env["RAYKA_HOME"], "clusters", "d.json")))
            assert not state_d["owned"] and state_d["ray_address"].endswith(":6379"), out_d
            _cli(env, "stop", "--name", "d")
            assert pid_alive(foreign_pid)
        status_a = json.loads(_cli(env, "status", "--name", "a", "--json").stdout)
        assert not status_a["zookeeper"].endswith(":2181")
        assert all(not b.endswith(":9092") for b in bootstrap.split(","))
        assert open(user_token).read() == token_before     # each private head has its own
    finally:
        for sock in held:
            sock.close()
        for name in ("b", "a"):
            if os.path.exists(os.path.join(env["RAYKA_HOME"], "clusters", f"{name}.json")):
                subprocess.run([RAYKA, "stop", "--name", name], env=env, capture_output=True,
                               timeout=120)
        for state in started.values():
            if pid_alive(state["pid"]):
                os.killpg(state["pid"], signal.SIGKILL)


# -- a HOME where Ray never ran, and a secured cluster whose followers are refused ---------------
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def _kcat_sasl(bootstrap: str, ca: str) -> list[str]:
    return [KCAT, "-b", bootstrap, "-X", "security.protocol=SASL_SSL",
            "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=admin",
            "-X", "sasl.password=admin-secret", "-X", f"ssl.ca.location={ca}"]


def test_a_first_rayka_start_in_a_fresh_home_and_refused_followers_named(stale_env, tmp_path):
    """`rayka start` where Ray never ran (no ~/.ray) makes its private head a token of its
    own, serves kcat and stops, leaving ~/.ray alone. The cluster is secured the wrong way
    (SASL_SSL for clients, an authorizer, but followers on the default PLAINTEXT listener as
    User:ANONYMOUS, no super user): `rayka start` warns in one line, `rayka status` names the
    refused followers, and a ClusterAction grant heals them without a restart."""
    from tests.certs import make_certs
    env, _dead = stale_env
    certs = make_certs(tmp_path / "certs")
    home = env["HOME"]
    configs = [f"{k}={v}" for k, v in {"authorizer.class.name": AUTHORIZER,
                                        "super.users": "User:admin",
                                        **certs.broker_config()}.items()]
    started = {}
    try:
        start = _cli(env, "start", "--name", "fresh", "--brokers", "2", "--controllers", "1",
                     "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                     *[a for c in configs for a in ("--config", c)])
        started = json.load(open(os.path.join(env["RAYKA_HOME"], "clusters", "fresh.json")))
        warnings = [ln for ln in start.stderr.splitlines() if ln.startswith("rayka: warning:")]
        assert len(warnings) == 1, start.stderr[-3000:]
        assert "PLAINTEXT as User:ANONYMOUS" in warnings[0]
        for fix in ("inter.broker.listener.name", "sasl.mechanism.inter.broker.protocol",
                    "sasl.jaas.config", "super.users", "ClusterAction"):
            assert fix in warnings[0]
        token = os.path.join(env["RAYKA_HOME"], "clusters", "fresh-ray-token")
        assert started["token_file"] == token and os.stat(token).st_mode & 0o077 == 0

        _cli(env, "users", "add", "admin", "--name", "fresh", stdin="admin-secret\n")
        _cli(env, "topics", "create", "guarded", "--partitions", "2",
             "--replication-factor", "2", "--config", "min.insync.replicas=2",
             "--name", "fresh")
        deadline = time.monotonic() + 60
        while True:
            status = json.loads(_cli(env, "status", "--name", "fresh", "--json").stdout)
            if {r["partitions"][0] for r in status["refused_followers"]} >= \
                    {"guarded-0", "guarded-1"}:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.5)     # poll interval of a deadline loop
        assert {(r["principal"], r["listener"], r["error"], r["code"])
                for r in status["refused_followers"]} == \
            {("User:ANONYMOUS", "PLAINTEXT", "TOPIC_AUTHORIZATION_FAILED", 29)}
        text = _cli(env, "status", "--name", "fresh").stdout
        assert "refused follower: broker" in text and "TOPIC_AUTHORIZATION_FAILED (29)" in text

        _cli(env, "acls", "add", "--allow-principal", "User:ANONYMOUS",
             "--operation", "ClusterAction", "--cluster", "--name", "fresh")
        deadline = time.monotonic() + 60
        while True:
            status = json.loads(_cli(env, "status", "--name", "fresh", "--json").stdout)
            if not status["refused_followers"] and not status["under_replicated"]:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.5)     # poll interval of a deadline loop

        bootstrap = _cli(env, "bootstrap-servers", "--name", "fresh", "--listener",
                         "SASL_SSL").stdout.strip()
        lines = [f"line-{i}" for i in range(100)]
        subprocess.run(_kcat_sasl(bootstrap, str(certs.ca)) + [
            "-P", "-t", "guarded", "-X", "acks=all"], input="\n".join(lines) + "\n",
            text=True, check=True, timeout=60)
        read = subprocess.run(_kcat_sasl(bootstrap, str(certs.ca)) + [
            "-C", "-t", "guarded", "-o", "beginning", "-e", "-q"],
            capture_output=True, text=True, timeout=60)
        assert sorted(read.stdout.splitlines()) == sorted(lines), read.stderr[-2000:]

        _cli(env, "stop", "--name", "fresh")
        assert not pid_alive(started["pid"]) and not os.path.exists(token)
        assert not os.path.exists(os.path.join(home, ".ray", "auth_token"))
    finally:
        if started and pid_alive(started["pid"]):
            subprocess.run([RAYKA, "stop", "--name", "fresh"], env=env, capture_output=True,
                           timeout=120)
            if pid_alive(started["pid"]):
                os.killpg(started["pid"], signal.SIGKILL)
