"""The console's web application: pages, their live fragments, plot data and actions (Starlette).

Rules:
- Pages render on the server (Jinja2) from the sampler's last snapshot; each page's live part
  is refreshed by htmx every `refresh_s` (the same URL asked with `HX-Request`, answered
  with the fragment only), and each plot polls /api/plot (uPlot's columnar data). A page
  load or a refresh never fans out to the cluster: at 10,000 partitions a page costs what a
  snapshot already holds (partition tables, a topic's or a group's, are paged, PAGE_ROWS
  rows a page).
- Detail reads a snapshot does not hold (a topic's configs, a group's members, a
  transaction) are asked when the page is opened, through rayka's Admin; Kafka's
  find-hanging (every leader asked once) only when its button is pressed.
- Bad input in a URL or a form, and a refused action, show Kafka's error name and code on
  the page with a 4xx status; the console keeps serving. An unknown topic is
  UNKNOWN_TOPIC_OR_PARTITION (3), an unknown group GROUP_ID_NOT_FOUND (69), a malformed
  number INVALID_REQUEST (42).
- Actions are POSTs (console/actions.py); a POST whose Origin is not the console's own is
  refused (a page elsewhere must not drive an operator's browser into writes).
- Extra pages (controller timeline, pipelines, chaos runs) register themselves through
  `pages` (console/pages.py) so this module stays the frame.
"""

from __future__ import annotations

import math
import os
import time
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console.actions import Actions, Outcome
from console.sampler import Sampler
from console.source import error_text
from rayka.errors import (GroupAuthorizationFailed, GroupIdNotFound, InvalidRequest, KafkaError,
                          TopicAuthorizationFailed, UnknownTopicOrPartition)

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(HERE, "static", "node_modules")
PAGE_ROWS = 200
NAV = [("cluster", "Cluster"), ("topics", "Topics"), ("groups", "Groups"),
       ("controller", "Controller"), ("transactions", "Transactions"),
       ("pipelines", "Pipelines"), ("chaos", "Chaos")]


def human_bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def rate_text(value) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.0f}/s"


class Console:
    """The state every handler shares: the cluster's name, the sampler, the actions."""

    def __init__(self, name: str, sampler: Sampler, actions: Actions, refresh_s: float = 2.0,
                 chaos_dir: str | None = None, extra=None):
        self.name, self.sampler, self.actions = name, sampler, actions
        self.refresh_s = refresh_s
        self.chaos_dir = chaos_dir
        self.source = sampler.source
        self.admin = sampler.source.admin
        self.extra = extra             # console/pages.py's Pages, given the Console later
        self.env = Environment(loader=FileSystemLoader(os.path.join(HERE, "templates")),
                               autoescape=select_autoescape(["html"]))
        self.env.globals.update(human_bytes=human_bytes, rate_text=rate_text, nav=NAV)

    # -- rendering ---------------------------------------------------------------------------
    def render(self, request: Request, page: str, status: int = 200, **context) -> HTMLResponse:
        """The page, or only its live part when htmx asks (HX-Request)."""
        snap = self.sampler.latest
        context = {"snap": snap, "console": self, "request": request, "page": page,
                   "writes": self.actions.allowed, "refresh_ms": int(self.refresh_s * 1000),
                   "age_s": max(0.0, time.time() - snap.time_s) if snap.time_s else None,
                   **context}
        fragment = request.headers.get("HX-Request") == "true" \
            and request.headers.get("HX-Target") == "live"
        name = f"{page}_live.html" if fragment else f"{page}.html"
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status)

    def error_page(self, request: Request, exc: BaseException, status: int = 400) -> HTMLResponse:
        return self.render(request, "error", status=status, error=error_text(exc))


