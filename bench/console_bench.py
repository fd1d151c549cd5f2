"""Web console cost: what `start_local(console=True)` costs the cluster it watches and the
browser that opens it, at 100, 1,000 and 10,000 partitions.

Setup per size and run: a FRESH rayka cluster (3 brokers, 2 controllers, embedded ZooKeeper,
a temp data dir) on the bench's one private Ray (`ray.init(address="local", num_cpus=2)`),
started with `console=True, console_args=("--interval-s", "2")`; ONE topic of N partitions,
RF 3, min.insync.replicas 2 (created with Admin.create_topic, which waits with
rayka.client.admin.wait_for until every broker's metadata knows every leader), and ONE
group with an offset committed on every partition (a simple group, no members: it makes the
sweep's offset fetch and the group pages carry N partitions, as a consumer of the whole
topic would). No records: what a page shows per partition has the same shape empty or full.
Once the console's snapshot holds the N partitions led:

1. Pages, as served (urllib GETs, bytes of the body): /cluster, /topics, /topics/<t>, the
   topic's last page (/topics/<t>?page=50 at 10,000 partitions; 200 rows a page),
   /groups, /groups/<g>, /controller, /api/plot of the topic's two series (what its plot
   polls), /api/status; and the live fragments a page's htmx refresh asks every interval
   (HX-Request + HX-Target: live) for /cluster, /topics and /topics/<t>. The issue's bound
   is one page under 1 MB: each page figure carries that target.
2. First load in headless Chromium (tests/console_browser.py, Debian's chromium): /cluster
   and /topics/<t>, each in a fresh browser (empty cache), once its plot has drawn:
   Browser.page_bytes() (the document and every resource: css, htmx, uPlot, the plot data)
   and the navigation's load time.
3. Answer times: /topics/<t> and /controller, median of 5 GETs after the first (the first
   GET of /controller pulls the controllers' journals; it is kept apart, in extra); the
   group page /groups/<g> once (its first GET): it asks the group's coordinator and every
   partition's end offset when opened (Admin.describe_group), one sequential Ray call per
   partition, 33-40 s at 10,000 partitions on the quiet 2-CPU dev machine (68 s loaded), so 5
   would cost minutes a run.
4. The console ON for WINDOW_S (30 s): /api/status polled every interval gives each sweep's
   `took_s` (median, p90, max over the sweeps seen); CPU of the console process
   (cluster.console.pid), the 3 brokers, the 2 controllers, ZooKeeper and Ray's gcs_server
   and raylet from /proc/<pid>/stat (CPU s per s of wall time); the console's VmRSS and
   VmHWM at the end. The status polls are in the window (their bytes and count are kept):
   they are what a sweep-time probe costs, ~1 GET per sweep.
5. The console stopped (cluster.console.stop()), the same cluster measured again for
   WINDOW_S: the brokers', controllers', ZooKeeper's and Ray's CPU with the console ON minus
   OFF is what the console's sweeps cost them. The whole machine's busy cores in each window
   (/proc/stat) are kept beside them: other work on the machine shows there.

"No request per partition": a sweep's calls are counted by reading console/source.py (the
product is not instrumented), SWEEP_CALLS below, and checked by measurement: the sweep time
at the largest size over the smallest (`console.sweep_ratio`, reported against the ratio of
partition counts, 100x for 10,000 / 100) and the brokers' extra CPU per sweep.

Output: the JSON (bench/common.py protocol) at --out (default
bench/results/<date>-console.json); a table on stderr. Load averages at start and end and
the machine (nproc, kernel) in setup/extra.

    .venv/bin/python bench/console_bench.py [--quick] [--runs 3] [--sizes 100,1000,10000]
        [--window-s 30] [--no-browser] [--out ...]
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import (arg_parser, busy_share_since, emit, figure,  # noqa: E402
                          machine_busy, machine_facts, proc_cpu_s, say)

NAME = "console"
SIZES, QUICK_SIZES = (100, 1_000, 10_000), (100, 300)
INTERVAL_S = 2.0
WINDOW_S, QUICK_WINDOW_S = 30.0, 8.0
PAGE_BOUND = 1_000_000          # the bound: one page under 1 MB
PAGE_ROWS = 200                 # console/app.py PAGE_ROWS: a topic page's partitions
TIMED_GETS = 5
TIMEOUT_S = 900.0               # per wait (topic creation at 10,000 partitions: ~15-45 s seen)
SEE_TIMEOUT_S = 300.0           # the console's snapshot showing the topic (0.1-1.5 s seen)
BROKEN_S, MAX_RESTARTS = 20.0, 3
GROUP = "console-bench"
DEFAULT_OUT = ROOT / "bench" / "results" / f"{datetime.date.today()}-{NAME}.json"

# What one sweep (console/source.py Source.sweep) asks, read from its source: B live brokers,
# C controller candidates, G groups. Ray actor calls are what reach a broker or controller;
# the GCS and ZooKeeper reads are the lookups around them. None depends on the partitions.
SWEEP_CALLS = {
    "actor_calls": {
        "broker.metadata (one live broker's metadata cache: every partition's state)": "1",
        "broker.partition_stats (Cluster.partition_stats)": "B",
        "broker.log_dirs (Cluster.log_dirs)": "B",
        "broker.kafka_stats (Cluster.kafka_stats)": "B",
        "controller.info + controller.node_id (every candidate)": "2C",
        "broker.group(ListGroups) (Admin.list_groups)": "B",
        "broker.find_coordinator per group (a fresh CoordinatorLink per group)": "G*B",
        "coordinator OffsetFetch per group (Admin.committed_offsets)": "G",
    },
    "actor_calls_total": "1 + 2C + 4B + G*(B+1)",
    "gcs": {"ray.nodes()": "1",
            "ray.get_actor lookups (Cluster.broker_actor / controller_actor)":
                "C + 1 + 4B + G*(B+1)"},
    "zookeeper": {"get_brokers (ids + each registration; _brokers twice, once per "
                  "Cluster._ask_live_brokers)": "5 x (1 + B)",
                  "get_controller + get_controller_epoch (Admin.controller)": "2"},
    "per_partition": "0: partitions come back inside the per-broker answers",
    "with_principal": "a console run with --command-config also asks what its principal may "
                      "describe (console/principal.py), once per sweep",
}


def sweep_calls(brokers: int, controllers: int, groups: int) -> dict:
    """SWEEP_CALLS' totals for this cluster."""
    b, c, g = brokers, controllers, groups
    return {"actor_calls": 1 + 2 * c + 4 * b + g * (b + 1), "ray_nodes": 1,
            "get_actor": c + 1 + 4 * b + g * (b + 1), "zookeeper_reads": 5 * (1 + b) + 2,
            "brokers": b, "controllers": c, "groups": g}


