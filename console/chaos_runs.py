"""Chaos runs: the Chaos page (every `rayka chaos` run under the console's chaos directory)
and a run's page (its faults on a timeline beside the workload's acknowledgements and
reads, and the checker's verdict).

Rules:
- The directory is `console.chaos_dir`, else ./chaos-runs (where `rayka chaos` writes).
  Each subdirectory holding a history.jsonl is a run (rayka/chaos/runner.py:
  `seed-<seed>-<unix time>/` with history.jsonl and, once checked, verdict.json).
- A run with a history and no verdict is "running" while its history was written within
  STALE_S, "unfinished" after that (it stopped before its checker ran: killed, crashed).
  Its outcome is the CLI's: PASS when the verdict has no violation and no liveness failure.
- The list reads, per run, only the history's first and last lines and the verdict (each
  cached by file size and mtime): a run costs the same whatever its history's length.
- A run's page parses its history once and keeps the result (the last CACHED_RUNS runs);
  a growing history is read on from where the last parse stopped, whole lines only (a torn
  last line waits for its end). Only meta and fault lines are decoded whole: the others are
  counted from their fixed prefix `{"type":..,"f":..,"time_ms":..` (the writer's key order,
  rayka/chaos/history.py), with a full decode when the prefix does not match. A line that
  does not parse is counted as unreadable and skipped: the checker judges a history, the
  console only shows it.
- Times are seconds since the history's first line (its meta line): the history's clock is
  monotonic, so a wall-clock time exists only for the start (the directory's stamp).
- Plot data, `/api/chaos/{run}`: uPlot's columns per 1 s bucket: records acknowledged
  (send/ok) per second, records read by the workload's consumers (read/ok) per second, and
  "faults active", how many faults held at some moment of the bucket (a fault shorter than
  a bucket still marks it). `?view=rates` gives the per-second columns alone, adding failed
  and indeterminate sends and the consumer group's and share group's reads when the run had
  them; `?view=faults` gives one 0/1 column per fault kind.
- A fault holds from its start line to its end line (matched by id); the history writes the
  start line once the injection returned and the end line once it was lifted, so a fault
  that is a single act (a kill, a session expiry) lasts microseconds there: its effect shows
  as "first ack after" (the first send/ok after its start, on its partition, or on any
  when it has none: the checker's failover time), not as an interval.
- A run name is one directory name: a name with a path separator, one starting with ".",
  or one that is not a run of the directory is INVALID_REQUEST (42).
"""

from __future__ import annotations

import bisect
import collections
import json
import os
import re
import threading
import time

from starlette.responses import JSONResponse
from starlette.routing import Route

from rayka.chaos.checker import INVARIANTS
from rayka.errors import InvalidRequest

DEFAULT_DIR = "chaos-runs"
STALE_S = 300.0
CACHED_RUNS = 8
SHOWN_VIOLATIONS = 200
TAIL_BYTES = 64 * 1024
RUN_NAME = re.compile(r"^seed-(-?\d+)-(\d+)$")
PREFIX = re.compile(rb'\{"type":"([^"\\]*)","f":"([^"\\]*)","time_ms":'
                    rb'(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)[,}]')
PARTITION = re.compile(rb',"partition":(-?[0-9]+)[,}]')
# per-second series: name → the (f, type) lines it counts; the first two are always drawn
RATES = {"acknowledged/s": ("send", "ok"), "read/s": ("read", "ok"),
         "send failed/s": ("send", "fail"), "send indeterminate/s": ("send", "info"),
         "group read/s": ("group-read", "ok"), "share acquired/s": ("share-acquire", "ok")}
ALWAYS = ("acknowledged/s", "read/s")
VIEWS = ("all", "rates", "faults")


def chaos_dir(console) -> str:
    return console.chaos_dir or os.path.join(os.getcwd(), DEFAULT_DIR)


def run_path(directory: str, run: str) -> str:
    """The run's directory, or INVALID_REQUEST when `run` is no run of `directory`."""
    if not run or "/" in run or "\\" in run or "\0" in run or run.startswith("."):
        raise InvalidRequest(f"{run!r} is not a chaos run name (one directory name)")
    path = os.path.join(directory, run)
    if not os.path.isfile(os.path.join(path, "history.jsonl")):
        raise InvalidRequest(f"no chaos run {run!r} in {directory}")
    return path


# -- reading a history -------------------------------------------------------------------------
def decode(line: bytes) -> tuple[str, str, float, bytes] | None:
    """(f, type, time_ms, the line) of a history line by its prefix; None if it has none."""
    m = PREFIX.match(line)
    if m is None:
        return None
    return m.group(2).decode(), m.group(1).decode(), float(m.group(3)), line


