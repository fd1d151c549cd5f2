"""Raw Kafka frames on a client socket (plain or TLS), for the listener tests.

Rules: `read_frame` reads one size-prefixed answer or raises ConnectionError when the broker
closed first; `closed` is True only if the broker closed the connection within the time
given (a socket still open then is False, so a test asserting `closed(s)` can fail)."""

from __future__ import annotations

import struct
import time


def read_frame(sock) -> bytes:
    size = struct.unpack(">i", exactly(sock, 4))[0]
    return exactly(sock, size)


def exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def closed(sock, timeout_s: float = 10.0) -> bool:
    """True once the broker closed the connection (EOF, reset or a TLS alert) within
    timeout_s; False if it is still open then. Data read meanwhile is dropped."""
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while sock.recv(65536):
            if time.monotonic() > deadline:
                return False
        return True
    except TimeoutError:                       # socket.timeout: still open
        return False
    except OSError:                            # reset, ssl.SSLError (an alert), ...
        return True


def client_hello(context, host: str) -> bytes:
    """The first flight of a real TLS client (its ClientHello), captured from memory BIOs."""
    import ssl
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = context.wrap_bio(incoming, outgoing, server_hostname=host)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()
