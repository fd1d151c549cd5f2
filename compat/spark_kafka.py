"""Spark's own Kafka connector (spark-sql-kafka-0-10 3.5.7) on RayDP, against a compat Target.

Rules:
- The connector's jars come from Maven Central, pinned by compat/spark/pom.xml: spark-sql-kafka
  and the runtime jars PySpark 3.5.7's jars/ folder lacks (spark-token-provider-kafka,
  kafka-clients 3.4.1, commons-pool2). ensure_jars() runs `mvn dependency:copy-dependencies`
  into compat/spark/build/jars once per pom hash (build/jars/.stamp), and refuses a jar
  that PySpark already ships (two copies of a class on one classpath).
- Spark runs on Ray through RayDP (pipeline/spark.py start_spark): one executor (1 core,
  1 GB, half a Ray CPU), the jars given as `spark.jars` (spark-submit puts them on the
  driver's class loader; the executors fetch them from the driver). It uses the Ray the
  process already has (the rayka target's, whose start_cluster ran ray.init); with none
  (the Kafka 3.9 target) it starts a local one and shuts it down at the end. One Spark
  driver JVM per process (NOTES.md: RayDP's JVM-side Ray runtime cannot re-initialise for
  a second Ray cluster): run one target per process (the CLI below does).
- The suite reaches the cluster only through its bootstrap servers (librdkafka,
  confluent-kafka, produces the input and reads the output back: a reference independent
  of Spark and of rayka's client) and the Target's kill_broker / wait_all_up.
- Checks, each on topics of its own (3 partitions, replication factor 3, min ISR 2):
  * "batch read offsets+headers": 300 records with keys (some null), explicit CreateTime
    timestamps and headers (a repeated key, a null value); spark.read.format("kafka") with
    startingOffsets / endingOffsets JSON (explicit offsets, -2 earliest, -1 latest) and
    includeHeaders=true must return exactly the records in those ranges: topic, partition,
    offset, key, value, timestamp (ms), timestampType 0 and the headers in order.
  * "stream exact without faults": N keyed records (half before the query starts, half
    while it runs); readStream kafka (startingOffsets earliest, maxOffsetsPerTrigger so it
    takes several micro-batches) → value upper-cased, key kept → writeStream kafka, a
    checkpoint, trigger processingTime 1 s. Once the query's progress shows the input's end
    offsets, the output multiset of (key, value) must EQUAL the input's, transformed.
  * "stream through broker kill + query restart (no loss)": the same pipeline; after two
    micro-batches, while a micro-batch is half-written (its stage has finished some of its
    tasks, not all: Spark's status tracker), the leader of an input partition is hard-killed
    (target.kill_broker) while more input is produced; two micro-batches later, again with
    one half-written, the query is stopped and a new one started from the same checkpoint,
    as a restarted driver would (the driver JVM itself stays: one per process); the
    half-written micro-batch runs again. Spark's Kafka
    sink is at-least-once: every input record must appear in the output (nothing lost,
    nothing foreign); duplicates are counted and reported, not failed.
- Before anything, target.wait_all_up; after the kill check, wait_all_up again (the cluster
  is left whole for whatever runs next). Records a producer cannot deliver in 120 s fail
  their check, with librdkafka's own errors (error_cb) in the reason.
- Figures: records, seconds (the check's), stream_seconds (query start to the input's end
  offsets in its progress), micro_batches (with rows, over both runs of the query),
  duplicates. run_spark_kafka(target, logs_dir) returns {"suite", "target", "seconds",
  "checks": {name: {"verdict", "why"?, "seconds", ...figures}}, "passed", "failed",
  "not_applicable"}; with logs_dir, every micro-batch's progress, the tracebacks and the
  result are written there (spark_kafka.json).
- CLI: `python compat/spark_kafka.py [build] [--target rayka|kafka] [--out f.json]`: one
  line per check, exit 1 when any failed; `build` only fetches the jars.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SPARK_DIR = os.path.join(ROOT, "compat", "spark")
POM = os.path.join(SPARK_DIR, "pom.xml")
JARS = os.path.join(SPARK_DIR, "build", "jars")
CONNECTOR = "spark-sql-kafka-0-10_2.12-3.5.7.jar"
PARTITIONS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
EPOCH_MS = 1_795_262_400_000            # fixed CreateTime timestamps for the batch check
MAX_OFFSETS_PER_TRIGGER = 2500
STREAM_DEADLINE_S = 420.0
PRODUCE_TIMEOUT_S = 120.0               # a record unacknowledged this long fails its check


_SPARK_RAY: dict = {}                   # the Ray (GCS address) this process ran Spark on


class SuiteError(Exception):
    """A check's failure with its reason."""


