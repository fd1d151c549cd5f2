"""PeerLinks: one broker's connections to its peers' inter-broker listeners for requests other
than replication (WriteTxnMarkers, AddPartitionsToTxn verification), on the broker's event
loop.

Rules:
- One BrokerLink (actors/broker_link.py) per peer, opened on first use at the endpoint the
  broker knows for that peer (`Broker.peer_endpoint`: the controller's view, else its
  ZooKeeper registration), with the broker's TLS and SASL client settings.
- `await call(peer_id, body, timeout_s)`: one request at a time per peer (the link's rule);
  callers queue on an asyncio lock. Any failure (no endpoint, refused, timeout, protocol
  error, the link-cut failpoint) closes the link and raises ConnectionError: the caller
  retries after its back-off and the next call reconnects.
- Everything runs on the loop; `close_all()` from the loop.
"""

from __future__ import annotations

import asyncio

from actors.broker_link import BrokerLink
from protocol.errors import ProtocolError

__all__ = ["PeerLinks"]


class PeerLinks:
    def __init__(self, broker, purpose: str):
        self.broker, self.purpose = broker, purpose
        self._links: dict[int, BrokerLink] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def call(self, peer_id: int, body, timeout_s: float):
        lock = self._locks.setdefault(peer_id, asyncio.Lock())
        async with lock:
            link = self._links.get(peer_id)
            if link is None:
                link = self._links[peer_id] = BrokerLink(
                    f"broker-{self.broker.id}-{self.purpose}", self.broker.security)
            try:
                if time_to_cut := self.broker.replication_cut_until(peer_id):
                    link.cut_until(time_to_cut)
                if not link.connected:
                    endpoint = self.broker.peer_endpoint(peer_id)
                    if endpoint is None:
                        raise ConnectionError(f"no {self.broker.inter_broker_listener} "
                                              f"endpoint known for broker {peer_id}")
                    await link.connect(endpoint, timeout_s)
                return await link.call(body, timeout_s)
            except (OSError, ProtocolError, RuntimeError, asyncio.TimeoutError) as exc:
                link.close()
                raise ConnectionError(f"broker {peer_id}: {type(exc).__name__}: {exc}") from None

    def close_all(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
