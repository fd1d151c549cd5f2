"""The controller's single event thread and the event catalogue."""

import dataclasses
import threading

import pytest

from controller import events as ev
from controller.event_loop import EventLoop
from replicas.dispatch import handler_name

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("event, name", [
    (ev.BrokerChange(), "process_broker_change"),
    (ev.AlterPartition(1, 2, {}), "process_alter_partition"),
    (ev.PartitionReassignmentIsrChange(("t", 0)), "process_partition_reassignment_isr_change"),
    (ev.Expire(), "process_expire"),
])
def test_handler_names(event, name):
    assert handler_name(type(event)) == name


def test_events_are_frozen():
    event = ev.BrokerModification(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.broker_id = 2
    assert event.broker_id == 1


def test_events_processed_in_order_on_one_thread():
    seen, threads = [], set()

    def process(event):
        seen.append(event)
        threads.add(threading.current_thread().name)

    loop = EventLoop(process).start()
    for i in range(100):
        loop.put(ev.BrokerModification(i))
    assert loop.idle(5)
    loop.shutdown()
    assert [e.broker_id for e in seen if isinstance(e, ev.BrokerModification)] == list(range(100))
    assert threads == {"controller-event-thread"}


def test_expire_clears_the_queue_and_goes_first():
    gate, busy, seen = threading.Event(), threading.Event(), []

    def process(event):
        if isinstance(event, ev.Startup):
            busy.set()
            gate.wait(5)
        seen.append(type(event).__name__)

    loop = EventLoop(process).start()
    loop.put(ev.Startup())
    assert busy.wait(5)                  # Startup is being processed, not queued
    for _ in range(5):
        loop.put(ev.BrokerChange())
    loop.expire()
    loop.put(ev.TopicChange())
    gate.set()
    assert loop.idle(5)
    loop.shutdown()
    assert seen[:3] == ["Startup", "Expire", "TopicChange"]


def test_a_failing_event_does_not_stop_the_loop():
    seen = []

    def process(event):
        if isinstance(event, ev.TopicChange):
            raise RuntimeError("boom")
        seen.append(event)

    loop = EventLoop(process).start()
    loop.put(ev.TopicChange())
    loop.put(ev.BrokerChange())
    assert loop.idle(5)
    loop.shutdown()
    assert seen == [ev.BrokerChange(), ev.Shutdown()]
    loop.put(ev.BrokerChange())          # after shutdown: ignored
    assert loop.queue_size() == 0
