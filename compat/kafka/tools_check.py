"""Apache Kafka 3.9.2's own CLI tools against rayka, compared with the same commands against
Apache Kafka 3.9.2 (ZooKeeper mode): an operator's everyday commands, scripted.

  .venv/bin/python compat/kafka/tools_check.py run --bootstrap H:P[,H:P] --out run.json
  .venv/bin/python compat/kafka/tools_check.py rayka --out rayka.json      # start, run, stop
  .venv/bin/python compat/kafka/tools_check.py kafka --out kafka.json      # start, run, stop
  .venv/bin/python compat/kafka/tools_check.py compare --out both.json     # rayka, then Kafka
  .venv/bin/python compat/kafka/tools_check.py up rayka|kafka              # a cluster to poke at
  .venv/bin/python compat/kafka/tools_check.py table both.json             # re-print a table

Every case is one tool invocation (launcher.run_tool: the jars and JVM flags of bin/*.sh) with a
60 s timeout (a hang is a recorded failure). For each: command, exit code, stdout/stderr (raw and
normalised: timestamps, host:port, UUIDs/topic ids, epochs, durations/floats replaced), the
verdict of its own assertions, and its output *shape*: exit class, table columns, ``Label:``
names, JSON keys and error names (``FooException``, ``UNKNOWN_TOPIC_OR_PARTITION``) outside log
lines. Error names in client log lines (``[ts] WARN ...``) are recorded apart (``log_errors``).

Cases depend on each other (a topic created, then described, ...) and run in order.
``compare`` runs the list against rayka (in a child process that starts rayka with
``rayka.start_local``, runs, shuts it down), then against Kafka (``launcher.KafkaCluster``) — never
both clusters at once — prints the table, writes --out, and exits 1 when a case passes on Kafka
and fails on rayka. Both clusters: 3 brokers, num.partitions=3, default.replication.factor=3,
offsets.topic.replication.factor=3, AclAuthorizer with allow.everyone.if.no.acl.found=true.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import launcher  # noqa: E402

TOOL_TIMEOUT_S = 60.0
BROKERS = 3
COMMON_CONFIG = {
    "num.partitions": 3,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

# -- normalisation and shape -------------------------------------------------------------
_HOSTNAMES = {socket.gethostname(), socket.getfqdn(), "localhost"}
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_SUBS = [
    (re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]"), "[TS]"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"), "<DATETIME>"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(:\d+|\.\d+|,\d+)?"), "<DATETIME>"),
    (re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
     "<UUID>"),
    (re.compile(r"(?i)(topic_?id[\"=:]*\s*\"?)[A-Za-z0-9_-]{22}"), r"\1<TOPICID>"),
    (re.compile(r"/?\b(127\.0\.0\.1|" + "|".join(re.escape(h) for h in _HOSTNAMES if h)
                + r")(:\d+)?\b"), "<HOST>"),
    (re.compile(r"\b\d{13}\b"), "<EPOCH>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds)\b"), "<DUR>"),
    (re.compile(r"\b\d+\.\d+(E[+-]?\d+)?\b"), "<F>"),
]


def normalise(text: str) -> str:
    for pat, rep in _SUBS:
        text = pat.sub(rep, text)
    return text


_IDENT = re.compile(r"^[A-Za-z#][A-Za-z0-9#_.()-]*$")
_LABEL = re.compile(r"(?:^|(?<=[\s{,]))([A-Z][A-Za-z0-9_]*|[a-z][a-z0-9]*_[a-z0-9_]+):[ \t]|^([a-z][a-z0-9_]*):[ \t]",
                    re.M)
_JSON_KEY = re.compile(r"\"([A-Za-z_][\w.-]*)\"\s*:")
_ERR_NAME = re.compile(r"\b([A-Z][A-Za-z0-9]+(?:Exception|Error))\b|\b([A-Z]{2,}(?:_[A-Z0-9]+)+)\b")
_ERROR_CODES: set[str] | None = None


def error_code_names() -> set[str]:
    """The constants of org.apache.kafka.common.protocol.Errors (javap on the 3.9.2 jar, cached
    in build/errors.txt), so that e.g. DEFAULT_CONFIG or SASL_SSL are not taken for errors."""
    global _ERROR_CODES
    if _ERROR_CODES is None:
        cache = launcher.BUILD / "errors.txt"
        if not cache.exists():
            try:
                javap = Path(launcher.find_java()).resolve().with_name("javap")
                out = subprocess.run([str(javap), "-cp", f"{launcher.ensure_libs()}/*",
                                      "org.apache.kafka.common.protocol.Errors"],
                                     capture_output=True, text=True, timeout=60).stdout
                names = re.findall(r"public static final org\.apache\.kafka\.common\.protocol\.Errors "
                                   r"([A-Z0-9_]+);", out)
                if names:
                    cache.write_text("\n".join(names) + "\n")
            except (OSError, subprocess.SubprocessError):
                pass
        _ERROR_CODES = set(cache.read_text().split()) if cache.exists() else set()
    return _ERROR_CODES


def _errors(text: str) -> list[str]:
    codes = error_code_names()
    return sorted({a or b for a, b in _ERR_NAME.findall(text) if a or not codes or b in codes})


def shape(rc, out: str, err: str) -> dict:
    """Columns, labels, JSON keys and error names of the tool's own output (log lines apart)."""
    lines = [ln for ln in (out + "\n" + err).splitlines()
             if ln.strip() and not _LOG_LINE.match(ln) and not ln.startswith("\tat ")]
    body = "\n".join(lines)
    cols: set[str] = set()
    for ln in lines:
        toks = [t for t in re.split(r"[\s,]+", ln.strip()) if t]
        if (len(toks) >= 3 and all(_IDENT.match(t) and not t.isdigit() for t in toks)
                and not ln.rstrip().endswith(".") and "'" not in ln and "=" not in ln
                and sum(any(c.isupper() for c in t) or "." in t for t in toks) * 2 >= len(toks)):
            cols.update(toks)
    logs = "\n".join(ln for ln in (out + "\n" + err).splitlines() if _LOG_LINE.match(ln))
    return {
        "exit": "timeout" if rc is None else ("0" if rc == 0 else "nonzero"),
        "columns": sorted(cols),
        "labels": sorted({a or b for a, b in _LABEL.findall(body)}),
        "json_keys": sorted(set(_JSON_KEY.findall(body))),
        "errors": _errors(body),
        "log_errors": _errors(logs),
    }