# -- /proc ------------------------------------------------------------------------------------
def mem_kib(pid: int) -> dict:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out


def ray_daemon_pids() -> dict[str, int]:
    """gcs_server and raylet of the Ray this process started (its children)."""
    from rayka.ops.procs import family
    out = {}
    for pid in family(os.getpid()):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == os.getpid() and comm in ("gcs_server", "raylet"):
            out[comm] = pid
    return out


def cluster_pids(cluster) -> dict[str, list[int]]:
    import ray
    from actors.cluster_host import HOST_NAME
    brokers = ray.get([cluster.broker_actor(b).pid.remote() for b in cluster.facts["brokers"]],
                      timeout=60)
    controllers = ray.get([cluster.controller_actor(c).pid.remote()
                           for c in cluster.facts["controllers"]], timeout=60)
    host = ray.get_actor(HOST_NAME, namespace=cluster.namespace)
    zk = ray.get(host.zookeeper_pid.remote(), timeout=60)
    return {"brokers": brokers, "controllers": controllers, "zookeeper": [zk] if zk else [],
            "ray": sorted(ray_daemon_pids().values())}


class CpuWindow:
    """CPU s per s of each group of pids, and the machine's busy cores, over a window."""

    def __init__(self, groups: dict[str, list[int]]):
        self.groups = groups
        self.t0 = time.monotonic()
        self.cpu0 = {k: proc_cpu_s(p) for k, p in groups.items()}
        self.busy0 = machine_busy()

    def end(self) -> dict:
        wall = time.monotonic() - self.t0
        out = {k: (proc_cpu_s(p) - self.cpu0[k]) / wall for k, p in self.groups.items()}
        out["machine_busy_cores"] = busy_share_since(self.busy0) * os.cpu_count()
        out["wall_s"] = wall
        return out


# -- HTTP -------------------------------------------------------------------------------------
def get(url: str, headers: dict | None = None, timeout_s: float = TIMEOUT_S) -> tuple[int, bytes, float]:
    """(status, body, seconds to the last byte)."""
    req = urllib.request.Request(url, headers=headers or {})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            body = r.read()
            status = r.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read(), exc.code
    return status, body, time.perf_counter() - t0


