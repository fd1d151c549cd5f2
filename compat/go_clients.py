"""The Go clients against a cluster: franz-go's own kgo integration tests, and a sarama check
(sarama is Burrow's client). Suites "franz-go" and "sarama", against compat's targets.

  .venv/bin/python compat/go_clients.py --target rayka|kafka --suite franz-go|sarama|both
                                        [--out f.json] [--logs DIR]
  .venv/bin/python compat/go_clients.py build

Rules:
- Versions are pinned by compat/go/go.mod and go.sum: github.com/IBM/sarama v1.61.1,
  github.com/twmb/franz-go v1.22.3 (pkg/kmsg v1.15.1, pkg/kadm v1.20.0). `build` (also run by
  each suite, a no-op when up to date: stamps in compat/go/build/) copies franz-go's module
  source from the Go module cache (`go mod download -json`, checked against go.sum) into
  compat/go/build/franz-go-v1.22.3, compiles its pkg/kgo tests there with its own go.mod and
  go.sum (`go test -c`), and builds compat/go/sarama_check.
- franz-go: the pinned release's pkg/kgo integration tests, those that reach a broker through
  its test helpers (adm, newTestClient, testClientOpts, getSeedBrokers and what calls them,
  found in the test source by `integration_tests`), plus the SCRAM/OAUTHBEARER tests that
  only run when given a SASL listener (they skip here on both targets: the targets offer
  PLAINTEXT only). Run in one `kgo.test` process as franz-go's CI runs `go test`, in
  parallel as the tests ask (t.Parallel, -parallel GOMAXPROCS), with KGO_SEEDS = the
  target's bootstrap servers, KGO_TEST_RF=3 (both targets have 3 brokers and replicate 3
  ways), KGO_TEST_RECORDS=RECORDS (see there), KGO_LOG_LEVEL=info. (KGO_TEST_STABLE_FETCH,
  set by franz-go's CI, is read by no test of v1.22.3.) Output goes through test2json;
  one check per top-level test: pass -> passed, fail -> failed (its t.Error/t.Fatal lines
  as the why), skip -> not applicable (its skip message), a test still running when the
  binary timed out or died -> failed.
- sarama: compat/go/sarama_check (Version V3_8_0_0: the protocol level rayka serves) runs
  its steps in order against one fresh topic and prints one JSON line per step; each line is
  a check (ok -> passed, else failed with its error). A step missing from the output (the
  program died) is a failed check. What each step asserts is in sarama_check/main.go.
- Returns the compat interface: {"suite", "target", "seconds", "checks": {name: {"verdict",
  "why", "seconds", ...}}, "passed", "failed", "not_applicable"}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

GO_DIR = os.path.join(ROOT, "compat", "go")
BUILD = os.path.join(GO_DIR, "build")
FRANZ = "github.com/twmb/franz-go"
FRANZ_VERSION = "v1.22.3"
FRANZ_SRC = os.path.join(BUILD, f"franz-go-{FRANZ_VERSION}")
KGO_TEST = os.path.join(BUILD, "kgo.test")
SARAMA_CHECK = os.path.join(BUILD, "sarama-check")
# Records each ETL chain moves (TestGroupETL, TestTxnEtl: produced once, then consumed and
# re-produced through three levels of groups, for each balancer; the default is 500,000).
# 25,000 keeps the whole suite near 5 minutes against Kafka on a busy 2-core box, and is
# above 10,000 so TestTxnEtl's producer commits and begins transactions mid-stream
# (EndAndBeginTransaction every 10,000 records) instead of once at the end.
RECORDS = 25000
FRANZ_TIMEOUT_S = 900       # the kgo.test binary's own -test.timeout
SARAMA_TIMEOUT_S = 900
SEED_HELPERS = ("adm", "newTestClient", "testClientOpts", "getSeedBrokers")
SASL_GATED = ("scramSeeds", "oauthSeeds")
SARAMA_STEPS = [
    "admin.create_topic", "admin.describe_topics", "admin.list_topics",
    "admin.describe_config", "admin.alter_config", "admin.incremental_alter_config",
    "sync_producer.idempotent", "async_producer.snappy", "async_producer.lz4",
    "async_producer.zstd", "admin.create_partitions", "consumer_group.range",
    "consumer_group.sticky", "admin.list_consumer_groups", "admin.describe_consumer_groups",
    "admin.list_consumer_group_offsets", "offset_manager", "admin.delete_consumer_group",
    "admin.delete_records", "admin.acls", "admin.describe_cluster", "admin.delete_topic"]


# -- build -----------------------------------------------------------------------------------
def _go(*args, cwd=GO_DIR, timeout=900) -> str:
    proc = subprocess.run(["go", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"go {' '.join(args)} (in {cwd}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


def _digest(paths) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.encode())
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _stamped(stamp: str, digest: str, target: str) -> bool:
    try:
        with open(stamp) as f:
            return f.read() == digest and os.path.exists(target)
    except OSError:
        return False


def _stamp(stamp: str, digest: str) -> None:
    with open(stamp, "w") as f:
        f.write(digest)


def build() -> None:
    """franz-go's source and kgo test binary, and the sarama check: each only when its
    inputs changed."""
    os.makedirs(BUILD, exist_ok=True)
    info = json.loads(_go("mod", "download", "-json", f"{FRANZ}@{FRANZ_VERSION}"))
    stamp = os.path.join(BUILD, "franz-src.stamp")
    if not _stamped(stamp, info["Sum"], FRANZ_SRC):
        shutil.rmtree(FRANZ_SRC, ignore_errors=True)
        shutil.copytree(info["Dir"], FRANZ_SRC)
        for d, _, files in os.walk(FRANZ_SRC):     # the module cache's copy is read-only
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        _stamp(stamp, info["Sum"])
    stamp = os.path.join(BUILD, "kgo-test.stamp")
    digest = info["Sum"] + _go("version").strip()
    if not _stamped(stamp, digest, KGO_TEST):
        _go("test", "-c", "-o", KGO_TEST, "./pkg/kgo", cwd=FRANZ_SRC)
        _stamp(stamp, digest)
    sources = [os.path.join(GO_DIR, f) for f in ("go.mod", "go.sum")] + [
        os.path.join(GO_DIR, "sarama_check", f)
        for f in os.listdir(os.path.join(GO_DIR, "sarama_check")) if f.endswith(".go")]
    stamp = os.path.join(BUILD, "sarama-check.stamp")
    digest = _digest(sources) + _go("version").strip()
    if not _stamped(stamp, digest, SARAMA_CHECK):
        _go("build", "-o", SARAMA_CHECK, "./sarama_check")
        _stamp(stamp, digest)


# -- franz-go --------------------------------------------------------------------------------
def integration_tests(kgo_dir: str) -> list[str]:
    """The top-level tests of pkg/kgo that talk to a broker: those whose body reaches one of
    SEED_HELPERS (directly or through other test-file functions), or reads a SASL seed
    variable. In file order."""
    bodies: dict[str, str] = {}
    tests: list[str] = []
    for name in sorted(os.listdir(kgo_dir)):
        if not name.endswith("_test.go"):
            continue
        with open(os.path.join(kgo_dir, name)) as f:
            src = f.read()
        for decl in re.split(r"(?m)^(?=func |type |var |const |\)$)", src):
            m = re.match(r"func (?:\([^)]*\)\s*)?(\w+)", decl)
            if not m:
                continue
            bodies[m.group(1)] = bodies.get(m.group(1), "") + decl.split("\n", 1)[-1]
            if re.match(r"func Test\w*\(t \*testing\.T\)", decl):
                tests.append(m.group(1))
    reach = set(SEED_HELPERS)
    grown = True
    while grown:
        grown = False
        for fn, body in bodies.items():
            if fn not in reach and set(re.findall(r"\b(\w+)\b", body)) & reach:
                reach.add(fn)
                grown = True
    return [t for t in tests if t in reach
            or any(re.search(rf"\b{v}\b", bodies[t]) for v in SASL_GATED)]


def _why(lines: list[str]) -> str:
    """A failed test's own assertion lines (file_test.go:N: ...), else its last lines."""
    found = [ln.strip() for ln in lines if re.match(r"\s*\w+_test\.go:\d+: ", ln)
             and "deleting" not in ln and "completed in" not in ln]
    found += [ln.strip() for ln in lines if "panic:" in ln or "testConsumer sendErr" in ln]
    if not found:
        found = [ln.strip() for ln in lines if ln.strip()][-3:]
    return " | ".join(dict.fromkeys(found))[:600] or "no output"


