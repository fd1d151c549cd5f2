"""Smoke test of compat/kafka/launcher.py: Apache Kafka 3.9.2 in ZooKeeper mode, its CLI tools,
and the confluent-kafka client, end to end. Exits non-zero on any failed check.

  .venv/bin/python compat/kafka/smoke.py

One 3-broker cluster (plus its ZooKeeper), stopped at the end whatever happens; then `ps`
must show none of the JVMs it started. Prints the time of every step.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launcher  # noqa: E402

TOOL_TIMEOUT_S = 180


class SmokeFailure(AssertionError):
    pass


def check(cond, what: str, detail: str = "") -> None:
    if not cond:
        raise SmokeFailure(f"FAILED: {what}\n{detail[-3000:]}")
    print(f"  ok  {what}")


def step(name: str):
    class _Step:
        def __enter__(self):
            self.t0 = time.monotonic()
            print(f"-- {name}", flush=True)

        def __exit__(self, *exc):
            print(f"   [{time.monotonic() - self.t0:.1f} s] {name}", flush=True)
    return _Step()


def tool(name: str, *args, **kw) -> subprocess.CompletedProcess:
    r = launcher.run_tool(name, [str(a) for a in args], timeout_s=TOOL_TIMEOUT_S, **kw)
    return r


def perf_produce(bootstrap: str, topic: str, n: int) -> None:
    r = tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", n,
             "--record-size", 100, "--throughput", -1, "--producer-props",
             f"bootstrap.servers={bootstrap}", "acks=all")
    out = r.stdout + r.stderr
    check(r.returncode == 0 and f"{n} records sent" in r.stdout,
          f"kafka-producer-perf-test.sh: {n} records sent with acks=all", out)
    print("      " + [ln for ln in r.stdout.splitlines() if "records sent" in ln][-1])


def console_consume(bootstrap: str, topic: str, n: int) -> None:
    r = tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", topic,
             "--from-beginning", "--max-messages", n, "--timeout-ms", 60000)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and len(lines) == n and f"Processed a total of {n} messages" in r.stderr,
          f"kafka-console-consumer.sh: {n} messages from the beginning",
          f"rc={r.returncode} lines={len(lines)}\n{r.stderr}")


def confluent_roundtrip(bootstrap: str, topic: str, n: int = 100) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        fut.result(30)
    errors, acked = [], []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, key=str(i), value=f"v{i}",
                  on_delivery=lambda err, msg: (errors if err else acked).append(err or msg))
    check(p.flush(30) == 0 and not errors and len(acked) == n,
          f"confluent-kafka producer: {n} acked (acks=all, idempotent)", repr(errors[:3]))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "smoke",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = {}, time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        got[m.key().decode()] = m.value().decode()
    c.commit(asynchronous=False)
    c.close()
    check(got == {str(i): f"v{i}" for i in range(n)},
          f"confluent-kafka consumer group: {n} records, keys and values intact",
          f"got {len(got)}")


def alive(pid: int) -> bool:
    r = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-p", str(pid)],
                       capture_output=True, text=True)
    line = r.stdout.strip()
    return bool(line) and " Z" not in line[:20]


def main() -> int:
    t_all = time.monotonic()
    with step("ensure_libs (mvn copy-dependencies, once per pom hash)"):
        libs = launcher.ensure_libs()
        print(f"      {len(list(libs.glob('*.jar')))} jars in {libs}")
    with step("kafka-topics.sh --version"):
        r = tool("kafka-topics.sh", "--version")
        check(r.returncode == 0 and r.stdout.strip().startswith(launcher.KAFKA_VERSION),
              f"Kafka tools are {launcher.KAFKA_VERSION}", r.stdout + r.stderr)

    cluster = launcher.KafkaCluster(3)
    started: dict[str, int] = {}
    failed = False
    try:
        with step("start 3 brokers (ZooKeeper mode) + ZooKeeper"):
            cluster.start()
            started.update(cluster.pids())
            bs = cluster.bootstrap_servers
            print(f"      bootstrap {bs}; zookeeper {cluster.zookeeper_connect}; "
                  f"pids {started}; heap {cluster.heap}; timings "
                  + ", ".join(f"{k}={v:.1f}" for k, v in cluster.timings.items()))
            check(len(cluster.live_ids()) == 3, "3 brokers up, all in every broker's metadata")

        with step("kafka-topics.sh --create t (3 partitions, RF 3)"):
            r = tool("kafka-topics.sh", "--bootstrap-server", bs, "--create", "--topic", "t",
                     "--partitions", 3, "--replication-factor", 3)
            check(r.returncode == 0 and "Created topic t." in r.stdout, "topic t created",
                  r.stdout + r.stderr)
        with step("kafka-topics.sh --describe t"):
            r = tool("kafka-topics.sh", "--bootstrap-server", bs, "--describe", "--topic", "t")
            print("\n".join("      " + ln.strip() for ln in r.stdout.splitlines()))
            parts = [ln for ln in r.stdout.splitlines() if re.search(r"\bPartition: \d", ln)]
            full = [ln for ln in parts
                    if len(re.search(r"Replicas: ([\d,]+)", ln).group(1).split(",")) == 3
                    and len(re.search(r"Isr: ([\d,]+)", ln).group(1).split(",")) == 3]
            check(r.returncode == 0 and len(parts) == 3 and len(full) == 3,
                  "3 partitions, 3 replicas each, all in sync", r.stdout + r.stderr)
        with step("kafka-producer-perf-test.sh 1000 records acks=all"):
            perf_produce(bs, "t", 1000)
        with step("kafka-console-consumer.sh --from-beginning --max-messages 1000"):
            console_consume(bs, "t", 1000)
        with step("confluent-kafka (venv) produce/consume"):
            confluent_roundtrip(bs, "ck")

        victim = next(i for i in cluster.broker_ids if i != cluster.controller())
        with step(f"kill_broker({victim}) (SIGKILL, not the controller), produce 1000 again"):
            pid = cluster.pid(victim)
            cluster.kill_broker(victim)
            check(not alive(pid) and cluster.pid(victim) is None, f"broker {victim} pid {pid} gone")
            perf_produce(bs, "t", 1000)
        with step("kafka-console-consumer.sh reads all 2000 with a broker down"):
            console_consume(bs, "t", 2000)
        with step(f"start_broker({victim}) (waits for its old ZooKeeper session to expire)"):
            cluster.start_broker(victim)
            started[f"broker-{victim}-restarted"] = cluster.pid(victim)
            check(cluster.live_ids() == [1, 2, 3], "3 brokers up again")
    except (SmokeFailure, launcher.KafkaLaunchError, subprocess.TimeoutExpired, Exception) as e:
        failed = True
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
    finally:
        with step("stop (SIGTERM by pid, controller last, then ZooKeeper)"):
            cluster.stop()
    try:
        left = {name: pid for name, pid in started.items() if alive(pid)}
        check(not left, "no JVM this smoke started is left (ps -p each pid)", repr(left))
        r = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True)
        ours = [ln for ln in r.stdout.splitlines()
                if "java" in ln and (str(launcher.LIBS) in ln or "rayka-kafka-" in ln)]
        check(not ours, "ps shows no java with our libs/ or temp dir", "\n".join(ours))
        base = cluster.base_dir
        check(base is not None and not base.exists(), f"temp dir {base} removed")
    except SmokeFailure as e:
        failed = True
        print(e, file=sys.stderr)
    print(f"== smoke {'FAILED' if failed else 'passed'} in {time.monotonic() - t_all:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