def status_of(base: str) -> dict:
    return json.loads(get(base + "api/status")[1])


def page_paths(topic: str, partitions: int) -> dict[str, str]:
    last = max(1, math.ceil(partitions / PAGE_ROWS))
    plot = f"api/plot?series=topic:{topic}:end,topic:{topic}:consumed&rate=1&window_s=900"
    return {"cluster": "cluster", "topics": "topics", "topic": f"topics/{topic}",
            "topic_last_page": f"topics/{topic}?page={last}", "groups": "groups",
            "group": f"groups/{GROUP}", "controller": "controller", "plot": plot,
            "status": "api/status"}


LIVE = {"cluster_live": "cluster", "topics_live": "topics", "topic_live": "topic"}
TIMED = ("topic", "controller")
ONCE = ("group",)                 # timed by its one (first) GET


def measure_pages(base: str, topic: str, partitions: int) -> dict:
    paths = page_paths(topic, partitions)
    out = {"bytes": {}, "first_s": {}, "status": {}, "answer_s": {}, "answers_s": {},
           "last_page": max(1, math.ceil(partitions / PAGE_ROWS))}
    for name, path in paths.items():
        status, body, took = get(base + path)
        out["bytes"][name], out["first_s"][name], out["status"][name] = len(body), took, status
    for name, page in LIVE.items():
        status, body, _ = get(base + paths[page], {"HX-Request": "true", "HX-Target": "live"})
        out["bytes"][name], out["status"][name] = len(body), status
    for name in TIMED:
        times = [get(base + paths[name])[2] for _ in range(TIMED_GETS)]
        out["answers_s"][name] = times
        out["answer_s"][name] = statistics.median(times)
    for name in ONCE:
        out["answers_s"][name] = [out["first_s"][name]]
        out["answer_s"][name] = out["first_s"][name]
    bad = {k: s for k, s in out["status"].items() if s != 200}
    if bad:
        raise RuntimeError(f"console pages answered {bad}")
    return out


def measure_browser(base: str, topic: str) -> dict:
    from tests.console_browser import Browser
    out = {}
    for name, path in (("cluster", "/cluster"), ("topic", f"/topics/{topic}")):
        b = Browser(base)
        try:
            b.open(path)
            b.wait(lambda br: br.driver.find_elements("css selector", ".plot[data-state=ok]"),
                   120, f"{path}'s plot drawn")
            timing = b.driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "return [n.domContentLoadedEventEnd, n.loadEventEnd,"
                " performance.getEntriesByType('resource').length];")
            out[name] = {"bytes": b.page_bytes(), "dom_content_loaded_ms": timing[0],
                         "load_ms": timing[1], "resources": timing[2]}
        finally:
            b.close()
    return out


# -- one run ----------------------------------------------------------------------------------
def percentile(xs, q: float) -> float:
    import numpy as np
    return float(np.percentile(xs, q))


def watch_sweeps(base: str, window_s: float) -> dict:
    """Poll /api/status every interval for `window_s`: each sweep seen once."""
    took, polls, status_bytes, status_s = {}, 0, [], []
    end = time.monotonic() + window_s
    while True:
        t0 = time.monotonic()
        _, body, took_get = get(base + "api/status")
        s = json.loads(body)
        polls += 1
        status_bytes.append(len(body))
        status_s.append(took_get)
        if s.get("time_s"):
            took[s["time_s"]] = s["took_s"]
        if time.monotonic() >= end:
            break
        time.sleep(max(0.0, min(INTERVAL_S - (time.monotonic() - t0), end - time.monotonic())))
    xs = list(took.values())
    return {"sweeps": len(xs), "took_s": xs, "median": statistics.median(xs),
            "p90": percentile(xs, 90), "max": max(xs), "status_polls": polls,
            "status_bytes": statistics.median(status_bytes),
            "status_get_s": statistics.median(status_s)}


def sources_sha256() -> dict[str, str]:
    """A digest of the code a console process imports when it starts (console/ and rayka/):
    others may edit it while a long run goes on, so each run records what it measured."""
    import hashlib
    out = {}
    for pkg, globs in (("console", ("**/*.py", "templates/*.html", "static/*.js",
                                     "static/*.css")), ("rayka", ("**/*.py",))):
        h = hashlib.sha256()
        for g in globs:
            for f in sorted((ROOT / pkg).glob(g)):
                h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
        out[pkg] = h.hexdigest()[:16]
    return out