def run_franz_go(target, logs_dir: str | None = None, records: int = RECORDS,
                 tests: list[str] | None = None) -> dict:
    t0 = time.monotonic()
    build()
    kgo_dir = os.path.join(FRANZ_SRC, "pkg", "kgo")
    names = tests or integration_tests(kgo_dir)
    env = dict(os.environ, KGO_SEEDS=target.bootstrap_servers(), KGO_TEST_RF="3",
               KGO_TEST_RECORDS=str(records), KGO_LOG_LEVEL="info")
    for var in ("KGO_TEST_SCRAM", "KGO_TEST_SCRAM_SEEDS", "KGO_TEST_OAUTH_SEEDS",
                "KGO_TEST_TLS", "KGO_TEST_CHAOS", "KGO_TEST_UNSAFE", "KGO_TEST_MAX_TOPIC_PARTS"):
        env.pop(var, None)
    scram = target.scram()
    if scram is not None:       # franz-go's SCRAM tests, on the target's SASL listener
        seeds, user, password, mechanism = scram
        env.update(KGO_TEST_SCRAM=f"{user}:{password}:{mechanism.rsplit('-', 1)[-1]}",
                   KGO_TEST_SCRAM_SEEDS=seeds)
    log_path = os.path.join(logs_dir or BUILD, f"franz-go-{target.name}.jsonl")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    cmd = ["go", "tool", "test2json", "-t", "-p", "kgo", KGO_TEST, "-test.v=test2json",
           "-test.count=1", f"-test.timeout={FRANZ_TIMEOUT_S}s",
           "-test.run", "^(" + "|".join(names) + ")$"]
    with open(log_path, "w") as out:
        try:
            proc = subprocess.run(cmd, cwd=kgo_dir, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=FRANZ_TIMEOUT_S + 120)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
    verdicts: dict[str, tuple[str, float]] = {}
    output: dict[str, list[str]] = {}
    loose: list[str] = []
    with open(log_path) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                loose.append(line)
                continue
            test = ev.get("Test")
            top = test.split("/", 1)[0] if test else None
            if ev.get("Action") == "output":
                (output.setdefault(top, []) if top else loose).append(ev.get("Output", ""))
            elif test and "/" not in test and ev.get("Action") in ("pass", "fail", "skip"):
                verdicts[test] = (ev["Action"], ev.get("Elapsed", 0.0))
    checks: dict[str, dict] = {}
    for name in names:
        action, secs = verdicts.get(name, (None, 0.0))
        if action == "pass":
            checks[name] = {"verdict": "passed", "seconds": secs}
        elif action == "skip":
            msg = [ln.strip() for ln in output.get(name, [])
                   if re.match(r"\s*\w+_test\.go:\d+: ", ln)]
            checks[name] = {"verdict": "not applicable", "seconds": secs,
                            "why": (msg[-1] if msg else "skipped")[:300]}
        elif action == "fail":
            checks[name] = {"verdict": "failed", "seconds": secs,
                            "why": _why(output.get(name, []))}
        else:
            ran = any(name == ln.split()[-1] for ln in output.get(name, []) if "=== RUN" in ln)
            checks[name] = {"verdict": "failed", "seconds": 0.0, "why": (
                ("did not finish: " + ("the run timed out" if code is None else
                                       _why(output.get(name, []) + loose[-5:])))
                if ran else f"never ran (kgo.test exit {code}: {_why(loose)})")}
    return _result("franz-go", target, checks, t0, records=records, log=log_path)


