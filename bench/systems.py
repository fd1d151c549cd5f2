"""The two systems the side-by-side benchmark (bench/kafka_bench.py) measures: rayka, and
Apache Kafka 3.9.2 in ZooKeeper mode, on this machine, reached the same way.

Rules:
- A workload sees a `System` and nothing else. Data goes only through Kafka's protocol
  (bootstrap_servers(), librdkafka clients); topics are made and inspected with
  librdkafka's AdminClient on both (create_topic, fresh_topic: a uniquely named one of
  RF 3, partitions); the operator acts a workload needs are the same calls on both, done
  the same way where the systems allow:
  * kill_broker(id): SIGKILL of the broker's OS process (rayka: the Ray worker holding the
    broker actor, which Ray restarts on the same data; Kafka: the JVM, started again by a
    thread once ZooKeeper dropped its registration, as a supervisor would). Returns at
    once, after the process is gone (reaped or a zombie), with that monotonic time. `pid=`
    (from broker_pids(), asked beforehand) sends the signal at once: rayka's pids come from
    Ray (~10 ms for the three), during which the broker would still serve the writes a
    failover workload times from its call.
  * kill_controller(): SIGKILL of the active controller's process (rayka: the controller
    actor's worker; Kafka in ZooKeeper mode: the broker that is controller, which is a
    broker too), restarted the same way; returns (its id, the time it was gone).
  * pause_broker(id) / resume_broker(id): SIGSTOP / SIGCONT of the same process;
    pause returns once /proc says the process is stopped; `pid=` as for kill_broker.
  * restart_broker(id): a clean restart, as `rayka restart-brokers` and a Kafka operator
    do it: controlled shutdown (leaderships moved away), clean stop, start on the same data,
    back once registered again.
  * wait_healed(timeout_s): every broker up, and every partition of every topic led with
    its full replica set in the ISR (Metadata from the brokers, polled with a deadline).
  * broker_pids(): {broker id: pid} of the processes doing the broker's work (for CPU).
  * gc_pauses(since_s, until_s): {broker id: [(wall time s, ms, what)]} of the
    collector's pauses each broker's runtime had that began between two wall times (Kafka:
    its JVMs' GC logs, as kafka-server-start.sh -loggc writes them; rayka: the broker
    process's cyclic collections, actors/gc_pauses.py: while either runs, the broker
    answers nothing).
- Settings are Kafka's defaults on Kafka (server.properties as 3.9.2 ships it, except what a
  3-broker RF-3 cluster needs and group.initial.rebalance.delay.ms at Kafka's code default
  3000, which rayka also uses) and rayka's defaults on rayka; `settings` records what
  differs between them (heap, ZooKeeper session timeout, flush policy) for the JSON.
- Each System stops everything it started (by pid) on close(); `open_system(name)` is a
  context manager.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SYSTEMS = ("rayka", "kafka")
# kafka-server-start.sh's default is 1G: at 10,000 partitions (RF 3, so 10,000 replicas per
# broker) its live heap is ~850 MiB and G1 collects back to back; 3 GiB each, 9 of the box's
# 24, leaves the page cache the rest (rayka does not run beside it)
KAFKA_HEAP = "-Xmx3G -Xms3G"
POLL_S = 0.05                       # poll interval of the deadline loops below


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = POLL_S):
    """predicate()'s first truthy answer, polled until `timeout_s` (TimeoutError naming what)."""
    deadline = time.monotonic() + timeout_s
    last_exc = None
    while True:
        try:
            got = predicate()
            if got:
                return got
        except Exception as exc:  # noqa: BLE001 - a restarting system answers with errors
            last_exc = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s"
                               + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval_s)


def process_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat (R, S, T, Z...), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def kill_and_wait(pid: int, timeout_s: float = 10.0) -> float:
    """SIGKILL `pid` and wait until it is dead (gone or a zombie); the monotonic time then."""
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: process_state(pid) in (None, "Z", "X"), timeout_s,
               f"process {pid} dead after SIGKILL", interval_s=0.001)
    return time.monotonic()


