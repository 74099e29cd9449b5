"""A TLS man in the middle: it poses as ZooKeeper with a certificate of its own, and records.

It accepts TLS connections with the certificate it is given (one the clients' CA signed, for
another host), relays what it decrypts to a real server's plain port (``proxy.py``), and keeps
every byte the clients sent, so a test sees whether credentials ever reached it.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator

from .proxy import ZookeeperProxy


class TlsImpostor(ZookeeperProxy):
    def __init__(self, certfile: str, keyfile: str, upstream_port: int) -> None:
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(certfile, keyfile)
        self._received = bytearray()
        self.handshakes = 0  # completed
        self.refused = 0  # handshakes the client broke off
        super().__init__(upstream_port)

    def received(self) -> bytes:
        with self._mutex:
            return bytes(self._received)

    def _client_side(self, accepted: socket.socket) -> socket.socket | None:
        accepted.settimeout(10)
        try:
            client = self._context.wrap_socket(accepted, server_side=True)
        except (ssl.SSLError, OSError):
            accepted.close()
            with self._mutex:
                self.refused += 1
            return None
        client.settimeout(None)
        with self._mutex:
            self.handshakes += 1
        return client

    def _heard(self, request: bytes) -> None:
        with self._mutex:
            self._received += request


@contextlib.contextmanager
def tls_impostor(certfile: str, keyfile: str, upstream_port: int) -> Iterator[TlsImpostor]:
    impostor = TlsImpostor(certfile, keyfile, upstream_port)
    try:
        yield impostor
    finally:
        impostor.close()
