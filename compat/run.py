"""`make compat`: peer suites nobody here wrote, against a fresh rayka cluster.

Rules:
- One cluster for the whole run (real Ray, the embedded ZooKeeper, 3 brokers), configured as
  librdkafka's CI "default" scenario: topic auto-creation on, num.partitions 4,
  default.replication.factor 3, Kafka's AclAuthorizer allowing what no ACL names. A second
  cluster without auto-creation serves the "noautocreate" scenario's tests, and a "rack"
  cluster (each broker's broker.rack RACK<id>, Kafka's RackAwareReplicaSelector) the
  tests `CLUSTER_OF` maps to it; each such cluster is started only when a test chosen
  needs it. Each is shut down at the end; every process it started is stopped by pid.
- librdkafka's own integration tests, built from the pinned source snapshot
  (compat/librdkafka-v2.15.0.tar.gz; the Makefile builds it): by default every broker test
  of its test list (`broker_tests`), or those named with --tests; run ONE AT A TIME as its
  tests/README says, with a test.conf naming the cluster's bootstrap servers. The verdict
  of each is read from its output ("Test <name> PASSED" / "TEST FAILURE" / a skip), never
  from the runner's exit code (this build aborts at exit after printing its verdict).
  Tests that drive Kafka's Java tools get a KAFKA_PATH of Apache Kafka 3.9's own jars and
  scripts (compat/kafka/launcher.py, from Maven Central); a test that cannot apply to rayka
  (NOT_APPLICABLE) is listed as such, with the reason.
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
- Prints passed / failed / skipped and writes them as JSON (--out).
"""

from __future__ import annotations

import argparse
import collections
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
}
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BROKERS = (1, 2, 3)
SERVED = (3, 8, 0, 0)           # the broker version rayka answers as (-V)
TEST_TIMEOUT_S = 900
LOGS = os.environ.get("RAYKA_COMPAT_LOGS")       # a directory: each test's output kept there
_ENTRY = re.compile(r"_TEST\(\s*(\w+)\s*,(.*?)\)\s*,\s*(?=_TEST\(|\{|$)", re.S)


def broker_tests(tests_dir: str) -> list[tuple[str, str]]:
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
        if m and tuple(int(x) for x in m.groups()) > SERVED:
            continue
        sc = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
        scenarios = sc.group(1).split(",") if sc else ["default"]
        out.append((name, "default" if "default" in scenarios else scenarios[0]))
    return out


BROKER_USER, BROKER_PASSWORD = "broker", "compat-broker-secret"