# -- jars --------------------------------------------------------------------------------------
def _pyspark_artifacts() -> set[str]:
    """Artifact names (version stripped) of the jars PySpark ships."""
    import pyspark
    names = set()
    for path in glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "*.jar")):
        names.add(_artifact(os.path.basename(path)))
    return names


def _artifact(jar: str) -> str:
    """'kafka-clients-3.4.1.jar' → 'kafka-clients', 'spark-sql-kafka-0-10_2.12-3.5.7.jar' →
    'spark-sql-kafka-0-10_2.12': the name up to the first '-' segment that starts like a
    version (digits, a dot, digits)."""
    parts = jar[:-4].split("-")
    for i, part in enumerate(parts):
        if i and re.match(r"\d+\.\d+", part):
            return "-".join(parts[:i])
    return jar[:-4]


def ensure_jars(quiet: bool = True) -> list[str]:
    """The connector's jars (absolute paths), fetched by Maven once per pom hash."""
    from compat.kafka.launcher import KafkaLaunchError, copy_dependencies
    try:
        copy_dependencies(POM, JARS, CONNECTOR, quiet=quiet)
    except KafkaLaunchError as exc:
        raise SuiteError(str(exc)) from None
    jars = sorted(glob.glob(os.path.join(JARS, "*.jar")))
    twice = sorted(j for j in map(os.path.basename, jars) if _artifact(j) in _pyspark_artifacts())
    if twice:
        raise SuiteError(f"{POM} brings jars PySpark already ships: {twice} (exclude them)")
    return jars


# -- Kafka side (librdkafka) --------------------------------------------------------------------
def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, names, timeout_s: float = 60.0) -> None:
    from confluent_kafka.admin import NewTopic
    admin = _admin(bootstrap)
    futures = admin.create_topics([NewTopic(n, PARTITIONS, 3, config=TOPIC_CONFIG)
                                   for n in names], operation_timeout=timeout_s)
    for f in futures.values():
        f.result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:             # every partition with a leader before anyone produces
        md = admin.list_topics(timeout=10)
        if all(n in md.topics and len(md.topics[n].partitions) == PARTITIONS and all(
                p.leader >= 0 for p in md.topics[n].partitions.values()) for n in names):
            return
        if time.monotonic() > deadline:
            raise SuiteError(f"topics {names} have no leader for every partition")
        time.sleep(0.3)     # poll interval while leaders are elected


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    return _admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[
        partition].leader


