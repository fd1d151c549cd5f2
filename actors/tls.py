"""TLS for the Kafka listener as bytes in, bytes out: a sans-I/O TLS session over memory BIOs.

The listener's event loop feeds a TlsSession what the socket read and sends what it produced;
its SSLContext comes from the broker's ssl.* configs (actors/tls_context.py).

Rules:
- Outgoing bytes (handshake records, data, alerts, close_notify) leave in the order OpenSSL
  produced them; plaintext sent before the handshake is done waits for it.
- What ends a session: a close_notify from the peer (`peer_closed`), a TlsError (bad
  record, failed handshake, plaintext on a TLS port: the alert OpenSSL made is in
  `outgoing()`), and `close()` (a close_notify queued, never waiting for the peer's).
- Not thread-safe: the transport's lock guards a session.
"""

from __future__ import annotations

import ssl

__all__ = ["TlsError", "TlsSession"]

PLAIN_CHUNK = 32 * 1024         # plaintext taken out of OpenSSL at a time (> one 16 KiB record)
HANDSHAKE_RECORD = 0x16


class TlsError(Exception):
    """The peer's TLS is unusable (bad record, failed handshake, not TLS at all, or a
    handshake not finished in time): close the connection."""


class TlsSession:
    """TLS as bytes in, bytes out (no sockets): `receive` ciphertext, get plaintext;
    `send` plaintext, take the ciphertext from `outgoing()`. Not thread-safe: the
    transport's lock guards it. Plaintext sent before the handshake is done waits for it."""

    def __init__(self, context: ssl.SSLContext, server_side: bool = True,
                 server_hostname: str | None = None):
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._in, self._out, server_side=server_side,
                                     server_hostname=server_hostname)
        self._buf = bytearray(PLAIN_CHUNK)
        self._view = memoryview(self._buf)
        self._pending = bytearray()      # plaintext sent before the handshake finished
        self._first_byte: int | None = None
        self._failed: str | None = None
        self._closed = False
        self.handshake_done = False
        self.peer_closed = False

    def receive(self, data: bytes) -> bytes:
        """Feed ciphertext; the plaintext now readable (b"" if none). TlsError if the peer's
        bytes are not acceptable TLS (the alert, if any, is then in `outgoing()`)."""
        if self._failed is not None:
            raise TlsError(self._failed)
        if self.peer_closed:
            return b""                   # nothing after close_notify counts
        if data:
            if self._first_byte is None:
                self._first_byte = data[0]
            self._in.write(data)
        try:
            if not self.handshake_done:
                try:
                    self._ssl.do_handshake()
                except ssl.SSLWantReadError:
                    return b""
                self.handshake_done = True
                if self._pending:
                    pending, self._pending = bytes(self._pending), bytearray()
                    self._write(pending)
            return self._read()
        except ssl.SSLError as exc:
            self._failed = self._reason(exc)
            raise TlsError(self._failed) from None

    def _read(self) -> bytes:
        plain = bytearray()
        while True:
            try:
                n = self._ssl.read(PLAIN_CHUNK, self._buf)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                n = 0
            if not n:                    # not WantRead, so: the peer's close_notify
                self.peer_closed = True
                break
            plain += self._view[:n]
        return bytes(plain)

    def _reason(self, exc: ssl.SSLError) -> str:
        words = (exc.reason or exc.strerror or str(exc)).lower().replace("_", " ")
        if getattr(exc, "verify_message", None):
            words += f" ({exc.verify_message})"
        if not self.handshake_done and self._first_byte not in (None, HANDSHAKE_RECORD):
            return (f"not TLS (first byte 0x{self._first_byte:02x}, a TLS handshake starts "
                    f"0x16): a plaintext client on a TLS listener? ({words})")
        return f"{'TLS handshake failed' if not self.handshake_done else 'bad TLS data'}: {words}"

    def send(self, plaintext: bytes) -> None:
        """Encrypt `plaintext` (any size; OpenSSL cuts it into records) into `outgoing()`."""
        if self._failed is not None:
            raise TlsError(self._failed)
        if self._closed:
            raise TlsError("send after close")
        if not self.handshake_done:
            self._pending += plaintext
            return
        try:
            self._write(plaintext)
        except ssl.SSLError as exc:
            self._failed = self._reason(exc)
            raise TlsError(self._failed) from None

    def _write(self, plaintext: bytes) -> None:
        view = memoryview(plaintext)
        while view:
            # a memory BIO never blocks, and partial writes are off: each call takes it all
            view = view[self._ssl.write(view):]

    def outgoing(self) -> bytes:
        """Ciphertext to put on the wire (handshake records, data, alerts), in order."""
        return self._out.read() if self._out.pending else b""

    def close(self) -> None:
        """Queue a close_notify (nothing if the handshake never finished)."""
        if self._closed:
            return
        self._closed = True
        if self.handshake_done and self._failed is None:
            try:
                self._ssl.unwrap()
            except ssl.SSLError:
                pass                     # WantRead: the peer's close_notify is not awaited

    @property
    def peer_certificate(self) -> dict | None:
        """The client's certificate, as ssl.getpeercert() gives it, when it sent one and it
        was verified (ssl.client.auth requested or required)."""
        return (self._ssl.getpeercert() or None) if self.handshake_done else None

    @property
    def version(self) -> str | None:
        return self._ssl.version() if self.handshake_done else None