class HistoryView:
    """What the pages show of one history, built by `feed` (whole lines, in file order)."""

    def __init__(self):
        self.t0_ms: float | None = None
        self.last_ms: float | None = None
        self.meta: dict = {}
        self.counts: collections.Counter = collections.Counter()     # (f, type) → lines
        self.per_second: dict[str, list[int]] = {name: [] for name in RATES}
        self.acks: dict[int, list[float]] = collections.defaultdict(list)  # partition → s
        self.faults: list[dict] = []
        self.open_faults: dict = {}          # id → index in faults
        self.unreadable = 0
        self.final_read_s: float | None = None
        self.wanted = {v: k for k, v in RATES.items()}

    def seconds(self, time_ms: float) -> float:
        return max(0.0, (time_ms - self.t0_ms) / 1000.0)

    def feed(self, line: bytes) -> None:
        if not line.strip():
            return
        head = decode(line)
        entry = None
        if head is None or head[0] in ("meta", "fault"):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict) or not {"f", "type", "time_ms"} <= entry.keys():
                self.unreadable += 1
                return
            try:
                head = (str(entry["f"]), str(entry["type"]), float(entry["time_ms"]), line)
            except (TypeError, ValueError):
                self.unreadable += 1
                return
        f, kind, time_ms, _ = head
        if self.t0_ms is None:
            self.t0_ms = time_ms
        self.last_ms = time_ms if self.last_ms is None else max(self.last_ms, time_ms)
        self.counts[f, kind] += 1
        t = self.seconds(time_ms)
        name = self.wanted.get((f, kind))
        if name is not None:
            column = self.per_second[name]
            bucket = int(t)
            if len(column) <= bucket:
                column.extend([0] * (bucket + 1 - len(column)))
            column[bucket] += 1
            if name == "acknowledged/s":
                m = PARTITION.search(line)
                if m is not None:
                    self.acks[int(m.group(1))].append(t)
        elif f == "meta" and not self.meta:
            self.meta = entry
        elif f == "fault":
            self.fault(entry, t)
        elif f == "final-read" and self.final_read_s is None:
            self.final_read_s = t

    def fault(self, e: dict, t: float) -> None:
        fid = e.get("id")
        if e.get("phase") == "start":
            self.open_faults[fid] = len(self.faults)
            self.faults.append({"id": fid, "kind": e.get("kind"), "target": e.get("target"),
                                "partition": e.get("partition"), "start_s": t, "end_s": None,
                                "detail": {}})
        elif e.get("phase") == "end" and fid in self.open_faults:
            fault = self.faults[self.open_faults.pop(fid)]
            fault["end_s"] = t
            fault["detail"] = {k: v for k, v in e.items() if k not in (
                "type", "f", "time_ms", "id", "kind", "phase", "target", "partition")}
            if e.get("kind") not in (None, fault["kind"]):
                fault["detail"]["ended as"] = e["kind"]     # isr-of-one ends its two faults

    # -- derived ---------------------------------------------------------------------------------
    @property
    def span_s(self) -> float:
        return self.seconds(self.last_ms) if self.t0_ms is not None else 0.0

    def first_ack_after(self, fault: dict) -> float | None:
        """Seconds from the fault's start to the first send/ok after it (checker's failover)."""
        p = fault["partition"]
        lists = [self.acks.get(p, [])] if p is not None else list(self.acks.values())
        after = []
        for times in lists:
            k = bisect.bisect_right(times, fault["start_s"])
            if k < len(times):
                after.append(times[k])
        return min(after) - fault["start_s"] if after else None

    def fault_rows(self) -> list[dict]:
        rows = []
        for f in self.faults:
            end = f["end_s"]
            rows.append({**f, "held_s": None if end is None else end - f["start_s"],
                         "open": end is None, "first_ack_s": self.first_ack_after(f)})
        return rows

    def buckets(self) -> int:
        return int(self.span_s) + 1 if self.t0_ms is not None else 0

    def rate_names(self) -> list[str]:
        return [n for n in RATES if n in ALWAYS or any(self.per_second[n])]

    def fault_kinds(self) -> list[str]:
        return sorted({f["kind"] for f in self.faults if f["kind"]})

    def holding(self, kinds=None) -> list[int]:
        """Per bucket, how many faults (of `kinds`, all if None) held at some moment of it."""
        out = [0] * self.buckets()
        for f in self.faults:
            if kinds is not None and f["kind"] not in kinds:
                continue
            end = self.span_s if f["end_s"] is None else f["end_s"]
            for b in range(int(f["start_s"]), min(int(end), len(out) - 1) + 1):
                out[b] += 1
        return out

    def columns(self, view: str = "all") -> dict:
        """uPlot's {"names", "data": [times_s, *columns]} (module rules)."""
        n = self.buckets()
        times = list(range(n))

        def padded(name):
            column = self.per_second[name]
            return column[:n] + [0] * max(0, n - len(column))
        if view == "faults":
            kinds = self.fault_kinds()
            return {"names": kinds,
                    "data": [times] + [[min(1, x) for x in self.holding({k})] for k in kinds]}
        if view == "rates":
            names = self.rate_names()
            return {"names": names, "data": [times] + [padded(x) for x in names]}
        return {"names": [*ALWAYS, "faults active"],
                "data": [times] + [padded(x) for x in ALWAYS] + [self.holding()]}


