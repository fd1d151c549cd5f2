"""One event dispatcher for the state machines: an event goes to its owner's `process_<event>`.

Rules:
- The handler of an event class is the owner's method named `process_` followed by the
  class name in snake_case (BrokerChange → process_broker_change), computed once per class.
- `handler_for(owner, event)` is that bound method, or None when the owner has none: the
  owner decides whether an event it has no handler for is a bug.
- Pure: the stdlib only.
"""

from __future__ import annotations

import re

__all__ = ["handler_name", "handler_for"]

_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")
_NAMES: dict[type, str] = {}


def handler_name(event_type: type) -> str:
    """`process_<snake case class name>` of an event class."""
    name = _NAMES.get(event_type)
    if name is None:
        name = _NAMES[event_type] = "process_" + _WORD_START.sub("_", event_type.__name__).lower()
    return name


def handler_for(owner, event):
    """The owner's bound handler of `event`, or None."""
    return getattr(owner, handler_name(type(event)), None)
