"""A TCP relay on loopback between a client and one server, for connection faults a real
server does not make on demand: hold the server's answers, cut every connection, refuse new
ones. Threads, one pair per connection; bytes are forwarded unchanged."""

from __future__ import annotations

import socket
import threading


class TcpRelay:
    """``TcpRelay(host, port).start()`` listens on 127.0.0.1:<relay.port> and forwards
    each accepted connection to (host, port).

    - ``hold_answers()``: bytes from the server are kept back (not lost) until ``cut()``,
      which drops them with the connection; ``sent()`` is everything clients sent since.
    - ``cut()``: closes every open connection (the client sees its connection lost).
    - ``refuse(True)``: new connections are closed at once."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._conns: list[tuple[socket.socket, socket.socket]] = []
        self._holding = False
        self._sent_while_holding = bytearray()
        self._refusing = False
        self._closed = False
        self.accepted = 0

    def start(self) -> "TcpRelay":
        threading.Thread(target=self._accept_loop, name="relay-accept", daemon=True).start()
        return self

    def hold_answers(self) -> None:
        with self._lock:
            self._holding = True
            self._sent_while_holding.clear()

    def sent(self) -> bytes:
        with self._lock:
            return bytes(self._sent_while_holding)

    def refuse(self, refusing: bool) -> None:
        with self._lock:
            self._refusing = refusing

    def cut(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
            self._holding = False
        for pair in conns:
            for s in pair:
                _close(s)

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.cut()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._conns.append((client, server))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        held = bytearray()
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(dst)
                return
            with self._lock:
                holding = self._holding
                if from_client and holding:
                    self._sent_while_holding += data
            if not from_client and holding:
                held += data    # the connection is cut before these would be sent
                continue
            try:
                dst.sendall(bytes(held) + data)
                held.clear()
            except OSError:
                _close(src)
                return


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
