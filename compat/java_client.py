"""Suite "java-client": Kafka's own Java client (kafka-clients) against a cluster.

Rules:
- What runs: compat/java (one Maven source tree, rayka.compat.JavaClientCheck) built twice,
  against kafka-clients 3.9.2 and against the newest 4.x Maven Central serves of
  CANDIDATES_4X (first that resolves: 4.4.0, else 4.3.1, else 4.1.1), each into
  compat/java/build/<version>/{classes,libs} (`mvn package dependency:copy-dependencies`
  with -Dkafka.version), skipped while build/<version>/.stamp holds the hash of the pom and
  the sources. The version chosen for 4.x is kept in build/newest-4x.txt (asked again when
  the pom changes). Each check is one JVM: `java -cp classes:libs/* ... <check> BOOTSTRAP
  PREFIX [MODE]`, its client logs (slf4j-simple, WARN) on stderr, kept in logs_dir.
- Checks, for each client version ("<version> <check>"):
  * idempotent-producer-broker-kill: enable.idempotence, acks=all, max.in.flight 5,
    numbered records to a 3-partition RF 3 min.insync.replicas=2 topic; the leader of
    partition 0 is hard-killed mid-run; read_committed and read_uncommitted consumers see
    every number exactly once, in order per partition.
  * group-range / group-cooperative / group-static / group-consumer -coordinator-kill: two
    consumers of one group (eager range, cooperative-sticky, static members, KIP-848's
    group.protocol=consumer: not applicable to Kafka 3.9 in ZooKeeper mode) commit through
    a hard kill of the group's coordinator; every record consumed, committed offsets = end offsets, the
    two assignments cover every partition with no overlap (the consumers' and the
    coordinator's view); static: a restarted member with the same group.instance.id gets
    its partitions back while the other sees no rebalance (same generation).
  * transactions: consume-transform-produce with sendOffsetsToTransaction, every third
    transaction aborted and rewound, a second producer's transactions overlapping;
    read_committed sees exactly the committed records, read_uncommitted every record;
    with a 4.x client on a cluster finalizing transaction.version 2 the producer's epoch
    grows by one per transaction (KIP-890 part 2), else it stays.
  * transactions-coordinator-kill: 40 transactions of one producer, the broker coordinating
    its transactional id hard-killed half-way; timed-out commits committed again,
    abortable errors aborted and resent; read_committed sees each committed record once.
  * admin-<group>: topics, configs, cluster-logdirs, producers-transactions,
    consumer-groups, delete-records, acls, scram, quotas, reassign-elect: every Admin call
    asserted; a failed call is named with its exception in "why".
  * share-groups (4.x clients; src/kafka4, built with -Dkafka4): KafkaShareConsumers
    read a topic together, each record once; release and reject; the share-group Admin
    calls (list, describe, list/alter/delete offsets, delete) and kafka-share-groups: see
    ShareCheck.java.
  * consumer-groups-tool (4.x clients): Kafka 4's kafka-consumer-groups on a KIP-848 group
    (group.protocol=consumer): see ConsumerGroupsToolCheck.java.
  * features-tool (4.x clients): Kafka 4's kafka-features describes, downgrades and
    upgrades transaction.version, and the 4.x producer follows it: see FeaturesCheck.java.
  The assertions are in the Java sources (each check's class docstring); the Java program
  ends with "RESULT <json>" (figures) or "FAIL <one-line reason>" and its exit code.
- The driver and the JVM talk over stdout/stdin: "KILL <broker id>" makes the driver call
  target.kill_broker(id) and answer "KILLED"; after a check that killed a broker the driver
  waits for target.wait_all_up before the next check. A JVM past CHECK_TIMEOUT_S is killed
  (by pid) and its check failed.
- Returns {"suite", "target", "seconds", "checks", "passed", "failed", "not_applicable",
  "clients"}; every check has verdict, seconds and the figures its JVM reported.

  python compat/java_client.py build                 # both client builds (idempotent)
  python compat/java_client.py --target rayka|kafka [--out f.json] [--logs DIR]
       [--clients 3.9.2,4.4.0] [--checks idempotent,admin,...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SUITE = "java-client"
JAVA_DIR = HERE / "java"
BUILD = JAVA_DIR / "build"
CLIENT_3X = "3.9.2"
CANDIDATES_4X = ("4.4.0", "4.3.1", "4.1.1")
MAIN = "rayka.compat.JavaClientCheck"
CHECK_TIMEOUT_S = 240
JVM_OPTS = ["-Xmx384m", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]
# (check name, JVM arguments after BOOTSTRAP PREFIX); admin's groups become checks of their own
CHECKS = [
    ("idempotent-producer-broker-kill", ["idempotent"]),
    ("group-range-coordinator-kill", ["group", "range"]),
    ("group-cooperative-coordinator-kill", ["group", "cooperative"]),
    ("group-static-coordinator-kill", ["group", "static"]),
    ("group-consumer-coordinator-kill", ["group", "consumer"]),
    ("transactions", ["txn"]),
    ("transactions-coordinator-kill", ["txnkill"]),
    ("admin", ["admin"]),
    ("share-groups", ["share"]),
    ("consumer-groups-tool", ["cgtool"]),
    ("features-tool", ["features"]),
]


class BuildError(RuntimeError):
    pass


# -- build ------------------------------------------------------------------------------
def _source_hash() -> str:
    h = hashlib.sha1()
    for p in [JAVA_DIR / "pom.xml", *sorted((JAVA_DIR / "src").rglob("*.java"))]:
        h.update(str(p.relative_to(JAVA_DIR)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _mvn(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    mvn = shutil.which("mvn")
    if not mvn:
        raise BuildError("mvn not found (apt-get install maven)")
    return subprocess.run([mvn, "-B", "-q", "-f", str(JAVA_DIR / "pom.xml"), *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def newest_4x() -> str:
    """The first of CANDIDATES_4X whose kafka-clients resolves from Maven Central."""
    memo = BUILD / "newest-4x.txt"
    pom = hashlib.sha1((JAVA_DIR / "pom.xml").read_bytes()).hexdigest()[:16]
    if memo.exists():
        version, _, stamp = memo.read_text().strip().partition(" ")
        if stamp == pom and version in CANDIDATES_4X:
            return version
    tried = []
    for version in CANDIDATES_4X:
        proc = _mvn(["dependency:get", f"-Dartifact=org.apache.kafka:kafka-clients:{version}",
                     "-Dtransitive=false"], timeout=300)
        if proc.returncode == 0:
            BUILD.mkdir(parents=True, exist_ok=True)
            memo.write_text(f"{version} {pom}\n")
            return version
        tried.append(f"{version}: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}")
    raise BuildError("no kafka-clients 4.x resolved: " + "; ".join(tried))


def build(version: str) -> str:
    """compat/java built against kafka-clients `version`; the classpath to run it with."""
    out = BUILD / version
    classpath = f"{out / 'classes'}:{out / 'libs'}/*"
    stamp, want = out / ".stamp", _source_hash()
    if stamp.exists() and stamp.read_text().strip() == want:
        return classpath
    shutil.rmtree(out / "libs", ignore_errors=True)
    shutil.rmtree(out / "classes", ignore_errors=True)
    t0 = time.monotonic()
    kafka4 = [] if version.startswith("3.") else ["-Dkafka4"]      # src/kafka4: 4.x only
    proc = _mvn([f"-Dkafka.version={version}", *kafka4, "package",
                 "dependency:copy-dependencies"])
    if proc.returncode != 0 or not any((out / "libs").glob(f"kafka-clients-{version}.jar")):
        raise BuildError(f"mvn build against kafka-clients {version} failed ({proc.returncode}): "
                         + (proc.stdout + proc.stderr).strip()[-2000:])
    stamp.write_text(want + "\n")
    print(f"java-client: built against kafka-clients {version} "
          f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return classpath


def build_all() -> dict[str, str]:
    """{version: classpath} for 3.9.2 and the newest 4.x."""
    return {v: build(v) for v in (CLIENT_3X, newest_4x())}


# -- one JVM ----------------------------------------------------------------------------
def run_jvm(target, classpath: str, args: list[str], log_path: Path | None,
            timeout_s: float = CHECK_TIMEOUT_S) -> dict:
    """Run one check; answer its KILL lines. {"ok", "result"|"why", "subs", "killed",
    "seconds"}."""
    from compat.kafka.launcher import find_java
    prefix = f"jc{uuid.uuid4().hex[:8]}"
    cmd = [find_java(), *JVM_OPTS, "-cp", classpath, MAIN, args[0],
           target.bootstrap_servers(), prefix, *args[1:]]
    t0 = time.monotonic()
    stderr_file = open(log_path, "w") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr_file, text=True, bufsize=1)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    subs, killed, result, why, lines = [], [], None, None, []
    try:
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            if line.startswith("KILL "):
                broker = int(line.split()[1])
                kt = time.monotonic()
                try:
                    target.kill_broker(broker)
                    killed.append({"broker": broker, "at_s": round(kt - t0, 2)})
                    proc.stdin.write("KILLED\n")
                except Exception as exc:       # the JVM reports the refusal as its failure
                    proc.stdin.write(f"ERROR {type(exc).__name__}: {exc}\n")
                proc.stdin.flush()
            elif line.startswith("SUB "):
                subs.append(json.loads(line[4:]))
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
            elif line.startswith("FAIL "):
                why = line[5:]
        code = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if log_path:
            stderr_file.close()
            with open(log_path, "a") as f:
                f.write("\n--- stdout ---\n" + "\n".join(lines) + "\n")
    seconds = round(time.monotonic() - t0, 1)
    if code == 0 and result is not None:
        return {"ok": True, "result": result, "subs": subs, "killed": killed, "seconds": seconds}
    if why is None:
        why = (f"timed out after {timeout_s} s" if code in (-9, 137) and seconds >= timeout_s
               else f"exit code {code} without a verdict")
    return {"ok": False, "why": why, "subs": subs, "killed": killed, "seconds": seconds}


# -- the suite --------------------------------------------------------------------------
def _admin_checks(version: str, run: dict) -> dict:
    out = {}
    for sub in run["subs"]:
        calls = sub["calls"]
        failed = [f"{name}: {c.get('error')}" for name, c in calls.items() if not c["ok"]]
        entry = {"verdict": "passed" if sub["ok"] else "failed",
                 "seconds": round(sub["seconds"], 2), "client": version,
                 "calls": {name: ("ok" if c["ok"] and "not_applicable" not in c else
                                  "not applicable: " + c["not_applicable"] if c["ok"] else
                                  "FAILED: " + c.get("error", "?")) for name, c in calls.items()},
                 "call_ms": {name: c["ms"] for name, c in calls.items() if "ms" in c}}
        if failed:
            entry["why"] = "; ".join(failed)
        out[f"{version} admin-{sub['group']}"] = entry
    if not run["ok"] and not any(s["ok"] is False for s in run["subs"]):
        # the JVM failed outside the calls it reports (setup, a crash, a timeout)
        out[f"{version} admin"] = {"verdict": "failed", "why": run["why"],
                                    "seconds": run["seconds"], "client": version}
    return out


def _not_applicable(args: list[str], version: str, target_name: str) -> str | None:
    """Why a check cannot run on this client and target (None: it can)."""
    kafka_3 = target_name.startswith("kafka-3")
    if args[1:] == ["consumer"] and kafka_3:
        return "Kafka 3.9 in ZooKeeper mode does not serve KIP-848 (KRaft only)"
    if args[0] in ("share", "cgtool") and (version.startswith("3.") or kafka_3):
        return ("share groups (KIP-932) and KIP-848 groups need a 4.x client and a 4.x "
                "(KRaft) broker")
    if args[0] == "features" and (version.startswith("3.") or kafka_3):
        return ("transaction.version (KIP-890 part 2) needs a 4.x client and a broker that "
                "finalizes it (Kafka 3.9 in ZooKeeper mode does not)")
    return None


def run_java_client(target, logs_dir=None, clients=None, checks=None) -> dict:
    """Every check of CHECKS for kafka-clients 3.9.2 and the newest 4.x, against `target`."""
    t_start = time.monotonic()
    logs = Path(logs_dir) if logs_dir else None
    if logs:
        logs.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    versions: dict[str, str | None] = {}
    wanted = clients or [CLIENT_3X, None]          # None: the newest 4.x
    for v in wanted:
        try:
            version = v or newest_4x()
            versions[version] = build(version)
        except (BuildError, subprocess.TimeoutExpired) as exc:
            name = v or "4.x"
            versions[name] = None
            results[f"{name} build"] = {"verdict": "failed", "why": str(exc)[:500], "seconds": 0.0}
    for version, classpath in versions.items():
        if classpath is None:
            continue
        for name, args in CHECKS:
            if checks and not any(name.startswith(c) or args[0] == c for c in checks):
                continue
            try:
                target.wait_all_up(180)
            except Exception as exc:
                results[f"{version} {name}"] = {"verdict": "failed", "seconds": 0.0,
                                                "why": f"cluster not back up before the check: {exc}"}
                continue
            why = _not_applicable(args, version, target.name)
            if why:
                results[f"{version} {name}"] = {"verdict": "not applicable", "seconds": 0.0,
                                                "client": version, "why": why}
                continue
            log = logs / f"{version}-{name}.log" if logs else None
            run = run_jvm(target, classpath, args, log)
            if args[0] == "admin":
                results.update(_admin_checks(version, run))
            else:
                entry = {"verdict": "passed" if run["ok"] else "failed",
                         "seconds": run["seconds"], "client": version}
                if run["ok"]:
                    entry.update({k: (round(v, 3) if isinstance(v, float) else v)
                                  for k, v in run["result"].items() if k != "client"})
                else:
                    entry["why"] = run["why"]
                if run["killed"]:
                    entry["killed"] = run["killed"]
                results[f"{version} {name}"] = entry
            _print_new(results)
    verdicts = [c["verdict"] for c in results.values()]
    return {"suite": SUITE, "target": target.name,
            "seconds": round(time.monotonic() - t_start, 1), "checks": results,
            "passed": verdicts.count("passed"), "failed": verdicts.count("failed"),
            "not_applicable": verdicts.count("not applicable"),
            "clients": sorted(v for v, cp in versions.items() if cp)}


_printed: set[str] = set()


def _print_new(results: dict) -> None:
    for name, c in results.items():
        if name in _printed:
            continue
        _printed.add(name)
        print(f"{SUITE} {name}: {c['verdict']} ({c['seconds']} s)"
              + (f": {c['why']}" if c.get("why") else _figure(c)), flush=True)


def _figure(c: dict) -> str:
    for key in ("records_per_s", "transactions_per_s"):
        if key in c:
            return f" [{key.replace('_per_s', '')}/s {c[key]:.0f}]"
    return ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="run", choices=("run", "build"))
    parser.add_argument("--target", default="rayka", choices=("rayka", "kafka"))
    parser.add_argument("--out", help="write the result as JSON here")
    parser.add_argument("--logs", help="keep each JVM's output in this directory")
    parser.add_argument("--clients", help="comma-separated kafka-clients versions "
                                          f"(default {CLIENT_3X} and the newest 4.x)")
    parser.add_argument("--checks", help="comma-separated check names or prefixes")
    args = parser.parse_args(argv)
    if args.command == "build":
        for version, cp in build_all().items():
            print(f"kafka-clients {version}: {cp}")
        return 0
    from compat.targets import finish, open_target
    with open_target(args.target) as target:
        result = run_java_client(target, args.logs,
                                 clients=args.clients.split(",") if args.clients else None,
                                 checks=args.checks.split(",") if args.checks else None)
    print(f"{SUITE} against {result['target']}: {result['passed']} passed, "
          f"{result['failed']} failed, {result['not_applicable']} not applicable "
          f"({result['seconds']} s; clients {', '.join(result['clients'])})")
    return finish(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
