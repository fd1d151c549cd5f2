"""`make compat`: peer suites nobody here wrote, against a fresh rayka cluster.

Rules:
- The suites run in SUITES order (`--suites` picks some), each against a compat.targets
  Target: rayka (default) or, with `--target kafka`, Apache Kafka 3.9.2 on this machine in
  ZooKeeper mode (compat/kafka/launcher.py), to see whether a check that fails on rayka
  fails on Kafka too. Kafka's own world has a module per suite (SUITE_MODULES: the Java
  client 3.9 and 4.x, Kafka Streams, Kafka Connect and MirrorMaker 2, Spark's Kafka
  connector on RayDP, franz-go's kgo tests, sarama; each states its rules), and Kafka's CLI
  tools are compared with Kafka itself (compat/kafka/tools_check.py compare). At the end
  one table: per suite passed, failed, not applicable (with the reason) and skipped, then
  every check that did not pass and why; --out keeps it as JSON after each suite. Exit 1
  when any check failed.
- One cluster for the whole run (real Ray, the embedded ZooKeeper, 3 brokers), configured as
  librdkafka's CI "default" scenario: topic auto-creation on, num.partitions 4,
  default.replication.factor 3, Kafka's AclAuthorizer allowing what no ACL names. A second
  cluster without auto-creation serves the "noautocreate" scenario's tests, and a "rack"
  cluster (each broker's broker.rack RACK<id>, Kafka's RackAwareReplicaSelector) and a
  "sasl" cluster (clients authenticate with SCRAM-SHA-512 on its SASL_PLAINTEXT listener,
  sessions of 10 s to re-authenticate) the tests `CLUSTER_OF` maps to them; each such
  cluster is started only when a test chosen needs it. Each is shut down at the end; every process it started is stopped by pid.
- librdkafka's own integration tests, built from the pinned source snapshot
  (compat/librdkafka-v2.15.0.tar.gz; the Makefile builds it): by default every broker test
  of its test list (`broker_tests`), or those named with --tests; run ONE AT A TIME as its
  tests/README says, with a test.conf naming the cluster's bootstrap servers. The verdict
  of each is read from its output ("Test <name> PASSED" / "TEST FAILURE" / a skip), never
  from the runner's exit code (this build aborts at exit after printing its verdict).
  Tests that drive Kafka's Java tools get a KAFKA_PATH of Apache Kafka 3.9's own jars and
  scripts (compat/kafka/launcher.py, from Maven Central); a test that cannot apply to rayka
  (NOT_APPLICABLE) is listed as such, with the reason. `--group-protocol consumer` runs
  them with librdkafka's TEST_CONSUMER_GROUP_PROTOCOL=consumer (its members speak KIP-848)
  and as against Kafka 4.2.0 (-V 4.2.0, and the tests up to that version chosen: its
  share-consumer tests 0170-0190 among them).
- quixstreams (in compat's own venv: it pins an older confluent-kafka) runs a stateful word
  count with processing_guarantee="exactly-once" (compat/quix_wordcount.py), is killed
  (SIGKILL) once it has committed some output, and restarted: read_committed, every
  word's counts in the output are exactly 1, 2, ..., n, n its true count (no duplicate, no
  gap, nothing lost).
- Burrow (Debian's `burrow`, --burrow) reports a group's lag per partition from rayka's
  __consumer_offsets and end offsets (compat/burrow_lag.py).
- kafkajs (2.2.4 from npm, --kafkajs; compat/kafkajs/check.js under node, installed by the
  Makefile's `npm ci`): admin createTopics / fetchTopicMetadata / describeCluster /
  fetchOffsets / fetchTopicOffsets / deleteTopics, an idempotent producer (acks -1, part
  GZIP), a consumer group reading every message exactly once with key, value, headers and
  timestamp intact, committed offsets equal to the end offsets, a second member's
  rebalance splitting the partitions, and a transactional producer (commit, abort, commit,
  with sendOffsets) read back with readUncommitted false and true. Its verdict is its exit
  code and the JSON line it prints; "not run" only without node or the installed kafkajs.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# librdkafka tests that cannot run against rayka, and why. Those that drive Kafka's Java tools
# (kafka-topics.sh, kafka-acls.sh, the Java TransactionProducerCli) get a real KAFKA_PATH:
# Apache Kafka's own jars and scripts from Maven Central (compat/kafka/launcher.py).
NOT_APPLICABLE = {"0016_client_swname": "reads the client names a Kafka broker publishes as JMX "
                                        "metrics (BROKER_JMX_PORT_2): rayka's brokers are not "
                                        "JVMs"}
# The cluster a test needs when its scenario (test.c) does not say it: the test still runs
# with its own scenario (-s), against this cluster.
CLUSTER_OF = {
    # names no scenario, yet skips itself unless the brokers report three broker.rack
    # values; its comments (0101-fetch-from-follower.cpp) want broker.rack per broker and
    # the RackAwareReplicaSelector, client.rack being RACK<id of a follower>
    "0101_fetch_from_follower": "rack",
    # need a SASL user and password (0135, 0142) or the OAUTHBEARER mechanism (0126): they
    # skip themselves otherwise; librdkafka's CI runs them on a SASL cluster
    "0126_oauthbearer_oidc": "sasl", "0135_sasl_credentials": "sasl",
    "0142_reauthentication": "sasl",
}
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BROKERS = (1, 2, 3)
SERVED = (3, 8, 0, 0)           # the broker version rayka answers as (-V)
# with --group-protocol consumer the suite runs as against Kafka 4.2 (its KIP-848 paths and
# its KIP-932 share-consumer tests)
AS_VERSION = {"classic": SERVED, "consumer": (4, 2, 0, 0)}
TEST_TIMEOUT_S = 900
LOGS = os.environ.get("RAYKA_COMPAT_LOGS")       # a directory: each test's output kept there
_ENTRY = re.compile(r"_TEST\(\s*(\w+)\s*,(.*?)\)\s*,\s*(?=_TEST\(|\{|$)", re.S)


def broker_tests(tests_dir: str, served: tuple = SERVED) -> list[tuple[str, str]]:
    """librdkafka's broker tests, from its test list (tests/test.c): every `_TEST(...)` entry
    that is not local (TEST_F_LOCAL: no broker), manual, socket-emulated (TEST_F_SOCKEM: this
    build runs with -E) or a known issue of librdkafka's own, and whose minimum broker
    version (TEST_BRKVER) rayka serves; with the scenario it runs in ("default", or the
    first it names: "noautocreate" needs a cluster without topic auto-creation). In the
    order of the list."""
    with open(os.path.join(tests_dir, "test.c")) as f:
        text = f.read()
    table = text[text.index("struct test tests[]"):]
    table = table[:table.index("\n};")]
    out = []
    for name, rest in _ENTRY.findall(table + ",{"):
        if name == "0000_unittests" or any(flag in rest for flag in (
                "TEST_F_LOCAL", "TEST_F_MANUAL", "TEST_F_SOCKEM", "TEST_F_KNOWN_ISSUE")):
            continue
        m = re.search(r"TEST_BRKVER\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)",
                      rest)
        if m and tuple(int(x) for x in m.groups()) > served:
            continue
        sc = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
        scenarios = sc.group(1).split(",") if sc else ["default"]
        out.append((name, "default" if "default" in scenarios else scenarios[0]))
    return out


BROKER_USER, BROKER_PASSWORD = "broker", "compat-broker-secret"
# the SASL scenario's client (librdkafka's CI gives its SASL tests a user and a password)
CLIENT_USER, CLIENT_PASSWORD = "librdkafka", "compat-client-secret"
SASL_CONF = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": CLIENT_USER, "sasl.password": CLIENT_PASSWORD}


def start_cluster(kind: str = "default"):
    """librdkafka's CI cluster: an ACL authorizer allowing what no ACL names (the tests'
    clients are User:ANONYMOUS on PLAINTEXT: 0115 and 0119 deny them topics and groups with
    kafka-acls.sh), the brokers replicating over a SASL_PLAINTEXT listener of their own as
    the SCRAM super user `broker` (0081_admin puts ACLs on the cluster resource, which
    would refuse anonymous followers); without topic auto-creation for "noautocreate"; for
    "rack" broker.rack=RACK<id> on each broker and the rack-aware replica selector (fetch
    from follower, KIP-392); for "sasl" a second SCRAM super user `librdkafka` whom the SASL
    tests connect as, on the SASL_PLAINTEXT listener, whose sessions last 10 s
    (connections.max.reauth.ms: clients re-authenticate, KIP-368)."""
    import ray
    import rayka
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    extra, per_broker = {}, None
    supers = [f"User:{BROKER_USER}"]
    if kind == "rack":
        extra["replica.selector.class"] = RACK_AWARE
        per_broker = {b: {"broker.rack": f"RACK{b}"} for b in BROKERS}
    if kind == "sasl":
        supers.append(f"User:{CLIENT_USER}")
        # 0142_reauthentication runs only when every broker has a session lifetime
        extra["connections.max.reauth.ms"] = 10000
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";')
    cluster = rayka.start_local(
        name=f"compat{uuid.uuid4().hex[:6]}", brokers=len(BROKERS), controllers=1,
        replica_lag_time_max_ms=10000, num_partitions=4, default_replication_factor=3,
        include_dashboard=False, auto_create_topics_enable=kind != "noautocreate",
        broker_configs=per_broker, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
           "super.users": ";".join(supers), "allow.everyone.if.no.acl.found": "true",
           "inter.broker.listener.name": "SASL_PLAINTEXT",
           "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
           "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
           # as librdkafka CI clusters are (its cluster_testing.py): share tests lock 3 s
           "group.share.min.record.lock.duration.ms": 1000, **extra})
    cluster.admin().add_user(BROKER_USER, BROKER_PASSWORD, mechanisms=["SCRAM-SHA-512"])
    if kind == "sasl":
        cluster.admin().add_user(CLIENT_USER, CLIENT_PASSWORD, mechanisms=["SCRAM-SHA-512"])
    return cluster


def kafka_properties(kind: str = "default") -> tuple[dict, dict | None]:
    """The same scenarios on Apache Kafka 3.9 (compat/targets.py KafkaTarget): (server
    properties, per-broker properties). Kafka's own default initial rebalance delay (3 s),
    as rayka's: librdkafka's rebalance-count tests (0113) assume it."""
    props = {"group.initial.rebalance.delay.ms": 3000}
    per_broker = None
    if kind == "noautocreate":
        props["auto.create.topics.enable"] = "false"
    if kind == "rack":
        props["replica.selector.class"] = RACK_AWARE
        per_broker = {b: {"broker.rack": f"RACK{b}"} for b in BROKERS}
    if kind == "sasl":
        props["connections.max.reauth.ms"] = 10000
    return props, per_broker


def open_cluster(target: str, kind: str = "default"):
    """A compat.targets Target of the scenario `kind` on rayka or on Kafka 3.9."""
    from compat.targets import KafkaTarget, RaykaTarget
    if target == "rayka":
        return RaykaTarget(kind=kind)
    props, per_broker = kafka_properties(kind)
    # a SASL_PLAINTEXT listener on every kind, as rayka's compat clusters have
    return KafkaTarget(properties=props, broker_properties=per_broker,
                       scram_user=(CLIENT_USER, CLIENT_PASSWORD))


def kafka_path() -> str:
    """A KAFKA_PATH: bin/ (Kafka 3.9's scripts, kafka-run-class.sh too), libs/ (its jars, from
    Maven Central, fetched once) and config/, as librdkafka's tests expect of a Kafka
    distribution."""
    from compat.kafka.launcher import make_home
    return str(make_home(tempfile.mkdtemp(prefix="kafka-path-")))


# -- librdkafka --------------------------------------------------------------------------------
def run_librdkafka(tests_dir: str, bootstrap: str, names, quick: bool,
                   scenario: str = "default", conf_extra: dict | None = None,
                   group_protocol: str = "classic") -> dict[str, dict]:
    tests_dir = os.path.abspath(tests_dir)
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write(f"metadata.broker.list={bootstrap}\ntest.timeout.multiplier=2\n"
               + "".join(f"{k}={v}\n" for k, v in (conf_extra or {}).items()))
    conf.close()
    env = dict(os.environ, RDKAFKA_TEST_CONF=conf.name, KAFKA_PATH=kafka_path(),
               BROKERS=bootstrap, TEST_CONSUMER_GROUP_PROTOCOL=group_protocol,
               LD_LIBRARY_PATH=os.path.join(tests_dir, "..", "src") + ":"
               + os.path.join(tests_dir, "..", "src-cpp"))
    out = {}
    for name in names:
        if name in NOT_APPLICABLE:
            out[name] = {"verdict": "not applicable", "why": NOT_APPLICABLE[name]}
            print(f"librdkafka {name}: not applicable ({NOT_APPLICABLE[name]})", flush=True)
            continue
        t0 = time.monotonic()
        version = ".".join(map(str, AS_VERSION[group_protocol][:3]))
        args = ["./test-runner", "-E", "-V", version, "-p1", "-s", scenario] + (
            ["-Q"] if quick else [])
        try:
            proc = subprocess.run(args, cwd=tests_dir, env=dict(env, TESTS=name),
                                  capture_output=True, text=True, timeout=TEST_TIMEOUT_S)
            text = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            text = (exc.stdout or "") + (exc.stderr or "") + "\nTIMEOUT"
        if LOGS:
            os.makedirs(LOGS, exist_ok=True)
            with open(os.path.join(LOGS, f"{name}.log"), "w") as f:
                f.write(text)
        verdict = _verdict(name, text)
        out[name] = {"verdict": verdict, "seconds": round(time.monotonic() - t0, 1)}
        if verdict == "failed":
            out[name]["why"] = _why(text)
        print(f"librdkafka {name}: {verdict} ({out[name]['seconds']} s)"
              + (f": {out[name]['why']}" if verdict == "failed" else ""), flush=True)
    os.unlink(conf.name)
    return out


def _verdict(name: str, text: str) -> str:
    if re.search(rf"Test {re.escape(name)}\S* PASSED", text) and "TEST FAILURE" not in text:
        return "passed"
    # a skip is the runner's own word for it ("SKIPPING TEST", "Test ... SKIPPED"), not a
    # test's log line (the consumer protocol's "Skipping setting forbidden configuration")
    if "TEST FAILURE" not in text and re.search(r"SKIPPING TEST|Test \S+ SKIPPED", text):
        return "skipped"
    return "failed"


def _why(text: str) -> str:
    lines = [ln for ln in text.splitlines() if "failed at" in ln or "TIMEOUT" in ln]
    after = text.split("failed at", 1)[-1].splitlines()[1:3] if "failed at" in text else []
    why = re.sub(r"\x1b\[[0-9;]*m", "", " ".join((lines[:1] + after))).strip()
    return (why or text.strip().splitlines()[-1] if text.strip() else "no output")[:300]


# -- quixstreams -------------------------------------------------------------------------------
def run_quix(cluster, python: str, sentences: int = 600) -> dict:
    admin = cluster.admin()
    source, sink = f"wc-in-{uuid.uuid4().hex[:6]}", f"wc-out-{uuid.uuid4().hex[:6]}"
    admin.create_topic(source, 3, 3, {"min.insync.replicas": 2})
    admin.create_topic(sink, 3, 3, {"min.insync.replicas": 2})
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(40)]
    lines = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 8)))
             for _ in range(sentences)]
    truth = collections.Counter(w for line in lines for w in line.split())
    producer = cluster.producer(acks="all")
    producer.send_batch(source, [line.encode() for line in lines]).result(120)
    producer.close()
    app = os.path.join(ROOT, "compat", "quix_wordcount.py")
    bootstrap = cluster.bootstrap_servers()
    state = tempfile.mkdtemp(prefix="quix-state-")
    # first run: killed without warning once some of its output is committed
    first = subprocess.Popen([python, app, bootstrap, source, sink, state, "30"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and first.poll() is None:
        if len(_read_committed(cluster, sink, 3, settle_s=0.0)) > 50:
            break
        time.sleep(0.5)         # poll interval while the app starts and commits
    killed = first.poll() is None
    if killed:
        os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    # second run: to the end (stops 10 s after its input ran out)
    second = subprocess.run([python, app, bootstrap, source, sink, state, "10"],
                            capture_output=True, text=True, timeout=600)
    outputs = _read_committed(cluster, sink, 3)
    seen: dict[str, list[int]] = collections.defaultdict(list)
    for value in outputs:
        item = json.loads(value)
        seen[item["word"]].append(item["count"])
    exact = {w: seen.get(w, []) == list(range(1, n + 1)) for w, n in truth.items()}
    bad = {w: (truth[w], seen.get(w, [])[-5:]) for w, ok in exact.items() if not ok}
    verdict = "passed" if not bad and second.returncode == 0 else "failed"
    result = {"verdict": verdict, "words": len(truth), "outputs": len(outputs),
              "killed_mid_run": killed, "wrong_counts": dict(list(bad.items())[:5])}
    if second.returncode:
        result["why"] = second.stderr[-500:]
    print(f"quixstreams exactly-once word count: {verdict} ({len(outputs)} outputs, "
          f"{len(truth)} words, first run killed: {killed})", flush=True)
    return result


# -- kafkajs -----------------------------------------------------------------------------------
KAFKAJS_DIR = os.path.join(ROOT, "compat", "kafkajs")
KAFKAJS_TIMEOUT_S = 900


def run_kafkajs(cluster, node: str = "node") -> dict:
    """compat/kafkajs/check.js (kafkajs 2.2.4, installed by the Makefile's `npm ci`) against
    the cluster: admin, an idempotent producer with GZIP, a consumer group and its rebalance,
    committed offsets, transactions under read_committed. Its verdict is its exit code and
    the JSON line it prints last; "not run" only when node or the installed kafkajs is
    missing."""
    node_bin = shutil.which(node)
    if not node_bin or not os.path.isdir(os.path.join(KAFKAJS_DIR, "node_modules", "kafkajs")):
        why = ("no node on PATH" if not node_bin else
               "kafkajs not installed: run `npm ci` in compat/kafkajs (make compat does)")
        print(f"kafkajs: not run ({why})", flush=True)
        return {"verdict": "not run", "why": why}
    t0 = time.monotonic()
    try:
        proc = subprocess.run([node_bin, os.path.join(KAFKAJS_DIR, "check.js"),
                               cluster.bootstrap_servers()], cwd=KAFKAJS_DIR,
                              capture_output=True, text=True, timeout=KAFKAJS_TIMEOUT_S)
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = (x.decode(errors="replace") if isinstance(x, bytes) else x or ""
                          for x in (exc.stdout, exc.stderr))
        stderr, code = stderr + "\nTIMEOUT", None
    if LOGS:
        os.makedirs(LOGS, exist_ok=True)
        with open(os.path.join(LOGS, "kafkajs.log"), "w") as f:
            f.write(stdout + stderr)
    report: dict = {}
    for line in reversed(stdout.strip().splitlines()):
        try:
            report = json.loads(line)
            break
        except ValueError:
            continue
    verdict = "passed" if code == 0 and report.get("ok") is True else "failed"
    result = {"verdict": verdict, "seconds": round(time.monotonic() - t0, 1), **{
        k: v for k, v in report.items() if k not in ("ok", "seconds")}}
    if verdict == "failed":
        result["why"] = (report.get("error") or
                         (f"timed out after {KAFKAJS_TIMEOUT_S} s" if code is None else
                          f"exit code {code}: {stderr.strip()[-300:]}"))
    print(f"kafkajs: {verdict} ({result['seconds']} s)" + (
        f": {result['why']}" if verdict == "failed" else
        f" ({report.get('messages')} messages, rebalance {report.get('rebalance')})"),
        flush=True)
    return result


def _read_committed(cluster, topic: str, partitions: int, settle_s: float = 3.0) -> list:
    consumer = cluster.consumer(isolation_level="read_committed")
    consumer.assign([(topic, p) for p in range(partitions)])
    got, last = [], time.monotonic()
    while True:
        records = consumer.poll(timeout_ms=300)
        got += [r.value for r in records]
        if records:
            last = time.monotonic()
        elif time.monotonic() - last >= settle_s:
            break
    consumer.close()
    return got


# -- the suites and the table -------------------------------------------------------------------
# In the order they run. Each takes a compat.targets Target (rayka's is compat's default cluster,
# shared); those marked rayka-only use rayka's own Python API beside the Kafka client under test.
SUITES = ("librdkafka", "java-client", "kafka-tools", "kafka-streams", "kafka-connect",
          "spark-kafka", "franz-go", "sarama", "kafkajs", "quixstreams", "burrow")
# the suites of a module of their own: run_<suite>(target, logs_dir) -> their result
SUITE_MODULES = {"java-client": ("compat.java_client", "run_java_client"),
                 "kafka-streams": ("compat.kafka_streams", "run_kafka_streams"),
                 "kafka-connect": ("compat.kafka_connect", "run_kafka_connect"),
                 "spark-kafka": ("compat.spark_kafka", "run_spark_kafka"),
                 "franz-go": ("compat.go_clients", "run_franz_go"),
                 "sarama": ("compat.go_clients", "run_sarama")}
RAYKA_ONLY = {"quixstreams": "fills and reads its topics through rayka's Python API",
              "burrow": "Burrow reads rayka's ZooKeeper for its own coordination",
              "kafka-tools": "compares rayka with Kafka itself (make kafka-tools runs both)"}


def run_kafka_tools() -> dict:
    """compat/kafka/tools_check.py compare: 105 operator commands against rayka, then against
    Kafka 3.9 (each cluster its own, one at a time). A command that fails on both is listed
    as failing the same way on Kafka, not as a rayka failure."""
    out = os.path.join(ROOT, "compat", "kafka", "build", "tools_check_results.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t0 = time.monotonic()
    subprocess.run([sys.executable, os.path.join(ROOT, "compat", "kafka", "tools_check.py"),
                    "compare", "--out", out], cwd=ROOT, timeout=3600,
                   stdout=subprocess.DEVNULL if not LOGS else None)
    with open(out) as f:
        rows = json.load(f)["table"]
    checks = {}
    for r in rows:
        name = f"{r['tool']} | {r['case']}"
        if r["rayka_ok"]:
            checks[name] = {"verdict": "passed", "same_shape": r["same_shape"]}
        elif r["kafka_ok"] is False:
            checks[name] = {"verdict": "not applicable",
                            "why": f"fails on Kafka 3.9 too: {r['kafka_why']}"}
        else:
            checks[name] = {"verdict": "failed", "why": r["rayka_why"]}
    return _suite("kafka-tools", "rayka", checks, time.monotonic() - t0,
                  different_shape=sum(not r["same_shape"] for r in rows))


def _suite(name: str, target: str, checks: dict, seconds: float, **figures) -> dict:
    count = collections.Counter(c["verdict"] for c in checks.values())
    return {"suite": name, "target": target, "seconds": round(seconds, 1), "checks": checks,
            "passed": count["passed"], "failed": count["failed"],
            "not_applicable": count["not applicable"], "skipped": count["skipped"], **figures}


def as_suite(name: str, target: str, result: dict) -> dict:
    """Any suite's result in the table's shape: librdkafka's {test: verdict}, the single-check
    suites' {verdict, why}, or a suite module's own {checks: ...}."""
    def check(r: dict) -> dict:     # a suite that could not run (not installed) is skipped
        return dict(r, verdict="skipped") if r["verdict"] == "not run" else r

    if "checks" in result:
        return result
    if "verdict" in result:
        return _suite(name, target, {name: check(result)}, result.get("seconds", 0.0))
    return _suite(name, target, {t: check(r) for t, r in result.items()},
                  sum(r.get("seconds", 0.0) for r in result.values()))


def print_table(suites: list[dict], file=sys.stdout) -> None:
    """One line per suite: passed, failed, not applicable, skipped; then why, for every check
    that is not passed."""
    head = f"{'suite':15} {'target':10} {'passed':>6} {'failed':>6} {'n/a':>5} {'skipped':>7} {'seconds':>8}"
    print("\n" + head + "\n" + "-" * len(head), file=file)
    for r in suites:
        print(f"{r['suite']:15} {r['target']:10} {r['passed']:6} {r['failed']:6} "
              f"{r['not_applicable']:5} {r.get('skipped', 0):7} {r['seconds']:8.0f}", file=file)
    total = collections.Counter()
    for r in suites:
        total.update({k: r.get(k, 0) for k in ("passed", "failed", "not_applicable", "skipped")})
    print("-" * len(head) + f"\n{'all':26} {total['passed']:6} {total['failed']:6} "
          f"{total['not_applicable']:5} {total['skipped']:7}", file=file)
    for r in suites:
        for check, c in r["checks"].items():
            if c["verdict"] != "passed":
                print(f"  {r['suite']} {check}: {c['verdict']}"
                      + (f" ({c['why']})" if c.get("why") else ""), file=file)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("rayka", "kafka"), default="rayka",
                        help="run the suites against rayka (default) or Apache Kafka 3.9.2 on "
                             "this machine (compat/kafka/launcher.py): where a check fails on "
                             "rayka, does it fail on Kafka too?")
    parser.add_argument("--suites", default="all",
                        help=f"comma-separated, of: {', '.join(SUITES)}; or all")
    parser.add_argument("--librdkafka-tests", help="librdkafka's built tests/ directory")
    parser.add_argument("--tests", default="all",
                        help="comma-separated librdkafka test names, or all: every broker test")
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                        help="librdkafka's TEST_CONSUMER_GROUP_PROTOCOL; consumer (KIP-848) "
                             "also runs the suite as against Kafka 4.2.0 (-V), share tests too")
    parser.add_argument("--quick", action="store_true",
                        help="librdkafka's quick mode (-Q): a smoke only, its count proves little")
    parser.add_argument("--quix-python", help="the python of a venv with quixstreams")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    chosen_suites = SUITES if args.suites == "all" else tuple(
        x for x in args.suites.split(",") if x)
    unknown = set(chosen_suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {', '.join(sorted(unknown))}")
    target_name = "rayka" if args.target == "rayka" else "kafka-3.9"
    suites: list[dict] = []

    def record(name: str, result: dict) -> None:
        suites.append(as_suite(name, target_name, result))
        if args.out:        # after each suite: a long run that dies keeps what it measured
            with open(args.out, "w") as f:
                json.dump(suites, f, indent=2)

    def not_applicable(name: str, why: str) -> None:
        record(name, {"verdict": "not applicable", "why": why})

    target = open_cluster(args.target)
    try:
        for name in chosen_suites:
            print(f"== {name} on {target_name}", flush=True)
            if args.target == "kafka" and name in RAYKA_ONLY:
                not_applicable(name, RAYKA_ONLY[name])
            elif name == "librdkafka":
                if not args.librdkafka_tests:
                    not_applicable(name, "no --librdkafka-tests (make compat builds them)")
                    continue
                record(name, _librdkafka(args, target))
            elif name == "kafka-tools":
                record(name, run_kafka_tools())
            elif name in SUITE_MODULES:
                module, function = SUITE_MODULES[name]
                run = getattr(importlib.import_module(module), function)
                record(name, run(target, LOGS))
            elif name == "kafkajs":
                record(name, run_kafkajs(target))
            elif name == "quixstreams":
                if not args.quix_python:
                    not_applicable(name, "no --quix-python (make compat makes its venv)")
                    continue
                record(name, run_quix(target.cluster, args.quix_python))
            elif name == "burrow":
                from compat.burrow_lag import run_burrow
                record(name, run_burrow(target.cluster))
    finally:
        target.close()
    print_table(suites)
    if args.quick:
        print("librdkafka ran in quick mode (-Q): a smoke only; its full-mode count is the "
              "one that counts")
    return 1 if any(r["failed"] for r in suites) else 0


def _librdkafka(args, target) -> dict:
    """The chosen broker tests, each against the cluster of its scenario: the shared one for
    "default", a cluster of their own for the others (started when a chosen test needs it)."""
    listed = broker_tests(args.librdkafka_tests, AS_VERSION[args.group_protocol])
    chosen = listed if args.tests == "all" else [
        (t, dict(listed).get(t, "default")) for t in args.tests.split(",") if t]
    kinds = {t: CLUSTER_OF.get(t, sc) for t, sc in chosen}
    results = run_librdkafka(args.librdkafka_tests, target.bootstrap_servers(),
                             [t for t, _ in chosen if kinds[t] == "default"], args.quick,
                             group_protocol=args.group_protocol)
    for kind in sorted(set(kinds.values()) - {"default"}):
        other = open_cluster(args.target, kind)
        try:
            bootstrap, conf = other.bootstrap_servers(), None
            if kind == "sasl":
                bootstrap, conf = other.scram()[0], SASL_CONF
            for scenario in sorted({sc for t, sc in chosen if kinds[t] == kind}):
                results.update(run_librdkafka(
                    args.librdkafka_tests, bootstrap,
                    [t for t, sc in chosen if kinds[t] == kind and sc == scenario],
                    args.quick, scenario, conf, args.group_protocol))
        finally:
            other.close()
    return results


if __name__ == "__main__":
    sys.exit(main())
