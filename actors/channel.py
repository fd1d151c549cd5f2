"""The controller's BrokerChannel over Ray: one sender thread per broker (Kafka's
ControllerChannelManager / RequestSendThread).

Rules:
- `send` never blocks the controller's event thread: requests go to the broker's queue
  and leave it in order, one at a time.
- A request is retried (with a short back-off) until the broker answers, the broker
  leaves the controller's live set, or the controller is no longer active at the
  request's epoch (a resigned controller's requests are dropped, never delivered late).
- Answers come back as controller events: LeaderAndIsrResponse, and StopReplicaResponse
  for the partitions whose replicas were deleted (topic deletion waits for those).
- The broker is found by its actor name `broker-<id>` in the cluster's namespace; the
  handle is looked up again after a failure (the broker actor may have restarted).
"""

from __future__ import annotations

import logging
import queue
import threading

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from actors.cluster_host import broker_actor_name
from controller import events as ev
from controller.requests import LeaderAndIsrRequest, StopReplicaRequest

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = 0.1


class RayBrokerChannel:
    def __init__(self, namespace: str, controller):
        self.namespace = namespace
        self.controller = controller
        self._queues: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def send(self, broker_id: int, request) -> None:
        with self._lock:
            q = self._queues.get(broker_id)
            if q is None:
                q = self._queues[broker_id] = queue.Queue()
                threading.Thread(target=self._run, args=(broker_id, q), daemon=True,
                                 name=f"controller-sender-{broker_id}").start()
        q.put(request)

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            for q in self._queues.values():
                q.put(None)

    # -- per-broker sender ---------------------------------------------------------------------
    def _still_wanted(self, broker_id: int, request) -> bool:
        c = self.controller
        return (not self._stopped.is_set() and c.is_active
                and request.controller_epoch == c.ctx.epoch and broker_id in c.ctx.live_brokers)

    def _run(self, broker_id: int, q: queue.Queue) -> None:
        handle = None
        while True:
            request = q.get()
            if request is None:
                return
            while self._still_wanted(broker_id, request):
                try:
                    if handle is None:
                        handle = ray.get_actor(broker_actor_name(broker_id), namespace=self.namespace)
                    answer = ray.get(handle.handle_controller_request.remote(request),
                                     timeout=REQUEST_TIMEOUT_S)
                    self._answer(broker_id, request, answer)
                    break
                except (GetTimeoutError, RayActorError, RayError, ValueError) as exc:
                    log.info("request to broker %s failed (%s); retrying", broker_id,
                             type(exc).__name__)
                    handle = None
                    self._stopped.wait(RETRY_BACKOFF_S)  # back-off between retries

    def _answer(self, broker_id: int, request, answer: dict) -> None:
        errors = answer.get("partition_errors", {})
        if answer.get("error"):
            log.warning("broker %s rejected %s: error %s", broker_id, type(request).__name__,
                        answer["error"])
        put = self.controller.loop.put
        if isinstance(request, LeaderAndIsrRequest):
            put(ev.LeaderAndIsrResponse(broker_id, errors))
        elif isinstance(request, StopReplicaRequest):
            deleted = {(p.topic, p.partition) for p in request.partitions if p.delete}
            if deleted:
                code = answer.get("error", 0)
                put(ev.StopReplicaResponse(broker_id, {tp: code or errors.get(tp, 0)
                                                       for tp in deleted}))
