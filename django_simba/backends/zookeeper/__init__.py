"""ZooKeeper backend (kazoo): ``SIMBA = {"BACKEND": "zookeeper", "OPTIONS": {...}}``.

Options (all optional)::

    {
        "hosts": "zk1:2181,zk2:2181,zk3:2181",   # default "127.0.0.1:2181"; a chroot suffix is allowed
        "root": "/simba",                        # where every node of the backend lives
        "connection_timeout": 5.0,               # bounds connecting a session (default: the call timeout)
        "auth": [("digest", "simba:secret")],    # credentials every client adds
        "acl": "auto",                           # "open" | "creator" | "auto" | callable(path) | dotted path
        "tls": {"ca": ..., "certfile": ..., "keyfile": ...},   # kazoo SSL settings for every client
        "sasl": {"mechanism": "DIGEST-MD5", "username": ..., "password": ...},  # needs pure-sasl
    }

Nodes (``layout.py``): ``{root}/leases/{name}`` is a container node, the name's line, holding one
ephemeral sequential node (``{session}-{n}``) per session asking for the name; the first holds
it, and the fencing token is that node's czxid. ``{root}/groups/{group}`` is a container node
holding one ephemeral node per member (``{root}/groups/{group}/{session}``);
``{root}/sessions/{session}`` is an ephemeral node with the session's metadata, written again at
every keep-alive.

How it works:

* A Simba session is one ZooKeeper session on a kazoo client of its own, never reconnected to
  another ZooKeeper session; the session id is the ZooKeeper session id as 16 hex digits. Once
  kazoo reports the session lost it stays expired, and the engine opens a new one.
* The token is the czxid of the holder's node: zxids are global to the ensemble and nodes join
  a line in zxid order, so tokens strictly increase across terms of a name (they are not
  consecutive) and never reset.
* Release deletes the term's own node; the next waiter in line, watching it, holds the name at
  once and is told by a HANDED_OVER notification (``line.py``, ``leases.py``). Group changes
  are watched too, including the creation of a group that did not exist yet. ``members`` syncs
  the group node first, so a join that returned is always listed.
* The session requests a timeout of the lease duration; the server clamps it to
  [minSessionTimeout, maxSessionTimeout] (by default 2 and 20 ticks). Every remaining time is
  min(lease, negotiated timeout). kazoo's pings keep a ZooKeeper session alive on their own, so a
  local watchdog closes a session no keep-alive renewed within its lease: heartbeats alone never
  keep a lease. A process that stops altogether (crash, SIGKILL, SIGSTOP) is replaced after the
  negotiated timeout, counted by the servers.
* A keep-alive is one round trip whatever the number of leases: a write of the session node
  and, pipelined behind it, ZooKeeper's ``getEphemerals`` of the leases directory, which lists
  exactly the nodes this session has in lines. A create whose reply was lost (connection loss,
  timeout) may have been applied: such a node appears in that list; first in its line it is
  reported as held by the next keep-alive (and the engine releases it), otherwise it is deleted.
  A release whose delete failed is not such a node: it stays "leaving" until a delete sent
  again (by the next keep-alive, or acquire of that name) succeeds, and is never reported held.
* While the client is disconnected, keep-alive and acquire fail, so the engine's local deadline
  runs out; when ZooKeeper reports the session expired, the session is expired.

Durability: every write commits through a quorum, so a leader change keeps every token. Tokens
can only go back if the ensemble's data is lost or restored from an older snapshot. Session
timeouts are measured with the servers' elapsed time, so a wall-clock step on an ensemble host
does not shorten them. Remaining times shown for *other* sessions (``owner``, ``leases``,
``sessions``) use the server wall clock stamped on session nodes; they are for display only.

Operators must configure: ``maxSessionTimeout`` at least the lease duration (otherwise sessions
get the maximum, and remaining times shrink to it); ZooKeeper 3.6 or newer (``getEphemerals``;
container nodes need 3.5.1). Empty lines and groups are removed by the server every
``znode.container.checkIntervalMs`` (one minute by default).

Security: **by default the nodes are open** (``OPEN_ACL_UNSAFE``): any client of the ensemble can
delete or pre-create lease nodes and forge group members. On a shared ensemble set credentials
(``auth``): the default ACL mode ``"auto"`` then makes every node the backend creates
creator-only (``CREATOR_ALL_ACL``), parents included. Nodes that already exist keep their ACL,
so the backend checks them (``acls.py``): the root and the nodes under it before its first
session, each line and group node the first time it meets it; one whose ACL grants anyone more
than the configured ACL is refused with ``UnsafeAcl`` (a ``ConfigurationError``; ``check
--deploy``: ``django_simba.E025``), never used and never changed. A node in a line or a group
that is not an ephemeral of the session its name gives is foreign (``foreign.py``): never a
holder, a waiter or a member, and logged once. ``tls`` and ``sasl`` configure every client the
backend opens; TLS verifies the server's certificate and its hostname unless ``"check_hostname":
False`` says otherwise. Requires kazoo (``pip install django-simba[zookeeper]``).
"""

from .backend import ZookeeperBackend

__all__ = ["ZookeeperBackend"]
