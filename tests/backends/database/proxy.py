"""A TCP proxy that can freeze (the server then looks alive but never answers) or go down (every
connection dropped, new ones closed at once, as a server that stopped) and come back."""

from __future__ import annotations

import contextlib
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
        self._down = threading.Event()
        self._closed = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._sockets: list[socket.socket] = [self._listener]
        self._thread = threading.Thread(target=self._serve, name="freezable-proxy", daemon=True)
        self._thread.start()

    def freeze(self) -> None:
        self._frozen.set()

    def down(self) -> None:
        """Drop every connection, and close each new one at once, until :meth:`up`."""
        self._down.set()

    def up(self) -> None:
        self._down.clear()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        for sock in self._sockets:
            sock.close()
        self._selector.close()

    def _serve(self) -> None:
        while not self._closed.is_set():
            if self._down.is_set():
                self._drop_connections()
            for key, _ in self._selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    client, _ = self._listener.accept()
                    if self._down.is_set():
                        client.close()
                        continue
                    try:
                        server = socket.create_connection(self._target)
                    except OSError:  # the server is down: so is this connection
                        client.close()
                        continue
                    self._sockets += [client, server]
                    self._selector.register(client, selectors.EVENT_READ, server)
                    self._selector.register(server, selectors.EVENT_READ, client)
                    continue
                peer = key.data
                try:
                    data = sock.recv(65536)
                    if data and not self._frozen.is_set():
                        peer.sendall(data)
                except OSError:  # either side reset the connection (a broken pipe, a reset)
                    data = b""
                if not data and self._frozen.is_set():  # the other side never hears of it
                    self._close_pair(sock)
                elif not data:  # one side is gone: so is the connection, as the other side sees it
                    self._close_pair(sock, peer)

    def _close_pair(self, *pair: socket.socket) -> None:
        for sock in pair:
            with contextlib.suppress(KeyError, ValueError):  # already unregistered
                self._selector.unregister(sock)
            sock.close()
            with contextlib.suppress(ValueError):
                self._sockets.remove(sock)

    def _drop_connections(self) -> None:
        for sock in self._sockets[1:]:
            with contextlib.suppress(KeyError, ValueError):  # already unregistered at its end
                self._selector.unregister(sock)
            sock.close()
        del self._sockets[1:]
