"""A TCP proxy that can freeze: the server then looks alive but never answers."""

from __future__ import annotations

import selectors
import socket
import threading


class FreezableProxy:
    """Forwards 127.0.0.1:<port> to a server until :meth:`freeze`, then swallows everything."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._frozen = threading.Event()
        self._closed = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._sockets: list[socket.socket] = [self._listener]
        self._thread = threading.Thread(target=self._serve, name="freezable-proxy", daemon=True)
        self._thread.start()

    def freeze(self) -> None:
        self._frozen.set()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for sock in self._sockets:
            sock.close()
        self._selector.close()

    def _serve(self) -> None:
        while not self._closed.is_set():
            for key, _ in self._selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    client, _ = self._listener.accept()
                    server = socket.create_connection(self._target)
                    self._sockets += [client, server]
                    self._selector.register(client, selectors.EVENT_READ, server)
                    self._selector.register(server, selectors.EVENT_READ, client)
                    continue
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    self._selector.unregister(sock)
                    continue
                if not self._frozen.is_set():
                    key.data.sendall(data)
