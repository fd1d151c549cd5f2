"""Apache Kafka's own jars (3.9.2, from Maven Central): its CLI tools, and Kafka itself in
ZooKeeper mode, for compat suites and benchmarks that need the real thing beside rayka.

Rules:

* Jars: ``compat/kafka/pom.xml`` pins Kafka 3.9.2 (the last release line with ZooKeeper
  mode; the newest 3.9.x on Maven Central) and the reload4j/slf4j-reload4j logging its
  binary distribution ships. ``ensure_libs()`` runs ``mvn dependency:copy-dependencies``
  into ``compat/kafka/build/libs`` once; ``libs/.stamp`` holds the pom's hash, so a
  changed pom rebuilds libs/ and an unchanged one costs nothing. ZooKeeper's client jar
  on Kafka's classpath is Maven's 3.8.4 (what Kafka ships), never Debian's.
* Tools run exactly as a distribution's ``bin/*.sh`` runs them: ``java $KAFKA_HEAP_OPTS
  $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_JMX_OPTS -Dkafka.logs.dir=$LOG_DIR $KAFKA_LOG4J_OPTS
  -cp 'libs/*' $KAFKA_OPTS <main class> args`` with the scripts' defaults (heap 256M, or
  512M for console/perf/verifiable tools; log4j ``config/tools-log4j.properties``: WARN to
  stderr; the same environment variables override them). ``TOOLS`` maps each script
  name to its 3.9.2 main class. ``make_bin(dir)`` writes real shell scripts (one per tool
  plus ``kafka-run-class.sh``) for suites that call ``$KAFKA_PATH/bin/kafka-topics.sh``;
  ``make_home(dir)`` lays out ``dir/bin``, ``dir/libs``, ``dir/config`` (a KAFKA_PATH).
* ``KafkaCluster`` starts Kafka 3.9.2 in ZooKeeper mode: a real ZooKeeper
  (controller/zookeeper/server.py, Debian's server; fresh temp data dir, free port,
  tickTime 3000 ms like Kafka's config/zookeeper.properties) unless a connect string is
  given, and N brokers (default 3), each a ``kafka.Kafka`` JVM with its own
  server.properties: ``listeners=PLAINTEXT://127.0.0.1:<free port>``, ZooKeeper chroot
  ``/kafka-<uuid>``, internal topics' replication min(3, N), transaction log min ISR
  min(2, N). Only loopback: one port per broker and one for ZooKeeper, all chosen free.
* Heap: ``-Xmx512m -Xms512m`` per broker by default (``heap=``; Kafka's own default is 1G),
  recorded in ``cluster.heap`` and in each broker's ``command.txt``. JVM flags are
  kafka-server-start.sh's (G1, MaxGCPauseMillis=20, ..., GC log); nothing extra is needed
  on Java 17.
* Files: everything under one temp dir (``cluster.base_dir``, ``rayka-kafka-*``):
  ``broker-<id>/server.properties``, ``broker-<id>/data`` (log.dirs), ``broker-<id>/logs``
  (kafka.logs.dir: server.log, controller.log, state-change.log, kafkaServer-gc.log, and
  kafkaServer.out with the JVM's stdout/stderr). ZooKeeper's files are in its own temp dir.
* Readiness is polled with a deadline, never slept: a broker is up when its JVM lives and
  a Metadata request to its listener lists every live broker and a controller.
* Processes: each JVM runs in its own session (process group) and dies with the thread
  that started it (PR_SET_PDEATHSIG, main thread only); an atexit hook stops the rest.
  ``stop()`` sends SIGTERM by pid (non-controllers first, the controller last), waits,
  SIGKILLs after the timeout, then stops ZooKeeper and removes the temp dirs (``keep=True``
  keeps them). A failed ``start()`` stops everything it started before raising, with the
  tail of the failing broker's log (``RAYKA_KAFKA_KEEP=1`` keeps its files). Never by
  name (no pkill/killall). A full stop takes ~12 s once topics exist: the last broker has
  nowhere to move its leaders, so its controlled shutdown retries as Kafka's defaults say
  (controlled.shutdown.max.retries=3, retry.backoff.ms=5000) before it exits.
* ``kill_broker(id)`` is SIGKILL; ``start_broker(id)`` restarts it with the same port,
  config and data, first waiting (kazoo, if importable) for ZooKeeper to expire the dead
  broker's registration (zookeeper.session.timeout.ms, 18 s by default).

CLI:
  python compat/kafka/launcher.py libs                      # download libs/ (Makefile)
  python compat/kafka/launcher.py up --brokers 3            # until Ctrl-C / SIGTERM
  python compat/kafka/launcher.py tool kafka-topics.sh --bootstrap-server H:P --list
  python compat/kafka/launcher.py bin DIR | home DIR | tools
"""
from __future__ import annotations

import argparse
import atexit
import ctypes
import fcntl
import hashlib
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
from controller.zookeeper.server import ZooKeeperServer, free_ports, log_tail  # noqa: E402
POM = HERE / "pom.xml"
BUILD = HERE / "build"
LIBS = BUILD / "libs"
CONFIG = BUILD / "config"
TOOL_LOG_DIR = BUILD / "logs"
KAFKA_VERSION = "3.9.2"

__all__ = ["KAFKA_VERSION", "TOOLS", "ensure_libs", "tool_command", "run_tool", "make_bin",
           "make_home", "KafkaCluster", "KafkaLaunchError"]


class KafkaLaunchError(RuntimeError):
    """The jars could not be fetched, or Kafka/ZooKeeper did not start."""


