"""The controller's BrokerChannel: one sender thread per broker (Kafka's
ControllerChannelManager / RequestSendThread); `RayBrokerChannel` delivers over Ray calls.

Rules:
- `send` never blocks the controller's event thread: requests go to the broker's queue
  and leave it in order, one at a time.
- A request is retried (with a short back-off) until the broker answers, the broker
  leaves the controller's live set, the broker is no longer the incarnation the request
  was made for (its broker epoch changed: Kafka drops a broker's queue when it leaves the
  live set, so a request queued for a dead incarnation never reaches the next one), or
  the controller is no longer active at the request's epoch (a resigned controller's
  requests are dropped, never delivered late).
- Answers come back as controller events: LeaderAndIsrResponse, and StopReplicaResponse
  for the partitions whose replicas were deleted (topic deletion waits for those).
- `QueuedBrokerChannel(controller, deliver, failures)` holds these rules for any
  `deliver(broker_id, request) -> answer`; a raise of one of `failures` is retried.
  Over Ray the broker is found by its actor name `broker-<id>` in the cluster's namespace;
  the handle is looked up again after a failure (the broker actor may have restarted).
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
from replicas.errors import ErrorCode as E

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = 0.1


class QueuedBrokerChannel:
    def __init__(self, controller, deliver, failures: tuple[type[BaseException], ...]):
        self.controller = controller
        self.deliver, self.failures = deliver, failures
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
                and request.controller_epoch == c.ctx.epoch and broker_id in c.ctx.live_brokers
                and request.broker_epoch == c.ctx.broker_epoch(broker_id))

    def _run(self, broker_id: int, q: queue.Queue) -> None:
        while True:
            request = q.get()
            if request is None:
                return
            while self._still_wanted(broker_id, request):
                try:
                    answer = self.deliver(broker_id, request)
                except self.failures as exc:
                    log.info("request to broker %s failed (%s); retrying", broker_id,
                             type(exc).__name__)
                    self._stopped.wait(RETRY_BACKOFF_S)  # back-off between retries
                    continue
                self._answer(broker_id, request, answer)
                break

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
                code = answer.get("error", E.NONE)
                put(ev.StopReplicaResponse(broker_id, {tp: code or errors.get(tp, E.NONE)
                                                       for tp in deleted}))


class RayBrokerChannel(QueuedBrokerChannel):
    """Requests as Ray calls to the broker actors of `namespace`."""

    def __init__(self, namespace: str, controller):
        super().__init__(controller, self._deliver,
                         (GetTimeoutError, RayActorError, RayError, ValueError))
        self.namespace = namespace
        self._handles: dict[int, object] = {}

    def _deliver(self, broker_id: int, request) -> dict:
        handle = self._handles.get(broker_id)
        if handle is None:
            handle = ray.get_actor(broker_actor_name(broker_id), namespace=self.namespace)
            self._handles[broker_id] = handle
        try:
            return ray.get(handle.handle_controller_request.remote(request),
                           timeout=REQUEST_TIMEOUT_S)
        except Exception:
            self._handles.pop(broker_id, None)     # it may have restarted: look it up again
            raise