class Producer:
    """An idempotent acks=all librdkafka producer that keeps every delivery report."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer as P
        self.client_errors: list[str] = []     # librdkafka's own (error_cb): e.g. no PID
        self._p = P({"bootstrap.servers": bootstrap, "acks": "all",
                     "error_cb": lambda err: self.client_errors.append(str(err)),
                     "enable.idempotence": True, "linger.ms": 5,
                     "message.timeout.ms": int(PRODUCE_TIMEOUT_S * 1000)})
        self.delivered: list[tuple] = []        # (partition, offset, key, value, ts, headers)
        self.errors: list[str] = []

    def send(self, topic, key, value, timestamp=None, headers=None) -> None:
        def report(err, msg, key=key, value=value, headers=headers):
            if err is not None:
                self.errors.append(str(err))
            else:
                self.delivered.append((msg.partition(), msg.offset(), key, value,
                                       msg.timestamp()[1], headers))
        kw = {"on_delivery": report}
        if timestamp is not None:
            kw["timestamp"] = timestamp
        if headers is not None:
            kw["headers"] = headers
        while True:
            try:
                self._p.produce(topic, value=value, key=key, **kw)
                break
            except BufferError:
                self._p.poll(0.1)       # the local queue is full: let deliveries drain
        self._p.poll(0)

    def flush(self, timeout_s: float = PRODUCE_TIMEOUT_S + 30) -> None:
        seen = f"; the client's errors: {self.client_errors[-3:]}" if self.client_errors else ""
        if self._p.flush(timeout_s):
            raise SuiteError(f"records not acknowledged in {timeout_s} s{seen}")
        if self.errors:
            raise SuiteError(f"{len(self.errors)} records not delivered: {self.errors[:2]}{seen}")


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sk-{uuid.uuid4().hex[:6]}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, timeout_s: float = 120.0) -> list[tuple]:
    """Every record of `topic` up to its current end offsets: (partition, offset, key, value)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    ends = end_offsets(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sk-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    out: list[tuple] = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        pos = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout_s
        while any(pos[p] < ends[p] for p in pos):
            if time.monotonic() > deadline:
                raise SuiteError(f"{topic}: read {pos} of {ends} in {timeout_s} s")
            for m in c.consume(1000, timeout=1.0):
                if m.error():
                    continue            # e.g. partition EOF
                out.append((m.partition(), m.offset(), m.key(), m.value()))
                pos[m.partition()] = m.offset() + 1
    finally:
        c.close()
    return out


# -- Spark --------------------------------------------------------------------------------------
def start_spark_on_ray(jars: list[str]):
    """RayDP in the Ray this process has (or a local one); returns (spark, owns_ray)."""
    import ray
    owns_ray = not ray.is_initialized()
    if owns_ray:
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    gcs = ray.get_runtime_context().gcs_address
    if _SPARK_RAY.setdefault("gcs", gcs) != gcs:
        if owns_ray:
            ray.shutdown()
        raise SuiteError("this process already ran Spark on another Ray cluster: RayDP's "
                         "driver JVM cannot join a second one (NOTES.md); run each target in "
                         "a process of its own (python compat/spark_kafka.py --target ...)")
    from pipeline.spark import start_spark
    spark = start_spark(executors=1, executor_cores=1, executor_memory="1g", executor_cpu=0.5,
                        app_name="compat-spark-kafka",
                        configs={"spark.jars": ",".join(jars),
                                 "spark.sql.shuffle.partitions": "2",
                                 "spark.ui.showConsoleProgress": "false",
                                 "spark.task.maxFailures": "8"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark, owns_ray


class Progress:
    """Every micro-batch's progress of the queries of one check, by (runId, batchId)."""

    def __init__(self):
        self.batches: dict[tuple, dict] = {}

    def collect(self, query) -> None:
        for p in query.recentProgress:
            self.batches.setdefault((p["runId"], p["batchId"]), p)

    def with_rows(self, run_id: str | None = None) -> int:
        return sum(1 for (r, _), p in self.batches.items()
                   if p.get("numInputRows", 0) > 0 and run_id in (None, r))


def _end_offset(progress: dict, topic: str) -> dict[int, int]:
    for src in progress.get("sources", []):
        end = src.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict) and topic in end:
            return {int(p): int(o) for p, o in end[topic].items()}
    return {}


def wait_batches(query, progress: Progress, n: int, timeout_s: float) -> None:
    """Until `query` has committed n more micro-batches with rows."""
    want = progress.with_rows(query.runId) + n
    deadline = time.monotonic() + timeout_s
    while progress.with_rows(query.runId) < want:
        _alive(query)
        if time.monotonic() > deadline:
            raise SuiteError(f"{n} micro-batches not committed in {timeout_s} s")
        time.sleep(0.3)         # poll interval of the query's progress
        progress.collect(query)


def wait_end(query, progress: Progress, topic: str, ends: dict[int, int],
             timeout_s: float) -> None:
    """Until the query's progress shows `ends` (the input's end offsets) as its end offsets."""
    deadline = time.monotonic() + timeout_s
    seen: dict[int, int] = {}
    while True:
        _alive(query)
        progress.collect(query)
        for p in query.recentProgress[-3:]:
            seen = _end_offset(p, topic) or seen
        if all(seen.get(p, -1) >= o for p, o in ends.items()):
            return
        if time.monotonic() > deadline:
            raise SuiteError(f"end offsets {ends} not reached in {timeout_s} s "
                             f"(progress shows {seen})")
        time.sleep(0.3)         # poll interval of the query's progress


def mid_batch(spark, query, timeout_s: float = 30.0) -> str:
    """Until a micro-batch of `query` is half-written: its write stage has finished some of
    its tasks (those partitions' output is in the sink) and not all; says so. "" when none
    was seen within timeout_s (the act then happens between micro-batches)."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _alive(query)
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None and 0 < info.numCompletedTasks < info.numTasks:
                return (f", during a micro-batch ({info.numCompletedTasks} of "
                        f"{info.numTasks} tasks done)")
        time.sleep(0.02)        # poll interval: a task takes ~0.5 s here
    return ""


def _alive(query) -> None:
    if not query.isActive:
        exc = query.exception()
        raise SuiteError(f"the query stopped: {exc.desc if exc is not None else 'no error'}"[:800])


def start_query(spark, bootstrap: str, source: str, sink: str, checkpoint: str, name: str):
    from pyspark.sql import functions as F
    df = (spark.readStream.format("kafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source)
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", MAX_OFFSETS_PER_TRIGGER)
          .option("failOnDataLoss", "true")
          .load())
    out = df.select(F.col("key"), F.upper(F.col("value").cast("string")).alias("value"))
    return (out.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.acks", "all")
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
            .queryName(name)
            .trigger(processingTime="1 second")
            .start())


# -- the records --------------------------------------------------------------------------------
def stream_records(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    """n keyed records: key k0000..k0499, value 'rec-<seq>-<lower-case letters>' (unique)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [(b"k%04d" % rng.randrange(500),
             b"rec-%06d-%s" % (i, "".join(rng.choices(letters, k=rng.randint(4, 24))).encode()))
            for i in range(n)]


def _compare(expected: collections.Counter, got: collections.Counter) -> dict:
    missing = expected - got
    extra = got - expected
    foreign = sum(c for rec, c in extra.items() if rec not in expected)
    return {"missing": sum(missing.values()), "duplicates": sum(extra.values()) - foreign,
            "foreign": foreign, "missing_sample": [repr(r) for r in list(missing)[:3]],
            "foreign_sample": [repr(r) for r in list(extra) if r not in expected][:3]}


# -- checks -------------------------------------------------------------------------------------
def check_batch_read(spark, bootstrap: str, run: str) -> dict:
    from pyspark.sql import functions as F
    topic = f"sk-batch-{run}"
    create_topics(bootstrap, [topic])
    producer = Producer(bootstrap)
    for i in range(300):
        headers = [("seq", b"%d" % i), ("tag", b"a"), ("tag", b"b")]
        if i % 7 == 0:
            headers.append(("none", None))
        producer.send(topic, None if i % 10 == 0 else b"key-%d" % (i % 13),
                      b"value-%d" % i, timestamp=EPOCH_MS + i * 1000, headers=headers)
    producer.flush()
    ends = end_offsets(bootstrap, topic)
    # partition 0: explicit both ends; 1: earliest → latest; 2: explicit start → latest
    ranges = {0: (3, max(3, ends[0] - 4)), 1: (0, ends[1]), 2: (min(10, ends[2]), ends[2])}
    starting = {topic: {"0": ranges[0][0], "1": -2, "2": ranges[2][0]}}
    ending = {topic: {"0": ranges[0][1], "1": -1, "2": -1}}
    expected = sorted(
        (topic, p, o, k, v, ts, 0, [(hk, hv) for hk, hv in h])
        for p, o, k, v, ts, h in producer.delivered if ranges[p][0] <= o < ranges[p][1])
    df = (spark.read.format("kafka")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic)
          .option("startingOffsets", json.dumps(starting))
          .option("endingOffsets", json.dumps(ending))
          .option("includeHeaders", "true")
          .load())
    rows = df.select("topic", "partition", "offset", "key", "value",
                     F.expr("unix_millis(timestamp)").alias("ts"), "timestampType",
                     "headers").collect()
    got = sorted(
        (r.topic, r.partition, r.offset, None if r.key is None else bytes(r.key),
         bytes(r.value), r.ts, r.timestampType,
         [(h.key, None if h.value is None else bytes(h.value)) for h in (r.headers or [])])
        for r in rows)
    result = {"records": len(expected), "read": len(got),
              "ranges": {str(p): list(r) for p, r in ranges.items()}}
    if got != expected:
        wrong = [(g, e) for g, e in zip(got, expected) if g != e][:2]
        result["why"] = (f"read {len(got)} records, expected {len(expected)}; first differences "
                         f"(got, expected): {wrong}")[:800]
    return result


def check_stream(spark, target, run: str, n: int, seed: int, faults: bool,
                 workdir: str, progress_log: list) -> dict:
    bootstrap = target.bootstrap_servers()
    kind = "faults" if faults else "exact"
    source, sink = f"sk-in-{kind}-{run}", f"sk-out-{kind}-{run}"
    create_topics(bootstrap, [source, sink])
    records = stream_records(n, seed)
    first, second = records[: n // 2], records[n // 2:]
    producer = Producer(bootstrap)
    for k, v in first:
        producer.send(source, k, v)
    producer.flush()
    checkpoint = os.path.join(workdir, f"checkpoint-{kind}")
    progress = Progress()
    events: list[str] = []
    produced_late = threading.Event()

    def produce_late():     # the second half while the query runs, paced over ~10 s
        try:
            for i, (k, v) in enumerate(second):
                producer.send(source, k, v)
                if i % 500 == 499:
                    time.sleep(0.15)
            producer.flush()
        except Exception as exc:      # reported by the caller
            events.append(f"late produce failed: {exc}")
        finally:
            produced_late.set()

    t0 = time.monotonic()
    query = start_query(spark, bootstrap, source, sink, checkpoint, f"sk-{kind}-{run}")
    late = threading.Thread(target=produce_late, daemon=True)
    restarts = 0
    try:
        wait_batches(query, progress, 2, 180)
        late.start()
        if faults:
            victim = leader_of(bootstrap, source, 0)
            during = mid_batch(spark, query)
            events.append(f"killed broker {victim} (leader of {source}-0) after "
                          f"{progress.with_rows()} micro-batches{during}")
            target.kill_broker(victim)
            wait_batches(query, progress, 2, 180)
            during = mid_batch(spark, query)
            progress.collect(query)
            events.append(f"query stopped after {progress.with_rows()} micro-batches{during}, "
                          f"restarted from its checkpoint")
            query.stop()
            progress.collect(query)
            query = start_query(spark, bootstrap, source, sink, checkpoint, f"sk-{kind}-{run}")
            restarts += 1
        late.join(STREAM_DEADLINE_S)
        if not produced_late.is_set() or any("failed" in e for e in events):
            raise SuiteError(f"the late input was not produced: {events}")
        producer.flush()
        ends = end_offsets(bootstrap, source)
        wait_end(query, progress, source, ends,
                 max(30.0, STREAM_DEADLINE_S - (time.monotonic() - t0)))
        seconds = time.monotonic() - t0
    finally:
        progress.collect(query)
        query.stop()
        progress_log.extend({"check": kind, **p} for p in progress.batches.values())
    if faults:
        target.wait_all_up(180)
    expected = collections.Counter((k, v.upper()) for k, v in records)
    got = collections.Counter((k, v) for _, _, k, v in read_all(bootstrap, sink))
    cmp = _compare(expected, got)
    result = {"records": n, "stream_seconds": round(seconds, 1),
              "micro_batches": progress.with_rows(), "duplicates": cmp["duplicates"],
              "output_records": sum(got.values()), "input_end_offsets": ends}
    if faults:
        result.update(query_restarts=restarts, events=events)
        if cmp["missing"] or cmp["foreign"]:
            result["why"] = (f"{cmp['missing']} input records missing from the output "
                             f"{cmp['missing_sample']}, {cmp['foreign']} foreign output "
                             f"records {cmp['foreign_sample']}")
    elif got != expected:
        result["why"] = (f"output differs from the input: {cmp['missing']} missing "
                         f"{cmp['missing_sample']}, {cmp['duplicates']} duplicated, "
                         f"{cmp['foreign']} foreign {cmp['foreign_sample']}")
    return result


CHECKS = ("batch read offsets+headers", "stream exact without faults",
          "stream through broker kill + query restart (no loss)")


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:800]


def run_spark_kafka(target, logs_dir: str | None = None, records: int = 30_000,
                    seed: int = 7) -> dict:
    """The suite against `target` (compat/targets.py): {"suite", "target", "seconds",
    "checks": {name: {"verdict", "why"?, "seconds", ...figures}}, "passed", "failed",
    "not_applicable"}."""
    t_suite = time.monotonic()
    checks: dict[str, dict] = {}
    traces: dict[str, str] = {}
    progress_log: list = []
    run = uuid.uuid4().hex[:6]
    workdir = tempfile.mkdtemp(prefix="spark-kafka-")
    spark = None
    owns_ray = False
    try:
        t = time.monotonic()
        target.wait_all_up(120)
        jars = ensure_jars()
        spark, owns_ray = start_spark_on_ray(jars)
        print(f"spark-kafka: Spark on Ray up in {time.monotonic() - t:.1f} s "
              f"({len(jars)} connector jars)", flush=True)
        steps = [
            (CHECKS[0], lambda: check_batch_read(spark, target.bootstrap_servers(), run)),
            (CHECKS[1], lambda: check_stream(spark, target, run, records, seed, False,
                                             workdir, progress_log)),
            (CHECKS[2], lambda: check_stream(spark, target, run, records, seed + 1, True,
                                             workdir, progress_log)),
        ]
        for name, step in steps:
            t = time.monotonic()
            try:
                result = step()
            except Exception as exc:
                result = {"why": _one_line(exc)}
                traces[name] = traceback.format_exc()
            result["verdict"] = "failed" if "why" in result else "passed"
            result["seconds"] = round(time.monotonic() - t, 1)
            checks[name] = result
            _print(target, name, result)
    except Exception as exc:          # the jars, the cluster or Spark itself
        why = _one_line(exc)
        traces["setup"] = traceback.format_exc()
        for name in CHECKS:
            checks.setdefault(name, {"verdict": "failed", "why": why, "seconds": 0.0})
        print(f"spark-kafka [{getattr(target, 'name', '?')}]: failed before the checks: {why}",
              flush=True)
    finally:
        if spark is not None:
            from pipeline.spark import stop_spark
            stop_spark()
        if owns_ray:
            import ray
            ray.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    n = collections.Counter(c["verdict"] for c in checks.values())
    out = {"suite": "spark-kafka", "target": getattr(target, "name", "?"),
           "seconds": round(time.monotonic() - t_suite, 1), "checks": checks,
           "passed": n["passed"], "failed": n["failed"],
           "not_applicable": n["not applicable"]}
    if logs_dir:
        os.makedirs(logs_dir, exist_ok=True)
        with open(os.path.join(logs_dir, "spark_kafka.json"), "w") as f:
            json.dump({**out, "tracebacks": traces, "progress": progress_log}, f, indent=1,
                      default=str)
    return out


def _print(target, name: str, r: dict) -> None:
    figures = ", ".join(f"{k} {r[k]}" for k in ("records", "seconds", "stream_seconds",
                                                "micro_batches", "duplicates") if k in r)
    print(f"spark-kafka [{getattr(target, 'name', '?')}] {name}: {r['verdict']} ({figures})"
          + (f": {r['why']}" if r["verdict"] == "failed" else ""), flush=True)
    for e in r.get("events", []):
        print(f"    {e}", flush=True)


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", nargs="?", choices=("run", "build"), default="run",
                   help="build: only fetch the connector's jars (mvn, once per pom hash)")
    p.add_argument("--target", default="rayka", help="rayka or kafka (Apache Kafka 3.9.2)")
    p.add_argument("--records", type=int, default=30_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--logs", help="a directory for spark_kafka.json (progress, tracebacks)")
    p.add_argument("--out", help="write the result as JSON here")
    args = p.parse_args(argv)
    if args.command == "build":
        print("\n".join(ensure_jars(quiet=False)))
        return 0
    from compat.targets import open_target
    with open_target(args.target) as target:
        result = run_spark_kafka(target, args.logs, args.records, args.seed)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2, default=str)
    print(f"spark-kafka [{result['target']}]: {result['passed']} passed, "
          f"{result['failed']} failed ({result['seconds']} s)")
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
