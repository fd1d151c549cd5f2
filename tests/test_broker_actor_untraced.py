"""actors/broker_actor.py `untraced`: the methods Ray's tracing shim wrapped on an actor
class go back to the originals for the actor's own calls, while what Ray's executor took
when it loaded the class (the wrapped functions) still works. Ray's real shim
(`_inject_tracing_into_class`), no cluster."""

from __future__ import annotations

import pytest
from ray.util.tracing.tracing_helper import _inject_tracing_into_class

from actors.broker_actor import untraced

pytestmark = pytest.mark.unit


class Base:
    def inner(self, x, *, y=0):
        return x + y

    def outer(self, x):
        return self.inner(x, y=1)


def test_the_actors_own_calls_skip_the_shim_and_the_executors_copies_still_work():
    class Actor(Base):
        def own(self):
            return "own"

    _inject_tracing_into_class(Actor)
    kept = {name: getattr(Actor, name) for name in ("inner", "outer", "own")}
    assert all(getattr(f, "__ray_tracing_wrapped__", False) for f in kept.values())
    untraced(Actor)
    assert Actor.inner is Base.inner and Actor.outer is Base.outer
    assert not getattr(Actor.own, "__ray_tracing_wrapped__", False)
    actor = Actor()
    assert actor.outer(1) == 2 and actor.own() == "own"
    # as Ray's executor calls what it collected: the trace context (None) is accepted
    assert kept["outer"](actor, 1, _ray_trace_ctx=None) == 2 and kept["own"](actor) == "own"
