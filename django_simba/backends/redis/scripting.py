"""Running the registered scripts on a single node or a cluster, and mapping driver errors to ours.

Both runners offer the same three calls: ``run`` (one script, one round trip), ``run_many``
(several scripts in one pipeline: one round trip on a single node; on a cluster one
pipeline per node, written to every node before any reply is read) and ``scan``.
A NOSCRIPT answer (first use, restart, failover) loads the script and runs the call again,
which is safe because a server that answered NOSCRIPT ran nothing.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import redis
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from ...spi import BackendTimeout, BackendUnavailable, SimbaError
from .keys import session_key
from .scripts import ALL_SCRIPTS, Script

SCAN_COUNT = 1000

try:
    import hiredis
except ImportError:  # pragma: no cover - the redis extra installs it
    hiredis = None  # type: ignore[assignment]


class Call(NamedTuple):
    script: Script
    keys: Sequence[str]
    args: Sequence[str | int | float]


class translated:  # named as the function it replaced: ``with translated("acquire", timeout):``
    """Turn redis-py errors into BackendTimeout / BackendUnavailable (never leak driver exceptions).

    A class rather than a generator-based context manager: every backend call makes one, and
    this costs a third as much.
    """

    __slots__ = ("timeout", "what")

    def __init__(self, what: str, timeout: float) -> None:
        self.what = what
        self.timeout = timeout

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        if error is None or isinstance(error, SimbaError):
            return
        what = self.what
        if isinstance(error, (redis.exceptions.TimeoutError, TimeoutError)):
            raise BackendTimeout(f"Redis did not answer {what} within {self.timeout:g} s: {error}") from error
        if isinstance(error, (RedisError, RedisClusterException, OSError)):
            raise BackendUnavailable(f"Redis {what} failed: {type(error).__name__}: {error}") from error


def _reply(connection: Any) -> Any:
    """The next reply on ``connection``; an error reply is returned (the next one stays in order)."""
    try:
        return connection.read_response()
    except ResponseError as error:
        return error


def _raise_first_error(results: Sequence[Any]) -> None:
    for result in results:
        if isinstance(result, BaseException):
            raise result


class _Scripting:
    """What both topologies do alike; a subclass says how to pipeline and read metadata."""

    def __init__(self, client: Any) -> None:
        self.client: Any = client  # redis-py is only partly typed: calls go through Any

    def load_all(self) -> None:
        for script in ALL_SCRIPTS:
            self.client.script_load(script.source)  # on a cluster, redis-py sends it to every primary

    def run(self, script: Script, keys: Sequence[str], args: Sequence[str | int | float] = ()) -> Any:
        try:
            return self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            self.client.script_load(script.source)
            return self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        if not calls:
            return []
        results = self._pipeline(calls)
        missing = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if missing:
            self.load_all()
            for i, result in zip(missing, self._pipeline([calls[i] for i in missing])):
                results[i] = result
        _raise_first_error(results)
        return results

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        raise NotImplementedError

    def command(self, *args: str | int) -> Any:
        return self.client.execute_command(*args)

    def scan(self, pattern: str) -> Iterator[str]:
        return iter(self.client.scan_iter(match=pattern, count=SCAN_COUNT))

    def close(self) -> None:
        self.client.close()


class StandaloneScripting(_Scripting):
    """Scripts and commands against one Redis server.

    ``run`` (every acquire, release and keep-alive) sends its EVALSHA on a connection
    of its own instead of through the client: a connection, once taken from the
    client's pool, goes back to a plain list of idle ones, which spares each call the
    pool's checkout and the client's per-command bookkeeping (about a third of a
    script call's time on loopback). There are never more connections than calls
    running at once, as with the pool. The call is packed by hiredis in one step: redis-py's
    packer encodes a script call's eleven or so arguments one by one in Python (measured:
    13 us of CPU a call, against 2.5).
    """

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self._idle: list[Any] = []  # list.pop and list.append are atomic: no lock needed
        self._session_connection: Any = None  # made on first use, outside the pool
        self._session_lock = threading.Lock()
        self._pack = packer_for(client.connection_pool.connection_kwargs)

    @property
    def address(self) -> str:
        """Where the server is, for messages: ``host:port/db`` or the socket path, never credentials."""
        kwargs = self.client.connection_pool.connection_kwargs
        where = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        return f"{where}/{kwargs.get('db', 0)}"

    def run(self, script: Script, keys: Sequence[str], args: Sequence[str | int | float] = ()) -> Any:
        try:
            return self._evalsha(script.sha, keys, args)
        except NoScriptError:
            self.client.script_load(script.source)
            return self._evalsha(script.sha, keys, args)

    def _evalsha(self, sha: str, keys: Sequence[str], args: Sequence[str | int | float]) -> Any:
        try:
            connection = self._idle.pop()
        except IndexError:
            connection = self.client.connection_pool.get_connection()  # checked by the pool
        else:
            _start_afresh_if_closed(connection)
        try:
            command = ("EVALSHA", sha, len(keys), *keys, *args)
            if self._pack is None:
                connection.send_command(*command)
            else:
                connection.send_packed_command((self._pack(command),))
            return connection.read_response()
        except ResponseError:
            raise  # the server answered in full: the connection is in a known state
        except BaseException:
            connection.disconnect()  # a reply may still be on its way: never read it as another's
            raise
        finally:
            self._idle.append(connection)  # a disconnected one reconnects on its next command

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return list(pipe.execute(raise_on_error=False))

    def run_for_session(
        self, script: Script, keys: Sequence[str], args: Sequence[str | int | float], replicas: int, ms: int
    ) -> tuple[Any, int]:
        """``run`` (then ``WAIT`` for ``replicas``, in the same round trip) on the session's own
        connection: (reply, replicas that acked).

        The keep-alive never shares a connection with the callers' calls: it cannot queue behind
        them, nor fail on a pool they exhausted (a url's ``max_connections`` bounds the pool,
        which then refuses a connection rather than wait for one).
        """
        commands: list[tuple[Any, ...]] = [("EVALSHA", script.sha, len(keys), *keys, *args)]
        if replicas:
            commands.append(("WAIT", replicas, ms))
        with self._session_lock:  # one session call at a time on it (engines sharing the backend)
            connection = self._session_connection
            if connection is None:
                pool = self.client.connection_pool
                connection = self._session_connection = pool.connection_class(**pool.connection_kwargs)
            reloaded = reconnected = False
            while True:
                try:
                    connection.send_packed_command(connection.pack_commands(commands))
                    replies = [_reply(connection) for _ in commands]
                except redis.exceptions.ConnectionError:
                    connection.disconnect()  # a reply may still be on its way: never read it as another's
                    if reconnected:
                        raise
                    # Found closed (a restart, a failover, an idle timeout): the session's calls
                    # renew, which is safe to send again, once, on a new connection.
                    reconnected = True
                    continue
                except BaseException:
                    connection.disconnect()
                    raise
                if isinstance(replies[0], NoScriptError) and not reloaded:
                    self.client.script_load(script.source)
                    reloaded = True
                    continue
                _raise_first_error(replies)
                return replies[0], int(replies[1]) if replicas else 0

    def run_then_wait(
        self, script: Script, keys: Sequence[str], args: Sequence[str | int | float], replicas: int, ms: int
    ) -> tuple[Any, int]:
        """Run ``script`` then ``WAIT`` on the same connection (one round trip): reply and replicas acked."""
        for attempt in range(2):
            pipe = self.client.pipeline(transaction=False)
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", replicas, ms)
            reply, acked = pipe.execute(raise_on_error=False)
            if isinstance(reply, NoScriptError) and attempt == 0:
                self.client.script_load(script.source)
                continue
            _raise_first_error([reply, acked])
            return reply, int(acked)
        raise AssertionError("unreachable")  # pragma: no cover

    def read_metadata(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        if not session_ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for sid in session_ids:
            pipe.execute_command("HGET", session_key(sid), "metadata")
        return dict(zip(session_ids, pipe.execute()))

    def close(self) -> None:
        pool = self.client.connection_pool
        while self._idle:
            pool.release(self._idle.pop())
        with self._session_lock:
            if self._session_connection is not None:
                self._session_connection.disconnect()
        self.client.close()
        pool.disconnect()  # a pool given to the client (a cache's settings) is not closed with it


def _start_afresh_if_closed(connection: Any) -> None:
    """Disconnect an idle connection the server closed meanwhile, so that the call reconnects.

    An idle connection has nothing to read unless the server closed it: a restart, a
    failover, its idle ``timeout``. Sent on such a connection, a call would fail, once per
    idle connection, although the server answers again (the pool's checkout makes the same
    check; the idle list spares the checkout, not the check).
    """
    try:
        closed = connection.can_read(timeout=0)
    except (redis.exceptions.ConnectionError, OSError):
        closed = True
    if closed:
        connection.disconnect()


def packer_for(connection_kwargs: dict[str, Any]) -> Callable[[tuple[Any, ...]], bytes] | None:
    """hiredis's packer where it encodes as the connections would (UTF-8, strict), else None (redis-py's)."""
    encoding = codecs.lookup(connection_kwargs.get("encoding", "utf-8")).name
    strict = connection_kwargs.get("encoding_errors", "strict") == "strict"
    if hiredis is None or encoding != "utf-8" or not strict:
        return None
    return hiredis.pack_command


class ClusterScripting(_Scripting):
    """Scripts and commands on a Redis Cluster, each routed to the node of its keys' hash slot."""

    def __init__(self, client: RedisCluster) -> None:
        super().__init__(client)

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args in calls:
            # an explicit node spares redis-py a COMMAND GETKEYS round trip per pipelined EVALSHA
            node = self.client.get_node_from_key(keys[0])
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args, target_nodes=node)
        return list(pipe.execute(raise_on_error=False))

    def read_metadata(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        if not session_ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for sid in session_ids:
            key = session_key(sid)
            pipe.execute_command("HGET", key, "metadata", target_nodes=self.client.get_node_from_key(key))
        results = list(pipe.execute(raise_on_error=False))
        _raise_first_error(results)
        return dict(zip(session_ids, results))


Scripting = StandaloneScripting | ClusterScripting
