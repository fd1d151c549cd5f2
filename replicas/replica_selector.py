"""Which replica a consumer should fetch a partition from (KIP-392, fetch from follower): the
leader's choice of a preferred read replica, pure.

Rules (Kafka 3.8: clients/.../common/replica/RackAwareReplicaSelector.java and
ReplicaView.java; core/.../server/ReplicaManager.scala findPreferredReadReplica):
- `replica.selector.class` names the selector. Unset (Kafka's default) is no selector: a
  consumer is never sent elsewhere. org.apache.kafka.common.replica.RackAwareReplicaSelector
  is the rack-aware one, Kafka 3.8's only selector. Any other class is InvalidConfig (a
  Kafka broker does not start with a class it cannot load).
- The candidates are the leader and the followers in the committed ISR whose log, as the
  leader last saw it, holds the fetch offset (log start <= offset <= LEO). Each carries the
  rack its broker registered, or None when the broker is not live or has no endpoint on
  the listener the client came in on (Kafka's Node.noNode): such a replica is never in a
  client's rack.
- Rack-aware choice: a client without a rack (None or "") gets the leader. Otherwise the
  candidates in its rack: none → the leader; the leader among them → the leader; else the
  greatest by (LEO, most recently caught up, broker id) (ReplicaView.comparator).
- The answer names a preferred read replica only when the choice is not the leader; the
  leader then reads as usual.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from replicas.errors import InvalidConfig

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = frozenset({RACK_AWARE})


class ReplicaView(NamedTuple):
    """Kafka's ReplicaView: one candidate as the leader sees it."""
    broker_id: int
    rack: str | None                   # None: not live, or no endpoint on the client's listener
    log_end_offset: int
    time_since_last_caught_up_ms: int  # 0 for the leader


def selector_for(class_name: str | None) -> str | None:
    """The selector `replica.selector.class` names, None for none; InvalidConfig for a class
    Kafka 3.8 does not ship."""
    name = (class_name or "").strip()
    if not name:
        return None
    if name not in SELECTORS:
        raise InvalidConfig(f"Invalid value {name} for configuration replica.selector.class: "
                            f"Class {name} cannot be found (Kafka 3.8 ships {RACK_AWARE})")
    return name


def _rank(view: ReplicaView) -> tuple[int, int, int]:
    """ReplicaView.comparator: LEO, then the most recently caught up, then the broker id."""
    return view.log_end_offset, -view.time_since_last_caught_up_ms, view.broker_id


def rack_aware_select(client_rack: str | None, leader: ReplicaView,
                      replicas: Iterable[ReplicaView]) -> ReplicaView:
    """RackAwareReplicaSelector.select over the leader and `replicas` (the leader may be
    among them or not)."""
    if not client_rack:
        return leader
    same_rack = [r for r in (leader, *replicas) if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=_rank)


def preferred_read_replica(selector: str | None, client_rack: str | None, leader: ReplicaView,
                           followers: Iterable[ReplicaView]) -> int:
    """The broker id a consumer should fetch from instead of the leader, -1 for the leader
    (no selector, or the selector chose it)."""
    if selector is None:
        return -1
    chosen = rack_aware_select(client_rack, leader, followers)
    if chosen == leader or chosen.rack is None:
        return -1
    return chosen.broker_id