# -- tools ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolSpec:
    main: str
    heap: str | None = None      # the script's KAFKA_HEAP_OPTS default (else kafka-run-class's)
    log4j: str | None = None     # the script's log4j file in config/ (else tools-log4j)
    name: str | None = None      # -name (daemon name: <LOG_DIR>/<name>.out, GC log name)
    loggc: bool = False


_S = ToolSpec
# bin/<script> -> main class, as in Kafka 3.9.2's distribution (classes checked in the jars)
TOOL_SPECS: dict[str, ToolSpec] = {
    "kafka-server-start.sh": _S("kafka.Kafka", "-Xmx1G -Xms1G", "log4j.properties",
                                "kafkaServer", True),
    "kafka-topics.sh": _S("org.apache.kafka.tools.TopicCommand"),
    "kafka-configs.sh": _S("kafka.admin.ConfigCommand"),
    "kafka-acls.sh": _S("kafka.admin.AclCommand"),
    "kafka-consumer-groups.sh": _S("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"),
    "kafka-console-producer.sh": _S("kafka.tools.ConsoleProducer", "-Xmx512M"),
    "kafka-console-consumer.sh": _S("org.apache.kafka.tools.consumer.ConsoleConsumer", "-Xmx512M"),
    "kafka-producer-perf-test.sh": _S("org.apache.kafka.tools.ProducerPerformance", "-Xmx512M"),
    "kafka-consumer-perf-test.sh": _S("org.apache.kafka.tools.ConsumerPerformance", "-Xmx512M"),
    "kafka-verifiable-producer.sh": _S("org.apache.kafka.tools.VerifiableProducer", "-Xmx512M"),
    "kafka-verifiable-consumer.sh": _S("org.apache.kafka.tools.VerifiableConsumer", "-Xmx512M"),
    "kafka-leader-election.sh": _S("org.apache.kafka.tools.LeaderElectionCommand"),
    "kafka-delete-records.sh": _S("org.apache.kafka.tools.DeleteRecordsCommand"),
    "kafka-log-dirs.sh": _S("org.apache.kafka.tools.LogDirsCommand"),
    "kafka-get-offsets.sh": _S("org.apache.kafka.tools.GetOffsetShell"),
    "kafka-transactions.sh": _S("org.apache.kafka.tools.TransactionsCommand"),
    "kafka-reassign-partitions.sh": _S("org.apache.kafka.tools.reassign.ReassignPartitionsCommand"),
    "kafka-broker-api-versions.sh": _S("kafka.admin.BrokerApiVersionsCommand"),
    "kafka-features.sh": _S("org.apache.kafka.tools.FeatureCommand"),
    "kafka-delegation-tokens.sh": _S("org.apache.kafka.tools.DelegationTokenCommand"),
    "kafka-client-metrics.sh": _S("org.apache.kafka.tools.ClientMetricsCommand"),
    "kafka-replica-verification.sh": _S("org.apache.kafka.tools.ReplicaVerificationTool"),
    "kafka-e2e-latency.sh": _S("org.apache.kafka.tools.EndToEndLatency"),
    "kafka-jmx.sh": _S("org.apache.kafka.tools.JmxTool"),
    "kafka-cluster.sh": _S("org.apache.kafka.tools.ClusterTool"),
    "kafka-metadata-quorum.sh": _S("org.apache.kafka.tools.MetadataQuorumCommand"),
    "kafka-storage.sh": _S("kafka.tools.StorageTool"),
    "kafka-dump-log.sh": _S("kafka.tools.DumpLogSegments"),
    "kafka-streams-application-reset.sh": _S("org.apache.kafka.tools.StreamsResetter"),
    "kafka-mirror-maker.sh": _S("kafka.tools.MirrorMaker"),          # MirrorMaker 1 (deprecated)
    "zookeeper-shell.sh": _S("org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka"),
    "zookeeper-security-migration.sh": _S("kafka.admin.ZkSecurityMigrator"),
    "connect-distributed.sh": _S("org.apache.kafka.connect.cli.ConnectDistributed",
                                 "-Xms256M -Xmx2G", "connect-log4j.properties", "connectDistributed"),
    "connect-standalone.sh": _S("org.apache.kafka.connect.cli.ConnectStandalone",
                                "-Xms256M -Xmx2G", "connect-log4j.properties", "connectStandalone"),
    "connect-mirror-maker.sh": _S("org.apache.kafka.connect.mirror.MirrorMaker",
                                  "-Xms256M -Xmx2G", "connect-log4j.properties", "mirrorMaker"),
    # no script upstream (system tests run it through kafka-run-class.sh); named here for use
    "kafka-transactional-message-copier.sh": _S("org.apache.kafka.tools.TransactionalMessageCopier",
                                                "-Xmx512M"),
}
TOOLS: dict[str, str] = {k: v.main for k, v in TOOL_SPECS.items()}

# kafka-run-class.sh's defaults
DEFAULT_HEAP = "-Xmx256M"
PERF_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
             "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
JMX_OPTS = ("-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.authenticate=false "
            "-Dcom.sun.management.jmxremote.ssl=false")

