"""The console's Chaos pages (console/chaos_runs.py) on run directories laid out as
`rayka chaos` leaves them: a history written by rayka/chaos/history.py's writer (on a
stepped clock) and a verdict.json in the runner's form; no Ray, no cluster."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from starlette.testclient import TestClient

from console.actions import Actions
from console.app import Console, build_app
from console.chaos_runs import STALE_S, HistoryView, Reader
from console.history import History as SeriesHistory
from console.pages import Pages
from console.principal import Visibility
from console.source import Snapshot
from rayka.chaos.history import History

pytestmark = pytest.mark.unit

T0_MS = 5_000_000.0          # the history's clock is monotonic: any origin


class Clock:
    def __init__(self):
        self.ms = T0_MS

    def __call__(self) -> float:
        return self.ms

    def at(self, seconds: float) -> "Clock":
        self.ms = T0_MS + seconds * 1000
        return self


class FakeSource:
    admin = None
    cluster = None
    access = Visibility()              # no principal: every page shown


class FakeSampler:
    """What Console and the pages read of console/sampler.py's Sampler."""

    def __init__(self):
        self.latest = Snapshot(time_s=time.time())
        self.history = SeriesHistory()
        self.lock = threading.Lock()
        self.source = FakeSource()


def write_run(root, name: str, verdict: dict | None, faults: bool = True,
              torn: bool = False) -> str:
    """A run directory: meta, sends acknowledged at 0.2 s .. 5.2 s (two per second on
    partitions 0 and 1), one read per ack, a pause held from 1.5 s to 3.5 s on partition 1
    and a broker kill at 4.1 s (an instant: its end line right after), then a final read."""
    path = os.path.join(root, name)
    os.makedirs(path)
    clock = Clock()
    with History(os.path.join(path, "history.jsonl"), clock=clock) as h:
        h.record("info", "meta", topic="chaos", partitions=2, replication_factor=3, min_isr=2,
                 seed=7, faults=["pause-leader", "kill-broker"], unsafe=False,
                 client="native")
        n = 0
        for second in range(6):
            for p in (0, 1):
                value = f"p0-{n}"
                clock.at(second + 0.1)
                h.record("invoke", "send", process=0, value=value)
                clock.at(second + 0.2 + p * 0.01)
                h.record("ok", "send", process=0, value=value, partition=p, offset=n // 2)
                h.record("ok", "read", process=100, partition=p, offset=n // 2, value=value)
                n += 1
            if faults and second == 1:
                clock.at(1.5)
                h.record("info", "fault", id=1, kind="pause-leader", phase="start",
                         target="broker-2", partition=1)
                clock.at(3.5)
                h.record("info", "fault", id=1, kind="pause-leader", phase="end",
                         target="broker-2", partition=1)
            if faults and second == 4:
                clock.at(4.1)
                h.record("info", "fault", id=2, kind="kill-broker", phase="start",
                         target="broker-1", partition=None)
                h.record("info", "fault", id=2, kind="kill-broker", phase="end",
                         target="broker-1", partition=None, restarted=True)
        clock.at(6.0)
        h.record("info", "send", process=1, value="p1-0", error="RequestTimedOut")
        h.record("ok", "final-read", partition=0, offset=0, value="p0-0")
    if torn:
        with open(os.path.join(path, "history.jsonl"), "a") as f:
            f.write('{"type":"ok","f":"send","time_ms":')       # a writer mid-line
    if verdict is not None:
        with open(os.path.join(path, "verdict.json"), "w") as f:
            json.dump(verdict, f)
    return path


def verdict_json(violations: list[dict], liveness: list[str] = ()) -> dict:
    return {"config": {"seed": 7, "faults": ["pause-leader", "kill-broker"],
                       "scenario": "random", "duration_s": 5.0},
            "verdict": {"ok": not violations, "violations": violations,
                        "stats": {"acknowledged": 12, "lost": 1 if violations else 0,
                                  "duplicated": 0, "invoked": 13, "failed": 0,
                                  "indeterminate": 1, "moved": 0,
                                  "faults_by_kind": {"pause-leader": 1, "kill-broker": 1},
                                  "failover_ms": {"p50": 10.0, "p99": 1800.0},
                                  "skipped": {"10": "no transactions in the run"},
                                  "liveness_failures": list(liveness)}}}


@pytest.fixture
def runs_dir(tmp_path):
    root = tmp_path / "chaos-runs"
    root.mkdir()
    write_run(root, "seed-7-1700000000", verdict_json([]))
    write_run(root, "seed-8-1700000100", verdict_json(
        [{"invariant": 1, "kind": "lost", "detail": "partition 1 offset 3 value p0-7 lost"}]))
    running = write_run(root, "seed-9-1700000200", None, torn=True)
    stale = write_run(root, "seed-3-1600000000", None, faults=False)
    old = time.time() - STALE_S - 60
    os.utime(os.path.join(stale, "history.jsonl"), (old, old))
    (root / "not-a-run").mkdir()                       # no history: not listed
    assert os.path.exists(running)
    return root


@pytest.fixture
def client(runs_dir):
    sampler = FakeSampler()
    console = Console("test", sampler, Actions(None), refresh_s=1.0, chaos_dir=str(runs_dir))
    console.extra = Pages(console)
    return TestClient(build_app(console))


def rows_of(html: str, table_id: str) -> list[str]:
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return body.split("<tr")[2:]                         # past the header row


def test_the_list_shows_every_run_newest_first_with_its_outcome(client):
    r = client.get("/chaos")
    assert r.status_code == 200
    rows = rows_of(r.text, "chaos-runs")
    names = [row.split('id="run-', 1)[1].split('"', 1)[0] for row in rows]
    assert names == ["seed-9-1700000200", "seed-8-1700000100", "seed-7-1700000000",
                     "seed-3-1600000000"]
    by_name = dict(zip(names, rows))
    assert ">PASS<" in by_name["seed-7-1700000000"]
    failed = by_name["seed-8-1700000100"]
    assert ">FAIL<" in failed and '<td class="alarm">1</td>' in failed     # 1 violation, 1 lost
    assert ">running<" in by_name["seed-9-1700000200"]
    assert ">unfinished<" in by_name["seed-3-1600000000"]
    assert "pause-leader, kill-broker" in by_name["seed-7-1700000000"]
    assert "6 s" in by_name["seed-7-1700000000"]                       # 0 .. 6.0 s
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1700000000)) in \
        by_name["seed-7-1700000000"]
    assert "not-a-run" not in r.text


