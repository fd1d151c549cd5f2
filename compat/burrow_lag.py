"""Burrow (LinkedIn's lag checker: Debian's `burrow`, sarama inside) against a rayka cluster:
it must report a group's lag per partition, read from rayka's __consumer_offsets.

Rules:
- Burrow runs as a child process with a config of its own in a temporary directory: its
  HTTP API on a free loopback port, its own znodes under /burrow-<random> of the cluster's
  ZooKeeper (Burrow 1.x always takes a ZooKeeper for its coordinator), a cluster module
  polling the brokers' end offsets (ListOffsets) and a consumer module reading
  __consumer_offsets. It is stopped by its pid (SIGTERM, then SIGKILL), whatever happens.
- The check: a 3-partition topic with 10, 20 and 30 records; once Burrow shows the topic's
  end offsets, group `burrow-<random>` commits 4, 20 and 5 (through librdkafka), twice, a few
  seconds apart (Burrow evaluates a window of commits); then
  /v3/kafka/<cluster>/consumer/<group>/lag must show, per partition, current_lag = end offset
  minus committed: 6, 0, 25 (and totallag 31), within a deadline.
- `run_burrow(cluster, burrow=...)` returns {"verdict": passed|failed|not run, ...}; "not run"
  only when no Burrow binary is installed (the Makefile installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid

BURROW = "/usr/bin/Burrow"
RECORDS = {0: 10, 1: 20, 2: 30}
COMMITTED = {0: 4, 1: 20, 2: 5}
DEADLINE_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(zookeeper: str, bootstrap: str, port: int, workdir: str, root: str) -> str:
    servers = ", ".join(f'"{hp}"' for hp in bootstrap.split(","))
    zk = ", ".join(f'"{hp}"' for hp in zookeeper.split("/")[0].split(","))
    return f"""[general]
pidfile="{workdir}/burrow.pid"

[logging]
filename="{workdir}/burrow.log"
level="info"

[zookeeper]
servers=[ {zk} ]
timeout=6
root-path="{root}"

[client-profile.rayka]
client-id="burrow-compat"
kafka-version="0.10.2"

[cluster.rayka]
class-name="kafka"
servers=[ {servers} ]
client-profile="rayka"
topic-refresh=5
offset-refresh=2

[consumer.rayka]
class-name="kafka"
cluster="rayka"
servers=[ {servers} ]
client-profile="rayka"
offsets-topic="__consumer_offsets"
start-latest=false

[httpserver.default]
address="127.0.0.1:{port}"

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
"""


def _get(port: int, path: str):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _commit(bootstrap: str, group: str, topic: str, deadline: float) -> bool:
    """Commit COMMITTED for `group`; retried while the coordinator is being found (the first
    group creates __consumer_offsets)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        while True:
            try:
                c.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
                         asynchronous=False)
                return True
            except KafkaException as exc:
                if not exc.args[0].retriable() and "coordinator" not in str(exc).lower() \
                        or time.monotonic() > deadline:
                    return False
                time.sleep(0.5)     # the coordinator's partition is still being loaded
    finally:
        c.close()


def _lags(answer) -> dict[int, int] | None:
    if not answer or answer.get("error"):
        return None
    parts = (answer.get("status") or {}).get("partitions") or []
    return {p["partition"]: p["current_lag"] for p in parts if p.get("end")}


def run_burrow(cluster, burrow: str = BURROW) -> dict:
    if not os.path.exists(burrow):
        return {"verdict": "not run", "why": f"{burrow} is not installed"}
    from confluent_kafka import Producer
    bootstrap = cluster.bootstrap_servers()
    topic, group = f"burrow-{uuid.uuid4().hex[:6]}", f"burrow-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 3, 3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p, n in RECORDS.items():
        for i in range(n):
            producer.produce(topic, b"r%d" % i, partition=p)
    if producer.flush(60):
        return {"verdict": "failed", "why": "records not acknowledged"}
    workdir = tempfile.mkdtemp(prefix="burrow-")
    port = _free_port()
    with open(os.path.join(workdir, "burrow.toml"), "w") as f:
        f.write(_config(cluster.zookeeper, bootstrap, port, workdir,
                        f"/burrow-{uuid.uuid4().hex[:6]}"))
    proc = subprocess.Popen([burrow, "--config-dir", workdir], cwd=workdir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    expected = {p: RECORDS[p] - COMMITTED[p] for p in RECORDS}
    result = {"verdict": "failed", "expected_lag": expected}
    try:
        deadline = time.monotonic() + DEADLINE_S
        offsets = None
        while time.monotonic() < deadline and proc.poll() is None:
            answer = _get(port, f"/v3/kafka/rayka/topic/{topic}")
            offsets = answer and answer.get("offsets")
            if offsets == [RECORDS[p] for p in sorted(RECORDS)]:
                break
            time.sleep(0.5)     # Burrow polls end offsets every offset-refresh (2 s)
        result["end_offsets"] = offsets
        lags = None
        commits = 0
        while time.monotonic() < deadline and proc.poll() is None:
            if commits < 2 and _commit(bootstrap, group, topic, deadline):
                commits += 1
            lags = _lags(_get(port, f"/v3/kafka/rayka/consumer/{group}/lag"))
            if lags == expected:
                break
            time.sleep(2)       # the next commit is a distinct point in Burrow's window
        result["burrow_lag"] = lags
        if lags == expected:
            result["verdict"] = "passed"
        else:
            result["why"] = ("Burrow exited" if proc.poll() is not None else "deadline") + \
                f"; log tail: {_tail(os.path.join(workdir, 'burrow.log'))}"
    finally:
        _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"burrow lag per partition: {result['verdict']} (expected {expected}, "
          f"burrow {result.get('burrow_lag')})", flush=True)
    return result


def _tail(path: str, chars: int = 800) -> str:
    try:
        with open(path) as f:
            return f.read()[-chars:]
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(20)