# Kafka 3.9's config/*log4j.properties (log4j 1.x syntax, read by reload4j)
_PATTERN = "[%d] %p %m (%c)%n"
CONFIG_FILES = {
    "tools-log4j.properties": f"""\
log4j.rootLogger=WARN, stderr

log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern={_PATTERN}
log4j.appender.stderr.Target=System.err
""",
    "log4j.properties": "log4j.rootLogger=INFO, stdout, kafkaAppender\n\n"
    "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
    f"log4j.appender.stdout.layout.ConversionPattern={_PATTERN}\n\n"
    + "".join(
        f"log4j.appender.{app}=org.apache.log4j.DailyRollingFileAppender\n"
        f"log4j.appender.{app}.DatePattern='.'yyyy-MM-dd-HH\n"
        f"log4j.appender.{app}.File=${{kafka.logs.dir}}/{fname}\n"
        f"log4j.appender.{app}.layout=org.apache.log4j.PatternLayout\n"
        f"log4j.appender.{app}.layout.ConversionPattern={_PATTERN}\n\n"
        for app, fname in (("kafkaAppender", "server.log"), ("stateChangeAppender", "state-change.log"),
                           ("requestAppender", "kafka-request.log"), ("cleanerAppender", "log-cleaner.log"),
                           ("controllerAppender", "controller.log"),
                           ("authorizerAppender", "kafka-authorizer.log")))
    + """\
log4j.logger.org.apache.zookeeper=INFO
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.kafka.request.logger=WARN, requestAppender
log4j.additivity.kafka.request.logger=false
log4j.logger.kafka.network.RequestChannel$=WARN, requestAppender
log4j.additivity.kafka.network.RequestChannel$=false
log4j.logger.org.apache.kafka.controller=INFO, controllerAppender
log4j.additivity.org.apache.kafka.controller=false
log4j.logger.kafka.controller=TRACE, controllerAppender
log4j.additivity.kafka.controller=false
log4j.logger.kafka.log.LogCleaner=INFO, cleanerAppender
log4j.additivity.kafka.log.LogCleaner=false
log4j.logger.state.change.logger=INFO, stateChangeAppender
log4j.additivity.state.change.logger=false
log4j.logger.kafka.authorizer.logger=INFO, authorizerAppender
log4j.additivity.kafka.authorizer.logger=false
""",
    "connect-log4j.properties": """\
log4j.rootLogger=INFO, stdout, connectAppender

log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.connectAppender=org.apache.log4j.DailyRollingFileAppender
log4j.appender.connectAppender.DatePattern='.'yyyy-MM-dd-HH
log4j.appender.connectAppender.File=${kafka.logs.dir}/connect.log
log4j.appender.connectAppender.layout=org.apache.log4j.PatternLayout

connect.log.pattern=[%d] %p %X{connector.context}%m (%c:%L)%n
log4j.appender.stdout.layout.ConversionPattern=${connect.log.pattern}
log4j.appender.connectAppender.layout.ConversionPattern=${connect.log.pattern}

log4j.logger.org.apache.zookeeper=ERROR
log4j.logger.org.reflections=ERROR
""",
}


# -- jars -------------------------------------------------------------------------------
def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)


def ensure_config() -> Path:
    """Write Kafka 3.9's log4j configs into build/config (idempotent); the dir."""
    CONFIG.mkdir(parents=True, exist_ok=True)
    for name, text in CONFIG_FILES.items():
        _write_if_changed(CONFIG / name, text)
    return CONFIG


def copy_dependencies(pom: Path, libs: Path, marker: str, *, quiet: bool = True,
                      touch: bool = False) -> Path:
    """`libs` with every jar `pom` depends on (`mvn dependency:copy-dependencies`), once per
    pom hash: libs/.stamp holds the hash, so a changed pom fetches again and an unchanged
    one costs nothing. A second process waits on a lock, then sees the stamp. The jars land
    in a temp dir that replaces `libs` whole; a jar matching the glob `marker` must be among
    them. KafkaLaunchError when mvn is missing or fails."""
    pom, libs = Path(pom), Path(libs)
    stamp, want = libs / ".stamp", hashlib.sha1(pom.read_bytes()).hexdigest()[:16]
    if stamp.exists() and stamp.read_text().strip() == want:
        if touch:
            stamp.touch()
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / f".{libs.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text().strip() == want:
            return libs
        mvn = shutil.which("mvn")
        if not mvn:
            raise KafkaLaunchError("mvn not found: install Debian's maven (apt-get install maven)")
        tmp = libs.parent / f"{libs.name}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        # outputDirectory must be absolute: a relative one resolves against the pom's dir
        cmd = [mvn, "-B", *(["-q"] if quiet else []), "-f", str(pom),
               "dependency:copy-dependencies", f"-DoutputDirectory={tmp.resolve()}"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode != 0 or not any(tmp.glob(marker)):
            shutil.rmtree(tmp, ignore_errors=True)
            raise KafkaLaunchError(f"{shlex.join(cmd)} failed ({proc.returncode}):\n"
                                   f"{(proc.stdout + proc.stderr)[-4000:]}")
        (tmp / ".stamp").write_text(want + "\n")
        old = libs.parent / f"{libs.name}.old{os.getpid()}"
        if libs.exists():
            os.replace(libs, old)
        os.replace(tmp, libs)
        shutil.rmtree(old, ignore_errors=True)
        if not quiet:
            print(f"== {len(list(libs.glob('*.jar')))} jars in {libs} "
                  f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    return libs


def ensure_libs(*, quiet: bool = True, touch: bool = False) -> Path:
    """build/libs with every jar of pom.xml (copy_dependencies, once per pom hash)."""
    ensure_config()
    return copy_dependencies(POM, LIBS, "kafka_2.13-*.jar", quiet=quiet, touch=touch)


def find_java(java=None) -> str:
    """java argument, else $JAVA_HOME/bin/java, else java on PATH (like kafka-run-class.sh)."""
    if java:
        return str(java)
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise KafkaLaunchError("java not found (set JAVA_HOME or install openjdk-17-jre-headless)")
    return found


def _split(s: str | None) -> list[str]:
    return s.split() if s else []    # the scripts expand these unquoted: word splitting only


def tool_command(tool: str, args=(), env: dict | None = None, java=None) -> list[str]:
    """The java command line bin/<tool> would exec. ``tool`` is a script name from TOOLS,
    ``kafka-run-class.sh`` (then args[0] is the main class) or a main class."""
    ensure_libs()
    args = list(args)
    env = dict(os.environ if env is None else env)
    if tool == "kafka-run-class.sh":
        if not args:
            raise ValueError("kafka-run-class.sh needs a main class")
        tool, args = args[0], args[1:]
    spec = TOOL_SPECS.get(tool) or ToolSpec(tool)
    if tool.endswith(".sh") and tool not in TOOL_SPECS:
        raise KeyError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOLS))}")
    log_dir = env.get("LOG_DIR") or str(TOOL_LOG_DIR)
    heap = env.get("KAFKA_HEAP_OPTS") or spec.heap or DEFAULT_HEAP
    perf = env.get("KAFKA_JVM_PERFORMANCE_OPTS") or PERF_OPTS
    jmx = env.get("KAFKA_JMX_OPTS") or JMX_OPTS
    if env.get("JMX_PORT"):
        jmx += f" -Dcom.sun.management.jmxremote.port={env['JMX_PORT']}"
    log4j = env.get("KAFKA_LOG4J_OPTS") or (
        f"-Dlog4j.configuration=file:{CONFIG / spec.log4j}" if spec.log4j else None)
    if log4j:
        Path(log_dir).mkdir(parents=True, exist_ok=True)   # the script creates it then
    else:
        log4j = f"-Dlog4j.configuration=file:{CONFIG / 'tools-log4j.properties'}"
    gc = (env.get("KAFKA_GC_LOG_OPTS") or
          f"-Xlog:gc*:file={log_dir}/{spec.name}-gc.log:time,tags:filecount=10,filesize=100M"
          ) if spec.loggc else env.get("KAFKA_GC_LOG_OPTS")
    return [find_java(java), *_split(heap), *_split(perf), *_split(gc), *_split(jmx),
            f"-Dkafka.logs.dir={log_dir}", *_split(log4j), "-cp", f"{LIBS}/*",
            *_split(env.get("KAFKA_OPTS")), spec.main, *map(str, args)]