def same_shape(a: dict, b: dict) -> bool:
    keys = ("exit", "columns", "labels", "json_keys", "errors")
    return all(a.get(k) == b.get(k) for k in keys)


def shape_diff(a: dict, b: dict) -> str:
    parts = []
    for k in ("exit", "columns", "labels", "json_keys", "errors", "log_errors"):
        x, y = a.get(k), b.get(k)
        if x != y:
            if isinstance(x, list):
                parts.append(f"{k}: rayka-only {sorted(set(x) - set(y))} kafka-only {sorted(set(y) - set(x))}")
            else:
                parts.append(f"{k}: rayka {x} kafka {y}")
    return "; ".join(parts)


# -- cases -------------------------------------------------------------------------------
@dataclass
class Case:
    tool: str
    name: str
    args: list
    check: Callable[[int | None, str, str], str | None]   # None = ok, else why not
    stdin: str | None = None
    files: dict = field(default_factory=dict)               # name -> content, under ctx tmp
    retries: int = 0                                        # rerun until the check passes
    retry_sleep: float = 2.0
    env: dict = field(default_factory=dict)


def rc0(*needles, out_only=False):
    def check(rc, out, err):
        if rc != 0:
            return f"exit {rc}"
        hay = out if out_only else out + err
        miss = [n for n in needles if n not in hay]
        return f"missing {miss}" if miss else None
    return check


def fails_with(*needles):
    """Non-zero exit (or Kafka's 'Error ...' with exit 0 for some tools) naming the error."""
    def check(rc, out, err):
        hay = out + err
        miss = [n for n in needles if n not in hay]
        return f"missing {miss}" if miss else None
    return check


def all_of(*checks):
    def check(rc, out, err):
        for c in checks:
            why = c(rc, out, err)
            if why:
                return why
        return None
    return check


def lacks(*needles):
    def check(rc, out, err):
        bad = [n for n in needles if n in out]
        return f"unexpected {bad}" if bad else None
    return check


def table_row(match: dict, want: dict):
    """A whitespace table on stdout: a row whose columns match ``match`` has ``want``."""
    def check(rc, out, err):
        if rc != 0:
            return f"exit {rc}"
        lines = [ln.split() for ln in out.splitlines() if ln.strip()]
        header = next((ln for ln in lines if all(k in ln for k in match)), None)
        if header is None:
            return f"no header with {list(match)}"
        for row in lines:
            if row == header:
                continue
            d = dict(zip(header, row))
            if all(d.get(k) == v for k, v in match.items()):
                bad = {k: d.get(k) for k, v in want.items() if d.get(k) != v}
                return f"row {d}: want {want}" if bad else None
        return f"no row {match}"
    return check


def matches(pattern: str, rc_zero: bool = True):
    """stdout matches a regex (tables whose rows Kafka prints oddly: no newline, split headers)."""
    def check(rc, out, err):
        if rc_zero and rc != 0:
            return f"exit {rc}"
        return None if re.search(pattern, out) else f"stdout does not match {pattern!r}"
    return check


def n_lines(n: int, first: str | None = None):
    def check(rc, out, err):
        lines = out.splitlines()
        if rc != 0:
            return f"exit {rc}"
        if len(lines) != n:
            return f"{len(lines)} lines, want {n}"
        if first is not None and lines[0] != first:
            return f"first line {lines[0]!r}, want {first!r}"
        return None
    return check


def json_events(name: str, count: int | None = None, key: str | None = None, total: int | None = None):
    def check(rc, out, err):
        evs = []
        for ln in out.splitlines():
            try:
                evs.append(json.loads(ln))
            except ValueError:
                pass
        got = [e for e in evs if e.get("name") == name]
        if count is not None and len(got) != count:
            return f"{len(got)} {name} events, want {count} (rc {rc})"
        if key is not None and sum(int(e.get(key, 0)) for e in got) != total:
            return f"sum of {name}.{key} = {sum(int(e.get(key, 0)) for e in got)}, want {total}"
        if rc != 0:
            return f"exit {rc}"
        return None
    return check


def log_dirs_json(topic_partition: str, brokers: int):
    def check(rc, out, err):
        if rc != 0:
            return f"exit {rc}"
        doc = None
        for ln in out.splitlines():
            if ln.startswith("{"):
                doc = json.loads(ln)
        if doc is None:
            return "no JSON line"
        bs = doc.get("brokers", [])
        if len(bs) != brokers:
            return f"{len(bs)} brokers, want {brokers}"
        parts = [p["partition"] for b in bs for d in b.get("logDirs", []) for p in d.get("partitions", [])]
        return None if topic_partition in parts else f"{topic_partition} not in {parts[:10]}"
    return check


def perf_consumed(n: int):
    def check(rc, out, err):
        if rc != 0:
            return f"exit {rc}"
        lines = [ln for ln in out.splitlines() if ln.strip()]
        hdr = next((i for i, ln in enumerate(lines) if "data.consumed.in.nMsg" in ln), None)
        if hdr is None or hdr + 1 >= len(lines):
            return "no header/data line"
        cols = [c.strip() for c in lines[hdr].split(",")]
        vals = [v.strip() for v in lines[hdr + 1].split(",")]
        got = dict(zip(cols, vals)).get("data.consumed.in.nMsg")
        return None if got == str(n) else f"nMsg {got}, want {n}"
    return check