def restart_console(cluster) -> None:
    import ray
    from rayka.console_process import start_console
    if cluster.console is not None:
        cluster.console.stop()
        shutil.rmtree(os.path.dirname(cluster.console.log_file), ignore_errors=True)
    cluster.console = start_console(cluster.name, ray.get_runtime_context().gcs_address,
                                    extra_args=("--interval-s", str(INTERVAL_S)))


def wait_console_sees(cluster, topic: str, partitions: int, restarts: list) -> None:
    """Until the console's snapshot holds every partition of `topic` led, none
    under-replicated, no error. A console whose every sweep fails for BROKEN_S (e.g. it
    started while its code was half edited) is restarted, at most MAX_RESTARTS times."""
    from rayka.client.admin import wait_for
    from rayka.errors import RequestTimedOut
    prefix, last = f"{topic}-", {}
    broken_since = [None]

    def sees_all():
        try:
            s = last["status"] = status_of(cluster.console_url)
        except OSError as exc:                   # the console died or does not answer
            s = last["status"] = {"errors": [f"sweep: console unreachable: {exc}"],
                                  "brokers": [], "leaders": {}, "under_replicated": []}
        broken = any(e.startswith("sweep:") for e in s["errors"]) or not s["brokers"]
        if not broken:
            broken_since[0] = None
        elif broken_since[0] is None:
            broken_since[0] = time.monotonic()
        elif time.monotonic() - broken_since[0] > BROKEN_S and len(restarts) < MAX_RESTARTS:
            restarts.append({"partitions": partitions, "errors": s["errors"],
                             "sources": sources_sha256()})
            say(f"p{partitions}: the console's sweeps fail ({s['errors'][:1]}): restarting it")
            restart_console(cluster)
            broken_since[0] = None
            return False
        led = [v for k, v in s["leaders"].items() if k.startswith(prefix) and v >= 0]
        return len(led) == partitions and not s["under_replicated"] and not s["errors"]
    try:
        wait_for(sees_all, SEE_TIMEOUT_S, f"the console's snapshot holding {topic}'s "
                 f"{partitions} partitions led", poll_s=0.5)
    except RequestTimedOut as exc:
        s = last.get("status", {})
        raise RequestTimedOut(f"{exc}; its last status: errors {s.get('errors')}, "
                              f"{len(s.get('under_replicated', []))} under-replicated") from None