# -- sarama ----------------------------------------------------------------------------------
def run_sarama(target, logs_dir: str | None = None) -> dict:
    t0 = time.monotonic()
    build()
    log_path = os.path.join(logs_dir or BUILD, f"sarama-{target.name}.log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    cmd = [SARAMA_CHECK, "-brokers", target.bootstrap_servers(), "-v"]
    # stdout (the steps) and stderr (sarama's own log) go to files as they come, so a
    # hung step can be watched
    with open(log_path, "w") as out, open(log_path + ".stderr", "w") as err:
        try:
            code = subprocess.run(cmd, stdout=out, stderr=err,
                                  timeout=SARAMA_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            code = None
    with open(log_path) as f:
        stdout = f.read()
    checks: dict[str, dict] = {}
    for line in stdout.splitlines():
        try:
            st = json.loads(line)
        except ValueError:
            continue
        check = {"verdict": "passed" if st.get("ok") else "failed",
                 "seconds": round(st.get("seconds", 0.0), 2)}
        if not st.get("ok"):
            check["why"] = (st.get("error") or "no error given")[:600]
        check.update(st.get("figures") or {})
        checks[st["name"]] = check
    for name in SARAMA_STEPS:
        if name not in checks:
            checks[name] = {"verdict": "failed", "seconds": 0.0, "why": (
                f"not reached: sarama-check {'timed out' if code is None else f'exit {code}'}"
                f" (its log: {log_path}.stderr)")}
    return _result("sarama", target, checks, t0, log=log_path)


# -- common ----------------------------------------------------------------------------------
def _result(suite: str, target, checks: dict, t0: float, **extra) -> dict:
    count = {v: sum(1 for c in checks.values() if c["verdict"] == v)
             for v in ("passed", "failed", "not applicable")}
    return {"suite": suite, "target": target.name, "seconds": round(time.monotonic() - t0, 1),
            "checks": checks, "passed": count["passed"], "failed": count["failed"],
            "not_applicable": count["not applicable"], **extra}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=["run", "build"], default="run")
    parser.add_argument("--target", default="rayka", help="rayka or kafka")
    parser.add_argument("--suite", default="both", choices=["franz-go", "sarama", "both"])
    parser.add_argument("--records", type=int, default=RECORDS,
                        help="KGO_TEST_RECORDS for franz-go's ETL tests")
    parser.add_argument("--tests", help="comma-separated kgo tests (default: all integration)")
    parser.add_argument("--logs", help="keep each suite's output here")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.command == "build":
        build()
        print("built", KGO_TEST, SARAMA_CHECK)
        return 0
    build()     # a build failure shows before a cluster is started
    from compat.targets import open_target
    results = []
    with open_target(args.target) as target:
        if args.suite in ("franz-go", "both"):
            results.append(run_franz_go(target, args.logs, args.records,
                                        args.tests.split(",") if args.tests else None))
        if args.suite in ("sarama", "both"):
            results.append(run_sarama(target, args.logs))
    for r in results:
        for name, c in r["checks"].items():
            print(f"{r['suite']} {name}: {c['verdict']} ({c['seconds']:.1f} s)"
                  + (f": {c['why']}" if c["verdict"] != "passed" else ""))
        print(f"{r['suite']} against {r['target']}: {r['passed']} passed, {r['failed']} failed, "
              f"{r['not_applicable']} not applicable ({r['seconds']} s)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results if len(results) > 1 else results[0], f, indent=2)
    return 1 if any(r["failed"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