def cases(bs: str) -> list[Case]:
    B = ["--bootstrap-server", bs]
    T, CG, CF, ACL = "kafka-topics.sh", "kafka-consumer-groups.sh", "kafka-configs.sh", "kafka-acls.sh"
    keyed = "".join(f"h1:v{i},h2:w{i}\tk{i}:value-{i}\n" for i in range(5))
    reassign = json.dumps({"version": 1, "partitions": [
        {"topic": "tc-reassign", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]})
    reassign_back = json.dumps({"version": 1, "partitions": [
        {"topic": "tc-reassign", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]})
    c = [
        # -- kafka-topics
        Case(T, "create --partitions 3 --rf 3 --config", [*B, "--create", "--topic", "tc-main",
             "--partitions", 3, "--replication-factor", 3, "--config", "retention.ms=3600000",
             "--config", "cleanup.policy=delete"], rc0("Created topic tc-main.")),
        Case(T, "create tc-data (1 partition)", [*B, "--create", "--topic", "tc-data", "--partitions", 1,
             "--replication-factor", 3], rc0("Created topic tc-data.")),
        Case(T, "create --replica-assignment 1:2", [*B, "--create", "--topic", "tc-reassign",
             "--replica-assignment", "1:2"], rc0("Created topic tc-reassign.")),
        Case(T, "create with defaults", [*B, "--create", "--topic", "tc-perf"], rc0("Created topic tc-perf.")),
        Case(T, "create tc-verify/tc-txn", [*B, "--create", "--topic", "tc-verify", "--partitions", 2,
             "--replication-factor", 3], rc0("Created topic tc-verify.")),
        Case(T, "create tc-txn", [*B, "--create", "--topic", "tc-txn", "--partitions", 1,
             "--replication-factor", 3], rc0("Created topic tc-txn.")),
        Case(T, "create existing topic (error)", [*B, "--create", "--topic", "tc-main", "--partitions", 3,
             "--replication-factor", 3], fails_with("TopicExistsException", "already exists")),
        Case(T, "create --if-not-exists existing", [*B, "--create", "--if-not-exists", "--topic", "tc-main",
             "--partitions", 3, "--replication-factor", 3], rc0()),
        Case(T, "create rf 4 > brokers (error)", [*B, "--create", "--topic", "tc-rf4",
             "--partitions", 1, "--replication-factor", 4], fails_with("InvalidReplicationFactorException")),
        Case(T, "--list", [*B, "--list"], rc0("tc-main", "tc-data", "tc-reassign", "tc-perf", out_only=True)),
        Case(T, "--describe --topic", [*B, "--describe", "--topic", "tc-main"],
             rc0("PartitionCount: 3", "ReplicationFactor: 3", "retention.ms=3600000",
                 "Partition: 0", "Partition: 2", "Leader: ", "Isr: ", out_only=True)),
        Case(T, "--describe (all)", [*B, "--describe"], rc0("Topic: tc-data", "Topic: tc-perf",
             "PartitionCount: 3", out_only=True)),
        Case(T, "--describe missing topic (error)", [*B, "--describe", "--topic", "tc-nope"],
             fails_with("does not exist")),
        Case(T, "--describe --topics-with-overrides", [*B, "--describe", "--topics-with-overrides"],
             rc0("Topic: tc-main", "retention.ms=3600000", out_only=True)),
        Case(T, "--describe --under-replicated-partitions", [*B, "--describe",
             "--under-replicated-partitions"], n_lines(0)),
        Case(T, "--alter --partitions 6", [*B, "--alter", "--topic", "tc-main", "--partitions", 6], rc0()),
        Case(T, "--describe after alter", [*B, "--describe", "--topic", "tc-main"],
             rc0("PartitionCount: 6", "Partition: 5", out_only=True), retries=5),
        Case(T, "--alter --partitions 2 (decrease, error)", [*B, "--alter", "--topic", "tc-main",
             "--partitions", 2], fails_with("InvalidPartitionsException")),
        # -- console producer / consumer
        Case("kafka-console-producer.sh", "parse.key + parse.headers", [*B, "--topic", "tc-data",
             "--property", "parse.key=true", "--property", "key.separator=:",
             "--property", "parse.headers=true"], rc0(), stdin=keyed),
        Case("kafka-console-consumer.sh", "--from-beginning print.key print.headers",
             [*B, "--topic", "tc-data", "--from-beginning", "--max-messages", 5, "--timeout-ms", 30000,
              "--property", "print.key=true", "--property", "print.headers=true"],
             all_of(n_lines(5, "h1:v0,h2:w0\tk0\tvalue-0"), fails_with("Processed a total of 5 messages"))),
        Case("kafka-console-consumer.sh", "print.timestamp/partition/offset", [*B, "--topic", "tc-data",
             "--from-beginning", "--max-messages", 2, "--timeout-ms", 30000, "--property", "print.timestamp=true",
             "--property", "print.partition=true", "--property", "print.offset=true"],
             all_of(n_lines(2), rc0("CreateTime:", "Partition:0\tOffset:1\tvalue-1"))),
        Case("kafka-console-consumer.sh", "--group (commits)", [*B, "--topic", "tc-data", "--group", "tc-g1",
             "--from-beginning", "--max-messages", 5, "--timeout-ms", 30000], n_lines(5, "value-0")),
        Case("kafka-console-consumer.sh", "--partition 0 --offset 3", [*B, "--topic", "tc-data",
             "--partition", 0, "--offset", 3, "--max-messages", 2, "--timeout-ms", 30000],
             n_lines(2, "value-3")),
        # -- kafka-consumer-groups
        Case(CG, "--list", [*B, "--list"], rc0("tc-g1", out_only=True)),
        Case(CG, "--describe --group", [*B, "--describe", "--group", "tc-g1"],
             table_row({"TOPIC": "tc-data", "PARTITION": "0"},
                       {"CURRENT-OFFSET": "5", "LOG-END-OFFSET": "5", "LAG": "0"})),
        Case(CG, "--describe --state", [*B, "--describe", "--group", "tc-g1", "--state"],
             matches(r"(?m)^tc-g1\s+\S+\s+\(\d+\)\s+Empty\s+0\s*$")),
        Case(CG, "--describe --members", [*B, "--describe", "--group", "tc-g1", "--members"],
             rc0("has no active members")),
        Case(CG, "--describe --all-groups --offsets", [*B, "--describe", "--all-groups", "--offsets"],
             rc0("tc-g1")),
        Case(CG, "--reset-offsets --shift-by -2 --execute", [*B, "--reset-offsets", "--group", "tc-g1",
             "--topic", "tc-data", "--shift-by", -2, "--execute"],
             matches(r"tc-g1\s+tc-data\s+0\s+3\b")),
        Case(CG, "--describe after shift-by", [*B, "--describe", "--group", "tc-g1"],
             table_row({"TOPIC": "tc-data", "PARTITION": "0"}, {"CURRENT-OFFSET": "3", "LAG": "2"})),
        Case(CG, "--reset-offsets --to-datetime --execute", [*B, "--reset-offsets", "--group", "tc-g1",
             "--topic", "tc-data", "--to-datetime", "2020-01-01T00:00:00.000", "--execute"],
             matches(r"tc-g1\s+tc-data\s+0\s+0\b")),
        Case(CG, "--reset-offsets --to-latest --dry-run", [*B, "--reset-offsets", "--group", "tc-g1",
             "--topic", "tc-data", "--to-latest", "--dry-run"],
             matches(r"tc-g1\s+tc-data\s+0\s+5\b")),
        Case(CG, "--reset-offsets --to-earliest --execute", [*B, "--reset-offsets", "--group", "tc-g1",
             "--topic", "tc-data", "--to-earliest", "--execute"],
             matches(r"tc-g1\s+tc-data\s+0\s+0\b")),
        Case(CG, "--describe after reset", [*B, "--describe", "--group", "tc-g1"],
             table_row({"TOPIC": "tc-data", "PARTITION": "0"}, {"CURRENT-OFFSET": "0", "LAG": "5"})),
        Case(CG, "--delete-offsets --topic", [*B, "--delete-offsets", "--group", "tc-g1", "--topic", "tc-data"],
             matches(r"tc-data\s+0\s+Successful")),
        Case("kafka-console-consumer.sh", "--group tc-g2 (for --delete)", [*B, "--topic", "tc-data",
             "--group", "tc-g2", "--from-beginning", "--max-messages", 1, "--timeout-ms", 30000],
             n_lines(1, "value-0")),
        Case(CG, "--delete --group", [*B, "--delete", "--group", "tc-g2"],
             rc0("Deletion of requested consumer groups ('tc-g2') was successful.")),
        Case(CG, "--describe missing group", [*B, "--describe", "--group", "tc-nogroup"],
             fails_with("Consumer group 'tc-nogroup' does not exist.")),
        Case(CG, "--list after delete", [*B, "--list"], all_of(rc0(), lacks("tc-g1", "tc-g2"))),
        # -- delete-records / get-offsets
        Case("kafka-delete-records.sh", "--offset-json-file", [*B, "--offset-json-file", "{tmp}/delete.json"],
             rc0("partition: tc-data-0", "low_watermark: 2"),
             files={"delete.json": json.dumps({"version": 1, "partitions": [
                 {"topic": "tc-data", "partition": 0, "offset": 2}]})}),
        Case("kafka-get-offsets.sh", "--time -1 (latest)", [*B, "--topic", "tc-data", "--time", -1],
             n_lines(1, "tc-data:0:5")),
        Case("kafka-get-offsets.sh", "--time -2 (earliest, after delete-records)",
             [*B, "--topic", "tc-data", "--time", -2], n_lines(1, "tc-data:0:2")),
        Case("kafka-get-offsets.sh", "--time -3 (max timestamp)", [*B, "--topic", "tc-data", "--time", -3],
             all_of(n_lines(1), matches(r"^tc-data:0:[0-4]$"))),
        Case("kafka-get-offsets.sh", "--time <timestamp 0>", [*B, "--topic", "tc-data", "--time", 0],
             n_lines(1, "tc-data:0:2")),
        Case(T, "--describe --unavailable-partitions", [*B, "--describe", "--unavailable-partitions"],
             n_lines(0)),
        Case("kafka-get-offsets.sh", "all topics", [*B], rc0("tc-main:5:0", "tc-data:0:5", out_only=True)),
        # -- kafka-configs
        Case(CF, "--describe topic", [*B, "--describe", "--entity-type", "topics", "--entity-name", "tc-main"],
             rc0("Dynamic configs for topic tc-main are:", "retention.ms=3600000",
                 "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
                 "DYNAMIC_TOPIC_CONFIG:retention.ms=3600000", out_only=True)),
        Case(CF, "--alter topic --add-config", [*B, "--alter", "--entity-type", "topics", "--entity-name",
             "tc-main", "--add-config", "retention.ms=7200000,max.message.bytes=2000000"],
             rc0("Completed updating config for topic tc-main.")),
        Case(CF, "--describe topic after alter", [*B, "--describe", "--entity-type", "topics",
             "--entity-name", "tc-main"], rc0("retention.ms=7200000", "max.message.bytes=2000000",
                                             "cleanup.policy=delete", out_only=True)),
        Case(CF, "--alter topic --delete-config", [*B, "--alter", "--entity-type", "topics", "--entity-name",
             "tc-main", "--delete-config", "max.message.bytes"], rc0("Completed updating config")),
        Case(CF, "--alter topic unknown config (error)", [*B, "--alter", "--entity-type", "topics",
             "--entity-name", "tc-main", "--add-config", "no.such.config=1"],
             fails_with("InvalidConfigurationException")),
        Case(CF, "--describe --all topic", [*B, "--describe", "--all", "--entity-type", "topics",
             "--entity-name", "tc-data"], rc0("All configs for topic tc-data are:", "segment.bytes=",
                                             "min.insync.replicas=", out_only=True)),
        Case(CF, "--describe brokers --entity-default", [*B, "--describe", "--entity-type", "brokers",
             "--entity-default"], rc0("Default configs for brokers in the cluster are:", out_only=True)),
        Case(CF, "--alter brokers --entity-default", [*B, "--alter", "--entity-type", "brokers",
             "--entity-default", "--add-config", "log.retention.ms=604800000"],
             rc0("Completed updating default config for brokers in the cluster.")),
        Case(CF, "--describe brokers --entity-default after", [*B, "--describe", "--entity-type", "brokers",
             "--entity-default"], rc0("log.retention.ms=604800000",
                                      "DEFAULT_BROKER_CONFIG:log.retention.ms=604800000", out_only=True),
             retries=3),
        Case(CF, "--alter broker 1 --add-config", [*B, "--alter", "--entity-type", "brokers",
             "--entity-name", 1, "--add-config", "log.cleaner.threads=2"],
             rc0("Completed updating config for broker 1.")),
        Case(CF, "--describe broker 1", [*B, "--describe", "--entity-type", "brokers", "--entity-name", 1],
             rc0("Dynamic configs for broker 1 are:", "log.cleaner.threads=2",
                 "DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2", out_only=True), retries=3),
        Case(CF, "--describe broker 1 --all", [*B, "--describe", "--all", "--entity-type", "brokers",
             "--entity-name", 1], rc0("All configs for broker 1 are:", "num.partitions=3",
                                      "advertised.listeners=PLAINTEXT://",
                                      "num.partitions=3 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=3",
                                      "log.retention.ms=604800000", out_only=True)),
        Case(CF, "--alter brokers --entity-default --delete-config", [*B, "--alter", "--entity-type", "brokers",
             "--entity-default", "--delete-config", "log.retention.ms"], rc0("Completed updating default")),
        Case(CF, "--describe broker-loggers", [*B, "--describe", "--entity-type", "broker-loggers",
             "--entity-name", 1], rc0("Dynamic configs for broker-logger 1 are:", "  root=INFO", out_only=True)),
        Case(CF, "--alter users SCRAM-SHA-256", [*B, "--alter", "--entity-type", "users", "--entity-name",
             "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"],
             rc0("Completed updating config for user alice.")),
        Case(CF, "--alter users SCRAM-SHA-512 default iterations", [*B, "--alter", "--entity-type", "users",
             "--entity-name", "bob", "--add-config", "SCRAM-SHA-512=[password=bob-secret]"],
             rc0("Completed updating config for user bob.")),
        Case(CF, "--describe users alice (SCRAM)", [*B, "--describe", "--entity-type", "users",
             "--entity-name", "alice"],
             rc0("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192",
                 out_only=True)),
        Case(CF, "--alter users quota", [*B, "--alter", "--entity-type", "users", "--entity-name", "alice",
             "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"],
             rc0("Completed updating config for user alice.")),
        Case(CF, "--alter clients --entity-default quota", [*B, "--alter", "--entity-type", "clients",
             "--entity-default", "--add-config", "request_percentage=200"],
             rc0("Completed updating default config for clients in the cluster.")),
        Case(CF, "--alter user+client quota", [*B, "--alter", "--entity-type", "users", "--entity-name",
             "alice", "--entity-type", "clients", "--entity-name", "app1", "--add-config",
             "producer_byte_rate=4096"], rc0("Completed updating config for user alice")),
        Case(CF, "--describe users alice (quota+SCRAM)", [*B, "--describe", "--entity-type", "users",
             "--entity-name", "alice"],
             rc0("Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, "
                 "producer_byte_rate=1048576.0", "SCRAM-SHA-256=iterations=8192", out_only=True)),
        Case(CF, "--describe clients --entity-default", [*B, "--describe", "--entity-type", "clients",
             "--entity-default"], rc0("Quota configs for the default client-id are request_percentage=200.0",
                                     out_only=True)),
        Case(CF, "--describe users (all)", [*B, "--describe", "--entity-type", "users"],
             rc0("user-principal 'alice'", "user-principal 'bob'", out_only=True)),
        Case(CF, "--alter users --delete-config SCRAM", [*B, "--alter", "--entity-type", "users",
             "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512"],
             rc0("Completed updating config for user bob.")),
        Case(CF, "--alter users --delete-config quota", [*B, "--alter", "--entity-type", "users",
             "--entity-name", "alice", "--delete-config", "producer_byte_rate"], rc0("Completed updating")),
        # -- reassign / leader election / log dirs
        Case("kafka-reassign-partitions.sh", "--generate", [*B, "--generate", "--topics-to-move-json-file",
             "{tmp}/move.json", "--broker-list", "1,2,3"],
             rc0("Current partition replica assignment", "Proposed partition reassignment configuration",
                 '"tc-reassign"', out_only=True),
             files={"move.json": json.dumps({"version": 1, "topics": [{"topic": "tc-reassign"}]})}),
        Case("kafka-reassign-partitions.sh", "--execute", [*B, "--execute", "--reassignment-json-file",
             "{tmp}/reassign.json"], rc0("Successfully started partition reassignment for tc-reassign-0"),
             files={"reassign.json": reassign}),
        Case("kafka-reassign-partitions.sh", "--verify", [*B, "--verify", "--reassignment-json-file",
             "{tmp}/reassign.json"], rc0("Reassignment of partition tc-reassign-0 is completed."),
             retries=8),
        Case(T, "--describe after reassignment", [*B, "--describe", "--topic", "tc-reassign"],
             rc0("Replicas: 2,3", out_only=True), retries=3),
        Case("kafka-reassign-partitions.sh", "--execute --throttle", [*B, "--execute",
             "--reassignment-json-file", "{tmp}/reassign_back.json", "--throttle", 50000000],
             rc0("The inter-broker throttle limit was set to 50000000 B/s",
                 "Successfully started partition reassignment for tc-reassign-0"),
             files={"reassign_back.json": reassign_back}),
        Case(CF, "--describe topic throttled replicas", [*B, "--describe", "--entity-type", "topics",
             "--entity-name", "tc-reassign"], rc0("leader.replication.throttled.replicas=",
                                                 "follower.replication.throttled.replicas=", out_only=True)),
        Case("kafka-reassign-partitions.sh", "--verify (clears throttles)", [*B, "--verify",
             "--reassignment-json-file", "{tmp}/reassign_back.json"],
             rc0("Reassignment of partition tc-reassign-0 is completed.",
                 "Clearing topic-level throttles on topic tc-reassign"), retries=8),
        Case("kafka-leader-election.sh", "preferred --all-topic-partitions", [*B, "--election-type",
             "preferred", "--all-topic-partitions"], rc0()),
        Case("kafka-leader-election.sh", "preferred --topic --partition", [*B, "--election-type",
             "preferred", "--topic", "tc-main", "--partition", 0], rc0()),
        Case("kafka-log-dirs.sh", "--describe --topic-list", [*B, "--describe", "--topic-list", "tc-data"],
             log_dirs_json("tc-data-0", BROKERS)),
        Case("kafka-log-dirs.sh", "--describe (all)", [*B, "--describe"],
             log_dirs_json("tc-main-0", BROKERS)),
        # -- perf / verifiable
        Case("kafka-producer-perf-test.sh", "20000 x 100 B acks=all", ["--topic", "tc-perf", "--num-records",
             20000, "--record-size", 100, "--throughput", -1, "--producer-props", f"bootstrap.servers={bs}",
             "acks=all"], rc0("20000 records sent", out_only=True)),
        Case("kafka-consumer-perf-test.sh", "--messages 20000", [*B, "--topic", "tc-perf", "--messages",
             20000, "--timeout", 30000], perf_consumed(20000)),
        Case("kafka-verifiable-producer.sh", "--max-messages 50 --acks -1", [*B, "--topic", "tc-verify",
             "--max-messages", 50, "--acks", -1], all_of(json_events("producer_send_success", count=50),
                                                        json_events("shutdown_complete", count=1))),
        Case("kafka-verifiable-consumer.sh", "--max-messages 50 --group-id", [*B, "--topic", "tc-verify",
             "--group-id", "tc-vg", "--max-messages", 50],
             all_of(json_events("records_consumed", key="count", total=50),
                    json_events("shutdown_complete", count=1))),
        Case("kafka-producer-perf-test.sh", "transactional 2000 records", ["--topic", "tc-txn",
             "--num-records", 2000, "--record-size", 100, "--throughput", -1, "--producer-props",
             f"bootstrap.servers={bs}", "acks=all", "--transactional-id", "tc-txn-1",
             "--transaction-duration-ms", 300], rc0("2000 records sent", out_only=True)),
        Case("kafka-console-consumer.sh", "--isolation-level read_committed", [*B, "--topic", "tc-txn",
             "--from-beginning", "--max-messages", 100, "--timeout-ms", 30000,
             "--isolation-level", "read_committed"], n_lines(100)),
        # -- kafka-transactions
        Case("kafka-transactions.sh", "list", [*B, "list"], table_row({"TransactionalId": "tc-txn-1"},
             {"TransactionState": "CompleteCommit"})),
        Case("kafka-transactions.sh", "describe --transactional-id", [*B, "describe", "--transactional-id",
             "tc-txn-1"], table_row({"TransactionalId": "tc-txn-1"}, {"TransactionState": "CompleteCommit"})),
        Case("kafka-transactions.sh", "describe-producers", [*B, "describe-producers", "--topic", "tc-txn",
             "--partition", 0], all_of(rc0("ProducerId", "ProducerEpoch", "CurrentTransactionStartOffset",
                                           out_only=True),
                                       matches(r"(?m)^\d+\s+0\s+\d+\s+1999\s+\d{13}\s+None"))),
        Case("kafka-transactions.sh", "find-hanging --broker-id 1", [*B, "find-hanging", "--broker-id", 1],
             all_of(n_lines(1), rc0("Topic", "ProducerId", "StartOffset", out_only=True))),
        # -- kafka-acls
        Case(ACL, "--list (empty)", [*B, "--list"], all_of(rc0(), lacks("principal="))),
        Case(ACL, "--add topic Read,Describe", [*B, "--add", "--allow-principal", "User:alice", "--operation",
             "Read", "--operation", "Describe", "--topic", "tc-acl"],
             rc0("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tc-acl, patternType=LITERAL)`",
                 "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)", out_only=True)),
        Case(ACL, "--add prefixed group", [*B, "--add", "--allow-principal", "User:alice", "--operation",
             "Read", "--group", "acl-", "--resource-pattern-type", "prefixed"],
             rc0("resourceType=GROUP, name=acl-, patternType=PREFIXED", out_only=True)),
        Case(ACL, "--add --deny-principal --allow-host", [*B, "--add", "--deny-principal", "User:mallory",
             "--deny-host", "10.0.0.9", "--operation", "Write", "--topic", "tc-acl"],
             rc0("(principal=User:mallory, host=10.0.0.9, operation=WRITE, permissionType=DENY)",
                 out_only=True)),
        Case(ACL, "--list --topic", [*B, "--list", "--topic", "tc-acl"],
             rc0("operation=READ", "operation=DESCRIBE", "User:mallory", out_only=True)),
        Case(ACL, "--list --principal", [*B, "--list", "--principal", "User:alice"],
             rc0("name=tc-acl", "name=acl-", out_only=True)),
        Case(ACL, "--remove --force", [*B, "--remove", "--allow-principal", "User:alice", "--operation",
             "Read", "--topic", "tc-acl", "--force"], rc0()),
        Case(ACL, "--list after remove", [*B, "--list", "--topic", "tc-acl"],
             all_of(rc0("operation=DESCRIBE", out_only=True), lacks("operation=READ"))),
        # -- misc
        Case("kafka-broker-api-versions.sh", "--bootstrap-server", [*B],
             rc0("(id: 1 rack: null)", "(id: 3 rack: null)", "Produce(0)", "Fetch(1)", out_only=True)),
        Case("kafka-features.sh", "describe", [*B, "describe"], rc0()),
        # -- delete topics last
        Case(T, "--delete", [*B, "--delete", "--topic", "tc-main"], rc0()),
        Case(T, "--list after delete", [*B, "--list"], all_of(rc0("tc-data", out_only=True), lacks("tc-main")),
             retries=5),
        Case(T, "--delete missing topic (error)", [*B, "--delete", "--topic", "tc-nope"],
             fails_with("does not exist")),
    ]
    return c


# -- running -----------------------------------------------------------------------------
def _trunc(s: str, n: int = 100000) -> str:
    return s if len(s) <= n else s[:n // 2] + f"\n...[{len(s) - n} chars cut]...\n" + s[-n // 2:]


def run_case(case: Case, tmp: Path) -> dict:
    for name, content in case.files.items():
        (tmp / name).write_text(content)
    args = [str(a).replace("{tmp}", str(tmp)) for a in case.args]
    env = dict(case.env)
    t0 = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        try:
            r = launcher.run_tool(case.tool, args, timeout_s=TOOL_TIMEOUT_S, env=env, input=case.stdin)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as exc:
            def _s(x):
                return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
            rc, out, err = None, _s(exc.stdout), _s(exc.stderr) + f"\n<TIMEOUT after {TOOL_TIMEOUT_S:g} s>"
        try:
            why = case.check(rc, out, err) if rc is not None else f"timeout after {TOOL_TIMEOUT_S:g} s"
        except Exception as exc:     # a check that trips on odd output is a failure, not a crash
            why = f"check raised {exc!r}"
        if why is None or attempts > case.retries:
            break
        time.sleep(case.retry_sleep)
    return {
        "tool": case.tool, "case": case.name,
        "command": shlex.join([f"bin/{case.tool}", *args]),
        "stdin": case.stdin, "exit_code": rc, "attempts": attempts,
        "seconds": round(time.monotonic() - t0, 2),
        "ok": why is None, "why": why,
        "stdout": _trunc(normalise(out)), "stderr": _trunc(normalise(err)),
        "raw_stdout": _trunc(out), "raw_stderr": _trunc(err),
        "shape": shape(rc, normalise(out), normalise(err)),
    }


def run_all(bootstrap: str, only: str | None = None, log=sys.stderr) -> dict:
    launcher.ensure_libs()
    t0 = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="rayka-tools-check-") as tmp:
        for case in cases(bootstrap):
            if only and not re.search(only, f"{case.tool} {case.name}"):
                continue
            res = run_case(case, Path(tmp))
            results.append(res)
            print(f"  {'ok  ' if res['ok'] else 'FAIL'} {res['seconds']:5.1f}s {case.tool} | {case.name}"
                  + ("" if res["ok"] else f"  -- {res['why']}"), file=log, flush=True)
    return {"bootstrap": bootstrap, "cases_s": round(time.monotonic() - t0, 1), "cases": results}


# -- clusters ----------------------------------------------------------------------------
class RaykaSystem:
    name = "rayka"

    def start(self) -> str:
        os.chdir(ROOT)
        sys.path.insert(0, str(ROOT))
        import rayka
        self.data_dir = tempfile.mkdtemp(prefix="rayka-tools-")
        self.c = rayka.start_local(name=f"tools{os.getpid()}", brokers=BROKERS, controllers=1,
                                   data_dir=self.data_dir, **COMMON_CONFIG)
        return self.c.bootstrap_servers()

    def stop(self) -> None:
        import shutil
        import ray
        try:
            self.c.shutdown()
        finally:
            ray.shutdown()
            shutil.rmtree(self.data_dir, ignore_errors=True)


class KafkaSystem:
    name = "kafka"

    def start(self) -> str:
        props = {k: v for k, v in COMMON_CONFIG.items()
                 if k not in ("num.partitions", "default.replication.factor")}
        self.c = launcher.KafkaCluster(BROKERS, num_partitions=COMMON_CONFIG["num.partitions"],
                                       default_replication_factor=COMMON_CONFIG["default.replication.factor"],
                                       properties=props)
        self.c.start()
        return self.c.bootstrap_servers

    def stop(self) -> None:
        self.c.stop()


SYSTEMS = {"rayka": RaykaSystem, "kafka": KafkaSystem}


def run_system(name: str, only: str | None = None) -> dict:
    sysobj = SYSTEMS[name]()
    t0 = time.monotonic()
    print(f"== starting {name}", file=sys.stderr, flush=True)
    bs = sysobj.start()
    start_s = time.monotonic() - t0
    print(f"== {name} up in {start_s:.1f} s: {bs}", file=sys.stderr, flush=True)
    try:
        res = run_all(bs, only)
    finally:
        t1 = time.monotonic()
        sysobj.stop()
        stop_s = time.monotonic() - t1
    res.update(system=name, start_s=round(start_s, 1), stop_s=round(stop_s, 1),
               total_s=round(time.monotonic() - t0, 1))
    print(f"== {name}: start {start_s:.1f} s, cases {res['cases_s']} s, stop {stop_s:.1f} s",
          file=sys.stderr, flush=True)
    return res


def recheck(doc: dict) -> None:
    """Assertions and shapes again, on the raw outputs stored in a run's JSON (no cluster)."""
    by_name = {(c.tool, c.name): c for c in cases(doc["bootstrap"])}
    for r in doc["cases"]:
        case = by_name.get((r["tool"], r["case"]))
        if case is None:
            continue
        rc, out, err = r["exit_code"], r["raw_stdout"], r["raw_stderr"]
        why = case.check(rc, out, err) if rc is not None else r["why"]
        r.update(ok=why is None, why=why, shape=shape(rc, normalise(out), normalise(err)))


def compare(rk: dict, kf: dict) -> tuple[list[dict], int]:
    kmap = {(c["tool"], c["case"]): c for c in kf["cases"]}
    rows, regressions = [], 0
    for c in rk["cases"]:
        k = kmap.get((c["tool"], c["case"]))
        same = k is not None and same_shape(c["shape"], k["shape"])
        reg = k is not None and k["ok"] and not c["ok"]
        regressions += reg
        rows.append({"tool": c["tool"], "case": c["case"], "rayka_ok": c["ok"],
                     "kafka_ok": None if k is None else k["ok"], "same_shape": same,
                     "regression": reg, "shape_diff": "" if k is None else shape_diff(c["shape"], k["shape"]),
                     "rayka_why": c["why"], "kafka_why": None if k is None else k["why"]})
    return rows, regressions


def print_table(rows: list[dict], rk: dict | None = None, kf: dict | None = None, file=sys.stdout) -> None:
    yn = {True: "yes", False: "NO", None: "-"}
    w1 = max(len(r["tool"]) for r in rows)
    w2 = max(len(r["case"]) for r in rows)
    print(f"{'tool':{w1}}  {'case':{w2}}  rayka  kafka  same-shape", file=file)
    for r in rows:
        mark = "  <-- fails on rayka only" if r["regression"] else ""
        print(f"{r['tool']:{w1}}  {r['case']:{w2}}  {yn[r['rayka_ok']]:5}  {yn[r['kafka_ok']]:5}  "
              f"{yn[r['same_shape']]:10}{mark}", file=file)
    n = len(rows)
    print(f"\n{sum(r['rayka_ok'] for r in rows)}/{n} ok on rayka, "
          f"{sum(bool(r['kafka_ok']) for r in rows)}/{n} ok on Kafka, "
          f"{sum(r['same_shape'] for r in rows)}/{n} same shape, "
          f"{sum(r['regression'] for r in rows)} pass on Kafka and fail on rayka", file=file)
    for s in (rk, kf):
        if s:
            print(f"{s['system']}: start {s['start_s']} s, cases {s['cases_s']} s, stop {s['stop_s']} s, "
                  f"total {s['total_s']} s", file=file)
    diffs = [r for r in rows if not r["rayka_ok"] or not r["same_shape"]]
    if diffs:
        print("\nDetails:", file=file)
    for r in diffs:
        print(f"- {r['tool']} | {r['case']}: rayka: {r['rayka_why'] or 'ok'}; kafka: {r['kafka_why'] or 'ok'}"
              + (f"; shape: {r['shape_diff']}" if r["shape_diff"] else ""), file=file)


def _child(name: str, out: Path, only: str | None) -> dict:
    """Run one system in a child process (its own Ray / JVMs, all stopped when it ends)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), name, "--out", str(out)]
    if only:
        cmd += ["--only", only]
    log_path = out.with_suffix(".log")
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    try:
        with open(log_path, "w") as log:      # everything, Ray's actor logs too; progress on stderr
            for line in proc.stderr:
                log.write(line)
                if line.startswith(("  ok", "  FAIL", "==", "Traceback")):
                    sys.stderr.write(line)
                    sys.stderr.flush()
        proc.wait()
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        raise
    if not out.exists():
        raise RuntimeError(f"{name} run wrote no results (exit {proc.returncode})")
    return json.loads(out.read_text())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the cases against a running cluster")
    r.add_argument("--bootstrap", required=True)
    for name in ("rayka", "kafka"):
        sub.add_parser(name, help=f"start {name}, run the cases, stop it")
    sub.add_parser("compare", help="rayka, then Kafka; table; exit 1 on a rayka-only failure")
    up = sub.add_parser("up", help="start a cluster, print its bootstrap, wait for SIGTERM/Ctrl-C")
    up.add_argument("system", choices=sorted(SYSTEMS))
    t = sub.add_parser("table", help="print the table of a compare JSON")
    t.add_argument("json")
    m = sub.add_parser("merge", help="table from separate rayka/kafka JSONs (no clusters)")
    m.add_argument("--rayka", required=True)
    m.add_argument("--kafka", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--recheck", action="store_true",
                   help="re-evaluate this file's assertions and shapes on the stored raw outputs")
    for sp in (r, *(sub.choices[n] for n in ("rayka", "kafka", "compare"))):
        sp.add_argument("--out", required=True, help="JSON with every output")
        sp.add_argument("--only", help="regex on 'tool case' (cases depend on earlier ones)")
    a = p.parse_args(argv)

    if a.cmd == "run":
        res = run_all(a.bootstrap, a.only)
        Path(a.out).write_text(json.dumps(res, indent=1))
        return 0 if all(c["ok"] for c in res["cases"]) else 1
    if a.cmd in SYSTEMS:
        res = run_system(a.cmd, a.only)
        Path(a.out).write_text(json.dumps(res, indent=1))
        return 0 if all(c["ok"] for c in res["cases"]) else 1
    if a.cmd == "up":
        s = SYSTEMS[a.system]()
        bs = s.start()
        print(bs, flush=True)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        try:
            while not stop:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            s.stop()
        return 0
    if a.cmd == "table":
        doc = json.loads(Path(a.json).read_text())
        print_table(doc["table"], doc["rayka"], doc["kafka"])
        return 0
    if a.cmd == "merge":
        rk, kf = (json.loads(Path(x).read_text()) for x in (a.rayka, a.kafka))
        if a.recheck:
            for doc in (rk, kf):
                recheck(doc)
        rows, regressions = compare(rk, kf)
        Path(a.out).write_text(json.dumps({"rayka": rk, "kafka": kf, "table": rows}, indent=1))
        print_table(rows, rk, kf)
        return 1 if regressions else 0
    # compare
    out = Path(a.out)
    t0 = time.monotonic()
    rk = _child("rayka", out.with_suffix(".rayka.json"), a.only)
    kf = _child("kafka", out.with_suffix(".kafka.json"), a.only)
    rows, regressions = compare(rk, kf)
    out.write_text(json.dumps({"rayka": rk, "kafka": kf, "table": rows,
                               "total_s": round(time.monotonic() - t0, 1)}, indent=1))
    print_table(rows, rk, kf)
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