def run_tool(tool: str, args=(), *, timeout_s: float, env: dict | None = None, input=None,
             text: bool = True, check: bool = False, cwd=None) -> subprocess.CompletedProcess:
    """Run bin/<tool> args as the distribution does; stdout/stderr captured.

    ``env`` adds to os.environ (KAFKA_HEAP_OPTS, KAFKA_OPTS, ... are honoured). On timeout the
    JVM is SIGKILLed (by pid) and subprocess.TimeoutExpired raised."""
    full_env = {**os.environ, **(env or {})}
    cmd = tool_command(tool, args, full_env)
    return subprocess.run(cmd, input=input, capture_output=True, text=text, timeout=timeout_s,
                          env=full_env, check=check, cwd=cwd,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          preexec_fn=_deathsig_preexec())


# -- bin/ scripts -----------------------------------------------------------------------
_RUN_CLASS = r"""#!/bin/bash
# kafka-run-class.sh, generated by compat/kafka/launcher.py: Apache Kafka __VERSION__'s
# bin/kafka-run-class.sh with the jars of compat/kafka/build/libs (Maven Central).
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] [-name servicename] [-loggc] classname [opts]"
  exit 1
fi
LIBS_DIR=__LIBS__
CONFIG_DIR=__CONFIG__
CLASSPATH="$LIBS_DIR/*${CLASSPATH:+:$CLASSPATH}"
if [ -z "$KAFKA_JMX_OPTS" ]; then
  KAFKA_JMX_OPTS="__JMX__"
fi
if [ $JMX_PORT ]; then
  KAFKA_JMX_OPTS="$KAFKA_JMX_OPTS -Dcom.sun.management.jmxremote.port=$JMX_PORT"
fi
if [ "x$LOG_DIR" = "x" ]; then
  LOG_DIR=__LOG_DIR__
fi
if [ -z "$KAFKA_LOG4J_OPTS" ]; then
  KAFKA_LOG4J_OPTS="-Dlog4j.configuration=file:$CONFIG_DIR/tools-log4j.properties"
else
  mkdir -p "$LOG_DIR"
fi
KAFKA_LOG4J_OPTS="-Dkafka.logs.dir=$LOG_DIR $KAFKA_LOG4J_OPTS"
if [ -z "$JAVA_HOME" ]; then JAVA="java"; else JAVA="$JAVA_HOME/bin/java"; fi
if [ -z "$KAFKA_HEAP_OPTS" ]; then
  KAFKA_HEAP_OPTS="__HEAP__"
fi
if [ -z "$KAFKA_JVM_PERFORMANCE_OPTS" ]; then
  KAFKA_JVM_PERFORMANCE_OPTS="__PERF__"
fi
while [ $# -gt 0 ]; do
  case $1 in
    -name) DAEMON_NAME=$2; CONSOLE_OUTPUT_FILE=$LOG_DIR/$DAEMON_NAME.out; shift 2 ;;
    -loggc) if [ -z "$KAFKA_GC_LOG_OPTS" ]; then GC_LOG_ENABLED="true"; fi; shift ;;
    -daemon) DAEMON_MODE="true"; shift ;;
    *) break ;;
  esac
done
if [ "x$GC_LOG_ENABLED" = "xtrue" ]; then
  KAFKA_GC_LOG_OPTS="-Xlog:gc*:file=$LOG_DIR/$DAEMON_NAME-gc.log:time,tags:filecount=10,filesize=100M"
fi
if [ "x$DAEMON_MODE" = "xtrue" ]; then
  nohup "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_GC_LOG_OPTS $KAFKA_JMX_OPTS $KAFKA_LOG4J_OPTS -cp "$CLASSPATH" $KAFKA_OPTS "$@" > "$CONSOLE_OUTPUT_FILE" 2>&1 < /dev/null &
else
  exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_GC_LOG_OPTS $KAFKA_JMX_OPTS $KAFKA_LOG4J_OPTS -cp "$CLASSPATH" $KAFKA_OPTS "$@"
fi
"""


