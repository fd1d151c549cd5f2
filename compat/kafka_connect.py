"""Suite "kafka-connect": Apache Kafka 3.9.2's Kafka Connect (distributed mode) and MirrorMaker 2
against a target cluster (compat/targets.py: rayka, or Apache Kafka 3.9.2 for comparison).

Rules:
- Jars: compat/connect/pom.xml pins Kafka 3.9.2's connect-runtime, connect-file, connect-json,
  connect-mirror(-client) and the reload4j/slf4j-reload4j logging the distribution ships;
  `build()` runs `mvn dependency:copy-dependencies` into compat/connect/build/libs once per pom
  hash (libs/.stamp). Every JVM is launched as bin/connect-*.sh launches it (kafka-run-class's
  G1 flags, config/connect-log4j.properties, -cp 'libs/*'; no JMX) but with -Xmx384m, each in
  its own session, stopped by pid.
- Connect: one ConnectDistributed worker (REST on a free loopback port) whose config, offset and
  status topics live on the target with replication factor 3, created by the worker itself.
  Worker settings beyond those: the distribution's JsonConverter defaults, offset commits
  every second (offset.flush.interval.ms=1000), plugin.discovery=service_load (no jar scan),
  scheduled.rebalance.max.delay.ms=10000.
  Through REST: a FileStreamSource connector (source file -> topic, 3 partitions, RF 3,
  min.insync.replicas 2) and a FileStreamSink connector (topic -> sink file). LINES numbered
  lines are appended to the source file in CHUNK-line chunks; halfway, the broker leading
  partition 0 of the data topic is hard-killed (target.kill_broker).
- Checks (Connect):
  * "connect distributed internal topics": the worker's three topics exist on the target,
    cleanup.policy=compact (as the worker creates them) and 3 replicas on every partition.
  * "filestream source+sink through broker kill": within a deadline the sink file holds every
    line: the set of lines out equals the set of lines in (none missing, none foreign).
    FileStream is at-least-once, so duplicates are counted and reported; asserted: at most
    DUP_BOUND (a tenth of LINES). A replay of the file, or of most of it, fails.
  * "connect connectors running after kill": once every broker is back, REST reports both
    connectors and their tasks RUNNING (polled with a deadline; a FAILED task fails at once).
  * "connect worker restart resumes": the worker gets SIGTERM (it exits within 60 s); the
    source connector's stored offset (GET /connectors/<name>/offsets, KIP-875) equals the
    source file's size; a new worker with the same config finds both connectors in the config
    topic and runs them; RESTART_LINES more lines reach the sink, and at most DUP_BOUND lines
    written before the restart appear again (re-reading the file from its start replays all
    LINES); afterwards the stored source offset equals the file's new size.
- MirrorMaker 2 (org.apache.kafka.connect.mirror.MirrorMaker, dedicated mode, mm2.properties:
  clusters=a,b, a->b only, topics=<topic>, groups=<group>, sync.group.offsets.enabled, 1-2 s
  checkpoint/sync/refresh intervals, every replication factor 3, offset.lag.max=0: an offset
  sync for every mirrored record). a is the target, b is `second_target` (or a second cluster
  of the same kind, started here and closed as soon as MM2 is done).
  A 3-partition topic on a gets MM_BATCH[0] records (key, value, a header; partition i % 3); a
  group consumes 40% of each partition and commits; MM2 starts; once the batch is on b the
  group consumes the rest of it and commits; then MM_BATCH[1] more records are produced.
- Checks (MM2):
  * "mm2 topic mirrored": b has `a.<topic>` with every record of every partition: same key,
    value and headers, same order, same offsets (1:1). Mirror lag = seconds from the second
    batch acknowledged on a to b's end offsets equal to a's.
  * "mm2 group offsets translated": (1) the mid-partition commit: MM2 may decline to
    translate it (its OffsetSyncStore keeps syncs at power-of-2 distances), but any offset it
    writes to b within MM_MID_WAIT_S is > 0 and <= a's (never ahead: that would skip records);
    (2) the commit at the end of the first batch (the latest offset sync is its last
    record's, offsets are 1:1) appears on b exactly, for every partition, within a deadline;
    (3) after the second batch is mirrored the offsets on b are still exactly a's (<= the
    records mirrored).
- Figures: lines, seconds, duplicates, mirror lag. Logs: each JVM's output and log4j files in
  logs_dir (a temp dir, removed afterwards, when none is given); a failing check's "why"
  carries the tail of the relevant log.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compat.kafka.launcher import (CONFIG_FILES, PERF_OPTS, _deathsig_preexec,  # noqa: E402
                                   copy_dependencies, find_java)
from controller.zookeeper.server import free_ports, log_tail  # noqa: E402

SUITE = "kafka-connect"
HERE = ROOT / "compat" / "connect"
POM = HERE / "pom.xml"
BUILD = HERE / "build"
LIBS = BUILD / "libs"
CONFIG = BUILD / "config"
HEAP = "-Xms64m -Xmx384m"

LINES = 20000
CHUNK = 500
CHUNK_PAUSE_S = 0.25        # ~2000 lines/s: the kill lands while lines are in flight
RESTART_LINES = 2000
DUP_BOUND = LINES // 10
SINK_DEADLINE_S = 240
RUNNING_DEADLINE_S = 120
WORKER_START_S = 120
MM_PARTITIONS = 3
MM_BATCH = (3000, 1500)      # first batch before MM2 starts, second while it runs
MM_DEADLINE_S = 180
MM_MID_WAIT_S = 30

SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"


# -- build --------------------------------------------------------------------------------------
def build(quiet: bool = True) -> Path:
    """compat/connect/build/libs with every jar of the pom (once per pom hash) and the
    distribution's connect-log4j.properties in build/config."""
    CONFIG.mkdir(parents=True, exist_ok=True)
    log4j = CONFIG / "connect-log4j.properties"
    if not log4j.exists() or log4j.read_text() != CONFIG_FILES["connect-log4j.properties"]:
        log4j.write_text(CONFIG_FILES["connect-log4j.properties"])
    return copy_dependencies(POM, LIBS, "connect-runtime-*.jar", quiet=quiet)


