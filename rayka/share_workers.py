"""Ray actors as one share group (KIP-932 queues on Ray): N workers, N free of the topic's
partition count, each a ShareConsumer in explicit mode that runs the user's function on
every record and acknowledges what it says.

Rules:
- `process(record) -> "accept" | "release" | "reject" | None` (None is accept). A function
  that raises releases the record (it comes back, with a higher delivery count, until
  group.share.delivery.count.limit archives it). The function runs in the worker actor, so
  it may use Ray itself.
- A worker commits its acknowledgements after each poll's records (ShareAcknowledge), so a
  record is settled as soon as it is processed; what a worker held when it died comes back
  to the others when its acquisition locks expire (share.record.lock.duration.ms).
- Every worker keeps a log of what it processed: (topic, partition, offset, delivery count,
  outcome, settled: whether the broker took the acknowledgement; a record whose lock
  expired while it was processed was handed to another worker and is not settled here),
  `log()` collects them; `kill(i)` kills one worker's actor (chaos, tests);
  `stop()` closes every live worker and returns the logs.
"""

from __future__ import annotations

import threading
import time

import ray

from rayka.client.share_consumer import ShareConsumer

OUTCOMES = ("accept", "release", "reject")
POLL_MS = 500


class ShareWorker:
    """One member: polls, processes, acknowledges, on a thread of its own."""

    def __init__(self, cluster_name: str, group_id: str, topics, process,
                 max_records: int = 100):
        import rayka                 # the package's lazy name: no import of rayka.cluster here
        self.cluster = rayka.connect(cluster_name)
        self.consumer = ShareConsumer(self.cluster, group_id, acknowledgement_mode="explicit",
                                      max_records=max_records)
        self.consumer.subscribe(topics)
        self.process = process
        self.entries: list[tuple] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="share-worker")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                records = self.consumer.poll(POLL_MS)
            except Exception as exc:                 # noted; the loop goes on
                self.errors.append(repr(exc))
                time.sleep(0.1)
                continue
            done = []
            for r in records:
                try:
                    outcome = self.process(r) or "accept"
                    if outcome not in OUTCOMES:
                        raise ValueError(f"process returned {outcome!r}, not one of {OUTCOMES}")
                except Exception as exc:
                    self.errors.append(repr(exc))
                    outcome = "release"
                self.consumer.acknowledge(r, outcome)
                done.append((r, outcome))
            if done:
                codes = self.consumer.commit_sync()
                refused = {tp: code for tp, code in codes.items() if code}
                if refused:
                    self.errors.append(f"acknowledgements refused: {refused}")
                self.entries += [(r.topic, r.partition, r.offset, r.delivery_count, outcome,
                                  codes.get((r.topic, r.partition), -1) == 0)
                                 for r, outcome in done]

    def log(self) -> list[tuple]:
        return list(self.entries)

    def member_id(self) -> str:
        return self.consumer.member_id

    def stop(self) -> list[tuple]:
        self._stop.set()
        self._thread.join(timeout=30)
        self.consumer.close()
        return list(self.entries)


class ShareWorkers:
    """`workers` ShareWorker actors over `topics` in share group `group_id`."""

    def __init__(self, cluster, group_id: str, topics, process, workers: int,
                 max_records: int = 100, num_cpus: float = 0):
        remote = ray.remote(num_cpus=num_cpus, max_restarts=0, max_concurrency=4)(ShareWorker)
        self.actors = [remote.remote(cluster.name, group_id, list(topics), process,
                                     max_records) for _ in range(workers)]
        self.alive = [True] * workers

    def kill(self, i: int) -> None:
        ray.kill(self.actors[i], no_restart=True)
        self.alive[i] = False

    def log(self) -> list[tuple]:
        out = []
        for a, alive in zip(self.actors, self.alive):
            if alive:
                out += ray.get(a.log.remote())
        return out

    def stop(self) -> list[tuple]:
        refs = [a.stop.remote() for a, alive in zip(self.actors, self.alive) if alive]
        return [e for r in ray.get(refs) for e in r]
