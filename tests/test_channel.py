"""actors/channel.py's QueuedBrokerChannel: which queued controller requests still reach a
broker (no Ray: a real ControllerContext and a recording deliver)."""

from __future__ import annotations

import threading

import pytest

from actors.channel import QueuedBrokerChannel
from controller.context import ControllerContext
from controller.layout import BrokerRegistration
from controller.requests import StopReplicaPartition, StopReplicaRequest

pytestmark = pytest.mark.unit


class _Loop:
    def __init__(self):
        self.events = []

    def put(self, event):
        self.events.append(event)


class _Controller:
    def __init__(self):
        self.ctx = ControllerContext(epoch=3)
        self.is_active = True
        self.loop = _Loop()


def _register(ctx: ControllerContext, broker_id: int, epoch: int) -> None:
    ctx.live_brokers[broker_id] = BrokerRegistration(broker_id, "127.0.0.1", 9092, epoch=epoch)


def _stop(broker_epoch: int, controller_epoch: int = 3) -> StopReplicaRequest:
    return StopReplicaRequest(100, controller_epoch, broker_epoch,
                              (StopReplicaPartition("t", 0, False, -1),))


def test_a_request_made_for_a_dead_incarnation_never_reaches_the_next_one():
    """The controller queued StopReplica for broker 1's failed incarnation (epoch -1 then,
    or its old epoch); broker 1 re-registered (a new epoch) before it was sent: the stale
    request is dropped, the new incarnation's request is delivered."""
    c = _Controller()
    _register(c.ctx, 1, 20)
    delivered, done = [], threading.Event()

    def deliver(broker_id, request):
        delivered.append(request.broker_epoch)
        if request.broker_epoch == 20 and request.controller_epoch == 3:
            done.set()
        return {"error": 0, "partition_errors": {}}
    channel = QueuedBrokerChannel(c, deliver, (RuntimeError,))
    try:
        for stale in (_stop(-1), _stop(10), _stop(20, controller_epoch=2)):
            channel.send(1, stale)
        channel.send(1, _stop(20))
        assert done.wait(10)
        assert delivered == [20]
    finally:
        channel.stop()
