"""The rules of a session's line state (``places.py``), which does no I/O.

Sequence numbers stand for the order in which the session's requests were queued; a listing
says something of a node only when it was sent after the request that created or deleted it.
"""

from __future__ import annotations

from django_simba.backends.zookeeper.places import Found, Node, Place, Places

LINE = "/simba/leases/x"


def _node(number: int, seq: int) -> Node:
    return Node("x", f"{LINE}/s-{number:010d}", token=100 + number, seq=seq)


def _released(places: Places, node: Node, delete_seq: int) -> str:
    """``node`` held, then released with a delete sent as request ``delete_seq``."""
    places.joined(node)
    assert places.take_place(node, [], wait=False) is Place.HELD
    released = places.release("x", node.token)
    assert released is node
    path = node.path
    places.delete_sent(path, delete_seq)
    return path


def test_a_failed_delete_keeps_the_node_leaving_and_never_adopted() -> None:
    places = Places()
    node = _node(1, seq=1)
    path = _released(places, node, delete_seq=2)
    places.delete_failed(path)
    assert places.owned() == {}
    assert places.reconcile({path: "x"}, seq=3) == []  # listed, yet not a lost create
    assert places.found(Node("x", path, node.token, 3), first=True) is Found.KNOWN
    assert places.to_delete_again() == [path] == places.to_delete_again("x")
    assert places.to_delete_again("y") == []
    assert places.release("x", node.token) is node  # a release asked again deletes it again
    assert places.release("x", node.token + 1) is None  # ... of that term only


def test_a_listing_after_the_delete_settles_the_node() -> None:
    places = Places()
    path = _released(places, _node(1, seq=1), delete_seq=2)
    places.reconcile({path: "x"}, seq=3)  # still listed after the delete: it failed
    assert places.to_delete_again() == [path]
    places.delete_sent(path, 4)
    assert places.to_delete_again() == []
    places.reconcile({}, seq=5)  # gone
    assert places.to_delete_again() == [] and places.release("x", None) is None


def test_a_listing_sent_before_the_delete_says_nothing_of_it() -> None:
    places = Places()
    path = _released(places, _node(1, seq=1), delete_seq=5)
    places.reconcile({path: "x"}, seq=4)
    assert places.to_delete_again() == []  # that delete may still succeed
    places.settle(set(), 4, "x")
    places.delete_failed(path)
    assert places.to_delete_again() == [path]  # not settled by a listing older than the delete


def test_a_keep_alive_drops_nodes_deleted_since_created_and_finds_lost_creates() -> None:
    places = Places()
    held, late = _node(1, seq=1), Node("y", "/simba/leases/y/s-0000000001", token=102, seq=5)
    for node in (held, late):
        places.joined(node)
        assert places.take_place(node, [], wait=False) is Place.HELD
    lost = f"{LINE}/s-{3:010d}"
    assert places.reconcile({lost: "x"}, seq=4) == [(lost, "x")]
    assert places.owned() == {"y": 102}  # x was force-released: created before the listing, not in it
    assert places.found(Node("x", lost, 103, 4), first=False) is Found.STRAY
    assert places.reconcile({lost: "x"}, seq=6) == []  # now leaving: not a lost create again
    assert places.found(Node("x", lost, 103, 6), first=True) is Found.KNOWN


def test_a_create_on_its_way_is_not_a_lost_create() -> None:
    places = Places()
    path = f"{LINE}/s-{1:010d}"
    with places.creating("x"):
        assert places.reconcile({path: "x"}, seq=2) == []
    assert places.reconcile({path: "x"}, seq=3) == [(path, "x")]


def test_a_closed_session_holds_nothing_and_places_nothing() -> None:
    places = Places()
    node = _node(1, seq=1)
    places.joined(node)
    places.close()
    assert places.take_place(node, [], wait=False) is Place.ENDED
    assert places.owned() == {} and places.mine("x") is None
    assert places.reconcile({node.path: "x"}, seq=2) == []
    assert places.found(node, first=True) is Found.KNOWN


def test_a_release_is_never_answered_by_a_waiting_node_whose_leaving_failed() -> None:
    places = Places()
    node = _node(1, seq=1)
    places.joined(node)
    assert places.take_place(node, ["s-0000000000"], wait=True) is Place.WAITING
    assert places.stop_waiting("x") is node
    places.delete_sent(node.path, 2)
    places.delete_failed(node.path)
    assert places.to_delete_again() == [node.path]  # keep-alives and acquires finish it
    assert places.release("x", node.token) is None  # it never held the name: not a term to release