# -- JVMs ---------------------------------------------------------------------------------------
class Jvm:
    """One Connect/MM2 JVM: the command line bin/connect-*.sh would exec, output to a file."""

    def __init__(self, main: str, args: list[str], log_dir: Path, name: str):
        self.log_dir, self.name = log_dir, name
        self.out = log_dir / f"{name}.out"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.cmd = [find_java(), *HEAP.split(), *PERF_OPTS.split(),
                    f"-Dkafka.logs.dir={log_dir}",
                    f"-Dlog4j.configuration=file:{CONFIG / 'connect-log4j.properties'}",
                    "-cp", f"{LIBS}/*", main, *args]
        (log_dir / f"{name}.command.txt").write_text(shlex.join(self.cmd) + "\n")
        with open(self.out, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, cwd=log_dir,
                                         start_new_session=True, preexec_fn=_deathsig_preexec())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 60.0) -> bool:
        """SIGTERM by pid; SIGKILL after timeout_s. True when it exited on SIGTERM."""
        if self.proc.poll() is not None:
            return True
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
            return True
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            return False

    def tail(self, lines: int = 15) -> str:
        return log_tail(self.out, lines)


def _rest(port: int, method: str, path: str, body=None, timeout_s: float = 30.0):
    """(status, decoded JSON or text); status 0 when the worker did not answer."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


class Worker:
    """A ConnectDistributed worker: its properties file and JVM."""

    def __init__(self, props: dict, log_dir: Path, name: str):
        self.port = free_ports(1)[0]
        props = dict(props, listeners=f"http://127.0.0.1:{self.port}",
                     **{"rest.advertised.host.name": "127.0.0.1",
                        "rest.advertised.port": self.port})
        self.config = log_dir / f"{name}.properties"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.jvm = Jvm("org.apache.kafka.connect.cli.ConnectDistributed", [str(self.config)],
                       log_dir, name)

    def wait_ready(self, timeout_s: float = WORKER_START_S) -> None:
        """Until the herder answers GET /connectors (it has joined its group)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.jvm.alive():
                raise RuntimeError(f"worker exited ({self.jvm.proc.returncode}): "
                                   f"{self.jvm.tail()}")
            status, _ = _rest(self.port, "GET", "/connectors", timeout_s=10)
            if status == 200:
                return
            time.sleep(0.5)     # the worker is starting / reading its config topic
        raise TimeoutError(f"worker REST not ready in {timeout_s} s: {self.jvm.tail()}")

    def put_connector(self, name: str, config: dict, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            status, body = _rest(self.port, "PUT", f"/connectors/{name}/config", config)
            if status in (200, 201):
                return
            last = (status, body)
            time.sleep(1.0)     # 409 while a rebalance is in progress; 500 on a timeout
        raise RuntimeError(f"PUT /connectors/{name}/config: {last}")

    def status(self, name: str):
        return _rest(self.port, "GET", f"/connectors/{name}/status", timeout_s=10)[1]

    def offsets(self, name: str):
        return _rest(self.port, "GET", f"/connectors/{name}/offsets", timeout_s=30)


def _states(status) -> tuple[str, list[str], str]:
    """(connector state, task states, first line of a failure's trace)."""
    if not isinstance(status, dict) or "connector" not in status:
        return "?", [], ""
    tasks = status.get("tasks") or []
    traces = [t.get("trace", "") for t in tasks if t.get("state") == "FAILED"]
    if status["connector"].get("state") == "FAILED":
        traces.append(status["connector"].get("trace", ""))
    first = next((t.strip().splitlines()[0][:300] for t in traces if t.strip()), "")
    return status["connector"].get("state", "?"), [t.get("state", "?") for t in tasks], first


def _wait_running(worker: Worker, names: list[str], timeout_s: float) -> tuple[bool, str]:
    """Until every connector and each of its (>= 1) tasks is RUNNING; False at once on FAILED."""
    deadline = time.monotonic() + timeout_s
    seen = {}
    while True:
        for name in names:
            seen[name] = _states(worker.status(name))
        if any(c == "FAILED" or "FAILED" in t for c, t, _ in seen.values()):
            bad = {n: st for n, st in seen.items() if st[0] == "FAILED" or "FAILED" in st[1]}
            return False, f"FAILED: {bad}"
        if all(c == "RUNNING" and t and all(x == "RUNNING" for x in t)
               for c, t, _ in seen.values()):
            return True, json.dumps({n: [c, t] for n, (c, t, _) in seen.items()})
        if time.monotonic() >= deadline:
            return False, f"not RUNNING in {timeout_s} s: " + json.dumps(
                {n: [c, t] for n, (c, t, _) in seen.items()})
        time.sleep(1.0)         # status topic updates on state changes


# -- Kafka client helpers (confluent-kafka) -----------------------------------------------------
def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _create_topic(bootstrap: str, topic: str, partitions: int, config=None) -> None:
    from confluent_kafka.admin import NewTopic
    admin = _admin(bootstrap)      # held until the answer: a dropped client cancels it
    admin.create_topics([NewTopic(topic, partitions, 3, config=config or {})],
                        operation_timeout=30)[topic].result(60)


def _topic_facts(bootstrap: str, topics: list[str]) -> dict:
    """{topic: {"exists", "partitions", "replicas" (min per partition), "cleanup.policy"}}."""
    from confluent_kafka.admin import ConfigResource
    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=30)
    out = {}
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or tm.error is not None:
            out[t] = {"exists": False, "error": str(tm.error) if tm else "not listed"}
            continue
        res = ConfigResource(ConfigResource.Type.TOPIC, t)
        configs = admin.describe_configs([res])[res].result(30)
        out[t] = {"exists": True, "partitions": len(tm.partitions),
                  "replicas": min(len(p.replicas) for p in tm.partitions.values()),
                  "cleanup.policy": configs["cleanup.policy"].value}
    return out


