"""Pipelines: the Pipelines page, where the last Spark reads' tasks ran against where their
partitions' leaders were.

Rules:
- The reads come from the cluster's ClusterHost (Cluster.pipeline_reads): pipeline/'s
  TaskLog forwards each read's plan and every task report there as it records them, so a
  read stays visible after its driver (and its TaskLog) is gone; the host keeps the last
  100 reads. The console never imports pipeline/: it reads the reports' fields.
- Per read: topic, when it was planned, the Ray job that ran it, tasks reported against
  partitions planned, rows, how many tasks ran on their leader's node, leader moves and
  re-resolves. Per task (one row per attempt): partition, range, rows, the leader broker
  and its node at plan time, the node the task ran on (found from its executor JVM's
  process), the leader and its node at the end, re-resolves, seconds, and whether the task
  ran on its leader's node (at plan time, and still at the end).
- A node is shown by its id's first NODE_CHARS hex characters and its IP from the
  sampler's last snapshot of Ray's node table (ray.nodes()): a page load asks the host for
  the reads, and nothing else.
- The host not answering is shown on the page with its error; the page keeps working.
"""

from __future__ import annotations

import time

from starlette.responses import JSONResponse
from starlette.routing import Route

from console.source import error_text
from rayka.errors import InvalidRequest

NODE_CHARS = 8
DEFAULT_READS = 20
MAX_READS = 100


def node_text(node_id: str | None, addresses: dict) -> dict:
    """{short, full, ip} of a Ray node id (None-safe)."""
    if not node_id:
        return {"short": "-", "full": "", "ip": None}
    return {"short": node_id[:NODE_CHARS], "full": node_id, "ip": addresses.get(node_id)}


def task_row(report: dict, addresses: dict) -> dict:
    ran = report.get("task_node")
    at_plan, at_end = report.get("leader_node_at_plan"), report.get("leader_node_at_end")
    return {"partition": report.get("partition"), "start": report.get("start"),
            "end": report.get("end"), "rows": report.get("rows"),
            "attempt": report.get("attempt"), "executor": report.get("pinned_executor"),
            "leader_at_plan": report.get("leader_at_plan"),
            "node_at_plan": node_text(at_plan, addresses),
            "task_node": node_text(ran, addresses),
            "leader_at_end": report.get("leader_at_end"),
            "node_at_end": node_text(at_end, addresses),
            "resolves": report.get("resolves") or 0, "seconds": report.get("seconds"),
            "local": ran is not None and ran == at_plan,
            "local_at_end": ran is not None and ran == at_end,
            "moved": report.get("leader_at_end") != report.get("leader_at_plan")}


def read_view(read: dict, addresses: dict) -> dict:
    """One read of Cluster.pipeline_reads, shaped for the page."""
    tasks = sorted((task_row(r, addresses) for r in read.get("reports") or []),
                   key=lambda t: (t["partition"] if t["partition"] is not None else -1,
                                  t["attempt"] or 0))
    planned = read.get("planned_ms")
    return {"read_id": read.get("read_id"), "topic": read.get("topic"),
            "job_id": read.get("job_id"), "pinned": read.get("pinned"),
            "isolation_level": read.get("isolation_level"),
            "planned_text": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(planned / 1000))
            if planned else "-",
            "partitions": read.get("partitions"), "records": read.get("records"),
            "tasks": tasks, "reported": len(tasks),
            "dropped": read.get("reports_dropped") or 0,
            "rows": sum(t["rows"] or 0 for t in tasks),
            "local": sum(t["local"] for t in tasks),
            "moved": sum(t["moved"] for t in tasks),
            "resolves": sum(t["resolves"] for t in tasks)}


def routes(console, guarded) -> list:
    def reads(request) -> tuple[list[dict], str | None]:
        raw = request.query_params.get("limit", str(DEFAULT_READS))
        try:
            limit = int(raw)
        except ValueError:
            raise InvalidRequest(f"limit must be a whole number, not {raw!r}") from None
        if not 1 <= limit <= MAX_READS:
            raise InvalidRequest(f"limit must be within 1..{MAX_READS}, not {limit}")
        cluster = console.source.cluster
        if cluster is None:
            return [], "no cluster connected"
        try:
            return cluster.pipeline_reads(limit), None
        except Exception as exc:        # the host restarting, or one without the method
            return [], f"the ClusterHost did not answer: {error_text(exc)}"

    def page(request):
        got, error = reads(request)
        addresses = {n.get("node_id"): n.get("address")
                     for n in console.sampler.latest.nodes}
        return console.render(request, "pipelines", title="pipelines", error=error,
                              reads=[read_view(r, addresses) for r in got])

    def data(request):
        got, error = reads(request)
        return JSONResponse({"reads": got, "error": error})

    return [Route("/pipelines", guarded(page)), Route("/api/pipelines", guarded(data))]
