"""The `rayka` command end to end, as a user runs it: separate processes, a private Ray head
started and stopped by `rayka start` / `rayka stop`, the real ZooKeeper, real broker actors.
Errors a user can cause print ONE line and exit non-zero."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import pytest

from rayka.ops import ray_head
from rayka.ops.procs import pid_alive

pytestmark = pytest.mark.ray
RAYKA = os.path.join(os.path.dirname(sys.executable), "rayka")


def run(env, *args, stdin: bytes | None = None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([RAYKA, *args], env=env, input=stdin, capture_output=True,
                          timeout=timeout)


def one_line_error(proc, code=1) -> str:
    assert proc.returncode == code, proc.stderr.decode()
    rayka_lines = [ln for ln in proc.stderr.decode().splitlines() if ln.startswith("rayka: ")]
    assert len(rayka_lines) == 1 and "Traceback" not in proc.stderr.decode(), proc.stderr.decode()
    return rayka_lines[0]


def state_of(home, name):
    path = os.path.join(home, "clusters", f"{name}.json")
    return ray_head.ClusterState(**json.load(open(path))) if os.path.exists(path) else None


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    home = str(tmp_path_factory.mktemp("rayka-home"))
    env = dict(os.environ, RAYKA_HOME=home)
    env.pop("RAY_ADDRESS", None)
    name = f"cli{uuid.uuid4().hex[:6]}"
    started = run(env, "start", "--name", name, "--num-cpus", "2",
                  "--config", "replica.lag.time.max.ms=3000")
    state = state_of(home, name)
    try:
        assert started.returncode == 0, started.stderr.decode()
        yield env, home, name, state, started.stdout.decode()
    finally:
        if state_of(home, name) is not None:            # a test failed before `stop`
            run(env, "stop", "--name", name)
        if state is not None and pid_alive(state.pid):
            os.killpg(state.pid, signal.SIGKILL)


def test_topics_produce_consume_status(cli):
    env, _home, name, state, start_out = cli
    assert state.owned and pid_alive(state.pid)
    assert f"rayka cluster '{name}' up: brokers [1, 2, 3]" in start_out
    assert "Ray dashboard http://127.0.0.1:" in start_out        # Ray's tools on by default
    n = ["--name", name]

    created = run(env, "topics", "create", "events", "--partitions", "3",
                  "--replication-factor", "3", "--config", "min.insync.replicas=2", *n)
    assert created.returncode == 0, created.stderr.decode()
    assert run(env, "topics", "list", *n).stdout.decode().split() == ["events"]
    describe = run(env, "topics", "describe", "events", *n).stdout.decode().splitlines()
    assert "PartitionCount: 3" in describe[0] and "min.insync.replicas=2" in describe[0]
    assert len(describe) == 4 and all("Isr: " in line for line in describe[1:])

    produced = run(env, "produce", "events", "--count", "20000", "--size", "50", *n)
    assert produced.returncode == 0, produced.stderr.decode()
    assert "20000 records acknowledged (acks=all)" in produced.stderr.decode()
    lines = run(env, "produce", "events", "--key-separator", ":", "--no-progress", *n,
                stdin=b"k1:first\nk1:second\nno-key\n")
    assert "3 records acknowledged" in lines.stderr.decode()

    consumed = run(env, "consume", "events", "--max-records", "20003", "--print-offsets", *n)
    assert consumed.returncode == 0, consumed.stderr.decode()
    rows = [line.split(b"\t") for line in consumed.stdout.splitlines()]
    assert len(rows) == 20003
    by_partition: dict[bytes, list[int]] = {}
    for p, offset, _key, _value in rows:
        by_partition.setdefault(p, []).append(int(offset))
    assert all(offs == list(range(len(offs))) for offs in by_partition.values())  # dense, once
    keyed = [(k, v) for _p, _o, k, v in rows if k == b"k1"]
    assert [v for _k, v in keyed] == [b"first", b"second"]              # same key, same partition
    generated = sorted(v[:12] for _p, _o, k, v in rows if not k and v[:1].isdigit())
    assert generated == [b"%012d" % i for i in range(20000)]

    status = json.loads(run(env, "status", "--json", *n).stdout)
    assert status["controller"]["id"] in (1001, 1002) and status["controller"]["epoch"] >= 1
    assert [b["alive"] for b in status["brokers"]] == [True, True, True]
    assert status["partitions"] == 3 and status["under_replicated"] == [] and status["offline"] == []
    assert status["ray_dashboard"].startswith("http://127.0.0.1:")
    # every broker's Kafka listener, as kcat (librdkafka 2.0.2) sees the cluster
    assert all(len(b["listeners"]) == 1 and b["listeners"][0].startswith("PLAINTEXT://127.0.0.1:")
               for b in status["brokers"])
    servers = run(env, "bootstrap-servers", *n).stdout.decode().strip()
    assert servers == status["bootstrap_servers"] and len(servers.split(",")) == 3
    listed = subprocess.run(["/usr/bin/kcat", "-b", servers, "-L", "-t", "events"],
                            capture_output=True, timeout=60)
    assert listed.returncode == 0 and b'topic "events" with 3 partitions' in listed.stdout
    assert one_line_error(run(env, "bootstrap-servers", "--listener", "SASL_SSL", *n))
    text = run(env, "status", *n).stdout.decode()
    assert "under-replicated 0  offline 0" in text

    deleted = run(env, "topics", "delete", "events", *n)
    assert deleted.returncode == 0 and "events" not in run(env, "topics", "list", *n).stdout.decode()


def test_admin_commands_elections_reassignments_offsets(cli):
    env, _home, name, _state, _out = cli
    n = ["--name", name]
    assert run(env, "topics", "create", "adm", "--partitions", "2", "--replication-factor",
               "2", *n).returncode == 0
    elected = run(env, "topics", "elect-leaders", "adm", *n).stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in elected] == ["adm-0", "adm-1"]
    assert all("ELECTION_NOT_NEEDED" in line for line in elected)
    listed = run(env, "topics", "reassignments", *n)
    assert listed.returncode == 0 and listed.stdout == b""            # nothing moving
    cancel = run(env, "topics", "cancel-reassign", "adm", "--partition", "0", *n)
    assert "NO_REASSIGNMENT_IN_PROGRESS" in cancel.stdout.decode()
    assert "GROUP_ID_NOT_FOUND" in one_line_error(
        run(env, "groups", *n, "delete-offsets", "nobody", "--topic", "adm"))


def test_user_errors_are_one_line(tmp_path):
    env = dict(os.environ, RAYKA_HOME=str(tmp_path))
    env.pop("RAY_ADDRESS", None)
    assert "no running rayka cluster 'ghost'" in one_line_error(run(env, "status", "--name", "ghost"))
    assert "invalid choice" in one_line_error(run(env, "bogus"), code=2)
    assert "--config wants key=value" in one_line_error(
        run(env, "topics", "create", "t", "--config", "novalue", "--name", "ghost"))


def test_a_launcher_error_of_the_demo_is_one_line(tmp_path):
    env = dict(os.environ, RAYKA_HOME=str(tmp_path),
               RAYKA_ZK_CLASSPATH="/nonexistent/zookeeper.jar")
    env.pop("RAY_ADDRESS", None)
    assert "zookeeper" in one_line_error(run(env, "demo", "--records", "1000")).lower()


def test_errors_against_a_running_cluster_are_typed_one_liners(cli):
    env, _home, name, _state, _out = cli
    n = ["--name", name]
    line = one_line_error(run(env, "topics", "describe", "nope", *n))
    assert line.startswith("rayka: UNKNOWN_TOPIC_OR_PARTITION (3)")
    line = one_line_error(run(env, "topics", "create", "big", "--replication-factor", "5", *n))
    assert line.startswith("rayka: INVALID_REPLICATION_FACTOR (38)")
    assert run(env, "topics", "create", "dup", *n).returncode == 0
    line = one_line_error(run(env, "topics", "create", "dup", *n))
    assert line.startswith("rayka: TOPIC_ALREADY_EXISTS (36)")
    line = one_line_error(run(env, "topics", "create", "cfg", "--config", "min.insync.replicas=x", *n))
    assert line.startswith("rayka: INVALID_CONFIG (40)")
    line = one_line_error(run(env, "produce", "nope", "--count", "10", "--no-progress", *n))
    assert line.startswith("rayka: UNKNOWN_TOPIC_OR_PARTITION (3)")
    listed = set(run(env, "topics", "list", *n).stdout.decode().split())
    assert listed & {"big", "cfg", "nope", "dup"} == {"dup"}   # nothing half-made


def test_features_describe_downgrade_and_a_refused_upgrade(cli):
    env, _home, name, _state, _out = cli
    n = ["--name", name]
    described = run(env, "features", "describe", *n)
    assert described.returncode == 0, described.stderr.decode()
    assert described.stdout.decode().startswith(
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
        "FinalizedVersionLevel: 2\tEpoch: ")
    line = one_line_error(run(env, "features", "upgrade", "--feature", "transaction.version=1",
                              *n))
    assert line.startswith("rayka: INVALID_UPDATE_VERSION (95)") and "downgrade" in line
    down = run(env, "features", "downgrade", "--feature", "transaction.version=1", *n)
    assert down.returncode == 0, down.stderr.decode()
    got = json.loads(run(env, "features", "describe", "--json", *n).stdout)
    assert got["finalized"] == {"transaction.version": 1}
    up = run(env, "features", "upgrade", "--feature", "transaction.version=2", *n)
    assert up.returncode == 0, up.stderr.decode()


def test_stop_ends_the_cluster_and_its_private_ray_head(cli):
    env, home, name, state, _out = cli
    assert state.owned and pid_alive(state.pid)
    stopped = run(env, "stop", "--name", name)
    assert stopped.returncode == 0, stopped.stderr.decode()
    assert not pid_alive(state.pid)
    assert state_of(home, name) is None
    assert "no running rayka cluster" in one_line_error(run(env, "status", "--name", name))