# a JVM's unified logging of a pause, as -loggc's decorations (time,tags) write it:
# [2026-11-30T18:58:12.000+0000][gc          ] GC(31) Pause Young (Normal) (G1 Evacuation
# Pause) 403M->161M(3072M) 44.906ms   (one line; the [gc,start] line before it has no time)
_GC_PAUSE = re.compile(r"^\[(?P<time>[^\]]+)\]\[gc *\] GC\(\d+\) (?P<what>Pause .*?)"
                       r"(?: \S+->\S+)? (?P<ms>\d+(?:\.\d+)?)ms$")


def gc_pauses(lines, since_s: float, until_s: float) -> list[tuple[float, float, str]]:
    """(wall time s, ms, what) of each pause logged in `lines` (a JVM GC log's) that began
    in [since_s, until_s]; the log stamps a pause when it ends."""
    from datetime import datetime
    out = []
    for line in lines:
        m = _GC_PAUSE.match(line.rstrip("\n"))
        if m is None:
            continue
        ms = float(m["ms"])
        start = datetime.fromisoformat(m["time"]).timestamp() - ms / 1000
        if since_s <= start <= until_s:
            out.append((start, ms, m["what"]))
    return out


class System:
    """What every workload may use; see the module's rules."""
    name = "?"
    version = "?"
    settings: dict = {}

    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def fresh_topic(self, prefix: str, partitions: int, timeout_s: float = 300.0) -> str:
        """A new topic "<prefix>-<8 hex>" of RF 3 (create_topic); its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.create_topic(name, partitions, 3, timeout_s=timeout_s)
        return name

    def broker_ids(self) -> list[int]:
        raise NotImplementedError

    def broker_pids(self) -> dict[int, int]:
        raise NotImplementedError

    def controller_id(self) -> int:
        raise NotImplementedError

    def kill_broker(self, broker_id: int, pid: int | None = None) -> float:
        raise NotImplementedError

    def kill_controller(self) -> tuple[int, float]:
        raise NotImplementedError

    def pause_broker(self, broker_id: int, pid: int | None = None) -> float:
        pid = self.broker_pids()[broker_id] if pid is None else pid
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: process_state(pid) in ("T", "t"), 10, f"broker {broker_id} stopped",
                   interval_s=0.001)
        self._paused[broker_id] = pid
        return time.monotonic()

    def resume_broker(self, broker_id: int) -> None:
        pid = self._paused.pop(broker_id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    def restart_broker(self, broker_id: int, timeout_s: float = 180.0) -> dict:
        raise NotImplementedError

    def wait_up(self, timeout_s: float = 180.0) -> None:
        """Until every broker answers Metadata listing all of them."""
        raise NotImplementedError

    def gc_pauses(self, since_s: float, until_s: float) -> dict:
        raise NotImplementedError

    # -- through Kafka's protocol, the same on both ---------------------------------------
    def admin(self):
        from confluent_kafka.admin import AdminClient
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers()})
        return self._admin

    def _topic_admin(self):
        """The AdminClient of CreateTopics and DeleteTopics: librdkafka drops a request
        after socket.timeout.ms whatever operation_timeout says, and Kafka answers the
        CreateTopics of 10,000 partitions after ~70 s here (300 s is librdkafka's maximum).
        Metadata goes through admin(), whose default 60 s a frozen broker cannot stretch."""
        from confluent_kafka.admin import AdminClient
        if self._long_admin is None:
            self._long_admin = AdminClient({"bootstrap.servers": self.bootstrap_servers(),
                                            "socket.timeout.ms": 300_000})
        return self._long_admin

    def create_topic(self, name: str, partitions: int, replication_factor: int = 3,
                     config: dict | None = None, timeout_s: float = 300.0) -> float:
        """CreateTopics through librdkafka's AdminClient, then polled until every partition
        has a leader in the Metadata of every broker; the seconds that took."""
        from confluent_kafka.admin import NewTopic
        cfg = {"min.insync.replicas": "2", **{k: str(v) for k, v in (config or {}).items()}}
        t0 = time.monotonic()
        self._admin_call(lambda a: a.create_topics(
            [NewTopic(name, partitions, replication_factor, config=cfg)],
            request_timeout=timeout_s, operation_timeout=timeout_s)[name], timeout_s)
        self.wait_led(name, partitions, timeout_s - (time.monotonic() - t0))
        return time.monotonic() - t0

    def wait_led(self, topic: str, partitions: int, timeout_s: float) -> None:
        """Until every broker's Metadata has `partitions` partitions of `topic`, each led."""
        from confluent_kafka.admin import AdminClient
        per_broker = [AdminClient({"bootstrap.servers": hp}) for hp in
                      self.bootstrap_servers().split(",")]

        def led_everywhere():
            for a in per_broker:
                t = a.list_topics(topic, timeout=10).topics.get(topic)
                if t is None or t.error is not None or len(t.partitions) != partitions or \
                        any(p.leader < 0 for p in t.partitions.values()):
                    return False
            return True
        wait_until(led_everywhere, max(1.0, timeout_s), f"{topic}: {partitions} partitions led",
                   interval_s=0.1)

    def delete_topic(self, name: str, timeout_s: float = 120.0) -> None:
        self._admin_call(lambda a: a.delete_topics([name], operation_timeout=timeout_s)[name],
                         timeout_s)

    def _admin_call(self, call, timeout_s: float):
        """call(admin)'s future's result; NOT_CONTROLLER (a client that knew the old
        controller) is asked again with a fresh AdminClient until `timeout_s`."""
        from confluent_kafka import KafkaError, KafkaException
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return call(self._topic_admin()).result(max(1.0, deadline - time.monotonic()))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.NOT_CONTROLLER or \
                        time.monotonic() > deadline:
                    raise
                self._long_admin = None
                time.sleep(0.1)      # the new controller is being learnt: ask again

    def partitions(self, topic: str, timeout_s: float = 10.0) -> dict:
        """{partition: (leader, replicas, isr)} from Metadata."""
        t = self.admin().list_topics(topic, timeout=timeout_s).topics[topic]
        if t.error is not None:
            raise RuntimeError(f"{topic}: {t.error}")
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition][0]

    def wait_healed(self, timeout_s: float = 180.0) -> None:
        self.wait_up(timeout_s)
        ids = set(self.broker_ids())

        def healed():
            from confluent_kafka.admin import AdminClient
            for hp in self.bootstrap_servers().split(","):
                md = AdminClient({"bootstrap.servers": hp}).list_topics(timeout=10)
                if set(md.brokers) != ids:
                    return False
                for t in md.topics.values():
                    for p in t.partitions.values():
                        if p.leader < 0 or set(p.isrs) != set(p.replicas):
                            return False
            return True
        wait_until(healed, timeout_s, f"{self.name}: every ISR full", interval_s=0.25)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RaykaSystem(System):
    name = "rayka"

    def __init__(self):
        import ray

        import rayka
        from bench.common import local_cluster
        self._admin, self._long_admin, self._paused = None, None, {}
        self.version = rayka.__version__
        self._ray = ray
        self._stack = contextlib.ExitStack()
        self.cluster, self.data_dir = self._stack.enter_context(
            local_cluster("versus", brokers=3, controllers=2))
        self.settings = {"brokers": 3, "controllers": 2, "zookeeper": "embedded (Debian 3.8)",
                         "zookeeper.session.timeout.ms": 3000,
                         "flush": "the OS's (rayka's default: no fsync per write)",
                         "group.initial.rebalance.delay.ms": 3000}

    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers()

    def broker_ids(self) -> list[int]:
        return sorted(self.cluster.facts["brokers"])

    def broker_pids(self) -> dict[int, int]:
        return {b: self._ray.get(self.cluster.broker_actor(b).pid.remote(), timeout=60)
                for b in self.broker_ids()}

    def controller_id(self) -> int:
        return self.cluster.store.get_controller()

    def kill_broker(self, broker_id: int, pid: int | None = None) -> float:
        return kill_and_wait(self.broker_pids()[broker_id] if pid is None else pid)

    def kill_controller(self) -> tuple[int, float]:
        cid = self.controller_id()
        pid = self._ray.get(self.cluster.controller_actor(cid).pid.remote(), timeout=60)
        return cid, kill_and_wait(pid)

    def restart_broker(self, broker_id: int, timeout_s: float = 180.0) -> dict:
        return self.cluster.restart_broker(broker_id, timeout_s)

    def gc_pauses(self, since_s: float, until_s: float) -> dict:
        return {b: self._ray.get(self.cluster.broker_actor(b).gc_pauses.remote(since_s, until_s),
                                 timeout=60) for b in self.broker_ids()}

    def wait_up(self, timeout_s: float = 180.0) -> None:
        def answering():
            self.cluster.wait_ready(timeout_s)
            self.broker_pids()
            return True
        wait_until(answering, timeout_s, "rayka brokers up", interval_s=0.25)

    def close(self) -> None:
        self._stack.close()