def test_the_live_fragment_is_the_table_alone(client):
    r = client.get("/chaos", headers={"HX-Request": "true", "HX-Target": "live"})
    assert r.status_code == 200
    assert r.text.startswith('<div id="live"') and "<html" not in r.text
    assert 'hx-trigger="every 1000ms"' in r.text and "seed-8-1700000100" in r.text


def test_a_run_page_shows_its_faults_and_the_verdict(client):
    r = client.get("/chaos/seed-8-1700000100")
    assert r.status_code == 200
    faults = rows_of(r.text, "faults")
    assert len(faults) == 2
    assert "pause-leader" in faults[0] and "broker-2" in faults[0]
    assert "<td>1.50</td><td>3.50</td><td>2.000</td>" in faults[0]
    # the first ack after the pause (1.5 s) on its partition 1: at 2.21 s
    assert "<td class=\"\">0.710</td>" in faults[0]
    assert "kill-broker" in faults[1] and "restarted=True" in faults[1]
    assert 'id="verdict-ok">violated<' in r.text
    assert "partition 1 offset 3 value p0-7 lost" in rows_of(r.text, "violations")[0]
    assert "skipped: no transactions in the run" in r.text
    assert 'id="run-acked">12<' in r.text and 'id="run-read">12<' in r.text
    assert 'data-url="/api/chaos/seed-8-1700000100?view=rates"' in r.text
    assert 'data-labels="acknowledged/s,read/s,send indeterminate/s"' in r.text
    assert 'data-labels="kill-broker,pause-leader"' in r.text


def test_a_running_run_has_no_verdict_and_skips_a_torn_last_line(client):
    r = client.get("/chaos/seed-9-1700000200")
    assert r.status_code == 200
    assert 'id="verdict-none"' in r.text and "the run is running" in r.text
    assert "unreadable" not in r.text                       # the torn line waits for its end