def _script(tool: str, spec: ToolSpec) -> str:
    lines = ["#!/bin/bash",
             f"# {tool}, generated by compat/kafka/launcher.py (Apache Kafka {KAFKA_VERSION}): "
             f"{spec.main}"]
    if spec.log4j:
        lines += ['if [ "x$KAFKA_LOG4J_OPTS" = "x" ]; then',
                  f'  export KAFKA_LOG4J_OPTS="-Dlog4j.configuration=file:{CONFIG / spec.log4j}"',
                  "fi"]
    if spec.heap:
        lines += ['if [ "x$KAFKA_HEAP_OPTS" = "x" ]; then',
                  f'  export KAFKA_HEAP_OPTS="{spec.heap}"', "fi"]
    if spec.name:
        extra = f"-name {spec.name}" + (" -loggc" if spec.loggc else "")
        lines += [f"EXTRA_ARGS=${{EXTRA_ARGS-'{extra}'}}",
                  'COMMAND=$1', 'case $COMMAND in',
                  '  -daemon) EXTRA_ARGS="-daemon "$EXTRA_ARGS; shift ;;',
                  '  *) ;;', 'esac',
                  f'exec "$(dirname "$0")/kafka-run-class.sh" $EXTRA_ARGS {spec.main} "$@"']
    else:
        lines.append(f'exec "$(dirname "$0")/kafka-run-class.sh" {spec.main} "$@"')
    return "\n".join(lines) + "\n"


def make_bin(directory) -> Path:
    """Write kafka-run-class.sh and one script per TOOLS entry into ``directory``."""
    ensure_libs()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    run_class = (_RUN_CLASS.replace("__VERSION__", KAFKA_VERSION)
                 .replace("__LIBS__", shlex.quote(str(LIBS)))
                 .replace("__CONFIG__", shlex.quote(str(CONFIG)))
                 .replace("__LOG_DIR__", shlex.quote(str(TOOL_LOG_DIR)))
                 .replace("__JMX__", JMX_OPTS).replace("__HEAP__", DEFAULT_HEAP)
                 .replace("__PERF__", PERF_OPTS))
    scripts = {"kafka-run-class.sh": run_class}
    scripts.update({tool: _script(tool, spec) for tool, spec in TOOL_SPECS.items()})
    for name, text in scripts.items():
        path = d / name
        _write_if_changed(path, text)
        path.chmod(0o755)
    return d


def make_home(directory) -> Path:
    """A KAFKA_PATH: ``directory/bin`` (make_bin), ``libs`` and ``config`` (symlinks)."""
    home = Path(directory)
    make_bin(home / "bin")
    for name, target in (("libs", LIBS), ("config", CONFIG)):
        link = home / name
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
    return home


# -- processes --------------------------------------------------------------------------
_PR_SET_PDEATHSIG = 1


def _deathsig_preexec():
    """A child started from the main thread gets SIGKILL when this process dies."""
    if threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def set_deathsig():
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
    return set_deathsig


_LIVE: set = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_all_at_exit():
    with _LIVE_LOCK:
        live = list(_LIVE)
    for cluster in live:
        try:
            cluster.stop(timeout_s=10)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def metadata(host: str, port: int, timeout_s: float = 2.0) -> tuple[list[int], int]:
    """(broker ids, controller id) from a Metadata v1 request (no topics). Raises OSError."""
    client = b"rayka-compat"
    body = struct.pack(">hhih", 3, 1, 1, len(client)) + client + struct.pack(">i", 0)
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(struct.pack(">i", len(body)) + body)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed during Metadata")
            buf += chunk
    pos = 8                                              # size, correlation id
    (n,) = struct.unpack_from(">i", buf, pos); pos += 4
    ids = []
    for _ in range(n):
        node_id, hlen = struct.unpack_from(">ih", buf, pos); pos += 6 + hlen
        pos += 4                                         # port
        (rlen,) = struct.unpack_from(">h", buf, pos); pos += 2 + max(rlen, 0)
        ids.append(node_id)
    (controller,) = struct.unpack_from(">i", buf, pos)
    return sorted(ids), controller


def wait_all_listed(addresses, ids, timeout_s: float, who: str, interval_s: float = 0.5) -> None:
    """Until every (host, port) of `addresses` answers a Metadata request listing every
    broker id of `ids` and a controller; polled every interval_s, TimeoutError naming
    `who` after timeout_s."""
    ids = set(ids)
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            ok = True
            for host, port in addresses:
                listed, controller = metadata(host, port)
                ok = ok and set(listed) >= ids and controller >= 0
            if ok:
                return
        except OSError as exc:
            last = exc
        time.sleep(interval_s)     # poll interval while a broker restarts
    raise TimeoutError(f"{who}: brokers {sorted(ids)} not all up in {timeout_s} s ({last})")