def run_one(partitions: int, window_s: float, browser: bool) -> dict:
    import rayka
    data_dir = tempfile.mkdtemp(prefix=f"rayka-console-bench-{partitions}-")
    cluster = None
    try:
        t0 = time.monotonic()
        cluster = rayka.start_local(name=f"cb{uuid.uuid4().hex[:6]}", brokers=3, controllers=2,
                                    data_dir=data_dir, console=True,
                                    console_args=("--interval-s", str(INTERVAL_S)))
        start_s = time.monotonic() - t0
        base = cluster.console_url
        admin, topic = cluster.admin(), f"t{uuid.uuid4().hex[:6]}"
        t0 = time.monotonic()
        admin.create_topic(topic, partitions, 3, {"min.insync.replicas": 2}, timeout_s=TIMEOUT_S)
        create_s = time.monotonic() - t0
        admin.commit_offsets(GROUP, {(topic, p): 0 for p in range(partitions)})
        t0 = time.monotonic()
        restarts: list = []
        wait_console_sees(cluster, topic, partitions, restarts)
        base = cluster.console_url              # a restarted console has a new port
        seen_s = time.monotonic() - t0
        sources = sources_sha256()              # what the console measured imported
        say(f"p{partitions}: cluster {start_s:.1f} s, topic {create_s:.1f} s, "
            f"console saw it {seen_s:.1f} s later")
        pages = measure_pages(base, topic, partitions)
        shown = pages["browser"] = measure_browser(base, topic) if browser else {}
        pids = cluster_pids(cluster)
        console_pid = cluster.console.pid
        say(f"p{partitions}: console ON for {window_s:g} s")
        w = CpuWindow({"console": [console_pid], **pids})
        sweeps = watch_sweeps(base, window_s)
        on = w.end()
        mem = mem_kib(console_pid)
        cluster.console.stop()
        shutil.rmtree(os.path.dirname(cluster.console.log_file), ignore_errors=True)
        cluster.console = None
        time.sleep(INTERVAL_S)              # its last sweep's answers drained
        say(f"p{partitions}: console OFF for {window_s:g} s")
        w = CpuWindow(pids)
        time.sleep(window_s)
        off = w.end()
        extra = {k: on[k] - off[k] for k in pids}
        per_sweep = {k: v * INTERVAL_S for k, v in extra.items()}
        r = {"partitions": partitions, "topic": topic, "start_s": start_s, "create_s": create_s,
             "console_saw_s": seen_s, "console_restarts": restarts, "sources": sources,
             "pages": pages, "sweeps": sweeps,
             "console_cpu": on["console"], "console_rss_mib": mem["VmRSS"] / 1024,
             "console_hwm_mib": mem["VmHWM"] / 1024, "cpu_on": on, "cpu_off": off,
             "extra_cpu": extra, "extra_cpu_s_per_sweep": per_sweep, "pids": pids,
             "calls": sweep_calls(len(cluster.facts["brokers"]),
                                  len(cluster.facts["controllers"]), 1)}
        say(f"p{partitions}: sweep median {sweeps['median'] * 1000:.0f} ms (p90 "
            f"{sweeps['p90'] * 1000:.0f}, max {sweeps['max'] * 1000:.0f}), console "
            f"{on['console']:.3f} CPU s/s, {r['console_rss_mib']:.0f} MiB; extra: brokers "
            f"{extra['brokers']:+.3f}, controllers {extra['controllers']:+.3f}, zk "
            f"{extra['zookeeper']:+.3f}, ray {extra['ray']:+.3f} CPU s/s; machine busy "
            f"{on['machine_busy_cores']:.2f} / {off['machine_busy_cores']:.2f} cores; pages "
            + ", ".join(f"{k} {v:,}" for k, v in pages["bytes"].items())
            + (f"; browser {shown['cluster']['bytes']:,} / {shown['topic']['bytes']:,}"
               if shown else ""))
        return r
    finally:
        if cluster is not None:
            if cluster.console is not None:
                shutil.rmtree(os.path.dirname(cluster.console.log_file), ignore_errors=True)
            cluster.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