def start_cluster(kind: str = "default"):
    """librdkafka's CI cluster: an ACL authorizer allowing what no ACL names (the tests'
    clients are User:ANONYMOUS on PLAINTEXT: 0115 and 0119 deny them topics and groups with
    kafka-acls.sh), the brokers replicating over a SASL_PLAINTEXT listener of their own as
    the SCRAM super user `broker` (0081_admin puts ACLs on the cluster resource, which
    would refuse anonymous followers); without topic auto-creation for "noautocreate"; for
    "rack" broker.rack=RACK<id> on each broker and the rack-aware replica selector (fetch
    from follower, KIP-392)."""
    import ray
    import rayka
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    extra, per_broker = {}, None
    if kind == "rack":
        extra["replica.selector.class"] = RACK_AWARE
        per_broker = {b: {"broker.rack": f"RACK{b}"} for b in BROKERS}
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";')
    cluster = rayka.start_local(
        name=f"compat{uuid.uuid4().hex[:6]}", brokers=len(BROKERS), controllers=1,
        replica_lag_time_max_ms=10000, num_partitions=4, default_replication_factor=3,
        include_dashboard=False, auto_create_topics_enable=kind != "noautocreate",
        broker_configs=per_broker, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
           "super.users": f"User:{BROKER_USER}", "allow.everyone.if.no.acl.found": "true",
           "inter.broker.listener.name": "SASL_PLAINTEXT",
           "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
           "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas, **extra})
    cluster.admin().add_user(BROKER_USER, BROKER_PASSWORD, mechanisms=["SCRAM-SHA-512"])
    return cluster


def kafka_path() -> str:
    """A KAFKA_PATH: bin/ (Kafka 3.9's scripts, kafka-run-class.sh too), libs/ (its jars, from
    Maven Central, fetched once) and config/, as librdkafka's tests expect of a Kafka
    distribution."""
    from compat.kafka.launcher import make_home
    return str(make_home(tempfile.mkdtemp(prefix="kafka-path-")))


# -- librdkafka --------------------------------------------------------------------------------
def run_librdkafka(tests_dir: str, bootstrap: str, names, quick: bool,
                   scenario: str = "default") -> dict[str, dict]:
    tests_dir = os.path.abspath(tests_dir)
    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write(f"metadata.broker.list={bootstrap}\ntest.timeout.multiplier=2\n")
    conf.close()
    env = dict(os.environ, RDKAFKA_TEST_CONF=conf.name, KAFKA_PATH=kafka_path(),
               BROKERS=bootstrap,
               LD_LIBRARY_PATH=os.path.join(tests_dir, "..", "src") + ":"
               + os.path.join(tests_dir, "..", "src-cpp"))
    out = {}
    for name in names:
        if name in NOT_APPLICABLE:
            out[name] = {"verdict": "not applicable", "why": NOT_APPLICABLE[name]}
            print(f"librdkafka {name}: not applicable ({NOT_APPLICABLE[name]})", flush=True)
            continue
        t0 = time.monotonic()
        args = ["./test-runner", "-E", "-V", "3.8.0", "-p1", "-s", scenario] + (
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
    if "SKIPPING" in text or "Skipping" in text and "PASSED" not in text:
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--librdkafka-tests", help="librdkafka's built tests/ directory")
    parser.add_argument("--tests", default="all",
                        help="comma-separated librdkafka test names, or all: every broker test")
    parser.add_argument("--quick", action="store_true", help="librdkafka's quick mode (-Q)")
    parser.add_argument("--quix-python", help="the python of a venv with quixstreams")
    parser.add_argument("--burrow", action="store_true",
                        help="check Burrow's lag per partition (compat/burrow_lag.py)")
    parser.add_argument("--kafkajs", action="store_true",
                        help="run kafkajs's check (compat/kafkajs/check.js; needs npm ci there)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    cluster = start_cluster()
    results: dict = {}
    try:
        if args.librdkafka_tests:
            listed = broker_tests(args.librdkafka_tests)
            chosen = listed if args.tests == "all" else [
                (t, dict(listed).get(t, "default")) for t in args.tests.split(",") if t]
            kinds = {t: CLUSTER_OF.get(t, sc) for t, sc in chosen}
            results["librdkafka"] = run_librdkafka(
                args.librdkafka_tests, cluster.bootstrap_servers(),
                [t for t, _ in chosen if kinds[t] == "default"], args.quick)
            for kind in sorted(set(kinds.values()) - {"default"}):
                other = start_cluster(kind)
                try:
                    for scenario in sorted({sc for t, sc in chosen if kinds[t] == kind}):
                        results["librdkafka"].update(run_librdkafka(
                            args.librdkafka_tests, other.bootstrap_servers(),
                            [t for t, sc in chosen if kinds[t] == kind and sc == scenario],
                            args.quick, scenario))
                finally:
                    other.shutdown()
        if args.quix_python:
            results["quixstreams"] = run_quix(cluster, args.quix_python)
        if args.burrow:
            from compat.burrow_lag import run_burrow
            results["burrow"] = run_burrow(cluster)
        if args.kafkajs:
            results["kafkajs"] = run_kafkajs(cluster)
    finally:
        cluster.shutdown()
    verdicts = collections.Counter(
        r["verdict"] for r in list(results.get("librdkafka", {}).values())
        + [results[k] for k in ("quixstreams", "burrow", "kafkajs") if k in results])
    print("compat: " + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    return 1 if verdicts.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
