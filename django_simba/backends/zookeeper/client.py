"""Building kazoo clients, and the three things kazoo does not expose that the backend needs.

* The negotiated session timeout: kazoo reads it from the server's connect reply but keeps only
  values derived from it (its read timeout is two thirds of it), so a small subclass of its
  connection handler records it.
* ``createContainer`` (opcode 19, ZooKeeper 3.5.1+): kazoo's ``create`` has no container mode.
  Group nodes are containers so the server deletes a group once its last member is gone.
* ``getEphemerals`` (opcode 103, ZooKeeper 3.6+): the paths of the ephemeral nodes the calling
  session owns under a prefix, which is how a keep-alive verifies its leases in one request.

The two requests go through kazoo's request queue (``KazooClient._call``), like kazoo's own.
``ensure_nodes`` creates the backend's persistent nodes, each with the configured ACL.
"""

from __future__ import annotations

import ssl
from collections import namedtuple
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NodeExistsError
from kazoo.protocol.connection import ConnectionDropped, ConnectionHandler
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import Create2, int_struct, read_string, write_string
from kazoo.retry import KazooRetry

from .chatter import KAZOO_LOGGER
from .errors import Deadline, kazoo_errors, wait
from .options import ZookeeperOptions

CONTAINER_FLAG = 4  # CreateMode.CONTAINER


class CreateContainer(Create2):  # type: ignore[misc]
    """A Create2 request with the container opcode; the reply is the path and the node's stat."""

    type = 19


class GetEphemerals(namedtuple("GetEphemerals", "prefix")):
    """The calling session's ephemeral node paths that start with ``prefix``."""

    type = 103

    def serialize(self) -> bytearray:
        return bytearray(write_string(self.prefix))

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[str]:
        count = int_struct.unpack_from(buffer, offset)[0]
        offset += int_struct.size
        paths = []
        for _ in range(max(count, 0)):
            path, offset = read_string(buffer, offset)
            paths.append(path)
        return paths


class _RecordingConnection(ConnectionHandler):  # type: ignore[misc]
    """kazoo's connection handler, remembering the session timeout the server granted, and why
    the last TLS handshake failed (kazoo only logs it, and tries again)."""

    negotiated_timeout: float | None = None
    tls_failure: str | None = None

    def _connect(self, host: str, hostip: str, port: int) -> tuple[float, float]:
        try:
            read_timeout, connect_timeout = super()._connect(host, hostip, port)
        except ConnectionDropped as error:
            if isinstance(error.__context__, ssl.SSLError):  # kazoo wraps the handshake's error
                self.tls_failure = f"TLS handshake with {host}:{port} failed: {error.__context__}"
            raise
        self.tls_failure = None
        # kazoo sets its read timeout (ms) to 2/3 of the negotiated session timeout
        self.negotiated_timeout = round(read_timeout * 1.5) / 1000.0
        return read_timeout, connect_timeout


def new_client(options: ZookeeperOptions, *, session_timeout: float) -> KazooClient:
    """A kazoo client asking for ``session_timeout`` seconds, with the backend's security settings.

    It reconnects quickly (a reconnect is useful only within the session timeout), never
    waiting more than half a second between attempts, and logs to ``chatter.KAZOO_LOGGER``.
    """
    security = options.security.client_kwargs()
    retry = KazooRetry(max_tries=-1, delay=0.02, backoff=2, max_jitter=0.3, max_delay=0.5)
    client = KazooClient(
        hosts=options.hosts,
        timeout=session_timeout,
        connection_retry=retry,
        read_only=False,
        logger=KAZOO_LOGGER,  # its retries at DEBUG: the engine tells an outage itself
        **security,
    )
    client._connection = _RecordingConnection(
        client, client._conn_retry.copy(), logger=client.logger, sasl_options=security.get("sasl_options")
    )
    return client


def negotiated_timeout(client: KazooClient) -> float | None:
    """The session timeout the server granted at the last connect, in seconds."""
    timeout = getattr(client._connection, "negotiated_timeout", None)
    return float(timeout) if timeout is not None else None


def connect_failure(client: KazooClient) -> str:
    """Why the client could not connect, when it knows (a TLS handshake refused), for messages."""
    failure = getattr(client._connection, "tls_failure", None)
    return f": {failure}" if failure else ""


def create_container_async(client: KazooClient, path: str, acl: list[Any]) -> Any:
    result = client.handler.async_result()
    client._call(CreateContainer(_prefix_root(client.chroot, path), b"", acl, CONTAINER_FLAG), result)
    return result


def get_ephemerals_async(client: KazooClient, prefix: str) -> Any:
    """The result is the list of server paths: strip a chroot with ``client.unchroot``."""
    result = client.handler.async_result()
    client._call(GetEphemerals(_prefix_root(client.chroot, prefix, trailing=True)), result)
    return result


def ensure_nodes(
    client: KazooClient, paths: list[str], options: ZookeeperOptions, deadline: Deadline
) -> None:
    """Create the persistent nodes that are missing, parents first, each with the provider's ACL."""
    with kazoo_errors("creating the backend's nodes"):
        pending = [
            (path, client.create_async(path, b"", acl=options.security.acl_for(path))) for path in paths
        ]
        for path, result in pending:
            try:
                wait(result, deadline, f"creating {path}", passthrough=(NoAuthError,))
            except NodeExistsError:
                pass
            except NoAuthError:
                # no right to create under an existing parent: fine as long as the node is there
                if wait(client.exists_async(path), deadline, f"reading {path}") is None:
                    raise
