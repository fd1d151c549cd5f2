"""TopicIO: Kafka's per-topic BrokerTopicMetrics on a broker: bytes in from producers and
bytes out to consumers, per topic, since the broker started.

Rules:
- Bytes in count what clients' Produce appends (the batches' bytes as received), on the
  leader; bytes out count the record bytes a consumer's Fetch answer carries (replica id
  < 0), on the broker answering it. Replication (followers' fetches) and the coordinators'
  own appends are not counted, as Kafka's BytesInPerSec/BytesOutPerSec leave them to
  ReplicationBytes*PerSec.
- Counters only grow; a monitor draws rates from two reads (the console does).
- One small lock of its own: the counters are bumped from the listener's loop and Ray's
  threads alike, never under the broker lock.
"""

from __future__ import annotations

import threading


class TopicIO:
    def __init__(self):
        self._lock = threading.Lock()
        self._in: dict[str, int] = {}
        self._out: dict[str, int] = {}

    def count_in(self, requests) -> None:
        """Produce requests [(tp, batch bytes), ...]."""
        with self._lock:
            for tp, data in requests:
                self._in[tp[0]] = self._in.get(tp[0], 0) + len(data)

    def count_out(self, records_by_tp) -> None:
        """A consumer's fetch answer: [(tp, records bytes or None), ...]."""
        with self._lock:
            for tp, records in records_by_tp:
                if records:
                    self._out[tp[0]] = self._out.get(tp[0], 0) + len(records)

    def stats(self) -> dict[str, tuple[int, int]]:
        """topic → (bytes in, bytes out) so far."""
        with self._lock:
            return {t: (self._in.get(t, 0), self._out.get(t, 0))
                    for t in set(self._in) | set(self._out)}