def _leaders_isrs(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    md = _admin(bootstrap).list_topics(topic, timeout=30)
    return {p: (pm.leader, sorted(pm.isrs)) for p, pm in
            sorted(md.topics[topic].partitions.items())}


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int] | None:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        out = {}
        for p in range(partitions):
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out[p] = high
        return out
    except Exception:     # noqa: BLE001 - the topic does not exist yet / metadata pending
        return None
    finally:
        c.close()


def _group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p)
                                               for p in range(partitions)])
    admin = _admin(bootstrap)
    res = admin.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def _read_all(bootstrap: str, topic: str, partitions: int, ends: dict[int, int]) -> dict:
    """{partition: [(offset, key, value, headers)]} up to the given end offsets."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 120
    try:
        while (any(ends[p] and (not got[p] or got[p][-1][0] < ends[p] - 1) for p in got)
               and time.monotonic() < deadline):
            for m in c.consume(500, timeout=1.0):
                if not m.error():
                    got[m.partition()].append((m.offset(), m.key(), m.value(),
                                               tuple(m.headers() or ())))
    finally:
        c.close()
    return got


# -- Connect ------------------------------------------------------------------------------------
def _sink_lines(path: Path) -> list[str]:
    """Complete (newline-terminated) lines of the sink file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return data[:data.rfind(b"\n") + 1].decode().splitlines()


