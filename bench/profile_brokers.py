"""Where each system's brokers spend their CPU in the side-by-side bench's paced runs: a
sampling profile of every broker of a settled Kafka (async-profiler) and of rayka (py-spy),
over the same windows.

Rules:
1. Each system is started fresh and settled first (bench/settle.py: a Kafka whose JIT still
   compiles is not the one compared), then each rate of `--rates` gets one paced window
   (bench/wire_bench.py latency_once, linger.ms 0, 6 partitions, RF 3) with every broker
   sampled throughout it.
2. Kafka: async-profiler 4.1 (Maven Central's tools.profiler:async-profiler, pinned by
   compat/kafka/profiler/pom.xml), attached with `jcmd <pid> JVMTI.agent_load` and the
   per-thread CPU timer (event=ctimer, 1 ms, threads): it samples Java, the JVM's own
   threads and native frames without changing what the JIT compiled. Not JFR: a JFR
   recording with settings=profile set Kafka's C2 compiler to work again (1.7-1.9 ms of
   compiler CPU per record per broker at 200/s, ack p50 240 ms on a settled cluster), so
   it profiles a different Kafka. rayka: py-spy record at PY_SPY_RATE, --gil (only a
   thread holding the GIL is sampled: the one running Python or uvloop's C code; a thread
   waiting in C without it is idle), --nonblocking (the broker is not paused to be read).
   py-spy costs rayka more than async-profiler costs Kafka (at 1,000 Hz without --gil a
   200/s window's ack p50 went to 12.8 ms), so a window's latencies under it are not the
   bench's; its shares are what this is for.
3. A profile is the samples' collapsed stacks, the thread first (both tools' formats);
   `summarize` gives each thread group's share (thread names without their numbers), the
   top leaf frames (own time) and the inclusive share of each frame named in the system's
   SUBSYSTEMS (a sample counts once for each name found anywhere in its stack).
4. Beside the profile, the window's figures as the bench measures them: broker CPU per
   record per broker, ack p50 and p99, requests per record, the machine's busy share, and
   the brokers' CPU by thread name (/proc).
5. Out: JSON (`--out`), one entry per system and rate; the collapsed stacks stay in a
   temporary directory (printed) for flame graphs.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.settle import settle, window_facts  # noqa: E402
from bench.wire_bench import PARTITIONS, latency_once  # noqa: E402

PROFILER_POM = ROOT / "compat" / "kafka" / "profiler" / "pom.xml"
PROFILER_DIR = ROOT / "compat" / "kafka" / "build" / "profiler"
AGENT = "linux-x64/libasyncProfiler.so"
WINDOW_S = 10.0
PY_SPY_RATE = 200
TOP = 25
SUBSYSTEMS = {
    "kafka": ("kafka/network/Processor.run", "org/apache/kafka/common/network/Selector.poll",
              "kafka/server/KafkaRequestHandler.run", "KafkaApis.handleFetchRequest",
              "KafkaApis.handleProduceRequest", "ReplicaManager.fetchMessages",
              "ReplicaManager.readFromLog", "ReplicaManager.appendRecords",
              "UnifiedLog.append", "DelayedFetch.tryComplete", "DelayedOperation",
              "Partition.updateFollowerFetchState", "AbstractFetcherThread.processFetchRequest",
              "FetchSession", "Sensor.record", "LockSupport.park", "writev", "epoll_wait"),
    "rayka": ("data_received (", "handlers/data.py:", "fetch_begin (", "leader_reads.py:",
              "produce_begin (", "append_as_leader (", "append_as_follower (",
              "purgatory.py:", "fetcher.py:", "partition_state.py:", "fetch_session.py:",
              "codec.py:", "hot_writers.py:", "segment.py:", "records.py:"),
}


# -- collapsed stacks ----------------------------------------------------------------------------
def thread_group(frame: str) -> str:
    """A thread frame without its numbers: async-profiler's "[name tid=N]" and py-spy's
    "thread (N): name" name each thread; pools differ only by their numbers."""
    frame = re.sub(r"^thread \(\d+\):\s*", "", frame.strip())
    frame = re.sub(r"\s*tid=\d+\]$", "]", frame)
    return re.sub(r"\d+", "#", frame)


def summarize(lines, subsystems=(), top: int = TOP) -> dict:
    """Collapsed stacks ("thread;frame;...;leaf count" per line) → {"samples", "threads":
    {group: share}, "leaves": {frame: share} (the `top` largest), "inclusive": {name:
    share} for each of `subsystems`}. Shares are of all samples, rounded to 0.1 %."""
    threads, leaves, inclusive = collections.Counter(), collections.Counter(), \
        collections.Counter()
    total = 0
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"not a collapsed stack line: {line[:80]!r}")
        n = int(count)
        frames = stack.split(";")
        total += n
        threads[thread_group(frames[0])] += n
        leaves[frames[-1]] += n
        for name in subsystems:
            if name in stack:
                inclusive[name] += n

    def share(counter, names):
        return {k: round(100.0 * counter[k] / total, 1) if total else 0.0 for k in names}
    return {"samples": total,
            "threads": share(threads, [k for k, _ in threads.most_common()]),
            "leaves": share(leaves, [k for k, _ in leaves.most_common(top)]),
            "inclusive": share(inclusive, subsystems)}


# -- the profilers -----------------------------------------------------------------------------
def profiler_agent() -> Path:
    """async-profiler's linux-x64 agent, from its Maven jar (fetched once per pom hash)."""
    from compat.kafka.launcher import copy_dependencies
    libs = copy_dependencies(PROFILER_POM, PROFILER_DIR / "jars", "async-profiler-*.jar")
    agent = PROFILER_DIR / AGENT
    if not agent.exists():
        jar = next(libs.glob("async-profiler-*.jar"))
        with zipfile.ZipFile(jar) as z:
            z.extract(AGENT, PROFILER_DIR)
    return agent


