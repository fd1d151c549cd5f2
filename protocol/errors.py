"""Why a Kafka connection has to close: the protocol layer's own exceptions.

Rules:
- Every exception here means "this byte stream can no longer be trusted": the caller logs
  it and closes the connection. Errors a client can be *answered* about (an unsupported
  version, an unknown topic) are Kafka error codes in a response, never these.
- Each carries a short `reason` and whatever of (api_key, api_version, correlation_id) was
  read before things went wrong (None when unknown), so the log line says which request.
- Nothing here is a `replicas.errors.KafkaError`: those are codes sent to clients; these
  never leave the broker.
"""

from __future__ import annotations

__all__ = [
    "ProtocolError", "MalformedFrame", "FrameTooLarge", "MalformedRequest",
    "UnsupportedRequest", "NoResponseSchema", "ConnectionFailed",
]


class ProtocolError(Exception):
    """The connection must close. `reason` is short enough for one log line."""

    def __init__(self, reason: str, *, api_key: int | None = None,
                 api_version: int | None = None, correlation_id: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def __str__(self) -> str:
        known = [f"{name}={value}" for name, value in (
            ("api_key", self.api_key), ("api_version", self.api_version),
            ("correlation_id", self.correlation_id)) if value is not None]
        return f"{self.reason} ({', '.join(known)})" if known else self.reason

    def __reduce__(self):
        # Keyword-only arguments do not survive the default exception pickling.
        return (_rebuild, (type(self), self.reason, self.api_key, self.api_version,
                           self.correlation_id))


def _rebuild(cls, reason, api_key, api_version, correlation_id):
    return cls(reason, api_key=api_key, api_version=api_version, correlation_id=correlation_id)


class MalformedFrame(ProtocolError):
    """The 4-byte size prefix is impossible (negative)."""


class FrameTooLarge(ProtocolError):
    """The size prefix is over the limit (Kafka's socket.request.max.bytes)."""


class MalformedRequest(ProtocolError):
    """A frame that is not a decodable request: too short, or a body kio rejects."""


class UnsupportedRequest(ProtocolError):
    """An (api_key, version) nothing can decode or answer (e.g. an unknown api_key)."""


class NoResponseSchema(ProtocolError):
    """kio has no response class for this (api_key, version), so no answer can be built."""


class ConnectionFailed(ProtocolError):
    """The connection already failed; it hands out nothing more."""