def _line(i: int) -> str:
    return f"line-{i:06d}"


def _append(path: Path, start: int, count: int) -> None:
    with open(path, "a") as f:
        f.write("".join(_line(i) + "\n" for i in range(start, start + count)))


def _wait_sink(path: Path, want: set[str], timeout_s: float) -> tuple[list[str], float]:
    t0 = time.monotonic()
    while True:
        lines = _sink_lines(path)
        if want <= set(lines) or time.monotonic() - t0 >= timeout_s:
            return lines, time.monotonic() - t0
        time.sleep(0.5)         # the sink task writes and flushes every offset flush


def _source_position(worker: Worker, name: str) -> int | None:
    status, body = worker.offsets(name)
    if status != 200 or not isinstance(body, dict):
        return None
    positions = [o.get("offset", {}).get("position") for o in body.get("offsets", [])]
    return positions[0] if positions else None


def run_connect(target, log_dir: Path, checks: dict) -> None:
    bootstrap = target.bootstrap_servers()
    run = uuid.uuid4().hex[:6]
    internal = {"config.storage.topic": f"connect-configs-{run}",
                "offset.storage.topic": f"connect-offsets-{run}",
                "status.storage.topic": f"connect-status-{run}"}
    props = {"bootstrap.servers": bootstrap, "group.id": f"connect-cluster-{run}",
             "key.converter": "org.apache.kafka.connect.json.JsonConverter",
             "value.converter": "org.apache.kafka.connect.json.JsonConverter",
             "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
             **internal,
             "config.storage.replication.factor": 3, "offset.storage.replication.factor": 3,
             "status.storage.replication.factor": 3,
             # offsets committed every second: a restart replays at most about a second
             "offset.flush.interval.ms": 1000,
             # plugins found through their ServiceLoader manifests (Kafka's own have them)
             # rather than by scanning every jar: start-up on a busy machine in seconds
             "plugin.discovery": "service_load",
             # a departed worker's tasks are reassigned after 10 s, not Kafka's 5 min
             "scheduled.rebalance.max.delay.ms": 10000}
    data_topic = f"connect-lines-{run}"
    src_file, sink_file = log_dir / f"source-{run}.txt", log_dir / f"sink-{run}.txt"
    log_dir.mkdir(parents=True, exist_ok=True)
    src_file.write_text("")
    _create_topic(bootstrap, data_topic, 3, {"min.insync.replicas": "2"})
    source = {"connector.class": SOURCE_CLASS, "tasks.max": "1", "file": str(src_file),
              "topic": data_topic}
    sink = {"connector.class": SINK_CLASS, "tasks.max": "1", "file": str(sink_file),
            "topics": data_topic}
    names = ["file-source", "file-sink"]
    t0 = time.monotonic()
    worker = Worker(props, log_dir, "connect-worker-1")
    try:
        worker.wait_ready()
        # -- internal topics
        # metadata reaches every broker a little after creation (ZooKeeper-mode Kafka too)
        deadline = time.monotonic() + 30
        while True:
            facts = _topic_facts(bootstrap, list(internal.values()))
            if all(f.get("exists") for f in facts.values()) or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        bad = {t: f for t, f in facts.items() if not f.get("exists")
               or f.get("cleanup.policy") != "compact" or f.get("replicas") != 3}
        checks["connect distributed internal topics"] = _check(
            not bad, time.monotonic() - t0, f"not compacted/RF 3 or missing: {bad}",
            topics={t: {k: v for k, v in f.items() if k != "exists"} for t, f in facts.items()})
        # -- source + sink through a broker kill
        t1 = time.monotonic()
        worker.put_connector(names[0], source)
        worker.put_connector(names[1], sink)
        ok, why = _wait_running(worker, names, RUNNING_DEADLINE_S)
        if not ok:
            raise RuntimeError(f"connectors not running before the kill: {why}")
        victim, isr_before = None, None
        killed_at = None
        for chunk in range(LINES // CHUNK):
            if chunk == LINES // CHUNK // 2:
                isr_before = _leaders_isrs(bootstrap, data_topic)
                victim = isr_before[0][0]
                target.kill_broker(victim)
                killed_at = chunk * CHUNK
            _append(src_file, chunk * CHUNK, CHUNK)
            time.sleep(CHUNK_PAUSE_S)   # pacing the writer so the kill lands mid-stream
        want = {_line(i) for i in range(LINES)}
        lines, waited = _wait_sink(sink_file, want, SINK_DEADLINE_S)
        missing = len(want - set(lines))
        foreign = len(set(lines) - want)
        duplicates = len(lines) - len(set(lines))
        ok = missing == 0 and foreign == 0 and duplicates <= DUP_BOUND
        checks["filestream source+sink through broker kill"] = _check(
            ok, time.monotonic() - t1,
            f"{missing} lines missing, {foreign} foreign, {duplicates} duplicates "
            f"(bound {DUP_BOUND}) after {waited:.0f} s; worker log: {worker.jvm.tail(5)}",
            lines=LINES, lines_out=len(lines), duplicates=duplicates, missing=missing,
            killed_broker=victim, killed_after_lines=killed_at,
            leader_isr_at_kill={p: f"{ld} {isr}" for p, (ld, isr) in isr_before.items()},
            sink_wait_s=round(waited, 1))
        # -- status after the kill
        t2 = time.monotonic()
        target.wait_all_up(180)
        ok, why = _wait_running(worker, names, RUNNING_DEADLINE_S)
        checks["connect connectors running after kill"] = _check(
            ok, time.monotonic() - t2, why, status=why if ok else None)
        # -- restart
        t3 = time.monotonic()
        pos_before = _wait_position(worker, names[0], src_file.stat().st_size, 30)
        before = len(_sink_lines(sink_file))
        size_before = src_file.stat().st_size
        clean_exit = worker.jvm.stop(60)
        worker = Worker(props, log_dir, "connect-worker-2")
        worker.wait_ready()
        ok_run, why_run = _wait_running(worker, names, RUNNING_DEADLINE_S)
        _append(src_file, LINES, RESTART_LINES)
        want2 = {_line(i) for i in range(LINES + RESTART_LINES)}
        lines2, waited2 = _wait_sink(sink_file, want2, SINK_DEADLINE_S)
        after = lines2[before:]
        replayed = sum(1 for ln in after if ln in want)
        missing2 = len(want2 - set(lines2))
        pos_after = _wait_position(worker, names[0], src_file.stat().st_size, 30)
        problems = []
        if not clean_exit:
            problems.append("worker did not exit within 60 s of SIGTERM")
        if pos_before != size_before:
            problems.append(f"stored source offset before restart {pos_before}, file size "
                            f"{size_before}")
        if not ok_run:
            problems.append(f"new worker: {why_run}")
        if missing2:
            problems.append(f"{missing2} lines missing after restart")
        if replayed > DUP_BOUND:
            problems.append(f"{replayed} earlier lines replayed (bound {DUP_BOUND})")
        if pos_after != src_file.stat().st_size:
            problems.append(f"stored source offset after restart {pos_after}, file size "
                            f"{src_file.stat().st_size}")
        checks["connect worker restart resumes"] = _check(
            not problems, time.monotonic() - t3, "; ".join(problems),
            lines=RESTART_LINES, replayed=replayed, source_offset_before=pos_before,
            source_offset_after=pos_after, sink_wait_s=round(waited2, 1))
    finally:
        worker.jvm.stop(30)


def _wait_position(worker: Worker, name: str, want: int, timeout_s: float) -> int | None:
    """The source connector's stored file position, polled until it reaches `want`."""
    deadline = time.monotonic() + timeout_s
    while True:
        pos = _source_position(worker, name)
        if pos == want or time.monotonic() >= deadline:
            return pos
        time.sleep(1.0)         # offsets are committed every offset.flush.interval.ms


# -- MirrorMaker 2 ------------------------------------------------------------------------------
def _mm2_properties(a: str, b: str, topic: str, group: str) -> str:
    props = {
        "clusters": "a, b", "a.bootstrap.servers": a, "b.bootstrap.servers": b,
        "a->b.enabled": "true", "a->b.topics": topic, "a->b.groups": group,
        "b->a.enabled": "false",
        # no b->a herder just to emit heartbeats into a
        "b->a.emit.heartbeats.enabled": "false",
        "replication.factor": 3, "checkpoints.topic.replication.factor": 3,
        "heartbeats.topic.replication.factor": 3, "offset-syncs.topic.replication.factor": 3,
        "offset.storage.replication.factor": 3, "status.storage.replication.factor": 3,
        "config.storage.replication.factor": 3,
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": 1,
        "emit.checkpoints.interval.seconds": 1, "emit.heartbeats.interval.seconds": 1,
        "refresh.topics.interval.seconds": 2, "refresh.groups.interval.seconds": 2,
        "sync.topic.configs.interval.seconds": 5,
        # an offset sync for every mirrored record: a group's offset translates exactly
        "offset.lag.max": 0,
        # a worker setting of the a->b herder, which takes its worker config from the target
        # cluster's keys: MirrorSourceTask sends its delayed offset syncs on each offset
        # commit, 60 s apart by default
        "b.offset.flush.interval.ms": 1000,
    }
    return "".join(f"{k} = {v}\n" for k, v in props.items())


def _produce(bootstrap: str, topic: str, start: int, count: int) -> dict[int, list]:
    """Records start..start+count-1 on partition i % MM_PARTITIONS; {partition: [(k, v, h)]}."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors = []
    out: dict[int, list] = {i: [] for i in range(MM_PARTITIONS)}
    for i in range(start, start + count):
        part = i % MM_PARTITIONS
        k, v, h = f"k{i}".encode(), f"value-{i}".encode(), (("n", str(i).encode()),)
        p.produce(topic, v, k, partition=part, headers=list(h),
                  on_delivery=lambda err, _m: err and errors.append(err))
        out[part].append((k, v, h))
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left or errors:
        raise RuntimeError(f"producing to {topic}: {left} unacknowledged, errors {errors[:3]}")
    return out


def _consume_upto(bootstrap: str, topic: str, group: str, upto: dict[int, int]) -> dict:
    """A member of `group` (subscribed) processes each partition's records up to offset
    upto[p] and commits those offsets; the group's committed offsets as a reads them back."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    nxt: dict[int, int] = {}
    deadline = time.monotonic() + 120
    try:
        while (any(nxt.get(p, 0) < o for p, o in upto.items())
               and time.monotonic() < deadline):
            for m in c.consume(500, timeout=1.0):
                if not m.error() and m.offset() < upto[m.partition()]:
                    nxt[m.partition()] = m.offset() + 1
        if any(nxt.get(p, 0) < o for p, o in upto.items()):
            raise RuntimeError(f"group {group} reached {nxt} of {upto} in 120 s")
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in upto.items()],
                 asynchronous=False)
    finally:
        c.close()
    return _group_offsets(bootstrap, group, topic, MM_PARTITIONS)


