"""A TCP proxy in front of a ZooKeeper server, to lose replies and drop connections on purpose.

``swallow_replies()`` keeps forwarding requests to the server but throws its answers away, so a
request is applied and its reply lost; ``swallow_requests()`` throws the requests away instead,
so a request is never applied. ``cut()`` then closes every client connection (a FIN, as a broken
network would end it), and ``forward()`` lets new connections through again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

from tests.servers.zookeeper import HOST


class ZookeeperProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self._mutex = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._swallow_replies = False
        self._swallow_requests = False
        self._closed = False
        threading.Thread(target=self._accept, name="zk-proxy-accept", daemon=True).start()

    @property
    def hosts(self) -> str:
        return f"{HOST}:{self.port}"

    def swallow_replies(self) -> None:
        with self._mutex:
            self._swallow_replies = True

    def swallow_requests(self) -> None:
        with self._mutex:
            self._swallow_requests = True

    def forward(self) -> None:
        with self._mutex:
            self._swallow_replies = self._swallow_requests = False

    def cut(self) -> None:
        """Close every open client connection and its upstream connection."""
        with self._mutex:
            pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, accepted: socket.socket) -> None:
        client = self._client_side(accepted)
        if client is None:
            return
        try:
            upstream = socket.create_connection((HOST, self.upstream_port), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._mutex:
            self._pairs.append((client, upstream))
        threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _client_side(self, accepted: socket.socket) -> socket.socket | None:
        """The socket to relay a client's bytes from (a subclass may wrap it, or refuse it)."""
        return accepted

    def _heard(self, request: bytes) -> None:
        """Bytes a client sent (a subclass may keep them)."""

    def _pump(self, source: socket.socket, target: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if not replies:
                    self._heard(data)
                with self._mutex:
                    swallow = self._swallow_replies if replies else self._swallow_requests
                if not swallow:
                    target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def zookeeper_proxy(upstream_port: int) -> Iterator[ZookeeperProxy]:
    proxy = ZookeeperProxy(upstream_port)
    try:
        yield proxy
    finally:
        proxy.close()