class Reader:
    """One history file, parsed on from where the last call stopped (module rules)."""

    def __init__(self, path: str):
        self.path = path
        self.key = None
        self.offset = 0
        self.view = HistoryView()

    def refresh(self) -> HistoryView:
        st = os.stat(self.path)
        key = (st.st_dev, st.st_ino)
        if key != self.key or st.st_size < self.offset:
            self.key, self.offset, self.view = key, 0, HistoryView()
        if st.st_size > self.offset:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(st.st_size - self.offset)
            end = data.rfind(b"\n") + 1          # whole lines only
            for line in data[:end].split(b"\n"):
                self.view.feed(line)
            self.offset += end
        return self.view


class Runs:
    """The runs of a directory: cheap summaries for the list, parsed histories for a run."""

    def __init__(self):
        self.lock = threading.Lock()
        self.readers: collections.OrderedDict[str, Reader] = collections.OrderedDict()
        self.small: dict = {}          # (path, what) → ((size, mtime), value)

    def history(self, path: str) -> HistoryView:
        file = os.path.join(path, "history.jsonl")
        with self.lock:
            reader = self.readers.pop(file, None) or Reader(file)
            self.readers[file] = reader
            while len(self.readers) > CACHED_RUNS:
                self.readers.popitem(last=False)
            return reader.refresh()

    def cached(self, file: str, what: str, load):
        try:
            st = os.stat(file)
        except FileNotFoundError:
            return None
        stamp = (st.st_size, st.st_mtime_ns)
        with self.lock:
            hit = self.small.get((file, what))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = load(file)
        with self.lock:
            self.small[file, what] = (stamp, value)
        return value

    def verdict(self, path: str) -> dict | None:
        def load(file):
            try:
                with open(file) as fh:
                    data = json.load(fh)
            except (OSError, ValueError) as exc:
                return {"unreadable": f"{type(exc).__name__}: {exc}"}
            return data if isinstance(data, dict) else {"unreadable": "not a JSON object"}
        return self.cached(os.path.join(path, "verdict.json"), "verdict", load)

    def ends(self, path: str) -> dict:
        """The history's first line (meta) and the last line's time: two small reads."""
        def load(file):
            with open(file, "rb") as fh:
                first = fh.readline(TAIL_BYTES)
                size = os.fstat(fh.fileno()).st_size
                fh.seek(max(0, size - TAIL_BYTES))
                tail = fh.read()
            lines = [x for x in tail.split(b"\n") if x.strip()]
            if tail and not tail.endswith(b"\n") and lines:
                lines.pop()                       # torn last line: still being written
            try:
                meta = json.loads(first)
            except ValueError:
                meta = {}
            meta = meta if isinstance(meta, dict) else {}
            t0 = meta.get("time_ms") if isinstance(meta.get("time_ms"), (int, float)) else None
            last = None
            for line in reversed(lines):
                head = decode(line)
                if head is not None:
                    last = head[2]
                    break
            span = (last - t0) / 1000 if t0 is not None and last is not None else None
            return {"meta": meta if meta.get("f") == "meta" else {}, "span_s": span}
        return self.cached(os.path.join(path, "history.jsonl"), "ends", load) or \
            {"meta": {}, "span_s": None}


