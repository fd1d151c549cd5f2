"""History: the console's memory of figures over time, bounded, and the rates drawn from it.

Rules:
- A Series keeps (time_s, value) samples of one counter or gauge, at most `capacity` of
  them (the oldest go first): an hour at the sampler's interval by default. Nothing here
  reads a clock: the caller passes each sample's time.
- A counter's rate between two samples is (v1 - v0) / (t1 - t0); a counter that went
  backwards (a log truncated, offsets reset, a series restarted) gives no rate for that
  step rather than a negative one.
- History holds named series (`"topic:orders:produced"`); `drop(prefix)` forgets those of a
  deleted topic or group so the memory follows what exists.
- `plot(names, since_s)` answers uPlot's columnar form: one shared time axis (the union of
  the series' times) and one column per series, None where a series has no sample.
"""

from __future__ import annotations

import collections
from typing import Iterable


class Series:
    def __init__(self, capacity: int):
        self.samples: collections.deque[tuple[float, float]] = collections.deque(maxlen=capacity)

    def add(self, time_s: float, value: float) -> None:
        if self.samples and time_s <= self.samples[-1][0]:
            self.samples[-1] = (self.samples[-1][0], value)   # same instant: keep the last
            return
        self.samples.append((time_s, value))

    def last(self) -> float | None:
        return self.samples[-1][1] if self.samples else None

    def rates(self) -> list[tuple[float, float]]:
        """(time_s, per-second rate since the previous sample) for each step that went forward."""
        out = []
        prev = None
        for t, v in self.samples:
            if prev is not None and v >= prev[1]:
                out.append((t, (v - prev[1]) / (t - prev[0])))
            prev = (t, v)
        return out

    def rate(self) -> float | None:
        """The last step's rate, None before two samples or after a backward step."""
        if len(self.samples) < 2:
            return None
        (t0, v0), (t1, v1) = self.samples[-2], self.samples[-1]
        return (v1 - v0) / (t1 - t0) if v1 >= v0 else None


class History:
    def __init__(self, capacity: int = 1800):
        self.capacity = capacity
        self.series: dict[str, Series] = {}

    def add(self, name: str, time_s: float, value: float) -> None:
        s = self.series.get(name)
        if s is None:
            s = self.series[name] = Series(self.capacity)
        s.add(time_s, value)

    def get(self, name: str) -> Series | None:
        return self.series.get(name)

    def drop(self, prefix: str) -> None:
        for name in [n for n in self.series if n.startswith(prefix)]:
            del self.series[name]

    def names(self, prefix: str = "") -> list[str]:
        return sorted(n for n in self.series if n.startswith(prefix))

    def plot(self, names: Iterable[str], since_s: float = 0.0, rate: bool = False) -> dict:
        """{"names": [...], "data": [times, column, ...]} for uPlot; `rate` plots each
        counter's per-second rate instead of its value."""
        names = list(names)
        points = []
        for n in names:
            s = self.series.get(n)
            pts = (s.rates() if rate else list(s.samples)) if s is not None else []
            points.append({t: v for t, v in pts if t >= since_s})
        times = sorted(set().union(*points)) if points else []
        return {"names": names,
                "data": [times] + [[p.get(t) for t in times] for p in points]}
