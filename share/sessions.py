"""Share sessions on a partition leader (KIP-932's ShareFetch and ShareAcknowledge sessions;
Kafka's ShareSessionCache and SharePartitionManager.newContext), pure.

Rules:
- A session is keyed by (group id, member id) on each broker and holds the partitions the
  member fetches from that broker and the epoch its next request must carry.
- ShareFetch epoch 0 opens a session (replacing the member's old one) with the partitions
  asked; it may not carry acknowledgements (INVALID_REQUEST). A broker holds at most
  `max_sessions` (group.share.max.share.sessions): one more is
  SHARE_SESSION_LIMIT_REACHED.
- Epoch -1 ends the session after its acknowledgements are applied; it fetches nothing and
  may not forget partitions (INVALID_REQUEST). Any other epoch continues the session: it
  must exist (SHARE_SESSION_NOT_FOUND) and the epoch must be the expected one
  (INVALID_SHARE_SESSION_EPOCH); the partitions asked are added and the forgotten ones
  removed. Each accepted request moves the expected epoch on by one (after
  2147483647 comes 1).
- ShareAcknowledge follows the same epochs but never opens a session: epoch 0 is
  INVALID_SHARE_SESSION_EPOCH.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replicas.errors import ErrorCode as E

INITIAL, FINAL = 0, -1
EPOCH_MAX = 2**31 - 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: set = field(default_factory=set)     # (topic, partition)


@dataclass(frozen=True, slots=True)
class SessionDecision:
    error: int = E.NONE
    session: ShareSession | None = None
    closing: bool = False               # epoch -1: apply acknowledgements, then close
    full: bool = False                  # a new session: answer every partition


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= EPOCH_MAX else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def fetch(self, group_id: str, member_id: str, epoch: int, asked, forgotten,
              has_acks: bool) -> SessionDecision:
        """`asked`, `forgotten`: (topic, partition) lists of the ShareFetch."""
        key = (group_id, member_id)
        if epoch == INITIAL:
            if has_acks:
                return SessionDecision(E.INVALID_REQUEST)
            old = self.sessions.get(key)
            if old is None and len(self.sessions) >= self.max_sessions:
                return SessionDecision(E.SHARE_SESSION_LIMIT_REACHED)
            session = self.sessions[key] = ShareSession(group_id, member_id, 1,
                                                        set(asked) - set(forgotten))
            return SessionDecision(session=session, full=True)
        if epoch == FINAL and forgotten:
            return SessionDecision(E.INVALID_REQUEST)
        decision = self._continue(key, epoch)
        if decision.error or epoch == FINAL:
            return decision
        decision.session.partitions |= set(asked)
        decision.session.partitions -= set(forgotten)
        return decision

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionDecision:
        if epoch == INITIAL:
            return SessionDecision(E.INVALID_SHARE_SESSION_EPOCH)
        return self._continue((group_id, member_id), epoch)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def _continue(self, key, epoch: int) -> SessionDecision:
        session = self.sessions.get(key)
        if session is None:
            return SessionDecision(E.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL:
            return SessionDecision(session=session, closing=True)
        if epoch != session.next_epoch:
            return SessionDecision(E.INVALID_SHARE_SESSION_EPOCH)
        session.next_epoch = next_epoch(epoch)
        return SessionDecision(session=session)
