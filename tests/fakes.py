"""Small real classes standing in for the outside world in unit tests (no patches)."""

from __future__ import annotations

from collections import defaultdict


class RecordingChannel:
    """An in-memory BrokerChannel: records every request per broker, in send order."""

    def __init__(self):
        self.sent: list[tuple[int, object]] = []

    def send(self, broker_id, request) -> None:
        self.sent.append((broker_id, request))

    def by_broker(self) -> dict[int, list[object]]:
        out = defaultdict(list)
        for b, r in self.sent:
            out[b].append(r)
        return dict(out)

    def kinds(self) -> list[tuple[int, str]]:
        return [(b, type(r).__name__) for b, r in self.sent]

    def clear(self) -> None:
        self.sent.clear()
