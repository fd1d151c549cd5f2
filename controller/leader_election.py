"""Partition leader election: Kafka's PartitionLeaderElectionAlgorithms and the new-ISR rules
of its four PartitionLeaderElectionStrategy outcomes (kafka.controller.Election, 3.8).

Rules (Kafka's PartitionLeaderElectionAlgorithms.scala):
- Inputs: `assignment` (or `target` for a reassignment) is the ordered replica list; the
  order is what makes a leader "first". `isr` is a list/tuple (its order is kept in every
  result ISR) or a set (result ISRs are then sorted). `live` and `shutting_down` are sets
  of broker ids. `live` holds the partition's ONLINE replicas (Kafka's isReplicaOnline,
  per partition: broker registered and not shutting down, replica not on an offline log
  directory); for controlled shutdown Kafka counts shutting-down brokers as live, and
  the result is the same either way because a shutting-down broker is never eligible
  there.
- offline: first replica in ASSIGNMENT order that is live and in the ISR. Only if there is
  none, and unclean election is allowed: first live replica in assignment order, and that
  is an unclean election. Else the election fails. New ISR: ISR ∩ live (ISR order) if the
  leader was in the ISR, else [leader].
- reassign: first replica of the TARGET list that is live and in the ISR. ISR unchanged.
- preferred: assignment[0], only if it is live and in the ISR. ISR unchanged.
- controlled shutdown: first replica in assignment order that is live, in the ISR and not
  shutting down. New ISR: ISR minus the shutting-down brokers.
- A failed election yields leader None, the ISR as it was, unclean False. The caller bumps
  the leader epoch on success; nothing here reads a clock or random state.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ElectionResult", "offline_partition_leader", "reassign_partition_leader",
    "preferred_replica_leader", "controlled_shutdown_leader", "elect_offline",
    "elect_reassign", "elect_preferred", "elect_controlled_shutdown",
]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """Outcome of one election: the new leader (None = failed), the new ISR, and whether
    the leader came from outside the ISR (an unclean election)."""

    leader: int | None
    isr: tuple[int, ...]
    unclean: bool = False

    @property
    def elected(self) -> bool:
        return self.leader is not None


def _ordered(isr: Iterable[int]) -> tuple[int, ...]:
    """The ISR as a tuple: sequence order kept, a set sorted (it has no order of its own)."""
    if isinstance(isr, (set, frozenset)):
        return tuple(sorted(isr))
    return tuple(isr)


def _first(replicas: Sequence[int], eligible) -> int | None:
    return next((r for r in replicas if eligible(r)), None)


# --- PartitionLeaderElectionAlgorithms: leader only -------------------------------------

def offline_partition_leader(assignment: Sequence[int], isr: Collection[int],
                             live: Collection[int], unclean: bool) -> int | None:
    """First live ISR replica in assignment order; else (if `unclean`) first live replica."""
    in_isr, up = set(isr), set(live)
    leader = _first(assignment, lambda r: r in up and r in in_isr)
    if leader is None and unclean:
        leader = _first(assignment, lambda r: r in up)
    return leader


def reassign_partition_leader(target: Sequence[int], isr: Collection[int],
                              live: Collection[int]) -> int | None:
    """First replica of the reassignment target that is live and in the ISR."""
    in_isr, up = set(isr), set(live)
    return _first(target, lambda r: r in up and r in in_isr)


def preferred_replica_leader(assignment: Sequence[int], isr: Collection[int],
                             live: Collection[int]) -> int | None:
    """assignment[0] if it is live and in the ISR, else None."""
    if not assignment:
        return None
    preferred = assignment[0]
    return preferred if preferred in set(live) and preferred in set(isr) else None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Collection[int],
                               live: Collection[int],
                               shutting_down: Collection[int]) -> int | None:
    """First replica in assignment order that is live, in the ISR and not shutting down."""
    in_isr, up, leaving = set(isr), set(live), set(shutting_down)
    return _first(assignment, lambda r: r in up and r in in_isr and r not in leaving)


# --- PartitionLeaderElectionStrategy outcomes: leader + new ISR ---------------------------

def elect_offline(assignment: Sequence[int], isr: Collection[int], live: Collection[int],
                  unclean_allowed: bool) -> ElectionResult:
    """Offline strategy. ISR ∩ live if the leader was in the ISR, else [leader] (unclean)."""
    old = _ordered(isr)
    leader = offline_partition_leader(assignment, old, live, unclean_allowed)
    if leader is None:
        return ElectionResult(None, old, False)
    if leader in old:
        up = set(live)
        return ElectionResult(leader, tuple(r for r in old if r in up), False)
    return ElectionResult(leader, (leader,), True)


def elect_reassign(target: Sequence[int], isr: Collection[int],
                   live: Collection[int]) -> ElectionResult:
    """Reassign strategy: the leader comes from the target list; the ISR is unchanged."""
    old = _ordered(isr)
    return ElectionResult(reassign_partition_leader(target, old, live), old, False)


def elect_preferred(assignment: Sequence[int], isr: Collection[int],
                    live: Collection[int]) -> ElectionResult:
    """Preferred-replica strategy: the ISR is unchanged."""
    old = _ordered(isr)
    return ElectionResult(preferred_replica_leader(assignment, old, live), old, False)


def elect_controlled_shutdown(assignment: Sequence[int], isr: Collection[int],
                              live: Collection[int],
                              shutting_down: Collection[int]) -> ElectionResult:
    """Controlled-shutdown strategy: new ISR = ISR minus the shutting-down brokers."""
    old = _ordered(isr)
    leader = controlled_shutdown_leader(assignment, old, live, shutting_down)
    if leader is None:
        return ElectionResult(None, old, False)
    leaving = set(shutting_down)
    return ElectionResult(leader, tuple(r for r in old if r not in leaving), False)
