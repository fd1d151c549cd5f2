"""The Spark reads' bookkeeping kept past their drivers (actors/cluster_host.py PipelineReads,
what ClusterHost.record_pipeline_read and pipeline_reads run) and the console's Pipelines
page (console/pipelines.py) drawn from it; no Ray: the cluster is a fake whose
`pipeline_reads` answers from a real PipelineReads, as Cluster.pipeline_reads does from
the host."""

from __future__ import annotations

import threading
import time

import pytest
from starlette.testclient import TestClient

from actors.cluster_host import PipelineReads
from console.actions import Actions
from console.app import Console, build_app
from console.history import History
from console.pages import Pages
from console.source import Snapshot

pytestmark = pytest.mark.unit

NODE_A, NODE_B = "a1" * 28, "b2" * 28          # Ray node ids: 56 hex characters


def report(partition: int, task_node: str, leader_node: str, end_node: str | None = None,
           leader: int = 1, end_leader: int | None = None, resolves: int = 0,
           attempt: int = 0) -> dict:
    """A task report as pipeline/reader.py's _report sends it."""
    return {"partition": partition, "start": 0, "end": 100, "rows": 100,
            "leader_at_plan": leader, "leader_node_at_plan": leader_node,
            "leader_at_end": leader if end_leader is None else end_leader,
            "leader_node_at_end": leader_node if end_node is None else end_node,
            "pinned_executor": "1", "task_node": task_node, "pid": 1234,
            "resolves": resolves, "attempt": attempt, "seconds": 0.25}


def test_reports_merge_into_their_read_in_any_order():
    store = PipelineReads()
    store.record("r1", {"reports": [report(0, NODE_A, NODE_A)]})     # before the plan
    store.record("r1", {"topic": "clicks", "partitions": 2, "planned_ms": 1})
    store.record("r1", {"reports": [report(1, NODE_B, NODE_B)]})
    [read] = store.latest(10)
    assert read["read_id"] == "r1" and read["topic"] == "clicks" and read["partitions"] == 2
    assert [r["partition"] for r in read["reports"]] == [0, 1]
    assert read["reports_dropped"] == 0


def test_the_store_keeps_the_last_reads_newest_first():
    store = PipelineReads(max_reads=3)
    for i in range(5):
        store.record(f"r{i}", {"topic": f"t{i}"})
    assert [r["read_id"] for r in store.latest(10)] == ["r4", "r3", "r2"]
    assert [r["read_id"] for r in store.latest(2)] == ["r4", "r3"]
    assert store.latest(0) == []
    store.record("r0", {"topic": "again"})        # a dropped read's late report: a new entry
    assert [r["read_id"] for r in store.latest(10)] == ["r0", "r4", "r3"]


def test_a_read_keeps_its_first_reports_and_counts_the_rest():
    store = PipelineReads(max_reports=3)
    store.record("r", {"reports": [report(p, NODE_A, NODE_A) for p in range(2)]})
    store.record("r", {"reports": [report(p, NODE_A, NODE_A) for p in range(2, 5)]})
    [read] = store.latest(1)
    assert [r["partition"] for r in read["reports"]] == [0, 1, 2]
    assert read["reports_dropped"] == 2


def test_an_answer_is_a_copy():
    store = PipelineReads()
    store.record("r", {"reports": [report(0, NODE_A, NODE_A)]})
    store.latest(1)[0]["reports"].clear()
    assert len(store.latest(1)[0]["reports"]) == 1


class FakeCluster:
    def __init__(self, store: PipelineReads | None, error: Exception | None = None):
        self.store, self.error = store, error

    def pipeline_reads(self, limit: int = 50) -> list[dict]:
        if self.error is not None:
            raise self.error
        return self.store.latest(limit)


class FakeSource:
    admin = None

    def __init__(self, cluster):
        self.cluster = cluster


class FakeSampler:
    def __init__(self, cluster):
        self.latest = Snapshot(time_s=time.time(), nodes=[
            {"node_id": NODE_A, "address": "10.0.0.1", "alive": True},
            {"node_id": NODE_B, "address": "10.0.0.2", "alive": True}])
        self.history = History()
        self.lock = threading.Lock()
        self.source = FakeSource(cluster)


def client_for(cluster) -> TestClient:
    console = Console("test", FakeSampler(cluster), Actions(None), refresh_s=1.0)
    console.extra = Pages(console)
    return TestClient(build_app(console))


def test_the_page_shows_where_each_task_ran_against_its_leader():
    store = PipelineReads()
    store.record("old", {"topic": "older", "partitions": 1,
                         "reports": [report(0, NODE_A, NODE_A)]})
    store.record("abc123", {"topic": "clicks", "partitions": 3, "records": 300,
                            "pinned": True, "planned_ms": 1_700_000_000_000,
                            "job_id": "02000000"})
    store.record("abc123", {"reports": [report(1, NODE_B, NODE_B)]})
    store.record("abc123", {"reports": [report(0, NODE_A, NODE_B, end_node=NODE_A,
                                                leader=2, end_leader=3, resolves=2)]})
    r = client_for(FakeCluster(store)).get("/pipelines")
    assert r.status_code == 200
    html = r.text
    assert html.index('id="read-abc123"') < html.index('id="read-old"')     # newest first
    section = html.split('id="read-abc123"', 1)[1].split('id="read-old"', 1)[0]
    assert 'class="reported">2</b> of <b>3</b> partitions' in section
    assert 'class="local">1</b> of 2' in section
    rows = section.split('<table class="tasks">', 1)[1].split("<tr")[2:]
    assert [row.split("<td>", 2)[1].split("<", 1)[0] for row in rows] == ["0", "1"]
    moved, local = rows
    assert 'class="remote"' in moved and 'class="local"' in local
    # partition 0: planned on B's leader 2, ran on A, whose leader 3 was there at the end
    assert f'title="{NODE_B}">{NODE_B[:8]}</span> <span class="ip">(10.0.0.2)' in moved
    assert f'title="{NODE_A}">{NODE_A[:8]}</span> <span class="ip">(10.0.0.1)' in moved
    assert ">no; its leader's at the end<" in moved and '<td class="alarm">3</td>' in moved
    assert ">yes<" in local
    assert "re-resolves <b>2</b>" in section and "leader moved <b>1</b>" in section


def test_the_json_and_a_limit():
    store = PipelineReads()
    for i in range(3):
        store.record(f"r{i}", {"topic": "t", "reports": [report(0, NODE_A, NODE_A)]})
    client = client_for(FakeCluster(store))
    body = client.get("/api/pipelines?limit=2").json()
    assert [r["read_id"] for r in body["reads"]] == ["r2", "r1"] and body["error"] is None
    r = client.get("/pipelines?limit=0")
    assert r.status_code == 400 and "INVALID_REQUEST (42): limit must be within 1..100" in r.text
    assert client.get("/pipelines?limit=x").status_code == 400


def test_a_host_that_does_not_answer_is_shown_not_raised():
    from rayka.errors import RequestTimedOut
    r = client_for(FakeCluster(None, RequestTimedOut("no answer in 10 s"))).get("/pipelines")
    assert r.status_code == 200
    assert 'id="pipelines-error"' in r.text and "REQUEST_TIMED_OUT (7): no answer in 10 s" in r.text
    empty = client_for(FakeCluster(PipelineReads())).get("/pipelines")
    assert 'id="no-reads"' in empty.text and 'id="pipelines-error"' not in empty.text