class KafkaSystem(System):
    name = "kafka"

    def __init__(self, heap: str = KAFKA_HEAP):
        from compat.kafka.launcher import KAFKA_VERSION, KafkaCluster
        self._admin, self._long_admin, self._paused = None, None, {}
        self.version = KAFKA_VERSION
        self.cluster = KafkaCluster(3, heap=heap, default_replication_factor=3,
                                    min_insync_replicas=2, num_partitions=1,
                                    properties={"group.initial.rebalance.delay.ms": 3000}).start()
        self._restarts: list[threading.Thread] = []
        self.settings = {"brokers": 3, "mode": "ZooKeeper (Debian's ZooKeeper 3.8 server)",
                         "heap": heap, "zookeeper.session.timeout.ms": 18000,
                         "flush": "the OS's (Kafka's default: log.flush.interval.* unset)",
                         "group.initial.rebalance.delay.ms": 3000,
                         "server.properties": "3.9.2's shipped file + sizes for 3 brokers"}

    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def broker_ids(self) -> list[int]:
        return self.cluster.broker_ids

    def broker_pids(self) -> dict[int, int]:
        return {b: pid for b in self.broker_ids() if (pid := self.cluster.pid(b)) is not None}

    def controller_id(self) -> int:
        return self.cluster.controller()

    def _restart_later(self, broker_id: int) -> None:
        t = threading.Thread(target=self.cluster.start_broker, args=(broker_id,), daemon=True)
        t.start()
        self._restarts.append(t)

    def kill_broker(self, broker_id: int, pid: int | None = None) -> float:
        t = kill_and_wait(self.cluster.pid(broker_id) if pid is None else pid)
        self.cluster.broker(broker_id).proc.wait(10)
        self._restart_later(broker_id)
        return t

    def kill_controller(self) -> tuple[int, float]:
        cid = self.controller_id()
        return cid, self.kill_broker(cid)

    def restart_broker(self, broker_id: int, timeout_s: float = 180.0) -> dict:
        t0 = time.monotonic()
        self.cluster.stop_broker(broker_id, timeout_s)      # SIGTERM: controlled shutdown
        stopped = time.monotonic() - t0
        self.cluster.start_broker(broker_id, timeout_s)
        return {"broker": broker_id, "stop_s": stopped, "restart_s": time.monotonic() - t0}

    def wait_up(self, timeout_s: float = 180.0) -> None:
        from compat.kafka.launcher import wait_all_listed
        deadline = time.monotonic() + timeout_s
        for t in self._restarts:
            t.join(max(0.0, deadline - time.monotonic()))
        self._restarts = [t for t in self._restarts if t.is_alive()]
        addresses = [(h, int(p)) for h, p in
                     (hp.rsplit(":", 1) for hp in self.bootstrap_servers().split(","))]
        wait_all_listed(addresses, self.broker_ids(), max(1.0, deadline - time.monotonic()),
                        "Kafka", interval_s=0.25)

    def gc_pauses(self, since_s: float, until_s: float) -> dict:
        out = {}
        for b in self.broker_ids():
            lines = []
            for path in sorted(glob.glob(f"{self.cluster.broker(b).gc_log}*")):
                with contextlib.suppress(OSError), open(path, errors="replace") as f:
                    lines.extend(f)
            out[b] = gc_pauses(lines, since_s, until_s)
        return out

    def close(self) -> None:
        for b, pid in list(self._paused.items()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        for t in self._restarts:
            t.join(200)
        self.cluster.stop()


@contextlib.contextmanager
def open_system(name: str, **kw):
    """A fresh 3-broker system of `name` ("rayka" or "kafka"; `kw` to KafkaSystem, e.g.
    heap=), closed afterwards."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}: one of {SYSTEMS}")
    system = RaykaSystem() if name == "rayka" else KafkaSystem(**kw)
    try:
        yield system
    finally:
        system.close()
