"""Rolling restart under acks=all load: every broker in turn does a controlled shutdown
(the controller moves its ~1,000 leaderships away), shuts down cleanly, restarts on its data
dir and rejoins every ISR before the next one. The chaos machinery supplies the real
ZooKeeper ensemble, the workload, and the checker (acknowledged records lost must be 0).

Prints JSON and writes bench/out/rolling_restart.json:
  per broker: controlled-shutdown seconds (target <= 1 s with 1,000 partitions led),
  registered-again seconds, ISR-full seconds; total; acknowledged / lost / duplicated.

    .venv/bin/python bench/rolling_restart_bench.py [--partitions 3000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

from rayka.chaos.runner import ChaosConfig, run_chaos


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=3000, help="RF 3 on 3 brokers: 1/3 led each")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=150.0, help="records/s per producer (3)")
    args = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="rayka-rolling-")
    t0 = time.monotonic()
    verdict, out = run_chaos(ChaosConfig(scenario="rolling-restart", faults=("kill-broker",),
                                         partitions=args.partitions, seed=args.seed,
                                         rate_per_producer=args.rate, out_dir=out_dir,
                                         heal_timeout_s=600.0))
    s = verdict.stats
    rolling = s.get("rolling_restart", [])
    result = {
        "bench": "rolling_restart", "partitions": args.partitions, "brokers": 3,
        "replication_factor": 3, "min_insync_replicas": 2,
        "per_broker": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
                       for r in rolling],
        "rolling_restart_total_s": round(sum(r["restart_s"] + r["isr_full_s"] for r in rolling), 1),
        "run_total_s": round(time.monotonic() - t0, 1),
        "acknowledged": s["acknowledged"], "lost": s["lost"], "duplicated": s["duplicated"],
        "checker_ok": verdict.ok, "liveness_failures": s.get("liveness_failures", []),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "history": out,
    }
    os.makedirs("bench/out", exist_ok=True)
    with open("bench/out/rolling_restart.json", "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