def _wait_group(bootstrap: str, group: str, topic: str, done, mm2: "Jvm",
                timeout_s: float) -> dict[int, int]:
    """The group's committed offsets on `bootstrap`, polled until done(offsets)."""
    deadline = time.monotonic() + timeout_s
    offsets: dict[int, int] = {}
    while time.monotonic() < deadline and mm2.alive():
        try:
            offsets = _group_offsets(bootstrap, group, topic, MM_PARTITIONS)
        except Exception:     # noqa: BLE001 - the group does not exist on b yet
            offsets = {}
        if done(offsets):
            break
        time.sleep(1.0)         # checkpoints are emitted and synced every second
    return offsets


def run_mm2(target, second, log_dir: Path, checks: dict) -> None:
    a, b = target.bootstrap_servers(), second.bootstrap_servers()
    run = uuid.uuid4().hex[:6]
    topic, group = f"mm2-src-{run}", f"mm2-group-{run}"
    remote = f"a.{topic}"
    t0 = time.monotonic()
    _create_topic(a, topic, MM_PARTITIONS)
    expected = _produce(a, topic, 0, MM_BATCH[0])
    first = {p: len(v) for p, v in expected.items()}
    # part of the first batch consumed before MM2 starts: a mid-partition offset, which MM2
    # translates only approximately (never ahead of it)
    part = {p: n * 2 // 5 for p, n in first.items()}
    a_part = _consume_upto(a, topic, group, part)
    log_dir.mkdir(parents=True, exist_ok=True)
    cfg = log_dir / "mm2.properties"
    cfg.write_text(_mm2_properties(a, b, topic, group))
    mm2 = Jvm("org.apache.kafka.connect.mirror.MirrorMaker", [str(cfg)], log_dir, "mirror-maker")
    t_group = 0.0
    try:
        ends = _wait_ends(b, remote, first, mm2, MM_DEADLINE_S)
        if ends != first:
            why = (f"first batch not mirrored in {MM_DEADLINE_S} s: b has {ends}, a {first}; "
                   f"MM2 log: {mm2.tail(8)}")
            checks["mm2 topic mirrored"] = _check(False, time.monotonic() - t0, why)
            checks["mm2 group offsets translated"] = _check(False, 0.0, why)
            return
        t1 = time.monotonic()
        problems = []
        waits = {}
        # MM2 may decline to translate an offset older than the syncs it kept (OffsetSyncStore
        # keeps syncs at power-of-2 distances, only the latest of those read at start-up); an
        # offset it does translate must never be ahead of the group's
        b_part = _wait_group(b, group, remote, lambda o: o.keys() == part.keys() or any(
            not 0 < o[p] <= a_part[p] for p in o), mm2, MM_MID_WAIT_S)
        waits["mid_partition_wait_s"] = round(time.monotonic() - t1, 1)
        for p, off in sorted(b_part.items()):
            if not 0 < off <= a_part.get(p, 0):
                problems.append(f"mid-partition: partition {p} offset {off} on b, not in "
                                f"(0, {a_part.get(p)}]")
        # the group catches up with the end of the first batch: the latest offset sync is
        # its last record's, so the translation is exact
        a_end = _consume_upto(a, topic, group, first)
        t2 = time.monotonic()
        b_end = _wait_group(b, group, remote, lambda o: o == a_end, mm2, MM_DEADLINE_S)
        waits["caught_up_translation_s"] = round(time.monotonic() - t2, 1)
        if b_end != a_end:
            problems.append(f"caught up: offsets on b {b_end}, on a {a_end}")
        t_group = time.monotonic() - t1
        # a second batch while MM2 runs: live mirroring, and the group's offsets on b stay
        second_batch = _produce(a, topic, MM_BATCH[0], MM_BATCH[1])
        acked = time.monotonic()
        for p, recs in second_batch.items():
            expected[p] += recs
        total = {p: len(v) for p, v in expected.items()}
        ends = _wait_ends(b, remote, total, mm2, MM_DEADLINE_S)
        lag = time.monotonic() - acked
        got = _read_all(b, remote, MM_PARTITIONS, ends or total)
        mirror_problems = []
        for p in range(MM_PARTITIONS):
            want = [(o, k, v, h) for o, (k, v, h) in enumerate(expected[p])]
            have = [(o, k, v, tuple((hk, hv) for hk, hv in hs)) for o, k, v, hs in got[p]]
            if have != want:
                first_bad = next((i for i, (x, y) in enumerate(zip(have, want)) if x != y),
                                 min(len(have), len(want)))
                mirror_problems.append(
                    f"partition {p}: {len(have)} records on b, {len(want)} on a, first "
                    f"difference at index {first_bad}")
        if ends != total and not mirror_problems:
            mirror_problems.append(f"end offsets on b {ends}, on a {total}")
        checks["mm2 topic mirrored"] = _check(
            not mirror_problems, time.monotonic() - t0 - t_group, "; ".join(mirror_problems),
            records=sum(total.values()), mirror_lag_s=round(lag, 1), remote_topic=remote)
        b_after = _group_offsets(b, group, remote, MM_PARTITIONS)
        if b_after != a_end:
            problems.append(f"after the second batch: offsets on b {b_after}, on a {a_end}")
        checks["mm2 group offsets translated"] = _check(
            not problems, t_group,
            "; ".join(problems) + (f"; MM2 log: {mm2.tail(6)}" if problems else ""),
            mid_partition={"a": a_part, "b": b_part}, caught_up={"a": a_end, "b": b_end},
            after_second_batch=b_after, **waits)
    finally:
        mm2.stop(60)


def _wait_ends(bootstrap: str, topic: str, want: dict[int, int], mm2: Jvm,
               timeout_s: float) -> dict[int, int] | None:
    deadline = time.monotonic() + timeout_s
    ends = None
    while time.monotonic() < deadline and mm2.alive():
        ends = _end_offsets(bootstrap, topic, MM_PARTITIONS)
        if ends == want:
            break
        time.sleep(0.5)         # MM2 creates the remote topic, then replicates
    return ends


# -- suite --------------------------------------------------------------------------------------
def _check(ok: bool, seconds: float, why: str, **figures) -> dict:
    out = {"verdict": "passed" if ok else "failed", "seconds": round(seconds, 1)}
    if not ok:
        out["why"] = " ".join(str(why).split())[:600]
    out.update({k: v for k, v in figures.items() if v is not None})
    return out


CHECKS = ["connect distributed internal topics", "filestream source+sink through broker kill",
          "connect connectors running after kill", "connect worker restart resumes",
          "mm2 topic mirrored", "mm2 group offsets translated"]


def run_kafka_connect(target, logs_dir=None, second_target=None,
                      parts=("connect", "mm2")) -> dict:
    t0 = time.monotonic()
    build()
    own_logs = logs_dir is None
    log_dir = (Path(tempfile.mkdtemp(prefix="kafka-connect-")) if own_logs
               else Path(logs_dir).resolve())
    log_dir.mkdir(parents=True, exist_ok=True)
    checks: dict[str, dict] = {}
    try:
        try:
            if "connect" in parts:
                run_connect(target, log_dir / "connect", checks)
        except Exception as exc:  # noqa: BLE001 - recorded as the failing check
            _fail_rest(checks, CHECKS[:4], f"{type(exc).__name__}: {exc}")
        try:
            if "mm2" not in parts:
                raise _Skip
            target.wait_all_up(180)
            owned = second_target is None
            if owned:
                from compat.targets import open_target
                second_target = open_target(target.name)
            try:
                run_mm2(target, second_target, log_dir / "mm2", checks)
            finally:
                if owned:
                    second_target.close()
        except _Skip:
            pass
        except Exception as exc:  # noqa: BLE001
            _fail_rest(checks, CHECKS[4:], f"{type(exc).__name__}: {exc}")
    finally:
        if own_logs:
            shutil.rmtree(log_dir, ignore_errors=True)
    verdicts = [c["verdict"] for c in checks.values()]
    return {"suite": SUITE, "target": target.name, "seconds": round(time.monotonic() - t0, 1),
            "checks": checks, "passed": verdicts.count("passed"),
            "failed": verdicts.count("failed"),
            "not_applicable": verdicts.count("not applicable")}


class _Skip(Exception):
    pass


def _fail_rest(checks: dict, names: list[str], why: str) -> None:
    for name in names:
        if name not in checks:
            checks[name] = _check(False, 0.0, why)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=["run", "build"], default="run")
    parser.add_argument("--target", choices=["rayka", "kafka"], default="rayka")
    parser.add_argument("--out", help="write the result as JSON here")
    parser.add_argument("--logs", help="keep every JVM's logs in this directory")
    parser.add_argument("--only", choices=["connect", "mm2"], help="run one half only")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(build(quiet=False))
        return 0
    from compat.targets import finish, open_target
    with open_target(args.target) as target:
        result = run_kafka_connect(target, args.logs, parts=(args.only,) if args.only
                                   else ("connect", "mm2"))
    for name, c in result["checks"].items():
        extra = {k: v for k, v in c.items() if k not in ("verdict", "seconds", "why")}
        print(f"{SUITE} [{result['target']}] {name}: {c['verdict']} ({c['seconds']} s)"
              + (f": {c['why']}" if "why" in c else "") + (f" {json.dumps(extra)}"
                                                           if extra else ""), flush=True)
    print(f"{SUITE} [{result['target']}]: {result['passed']} passed, {result['failed']} failed "
          f"({result['seconds']} s)")
    return finish(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
