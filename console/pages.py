"""Pages: the console's pages beyond the Kafka views, each from a module of its own.

Rules:
- Each module here answers `routes(console, guarded) -> list[Route]`: the controller's
  timeline (console/timeline.py), the Spark pipelines' placements (console/pipelines.py)
  and the chaos runs (console/chaos_runs.py). `guarded` wraps a handler so a typed error
  becomes an error page (console/app.py).
- A page's data is read when the page (or its live fragment) is asked for, never by the
  sampler: they cost nothing while nobody looks.
"""

from __future__ import annotations

from console import chaos_runs, pipelines, timeline


class Pages:
    def __init__(self, console):
        self.console = console

    def routes(self, console, guarded) -> list:
        return [*timeline.routes(console, guarded), *pipelines.routes(console, guarded),
                *chaos_runs.routes(console, guarded)]
