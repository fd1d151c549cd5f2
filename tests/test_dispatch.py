"""replicas/dispatch.py: the one `process_<event>` dispatcher of the state machines."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from replicas.dispatch import handler_for, handler_name

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class BrokerChange:
    broker_id: int


class LeaderAndIsrResponse:
    pass


class Owner:
    def process_broker_change(self, e):
        return ("changed", e.broker_id)


def test_the_handler_is_the_class_name_in_snake_case():
    assert handler_name(BrokerChange) == "process_broker_change"
    assert handler_name(LeaderAndIsrResponse) == "process_leader_and_isr_response"
    assert handler_name(BrokerChange) is handler_name(BrokerChange)      # cached per class


def test_handler_for_is_the_bound_method_or_none():
    owner = Owner()
    assert handler_for(owner, BrokerChange(3))(BrokerChange(3)) == ("changed", 3)
    assert handler_for(owner, LeaderAndIsrResponse()) is None