def test_the_plot_data_counts_per_second_and_marks_faults(client):
    r = client.get("/api/chaos/seed-7-1700000000")
    assert r.status_code == 200
    body = r.json()
    assert body["names"] == ["acknowledged/s", "read/s", "faults active"]
    times, acked, read, active = body["data"]
    assert times == [0, 1, 2, 3, 4, 5, 6]
    assert acked == [2, 2, 2, 2, 2, 2, 0] and read == acked
    # the pause holds 1.5 .. 3.5 s (buckets 1, 2, 3); the kill is an instant at 4.1 s
    assert active == [0, 1, 1, 1, 1, 0, 0]
    rates = client.get("/api/chaos/seed-7-1700000000?view=rates").json()
    assert rates["names"] == ["acknowledged/s", "read/s", "send indeterminate/s"]
    assert rates["data"][3] == [0, 0, 0, 0, 0, 0, 1]
    kinds = client.get("/api/chaos/seed-7-1700000000?view=faults").json()
    assert kinds["names"] == ["kill-broker", "pause-leader"]
    assert kinds["data"][1] == [0, 0, 0, 0, 1, 0, 0]
    assert kinds["data"][2] == [0, 1, 1, 1, 0, 0, 0]


def test_an_unknown_run_or_view_is_a_kafka_error_page(client, runs_dir):
    r = client.get("/chaos/seed-1-1")
    assert r.status_code == 400
    assert f"INVALID_REQUEST (42): no chaos run &#39;seed-1-1&#39; in {runs_dir}" in r.text
    r = client.get("/api/chaos/seed-1-1")
    assert r.status_code == 400 and "no chaos run" in r.text
    r = client.get("/api/chaos/seed-7-1700000000?view=pie")
    assert r.status_code == 400 and "view must be one of" in r.text


@pytest.mark.parametrize("path", ["/chaos/..%2Fchaos-runs%2Fseed-7-1700000000",
                                  "/chaos/%2E%2E", "/api/chaos/..%2F..%2Fetc",
                                  "/chaos/seed-7-1700000000%2Fhistory.jsonl",
                                  "/chaos/seed-7-1700000000%2F..%2Fseed-8-1700000100",
                                  "/chaos/.hidden"])
def test_a_path_is_refused(client, path):
    r = client.get(path)
    assert r.status_code == 400
    assert "INVALID_REQUEST (42)" in r.text and "is not a chaos run name" in r.text


def test_a_growing_history_is_read_on_from_where_it_stopped(tmp_path):
    path = tmp_path / "history.jsonl"
    clock = Clock()
    h = History(path, clock=clock)
    h.record("info", "meta", topic="chaos", partitions=1)
    reader = Reader(str(path))
    assert reader.refresh().counts["send", "ok"] == 0
    offset = reader.offset
    clock.at(2.5)
    h.record("ok", "send", process=0, value="p0-0", partition=0, offset=0)
    with open(path, "a") as f:
        f.write('{"type":"ok","f":"re')                       # torn: not read yet
    view = reader.refresh()
    assert reader.offset > offset and view.counts["send", "ok"] == 1
    assert view.columns()["data"][1] == [0, 0, 1]
    with open(path, "a") as f:
        f.write('ad","time_ms":5003000.0,"partition":0,"offset":0,"value":"p0-0"}\n')
    assert reader.refresh().counts["read", "ok"] == 1 and view.unreadable == 0
    h.close()


def test_lines_without_the_writers_prefix_are_decoded_whole_or_counted_unreadable():
    view = HistoryView()
    view.feed(b'{"f":"meta","type":"info","time_ms":1000.0,"topic":"t"}')  # keys reordered
    view.feed(b'{"f":"send","time_ms":2000.0,"type":"ok","partition":0}')
    view.feed(b"not json at all")
    view.feed(b'["a list"]')
    assert view.meta["topic"] == "t"
    assert view.counts["send", "ok"] == 1 and view.per_second["acknowledged/s"] == [0, 1]
    assert view.unreadable == 2