def outcome(verdict: dict | None, history_mtime: float, now: float) -> dict:
    """status ("PASS", "FAIL", "running", "unfinished", "unreadable"), violations, liveness."""
    if verdict is None:
        return {"status": "running" if now - history_mtime < STALE_S else "unfinished",
                "violations": None, "liveness": None}
    if "unreadable" in verdict:
        return {"status": "unreadable", "violations": None, "liveness": None,
                "error": verdict["unreadable"]}
    v = verdict.get("verdict") or {}
    violations = len(v.get("violations") or [])
    liveness = len((v.get("stats") or {}).get("liveness_failures") or [])
    ok = bool(v.get("ok")) and violations == 0 and liveness == 0
    return {"status": "PASS" if ok else "FAIL", "violations": violations, "liveness": liveness}


def summary(runs: Runs, directory: str, name: str, now: float) -> dict:
    path = os.path.join(directory, name)
    st = os.stat(os.path.join(path, "history.jsonl"))
    verdict = runs.verdict(path)
    ends = runs.ends(path)
    meta = ends["meta"]
    config = (verdict or {}).get("config") or {}
    stats = ((verdict or {}).get("verdict") or {}).get("stats") or {}
    m = RUN_NAME.match(name)
    if m:
        seed, started = int(m.group(1)), float(m.group(2))
    else:
        seed = meta.get("seed", config.get("seed"))
        started = st.st_mtime - (ends["span_s"] or 0)
    faults = config.get("faults") or meta.get("faults") or []
    scenario = config.get("scenario")
    return {"name": name, "seed": seed, "started": started,
            "started_text": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
            "span_s": ends["span_s"], "faults": list(faults),
            "scenario": scenario if scenario and scenario != "random" else None,
            "injected": sum((stats.get("faults_by_kind") or {}).values()) if stats else None,
            "acknowledged": stats.get("acknowledged"), "lost": stats.get("lost"),
            "duplicated": stats.get("duplicated"), "history_bytes": st.st_size,
            **outcome(verdict, st.st_mtime, now)}


def list_runs(runs: Runs, directory: str) -> list[dict]:
    """Every run of the directory, newest first."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    now = time.time()
    out = []
    for name in names:
        if name.startswith(".") or not os.path.isfile(os.path.join(directory, name,
                                                                   "history.jsonl")):
            continue
        try:
            out.append(summary(runs, directory, name, now))
        except OSError:       # removed while listed
            continue
    return sorted(out, key=lambda r: (r["started"], r["name"]), reverse=True)


def verdict_view(verdict: dict | None) -> dict | None:
    """The checker's verdict for the page: invariants held, violated or skipped."""
    if verdict is None or "unreadable" in verdict:
        return None
    v = verdict.get("verdict") or {}
    violations = v.get("violations") or []
    stats = v.get("stats") or {}
    skipped = {str(k): why for k, why in (stats.get("skipped") or {}).items()}
    by_invariant = collections.Counter(x.get("invariant") for x in violations)
    invariants = [{"n": n, "name": name, "violations": by_invariant.get(n, 0),
                   "skipped": skipped.get(str(n))} for n, (name, _) in sorted(INVARIANTS.items())]
    return {"ok": v.get("ok"), "violations": violations[:SHOWN_VIOLATIONS],
            "violation_count": len(violations),
            "by_kind": collections.Counter(x.get("kind") for x in violations).most_common(),
            "invariants": invariants, "stats": stats,
            "liveness": stats.get("liveness_failures") or [],
            "failover": stats.get("failover_ms") or {}, "config": verdict.get("config") or {}}


def routes(console, guarded) -> list:
    runs = Runs()

    def page(request):
        directory = chaos_dir(console)
        return console.render(request, "chaos", title="chaos runs", directory=directory,
                              exists=os.path.isdir(directory),
                              runs=list_runs(runs, directory))

    def run_page(request):
        directory = chaos_dir(console)
        name = request.path_params["run"]
        path = run_path(directory, name)
        history = runs.history(path)
        run = summary(runs, directory, name, time.time())
        return console.render(request, "chaos_run", title=f"chaos {name}", run=run,
                              history=history, faults=history.fault_rows(),
                              rate_names=history.rate_names(),
                              fault_kinds=history.fault_kinds(),
                              counts=sorted(history.counts.items()), stale_s=STALE_S,
                              verdict=verdict_view(runs.verdict(path)))

    def data(request):
        view = request.query_params.get("view", "all")
        if view not in VIEWS:
            raise InvalidRequest(f"view must be one of {', '.join(VIEWS)}, not {view!r}")
        path = run_path(chaos_dir(console), request.path_params["run"])
        return JSONResponse(runs.history(path).columns(view))

    return [Route("/chaos", guarded(page)), Route("/chaos/{run:path}", guarded(run_page)),
            Route("/api/chaos/{run:path}", guarded(data))]
