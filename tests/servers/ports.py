"""Loopback ports for the servers and processes the tests start."""

from __future__ import annotations

import socket
import threading

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A port that nothing listens on now (the kernel's pick): the server given it binds it next."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class SilentServer:
    """A loopback port that accepts connections and never answers: a server that hangs.

    ``accepted`` is set once a client connected, so a test knows that the client now waits on it.
    """

    def __init__(self, host: str = HOST) -> None:
        self._listener = socket.create_server((host, 0))
        self.port = int(self._listener.getsockname()[1])
        self.accepted = threading.Event()
        self._clients: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._clients.append(client)
            self.accepted.set()

    def close(self) -> None:
        self._listener.close()
        self._thread.join(5)
        for client in self._clients:
            client.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
