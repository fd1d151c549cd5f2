"""Side-by-side family "tools": Apache Kafka 3.9.2's own perf tools against each system.

Rules: the same code runs against rayka and Kafka (bench/versus.py). The tools are the real
JVM tools, run as the distribution's bin/*.sh run them (compat/kafka/launcher.py
run_tool: the scripts' heap -Xmx512M and JVM flags); their start (~1-2 s of JVM) is part
of their own measurement, not ours: every figure is what the tool itself prints. A fresh
topic per run, deleted afterwards. One sample per run per figure. Before the first run,
bench/versus_groups.py's warm_up() (not measured, its seconds noted): Kafka creates
__consumer_offsets on a group's first use, which would otherwise land in run 1's
consumer figures.

Per run: a fresh topic of 6 partitions (RF 3, min ISR 2), then
1. kafka-producer-perf-test.sh --topic T --num-records 2,000,000 (quick: 50,000; at
   500,000 the consumer's fetch took ~0.5 s, too short to repeat within 20 %)
   --record-size 100 --throughput -1 --producer-props bootstrap.servers=<all brokers>
   acks=all enable.idempotence=true linger.ms=5. From its final summary line ("N records
   sent, X records/sec (Y MB/sec), Z ms avg latency, W ms max latency, a ms 50th, b ms
   95th, c ms 99th, d ms 99.9th."):
   tools.producer_perf.records_per_s = X (records/s, higher),
   tools.producer_perf.avg_latency_ms = Z and tools.producer_perf.p99_ms = c (ms, lower).
   The run fails unless N is every record asked for.
2. kafka-consumer-perf-test.sh --bootstrap-server <all brokers> --topic T --messages
   <the same count> --timeout 60000 --group <fresh>, reading what 1 wrote (a fresh group:
   from the earliest offset). From its CSV line:
   tools.consumer_perf.records_per_s = nMsg.sec (records/s, higher): records over the
   tool's whole run from its start.time to end.time, which includes joining the group
   (its rebalance.time.ms);
   tools.consumer_perf.fetch_records_per_s = fetch.nMsg.sec (records/s, higher): the same
   records over fetch.time.ms (the run minus that rebalance time).
   The run fails unless data.consumed.in.nMsg reaches the count.

    .venv/bin/python bench/versus_tools.py kafka|rayka [--runs 3] [--quick]
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RECORDS, QUICK_RECORDS = 2_000_000, 50_000
RECORD_BYTES, PARTITIONS = 100, 6
TOOL_TIMEOUT_S = 600.0
CONSUMER_TIMEOUT_MS = 60_000

_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")


def _tool(tool: str, args: list[str]) -> str:
    """The tool's stdout; a RuntimeError with its output's tail when it exits non-zero."""
    from compat.kafka.launcher import run_tool
    r = run_tool(tool, args, timeout_s=TOOL_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"{tool} exited {r.returncode}:\n{r.stdout[-2000:]}\n"
                           f"{r.stderr[-2000:]}")
    return r.stdout


def producer_perf(bootstrap: str, topic: str, records: int) -> dict:
    out = _tool("kafka-producer-perf-test.sh", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_BYTES),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
        "acks=all", "enable.idempotence=true", "linger.ms=5"])
    found = _SUMMARY.findall(out)
    if not found:
        raise RuntimeError(f"kafka-producer-perf-test.sh: no summary line in:\n{out[-2000:]}")
    sent, rate, mb_s, avg, mx, p50, p95, p99, p999 = found[-1]
    if int(sent) != records:
        raise RuntimeError(f"kafka-producer-perf-test.sh sent {sent} of {records} records")
    return {"records": int(sent), "records_per_s": float(rate), "mb_per_s": float(mb_s),
            "avg_latency_ms": float(avg), "max_latency_ms": float(mx), "p50_ms": int(p50),
            "p95_ms": int(p95), "p99_ms": int(p99), "p999_ms": int(p999)}


def consumer_perf(bootstrap: str, topic: str, records: int) -> dict:
    out = _tool("kafka-consumer-perf-test.sh", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records),
        "--timeout", str(CONSUMER_TIMEOUT_MS), "--group", f"vperf-{uuid.uuid4().hex[:8]}"])
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    header = next((i for i, ln in enumerate(lines) if ln.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise RuntimeError(f"kafka-consumer-perf-test.sh: no CSV in:\n{out[-2000:]}")
    keys = [k.strip() for k in lines[header].split(",")]
    values = [v.strip() for v in lines[header + 1].split(",")]
    row = dict(zip(keys, values))
    got = int(float(row["data.consumed.in.nMsg"]))
    if got < records:
        raise RuntimeError(f"kafka-consumer-perf-test.sh read {got} of {records} records:\n"
                           f"{out[-2000:]}")
    return {"records": got, "records_per_s": float(row["nMsg.sec"]),
            "fetch_records_per_s": (float(row["fetch.nMsg.sec"])
                                    if "fetch.nMsg.sec" in row else None),
            "rebalance_ms": float(row["rebalance.time.ms"]) if "rebalance.time.ms" in row
            else None, "csv": row}


def run(system, sheet, runs: int, quick: bool) -> None:
    from bench.versus_groups import warm_up
    records = QUICK_RECORDS if quick else RECORDS
    params = dict(records=records, record_bytes=RECORD_BYTES, partitions=PARTITIONS,
                  replication_factor=3, min_insync_replicas=2)
    pparams = dict(acks="all", idempotence=True, linger_ms=5, throughput=-1, **params)
    sheet.note("tools.warm_up_s", round(warm_up(system), 2))
    for _ in range(runs):
        bootstrap = system.bootstrap_servers()
        topic = f"vtool-{uuid.uuid4().hex[:8]}"
        system.create_topic(topic, PARTITIONS, 3)
        try:
            t0 = time.monotonic()
            p = producer_perf(bootstrap, topic, records)
            produce_wall = time.monotonic() - t0
            t0 = time.monotonic()
            c = consumer_perf(bootstrap, topic, records)
            consume_wall = time.monotonic() - t0
        finally:
            system.delete_topic(topic)
        sheet.add("tools.producer_perf.records_per_s", p["records_per_s"], "records/s",
                  "higher", **pparams)
        sheet.add("tools.producer_perf.avg_latency_ms", p["avg_latency_ms"], "ms", "lower",
                  **pparams)
        sheet.add("tools.producer_perf.p99_ms", p["p99_ms"], "ms", "lower", **pparams)
        sheet.add("tools.consumer_perf.records_per_s", c["records_per_s"], "records/s",
                  "higher", includes="the tool's group join", **params)
        if c["fetch_records_per_s"] is not None:
            sheet.add("tools.consumer_perf.fetch_records_per_s", c["fetch_records_per_s"],
                      "records/s", "higher", **params)
        sheet.note("tools.producer_perf", {**p, "tool_wall_s": round(produce_wall, 2)})
        sheet.note("tools.consumer_perf", {**c, "tool_wall_s": round(consume_wall, 2)})


if __name__ == "__main__":
    from bench.versus import family_main
    family_main(run, __doc__)