class Broker:
    """One kafka.Kafka JVM: its id, port, dir, server.properties and process."""

    def __init__(self, broker_id: int, port: int, base: Path, sasl_port: int | None = None):
        self.id, self.port, self.sasl_port = broker_id, port, sasl_port
        self.dir = base / f"broker-{broker_id}"
        self.data_dir, self.log_dir = self.dir / "data", self.dir / "logs"
        self.config = self.dir / "server.properties"
        self.out = self.log_dir / "kafkaServer.out"
        self.gc_log = self.log_dir / "kafkaServer-gc.log"    # -Xlog adds .0, .1, ... rotated
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig) -> None:
        if self.is_running():
            try:
                os.kill(self.proc.pid, sig)              # by pid only
            except ProcessLookupError:
                pass


class KafkaCluster:
    """Apache Kafka 3.9.2 in ZooKeeper mode on loopback: N broker JVMs beside a ZooKeeper.

    ``zookeeper``: a connect string to use instead of starting a ZooKeeper server (a chroot
    ``/kafka-<uuid>`` is appended either way). ``properties``: extra server.properties (all
    brokers); ``broker_properties``: {id: {...}} per broker. Broker ids are 1..N.
    ``sasl=True`` adds a SASL_PLAINTEXT listener per broker (SCRAM-SHA-256 and -512; the
    brokers still talk PLAINTEXT to each other): ``sasl_bootstrap_servers``, and users made
    with ``add_scram_user`` (Kafka's own kafka-configs.sh)."""

    def __init__(self, brokers: int = 3, *, zookeeper: str | None = None,
                 heap: str = "-Xmx512m -Xms512m", default_replication_factor: int | None = None,
                 min_insync_replicas: int = 1, num_partitions: int = 1,
                 properties: dict | None = None, broker_properties: dict | None = None,
                 base_dir=None, start_timeout_s: float = 120.0, java=None,
                 jvm_opts: str | None = None, sasl: bool = False):
        if brokers < 1:
            raise ValueError("brokers >= 1")
        self.n, self.heap, self.java, self.jvm_opts = brokers, heap, java, jvm_opts
        self.sasl = sasl
        self.start_timeout_s = start_timeout_s
        self._zk_given = zookeeper
        self._zk = None                  # our ZooKeeperServer, if we start one
        self.chroot = f"/kafka-{uuid.uuid4().hex[:12]}"
        self._owns_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir else None
        rf = min(3, brokers)
        self.properties = {
            # Kafka 3.9's config/server.properties (ZooKeeper mode)
            "num.network.threads": 3, "num.io.threads": 8,
            "socket.send.buffer.bytes": 102400, "socket.receive.buffer.bytes": 102400,
            "socket.request.max.bytes": 104857600, "num.partitions": num_partitions,
            "num.recovery.threads.per.data.dir": 1, "log.retention.hours": 168,
            "log.retention.check.interval.ms": 300000, "zookeeper.connection.timeout.ms": 18000,
            "group.initial.rebalance.delay.ms": 0,
            # sized to the cluster
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min(2, brokers),
            "default.replication.factor": default_replication_factor or 1,
            "min.insync.replicas": min_insync_replicas,
        }
        self.properties.update(properties or {})
        self.broker_properties = {int(k): dict(v) for k, v in (broker_properties or {}).items()}
        self._brokers: dict[int, Broker] = {}
        self._lock = threading.RLock()
        self.timings: dict[str, float] = {}

    # -- properties ---------------------------------------------------------------------
    @property
    def zookeeper_connect(self) -> str:
        """ZooKeeper connect string with the cluster's chroot."""
        base = self._zk_given or (self._zk.connect_string if self._zk else None)
        if base is None:
            raise KafkaLaunchError("cluster not started")
        return base + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self._brokers.values())

    @property
    def sasl_bootstrap_servers(self) -> str:
        if not self.sasl:
            raise KafkaLaunchError("this cluster has no SASL listener (sasl=False)")
        return ",".join(f"127.0.0.1:{b.sasl_port}" for b in self._brokers.values())

    def add_scram_user(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512",
                       timeout_s: float = 60.0) -> None:
        """Kafka's kafka-configs.sh --alter --add-config on the PLAINTEXT listener, then
        polled until every broker accepts the user's login (the credential reaches the
        brokers through ZooKeeper's change notification)."""
        from confluent_kafka.admin import AdminClient
        run_tool("kafka-configs.sh", ["--bootstrap-server", self.bootstrap_servers, "--alter",
                                      "--add-config", f"{mechanism}=[password={password}]",
                                      "--entity-type", "users", "--entity-name", user],
                 timeout_s=timeout_s, check=True)
        deadline = time.monotonic() + timeout_s
        for b in self._brokers.values():
            conf = {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}",
                    "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                    "sasl.username": user, "sasl.password": password}
            while True:
                try:
                    AdminClient(conf).list_topics(timeout=5)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise KafkaLaunchError(f"broker {b.id} refuses {user}'s {mechanism} "
                                               f"login after {timeout_s} s") from None
                    time.sleep(0.5)      # poll interval while the credential propagates

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    def broker(self, broker_id: int) -> Broker:
        return self._brokers[broker_id]

    def pid(self, broker_id: int) -> int | None:
        b = self._brokers[broker_id]
        return b.proc.pid if b.is_running() else None

    def pids(self) -> dict[str, int]:
        """Every live JVM this cluster started: broker-<id> and zookeeper."""
        out = {f"broker-{i}": b.proc.pid for i, b in self._brokers.items() if b.is_running()}
        if self._zk is not None and self._zk.pid:
            out["zookeeper"] = self._zk.pid
        return out

    def live_ids(self) -> list[int]:
        return sorted(i for i, b in self._brokers.items() if b.is_running())

    def controller(self) -> int:
        """The controller's broker id, from a live broker's metadata (-1 if none known)."""
        for i in self.live_ids():
            try:
                return metadata("127.0.0.1", self._brokers[i].port)[1]
            except OSError:
                continue
        return -1

    def __repr__(self):
        return f"<KafkaCluster {KAFKA_VERSION} zk={self._zk_given or self._zk} {self.bootstrap_servers}>"

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> "KafkaCluster":
        """Start ZooKeeper (unless given) and every broker; wait until all are up."""
        with self._lock:
            t0 = time.monotonic()
            ensure_libs()
            with _LIVE_LOCK:
                _LIVE.add(self)
            try:
                if self.base_dir is None:
                    self.base_dir = Path(tempfile.mkdtemp(prefix="rayka-kafka-"))
                self.base_dir.mkdir(parents=True, exist_ok=True)
                if self._zk_given is None and self._zk is None:
                    self._zk = ZooKeeperServer(tick_time_ms=3000).start()
                self.timings["zookeeper_s"] = time.monotonic() - t0
                if not self._brokers:
                    ports = free_ports(self.n * (2 if self.sasl else 1))
                    self._brokers = {i + 1: Broker(i + 1, ports[i], self.base_dir,
                                                   ports[self.n + i] if self.sasl else None)
                                     for i in range(self.n)}
                for attempt in range(3):
                    for b in self._brokers.values():
                        if not b.is_running():
                            self._spawn(b)
                    try:
                        self._wait_ready(list(self._brokers), self.start_timeout_s)
                        break
                    except KafkaLaunchError as exc:
                        # a free port taken by someone else before the JVM bound it: the
                        # brokers that lost theirs get new ones (nothing registered yet)
                        if "Address already in use" not in str(exc) or attempt == 2:
                            raise
                        self._move_dead_brokers()
            except BaseException:
                self.stop(keep=bool(os.environ.get("RAYKA_KAFKA_KEEP")))
                raise
            self.timings["start_s"] = time.monotonic() - t0
            return self

    def _move_dead_brokers(self) -> None:
        dead = [b for b in self._brokers.values() if not b.is_running()]
        ports = free_ports(len(dead) * (2 if self.sasl else 1))
        for i, b in enumerate(dead):
            b.port = ports[i]
            b.sasl_port = ports[len(dead) + i] if self.sasl else None

    def _server_properties(self, b: Broker) -> str:
        listeners = f"PLAINTEXT://{b.address}"
        props = {}
        if b.sasl_port is not None:
            listeners += f",SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"
            props = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                     "inter.broker.listener.name": "PLAINTEXT",
                     **{f"listener.name.sasl_plaintext.{m}.sasl.jaas.config":
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                        for m in ("scram-sha-256", "scram-sha-512")}}
        props = {"broker.id": b.id, "listeners": listeners, "advertised.listeners": listeners,
                 "log.dirs": str(b.data_dir), "zookeeper.connect": self.zookeeper_connect,
                 **props}
        props.update(self.properties)
        props.update(self.broker_properties.get(b.id, {}))
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _command(self, b: Broker) -> list[str]:
        return [find_java(self.java), *_split(self.heap), *_split(PERF_OPTS),
                f"-Xlog:gc*:file={b.gc_log}:time,tags:filecount=10,filesize=100M",
                *_split(JMX_OPTS), f"-Dkafka.logs.dir={b.log_dir}",
                f"-Dlog4j.configuration=file:{CONFIG / 'log4j.properties'}",
                "-cp", f"{LIBS}/*", *_split(self.jvm_opts), "kafka.Kafka", str(b.config)]

    def _spawn(self, b: Broker) -> None:
        b.log_dir.mkdir(parents=True, exist_ok=True)
        b.data_dir.mkdir(parents=True, exist_ok=True)
        b.config.write_text(self._server_properties(b))
        cmd = self._command(b)
        (b.dir / "command.txt").write_text(shlex.join(cmd) + "\n")
        with open(b.out, "ab") as out:
            b.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, cwd=b.dir,
                                      start_new_session=True, preexec_fn=_deathsig_preexec())

    def _wait_ready(self, ids: list[int], timeout_s: float) -> None:
        """Until every live broker's Metadata lists all live brokers and a controller."""
        deadline = time.monotonic() + timeout_s
        while True:
            for i in ids:
                b = self._brokers[i]
                if not b.is_running():
                    raise KafkaLaunchError(
                        f"Kafka broker {i} ({b.address}) exited with code {b.proc.returncode}.\n"
                        f"--- last lines of {b.out} ---\n{log_tail(b.out, 40)}")
            live = self.live_ids()
            ok = True
            for i in live:
                try:
                    got, controller = metadata("127.0.0.1", self._brokers[i].port, 1.0)
                except (OSError, struct.error):
                    ok = False
                    break
                if got != live or controller < 0:
                    ok = False
                    break
            if ok:
                return
            if time.monotonic() >= deadline:
                slow = ids[0]
                raise KafkaLaunchError(
                    f"Kafka brokers {ids} not all up within {timeout_s:g} s "
                    f"(live {live}).\n--- last lines of {self._brokers[slow].out} ---\n"
                    f"{log_tail(self._brokers[slow].out, 40)}")
            time.sleep(0.2)

    def _terminate(self, brokers: list[Broker], timeout_s: float) -> None:
        for b in brokers:
            b.signal(signal.SIGTERM)
            b.signal(signal.SIGCONT)
        deadline = time.monotonic() + timeout_s
        for b in brokers:
            if b.proc is None:
                continue
            try:
                b.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                b.signal(signal.SIGKILL)
                b.proc.wait(10)

    def stop_broker(self, broker_id: int, timeout_s: float = 30.0) -> None:
        """Clean shutdown (SIGTERM: controlled shutdown), SIGKILL after timeout_s."""
        with self._lock:
            self._terminate([self._brokers[broker_id]], timeout_s)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL (no controlled shutdown); data and port are kept for start_broker."""
        with self._lock:
            b = self._brokers[broker_id]
            b.signal(signal.SIGKILL)
            if b.proc is not None:
                b.proc.wait(10)

    def start_broker(self, broker_id: int, timeout_s: float | None = None) -> None:
        """Start a stopped/killed broker again (same id, port, config, data); wait until up."""
        with self._lock:
            b = self._brokers[broker_id]
            if b.is_running():
                return
            timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
            deadline = time.monotonic() + timeout_s
            self._wait_unregistered(broker_id, deadline)
            while True:
                self._spawn(b)
                try:
                    self._wait_ready([broker_id], max(1.0, deadline - time.monotonic()))
                    return
                except KafkaLaunchError:
                    # the old registration may still be there (no kazoo to wait on it)
                    if (not b.is_running() and time.monotonic() < deadline
                            and "already exists" in log_tail(b.out, 200)):
                        time.sleep(1.0)
                        continue
                    b.signal(signal.SIGKILL)
                    if b.proc is not None:
                        b.proc.wait(10)
                    raise

    def _wait_unregistered(self, broker_id: int, deadline: float) -> None:
        """Wait for ZooKeeper to drop /brokers/ids/<id> of a dead session (kazoo if any)."""
        try:
            from kazoo.client import KazooClient
        except ImportError:
            return
        zk = KazooClient(hosts=self.zookeeper_connect, timeout=10)
        zk.start(timeout=10)
        try:
            while zk.exists(f"/brokers/ids/{broker_id}") and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            zk.stop()
            zk.close()

    def stop(self, timeout_s: float = 30.0, keep: bool = False) -> None:
        """Stop every broker (controller last), then ZooKeeper; remove temp dirs unless keep."""
        with self._lock:
            live = [self._brokers[i] for i in self.live_ids()]
            if live:
                controller = self.controller()
                others = [b for b in live if b.id != controller]
                self._terminate(others, timeout_s)
                self._terminate([b for b in live if b.id == controller], timeout_s)
            if self._zk is not None:
                self._zk.stop(keep_data=keep)
                self._zk = None if not keep else self._zk
            if self._owns_dir and self.base_dir is not None and not keep:
                shutil.rmtree(self.base_dir, ignore_errors=True)
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# -- CLI --------------------------------------------------------------------------------
def _cmd_up(a) -> int:
    props = dict(kv.split("=", 1) for kv in a.property)
    cluster = KafkaCluster(a.brokers, zookeeper=a.zookeeper, heap=a.heap, properties=props,
                           default_replication_factor=a.replication_factor,
                           min_insync_replicas=a.min_isr)
    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.monotonic()
    cluster.start()
    try:
        print(f"Kafka {KAFKA_VERSION} (ZooKeeper mode) up in {time.monotonic() - t0:.1f} s",
              file=sys.stderr)
        print(f"zookeeper: {cluster.zookeeper_connect}", file=sys.stderr)
        print(f"dir: {cluster.base_dir}  pids: {cluster.pids()}", file=sys.stderr)
        print(cluster.bootstrap_servers, flush=True)
        while not stop.wait(1.0):
            dead = [i for i in cluster.broker_ids if not cluster.broker(i).is_running()]
            if dead:
                print(f"broker(s) {dead} exited; stopping", file=sys.stderr)
                return 1
        return 0
    finally:
        cluster.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("libs", help="fetch the jars into build/libs (idempotent)")
    up = sub.add_parser("up", help="run a Kafka cluster until Ctrl-C/SIGTERM")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--zookeeper", help="use this ZooKeeper instead of starting one")
    up.add_argument("--heap", default="-Xmx512m -Xms512m")
    up.add_argument("--replication-factor", type=int, default=None)
    up.add_argument("--min-isr", type=int, default=1)
    up.add_argument("--property", "-p", action="append", default=[], metavar="K=V")
    tool = sub.add_parser("tool", help="run bin/<tool> args", prefix_chars="\0")
    tool.add_argument("tool")
    tool.add_argument("args", nargs=argparse.REMAINDER)
    b = sub.add_parser("bin", help="write bin/ scripts into DIR")
    b.add_argument("dir")
    h = sub.add_parser("home", help="write a KAFKA_PATH (bin, libs, config) into DIR")
    h.add_argument("dir")
    sub.add_parser("tools", help="print the tool -> main class table")
    a = p.parse_args(argv)
    if a.cmd == "libs":
        ensure_libs(quiet=False, touch=True)
        print(LIBS)
    elif a.cmd == "up":
        return _cmd_up(a)
    elif a.cmd == "tool":
        cmd = tool_command(a.tool, a.args)
        os.execv(cmd[0], cmd)            # like the script: exec, same stdio and exit code
    elif a.cmd == "bin":
        print(make_bin(a.dir))
    elif a.cmd == "home":
        print(make_home(a.dir))
    elif a.cmd == "tools":
        for name, main_class in TOOLS.items():
            print(f"{name:40} {main_class}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
