"""Timeline: the Controller page, the controllers' journals of elections, ISR changes and
controller changes as a table and a plot of events over time.

Rules:
- The journal is the controllers' own (Cluster.controller_journal): each candidate keeps
  what it did while active; the console asks incrementally (the last seq seen per
  controller) and keeps up to MAX_ENTRIES merged entries, oldest dropped first.
- It is read when the page or its plot data is asked for, not by the sampler. With a
  principal (console/principal.py) the table leaves out the topics it may not describe.
- The plot counts events per BUCKET_S seconds and kind ("leader": a new leader or leader
  epoch, "isr": an ISR change alone, "controller": a controller became active or resigned,
  "broker": a broker joined or left); the table lists the newest entries first, optionally
  one topic's (`?topic=`).
"""

from __future__ import annotations

import collections
import threading
import time

from starlette.responses import JSONResponse
from starlette.routing import Route

from rayka.errors import InvalidRequest

MAX_ENTRIES = 20_000
BUCKET_S = 5
SHOWN = 300
KINDS = ("leader", "isr", "controller", "broker")


class Timeline:
    def __init__(self, cluster):
        self.cluster = cluster
        self.entries: collections.deque = collections.deque(maxlen=MAX_ENTRIES)
        self.after: dict = {}
        self.lock = threading.Lock()

    def refresh(self) -> list[dict]:
        """Ask the controllers for what is new; answer every entry kept, oldest first."""
        with self.lock:
            new = self.cluster.controller_journal(after=dict(self.after))
            for e in new:
                c = e.get("controller_id")
                if e.get("seq", 0) > self.after.get(c, 0):
                    self.after[c] = e["seq"]
                self.entries.append(e)
            if new:
                ordered = sorted(self.entries, key=lambda e: (e.get("time_ms", 0), e.get("seq", 0)))
                self.entries = collections.deque(ordered, maxlen=MAX_ENTRIES)
            return list(self.entries)


def counts(entries: list[dict], now_s: float, window_s: float) -> dict:
    """uPlot's columns: bucket times and one count column per kind."""
    start = now_s - window_s
    first = int(start // BUCKET_S) * BUCKET_S
    times = list(range(first, int(now_s) + 1, BUCKET_S))
    index = {t: i for i, t in enumerate(times)}
    columns = {k: [0] * len(times) for k in KINDS}
    for e in entries:
        t = e.get("time_ms", 0) / 1000
        if t < start or e.get("kind") not in columns:
            continue
        i = index.get(int(t // BUCKET_S) * BUCKET_S)
        if i is not None:
            columns[e["kind"]][i] += 1
    return {"names": list(KINDS), "data": [times] + [columns[k] for k in KINDS]}


def row(e: dict) -> dict:
    """An entry as the table shows it: local time, what it was before, why."""
    out = dict(e)
    out["time_text"] = time.strftime("%H:%M:%S", time.localtime(e.get("time_ms", 0) / 1000)) + \
        ".%03d" % (e.get("time_ms", 0) % 1000)
    if e.get("kind") == "leader" and e.get("previous_leader_epoch") is not None:
        out["was"] = f"leader {e.get('previous_leader')}, epoch {e.get('previous_leader_epoch')}"
    elif e.get("kind") in ("leader", "isr") and e.get("previous_isr") is not None:
        out["was"] = "ISR " + ",".join(map(str, e["previous_isr"]))
    else:
        out["was"] = ""
    out["why"] = " ".join(str(x) for x in (e.get("event"), e.get("reason")) if x)
    return out


def routes(console, guarded) -> list:
    timeline = Timeline(console.source.cluster)

    def page(request):
        entries = timeline.refresh()
        topic = request.query_params.get("topic") or None
        access = console.source.access
        if topic is not None:
            access.check_topic(topic)
        shown = [e for e in reversed(entries) if (topic is None or e.get("topic") == topic)
                 and access.topic_shown(e.get("topic"))]
        return console.render(request, "controller", rows=[row(e) for e in shown[:SHOWN]],
                              total=len(shown),
                              topic=topic,
                              elections=sum(e.get("kind") == "leader" for e in entries),
                              isr_changes=sum(e.get("kind") == "isr" for e in entries))

    def data(request):
        try:
            window_s = float(request.query_params.get("window_s", "900"))
        except ValueError:
            raise InvalidRequest("window_s must be a number of seconds") from None
        return JSONResponse(counts(timeline.refresh(), time.time(), window_s))

    return [Route("/controller", guarded(page)), Route("/api/timeline", guarded(data))]