def agent_command(pid: int, agent: Path, command: str) -> list[str]:
    """jcmd's JVMTI.agent_load with one async-profiler command: jcmd splits its own
    arguments on commas unless the agent's options are quoted inside the argument."""
    return ["jcmd", str(pid), "JVMTI.agent_load", str(agent), f'"{command}"']


def _run(cmd: list[str]) -> None:
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if got.returncode != 0 or "[ERROR]" in got.stdout:
        raise RuntimeError(f"{' '.join(cmd)}: {(got.stdout + got.stderr).strip()[-400:]}")


class KafkaSampler:
    def __init__(self, pids: dict[int, int], out: Path):
        self.pids, self.out, self.agent = pids, out, profiler_agent()

    def start(self, seconds: float) -> None:
        for pid in self.pids.values():
            _run(agent_command(pid, self.agent, "start,event=ctimer,interval=1ms,threads"))

    def stop(self) -> list[Path]:
        files = []
        for b, pid in self.pids.items():
            f = self.out / f"kafka-b{b}.collapsed"
            _run(agent_command(pid, self.agent, f"stop,collapsed,file={f}"))
            files.append(f)
        return files

    def abandon(self) -> None:
        """Stop sampling every JVM the window started (a JVM never started answers an
        error, ignored): a failed window must not leave a profiler running in a broker."""
        for b, pid in self.pids.items():
            try:
                _run(agent_command(pid, self.agent,
                                   f"stop,collapsed,file={self.out / f'abandoned-b{b}.collapsed'}"))
            except (RuntimeError, OSError, subprocess.SubprocessError):
                pass


class RaykaSampler:
    def __init__(self, pids: dict[int, int], out: Path):
        self.pids, self.out, self.procs = pids, out, {}

    def start(self, seconds: float) -> None:
        py_spy = Path(sys.executable).with_name("py-spy")
        for b, pid in self.pids.items():
            self.procs[b] = subprocess.Popen(
                [str(py_spy), "record", "--pid", str(pid), "--rate", str(PY_SPY_RATE),
                 "--duration", str(int(seconds) + 1), "--format", "raw", "--threads", "--gil",
                 "--nonblocking", "--output", str(self.out / f"rayka-b{b}.collapsed")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> list[Path]:
        for proc in self.procs.values():
            proc.wait(timeout=120)
        return [self.out / f"rayka-b{b}.collapsed" for b in self.procs]

    def abandon(self) -> None:
        """Stop every py-spy the window started (by its pid, never by name)."""
        for proc in self.procs.values():
            proc.terminate()
            proc.wait(timeout=30)


# -- the windows ---------------------------------------------------------------------------------
def profile_window(system, sampler_class, rate: int, seconds: float, out: Path,
                   paced=latency_once) -> dict:
    out = out.resolve()             # the JVM writes a relative file name in its own cwd
    out.mkdir(parents=True, exist_ok=True)
    pids = system.broker_pids()
    topic = system.fresh_topic("vs-profile", PARTITIONS, 300)
    sampler = sampler_class(pids, out)
    try:
        try:
            sampler.start(seconds)
            got = paced(system.bootstrap_servers(), topic, rate, seconds, 0,
                        broker_pids=list(pids.values()))
        except BaseException:
            sampler.abandon()
            raise
        files = sampler.stop()
    finally:
        system.delete_topic(topic)
    n = got["sent"] * got["brokers"]
    lines = [line for f in files for line in f.read_text().splitlines()]
    by_thread = collections.Counter()
    for name, cpu_s in got["broker_threads_cpu_s"].items():
        by_thread[thread_group(name)] += cpu_s
    return {"rate": rate, "linger_ms": 0, "seconds": seconds, **window_facts(got),
            "requests_per_record": round(got["requests"] / got["sent"], 2),
            "threads_us_per_record": {k: round(1e6 * v / n, 1)
                                      for k, v in by_thread.most_common(12)},
            "profile": summarize(lines, SUBSYSTEMS[system.name])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", default="kafka,rayka")
    ap.add_argument("--rates", default="200,1000")
    ap.add_argument("--seconds", type=float, default=WINDOW_S)
    ap.add_argument("--out", required=True, help="the JSON to write")
    args = ap.parse_args(argv)
    from bench.systems import KafkaSystem, RaykaSystem
    classes = {"kafka": (KafkaSystem, KafkaSampler), "rayka": (RaykaSystem, RaykaSampler)}
    result = {"bench": "profile_brokers", "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "windows": []}
    work = Path(tempfile.mkdtemp(prefix="rayka-profile-"))     # the collapsed stacks
    print(f"collapsed stacks in {work}", flush=True)
    for name in args.systems.split(","):
        system_class, sampler_class = classes[name]
        system = system_class()
        try:
            result.setdefault("settle", {})[name] = settle(system)
            for rate in (int(r) for r in args.rates.split(",")):
                w = profile_window(system, sampler_class, rate, args.seconds,
                                   work / f"{name}-{rate}")
                w["system"] = name
                result["windows"].append(w)
                print(f"{name} {rate}/s: {w['broker_us_per_record']} µs/record/broker, ack "
                      f"p50 {w['ack_p50_ms']} ms, {w['profile']['samples']} samples",
                      flush=True)
        finally:
            system.close()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