# -- the suite protocol -----------------------------------------------------------------------
def _terminated(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def machine() -> dict:
    return {**machine_facts(), "nproc": os.cpu_count(), "kernel": platform.release()}


def figures_for(n: int, rs: list[dict], browser: bool) -> list[dict]:
    figs = [figure(f"console.p{n}.sweep_s.{k}", "s", [r["sweeps"][k] for r in rs],
                   better="lower", partitions=n) for k in ("median", "p90", "max")]
    figs.append(figure(f"console.p{n}.console_cpu", "CPU s/s", [r["console_cpu"] for r in rs],
                       better="lower", partitions=n))
    figs.append(figure(f"console.p{n}.console_rss_mib", "MiB", [r["console_rss_mib"] for r in rs],
                       better="lower", partitions=n))
    for k in ("brokers", "controllers", "zookeeper", "ray"):
        figs.append(figure(f"console.p{n}.extra_cpu.{k}", "CPU s/s",
                           [r["extra_cpu"][k] for r in rs], better="lower", partitions=n))
    for page in rs[0]["pages"]["bytes"]:
        bound = PAGE_BOUND if page not in ("status", "plot") else None
        figs.append(figure(f"console.p{n}.page_bytes.{page}", "bytes",
                           [r["pages"]["bytes"][page] for r in rs], target=bound, better="lower",
                           partitions=n, **({"page": rs[0]["pages"]["last_page"]}
                                            if page == "topic_last_page" else {})))
    for page in TIMED + ONCE:
        figs.append(figure(f"console.p{n}.answer_ms.{page}", "ms",
                           [r["pages"]["answer_s"][page] * 1000 for r in rs], better="lower",
                           partitions=n, gets=TIMED_GETS if page in TIMED else 1))
    if browser:
        for page in ("cluster", "topic"):
            figs.append(figure(f"console.p{n}.browser_bytes.{page}", "bytes",
                               [r["pages"]["browser"][page]["bytes"] for r in rs],
                               target=PAGE_BOUND, better="lower", partitions=n))
            figs.append(figure(f"console.p{n}.browser_load_ms.{page}", "ms",
                               [r["pages"]["browser"][page]["load_ms"] for r in rs],
                               better="lower", partitions=n))
    return figs


def run(quick: bool = False, runs: int = 3, sizes=None, window_s: float | None = None,
        browser: bool = True) -> dict:
    import ray
    from bench.scale_bench import raise_fd_limit
    sizes = sorted(sizes or (QUICK_SIZES if quick else SIZES))
    window_s = window_s or (QUICK_WINDOW_S if quick else WINDOW_S)
    import signal
    signal.signal(signal.SIGTERM, _terminated)      # stop the clusters, then Ray, on SIGTERM
    load_start = os.getloadavg()
    sources_start = sources_sha256()
    limits = raise_fd_limit(max(sizes) + 500)       # a broker keeps ~1 fd per replica
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING",
             log_to_driver=False)
    results: dict[int, list[dict]] = {n: [] for n in sizes}
    t_all = time.monotonic()
    try:
        for i in range(runs):
            for n in sizes:
                say(f"run {i + 1}/{runs}: {n} partitions")
                results[n].append(run_one(n, window_s, browser))
    finally:
        ray.shutdown()
    figs = []
    for n in sizes:
        figs += figures_for(n, results[n], browser)
    lo, hi = sizes[0], sizes[-1]
    ratios = [h["sweeps"]["median"] / l["sweeps"]["median"]
              for l, h in zip(results[lo], results[hi])]
    if hi > lo:
        figs.append(figure("console.sweep_ratio", "x", ratios, better="lower",
                           partitions=f"{hi}/{lo}", partitions_ratio=hi / lo))
    per_partition_us = [(h["sweeps"]["median"] - l["sweeps"]["median"]) / (hi - lo) * 1e6
                        for l, h in zip(results[lo], results[hi])] if hi > lo else []
    return {"bench": NAME,
            "setup": {"brokers": 3, "controllers": 2, "replication_factor": 3,
                      "min_insync_replicas": 2, "sizes": sizes, "runs": runs, "quick": quick,
                      "interval_s": INTERVAL_S, "window_s": window_s, "timed_gets": TIMED_GETS,
                      "group": f"{GROUP}: an offset committed on every partition, no members",
                      "ray": "one private ray.init(address='local', num_cpus=2); a fresh "
                             "rayka cluster (start_local(console=True)) per size and run",
                      "page_bound_bytes": PAGE_BOUND, "sweep_calls": SWEEP_CALLS,
                      "fd_limit": limits, "machine": machine(),
                      "load_average_at_start": [round(x, 2) for x in load_start]},
            "figures": figs,
            "extra": {"sweep_calls_here": sweep_calls(3, 2, 1),
                      "sources": {"at_start": sources_start, "at_end": sources_sha256(),
                                  "distinct_per_run": sorted({json.dumps(r["sources"])
                                                            for rs in results.values()
                                                            for r in rs})},
                      "console_restarts": [x for rs in results.values() for r in rs
                                           for x in r["console_restarts"]],
                      "sweep_ratio": {"sizes": [lo, hi], "partitions_ratio": hi / lo,
                                      "runs": ratios,
                                      "per_partition_us": per_partition_us},
                      "runs": {str(n): rs for n, rs in results.items()},
                      "total_s": round(time.monotonic() - t_all, 1),
                      "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}}


def table(result: dict) -> str:
    rows = [f"{'figure':52} {'median':>12} {'min':>12} {'max':>12} unit"]
    for f in result["figures"]:
        rows.append(f"{f['name']:52} {f['median']:12,.3f} {f['min']:12,.3f} {f['max']:12,.3f} "
                    f"{f['unit']}" + ("" if f.get("met") in (None, True) else "  MISSED"))
    return "\n".join(rows)


def main(argv=None) -> dict:
    parser = arg_parser(__doc__, DEFAULT_OUT, f"sizes {QUICK_SIZES}, {QUICK_WINDOW_S:g} s windows")
    parser.add_argument("--sizes", default=None, help="comma-separated partition counts "
                        f"(default {','.join(map(str, SIZES))})")
    parser.add_argument("--window-s", type=float, default=None,
                        help=f"each CPU window, console on and off (default {WINDOW_S:g})")
    parser.add_argument("--no-browser", action="store_true", help="skip headless Chromium")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    result = run(quick=args.quick, runs=args.runs, sizes=sizes, window_s=args.window_s,
                 browser=not args.no_browser)
    emit(result, args.out)
    print(table(result), file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