def _int_arg(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be a whole number, not {raw!r}") from None


def _paged(request: Request, rows: list, what: str) -> dict:
    """The `?page=` of `rows` (PAGE_ROWS a page) as the templates take it: parts, count,
    page_no, pages; a page that does not exist is INVALID_REQUEST."""
    page = _int_arg(request, "page", 1)
    pages = max(1, math.ceil(len(rows) / PAGE_ROWS))
    if not 1 <= page <= pages:
        raise InvalidRequest(f"page {page} of {what} does not exist (1..{pages})")
    return {"parts": rows[(page - 1) * PAGE_ROWS: page * PAGE_ROWS], "count": len(rows),
            "page_no": page, "pages": pages}


def _status_for(exc: BaseException) -> int:
    if isinstance(exc, (UnknownTopicOrPartition, GroupIdNotFound)):
        return 404
    if isinstance(exc, (TopicAuthorizationFailed, GroupAuthorizationFailed)):
        return 403
    return 400


def build_app(console: Console) -> Starlette:
    def guarded(handler):
        """Run a page handler; a typed error becomes an error page, never a 500."""
        def run(request: Request):
            try:
                return handler(request)
            except KafkaError as exc:
                return console.error_page(request, exc, _status_for(exc))
        return run

    def same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        return origin is None or urlsplit(origin).netloc == request.headers.get("host")

    # -- pages ---------------------------------------------------------------------------------
    def cluster_page(request: Request):
        snap = console.sampler.latest
        led: dict[int, int] = {}
        followed: dict[int, int] = {}
        for p in snap.partitions.values():
            led[p.leader] = led.get(p.leader, 0) + 1
            for r in p.replicas:
                if r != p.leader:
                    followed[r] = followed.get(r, 0) + 1
        by_node: dict = {}
        for b in snap.brokers:
            by_node.setdefault(b["node_id"], []).append(b)
        controllers_by_node: dict = {}
        for c in snap.controllers:
            controllers_by_node.setdefault(c.get("node_id"), []).append(c)
        offline_dirs = [(b, d) for b, dirs in sorted(snap.log_dirs.items()) for d in dirs
                        if not d.get("online", True)]
        return console.render(request, "cluster", led=led, followed=followed, by_node=by_node,
                              controllers_by_node=controllers_by_node,
                              offline=sorted(snap.offline(), key=lambda p: (p.topic, p.partition)),
                              under=sorted(snap.under_replicated(),
                                           key=lambda p: (p.topic, p.partition)),
                              offline_dirs=offline_dirs)

    def topics_page(request: Request, outcome: Outcome | None = None, status: int = 200):
        snap = console.sampler.latest
        hist = console.sampler.history
        rows = []
        with console.sampler.lock:
            for topic, parts in snap.topics().items():
                end = hist.get(f"topic:{topic}:end")
                consumed = hist.get(f"topic:{topic}:consumed")
                bytes_in = hist.get(f"topic:{topic}:bytes_in")
                bytes_out = hist.get(f"topic:{topic}:bytes_out")
                rows.append({"topic": topic, "partitions": len(parts),
                             "rf": max((len(p.replicas) for p in parts), default=0),
                             "under": sum(p.under_replicated for p in parts),
                             "bytes": sum(p.size_bytes or 0 for p in parts),
                             "end": sum(p.log_end or 0 for p in parts),
                             "produce_rate": end.rate() if end else None,
                             "consume_rate": consumed.rate() if consumed else None,
                             "bytes_in_rate": bytes_in.rate() if bytes_in else None,
                             "bytes_out_rate": bytes_out.rate() if bytes_out else None})
        return console.render(request, "topics", status=status, rows=rows, outcome=outcome)

    def topic_page(request: Request, outcome: Outcome | None = None, status: int = 200):
        name = request.path_params["name"]
        console.source.access.check_topic(name)
        snap = console.sampler.latest
        config = console.admin.topic_config(name)     # UNKNOWN_TOPIC_OR_PARTITION if none
        parts = snap.topics().get(name, [])
        return console.render(request, "topic", status=status, topic=name, config=config,
                              outcome=outcome, **_paged(request, parts, f"topic {name}"))

    def groups_page(request: Request):
        snap = console.sampler.latest
        rows = []
        for g in snap.groups:
            lag = snap.lag(g["group"])
            rows.append({**g, "partitions": len(lag),
                         "lag": sum(x["lag"] or 0 for x in lag.values()),
                         "topics": sorted({tp[0] for tp in lag})})
        return console.render(request, "groups", rows=rows)

    def group_page(request: Request, outcome: Outcome | None = None, status: int = 200):
        group = request.path_params["group"]
        console.source.access.check_group(group)
        known = {g["group"] for g in console.sampler.latest.groups}
        try:
            described = console.admin.describe_group(group)
        except KafkaError:
            if group not in known:
                raise GroupIdNotFound(f"The group id {group} was not found.") from None
            raise
        if group not in known and described["state"] == "Dead":
            raise GroupIdNotFound(f"The group id {group} was not found.")
        topics = sorted({p["topic"] for p in described["partitions"]})
        parts = described["partitions"]
        return console.render(request, "group", status=status, group=group, d=described,
                              topics=topics, outcome=outcome,
                              total_lag=sum(p["lag"] or 0 for p in parts),
                              **_paged(request, parts, f"group {group}"))

    def transactions_page(request: Request):
        now_ms = time.time() * 1000
        rows = []
        for t in console.admin.list_transactions():
            row = dict(t)
            if t["state"] == "Ongoing":
                try:
                    d = console.admin.describe_transaction(t["transactional_id"])
                    row.update(d)
                    row["running_ms"] = now_ms - d["transaction_start_time_ms"]
                    row["hanging"] = row["running_ms"] > d["transaction_timeout_ms"]
                except KafkaError as exc:
                    row["error"] = error_text(exc)
            rows.append(row)
        by_producer: dict = {}
        for r in rows:
            by_producer.setdefault(r["producer_id"], []).append(r)
        found = None
        if request.query_params.get("find_hanging") and request.headers.get("HX-Request") != "true":
            minutes = _int_arg(request, "max_minutes", 15)
            if minutes < 0:
                raise InvalidRequest(f"max_minutes is never negative: {minutes}")
            visible = console.source.access.visible
            found = console.admin.find_hanging_transactions(
                None if visible is None else sorted(visible[0]),
                max_transaction_timeout_ms=minutes * 60_000)
        return console.render(request, "transactions", rows=rows, by_producer=by_producer,
                              found=found)

    # -- plots ---------------------------------------------------------------------------------
    def plot(request: Request):
        names = [n for n in request.query_params.get("series", "").split(",") if n]
        if not names or len(names) > 32:
            return JSONResponse({"error": "INVALID_REQUEST (42): give 1 to 32 series"}, 400)
        rate = request.query_params.get("rate") == "1"
        since = time.time() - _int_arg(request, "window_s", 900)
        with console.sampler.lock:
            data = console.sampler.history.plot(names, since, rate=rate)
        return JSONResponse(data)

    def status(request: Request):
        snap = console.sampler.latest
        return JSONResponse({"cluster": console.name, "time_s": snap.time_s,
                             "took_s": snap.took_s, "brokers": snap.brokers,
                             "controller": snap.controller,
                             "under_replicated": [[p.topic, p.partition]
                                                  for p in snap.under_replicated()],
                             "offline": [[p.topic, p.partition] for p in snap.offline()],
                             "leaders": {f"{p.topic}-{p.partition}": p.leader
                                         for p in snap.partitions.values()},
                             "errors": snap.errors})

    # -- actions -------------------------------------------------------------------------------
    def action(do, then):
        """A POST: check its origin, run the action, render `then` with its outcome."""
        async def run(request: Request):
            form = await request.form()
            if not same_origin(request):
                return console.error_page(request, InvalidRequest(
                    "a write must come from the console's own pages"), 403)
            from starlette.concurrency import run_in_threadpool

            def both():
                outcome = do(request, form)
                if outcome.ok:
                    console.sampler.sweep_once()      # the page shows the action's effect
                try:
                    return then(request, outcome, 200 if outcome.ok else
                                (403 if "AUTHORIZATION" in outcome.message else 400))
                except KafkaError:               # e.g. the topic just deleted
                    return RedirectResponse("/topics", 303) if outcome.ok else \
                        console.render(request, "error", status=400, error=outcome.message)
            return await run_in_threadpool(both)
        return run

    def ints(text: str) -> list[int]:
        try:
            return [int(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise InvalidRequest(f"partitions must be numbers like 0,1,2, not {text!r}") from None

    def all_partitions(topic: str) -> list[int]:
        parts = console.sampler.latest.topics().get(topic)
        if parts is None:
            return [p.partition for p in console.admin.describe_topic(topic)]
        return [p.partition for p in parts]

    def guarded_outcome(fn):
        def run(request, form):
            try:
                return fn(request, form)
            except KafkaError as exc:
                return Outcome(False, error_text(exc))
        return run

    create = guarded_outcome(lambda r, f: console.actions.create_topic(
        f.get("name", ""), f.get("partitions", ""), f.get("replication_factor", ""),
        f.get("configs", "")))
    delete = guarded_outcome(lambda r, f: console.actions.delete_topic(r.path_params["name"]))
    alter = guarded_outcome(lambda r, f: console.actions.alter_configs(
        r.path_params["name"], f.get("configs", "")))
    elect = guarded_outcome(lambda r, f: console.actions.elect_preferred(
        r.path_params["name"], ints(f.get("partitions", "")) or
        all_partitions(r.path_params["name"])))
    reassign = guarded_outcome(lambda r, f: console.actions.reassign(
        r.path_params["name"], f.get("partition", ""), f.get("replicas", "")))
    reset = guarded_outcome(lambda r, f: console.actions.reset_offsets(
        r.path_params["group"], f.get("topic", ""), f.get("to", ""),
        ints(f.get("partitions", "")) or all_partitions(f.get("topic", ""))))

    routes = [
        Route("/", lambda r: RedirectResponse("/cluster", 302)),
        Route("/cluster", guarded(cluster_page)),
        Route("/topics", guarded(topics_page)),
        Route("/topics/{name:path}/delete", action(delete, topics_page), methods=["POST"]),
        Route("/topics/{name:path}/configs", action(alter, topic_page), methods=["POST"]),
        Route("/topics/{name:path}/elect", action(elect, topic_page), methods=["POST"]),
        Route("/topics/{name:path}/reassign", action(reassign, topic_page), methods=["POST"]),
        Route("/topics", action(create, topics_page), methods=["POST"]),
        Route("/topics/{name:path}", guarded(topic_page)),
        Route("/groups", guarded(groups_page)),
        Route("/groups/{group:path}/reset", action(reset, group_page), methods=["POST"]),
        Route("/groups/{group:path}", guarded(group_page)),
        Route("/transactions", guarded(transactions_page)),
        Route("/api/plot", guarded(plot)),
        Route("/api/status", status),
        Route("/healthz", lambda r: Response("ok")),
        Mount("/static", StaticFiles(directory=os.path.join(HERE, "static"), check_dir=True),
              name="static"),
    ]
    if console.extra is not None:
        routes[-2:-2] = console.extra.routes(console, guarded)
    return Starlette(routes=routes)
