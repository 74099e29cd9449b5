"""Running the registered scripts on a single node or a cluster, and mapping driver errors to ours.

Both runners offer the same three calls: ``run`` (one script, one round trip), ``run_many``
(several scripts in one pipeline: one round trip on a single node; on a cluster one
pipeline per node, written to every node before any reply is read) and ``scan``.
A NOSCRIPT answer (first use, restart, failover) loads the script and runs the call again,
which is safe because a server that answered NOSCRIPT ran nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import redis
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from ...spi import BackendTimeout, BackendUnavailable, SimbaError
from .keys import session_key
from .scripts import ALL_SCRIPTS, Script

SCAN_COUNT = 1000


class Call(NamedTuple):
    script: Script
    keys: Sequence[str]
    args: Sequence[str | int | float]


@contextlib.contextmanager
def translated(what: str, timeout: float) -> Iterator[None]:
    """Turn redis-py errors into BackendTimeout / BackendUnavailable (never leak driver exceptions)."""
    try:
        yield
    except SimbaError:
        raise
    except (redis.exceptions.TimeoutError, TimeoutError) as error:
        raise BackendTimeout(f"Redis did not answer {what} within {timeout:g} s: {error}") from error
    except (RedisError, RedisClusterException, OSError) as error:
        raise BackendUnavailable(f"Redis {what} failed: {type(error).__name__}: {error}") from error


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
    running at once, as with the pool.
    """

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self._idle: list[Any] = []  # list.pop and list.append are atomic: no lock needed

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
            connection = self.client.connection_pool.get_connection()
        try:
            connection.send_command("EVALSHA", sha, len(keys), *keys, *args)
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
        self.client.close()
        pool.disconnect()  # a pool given to the client (a cache's settings) is not closed with it


class ClusterScripting(_Scripting):
    """Scripts and commands on a Redis Cluster, each routed to the node of its keys' slot."""

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
