"""The shipped table of hash-slot tags for the Cluster's per-slot markers."""

from __future__ import annotations

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from django_simba.backends.redis import keys


def test_the_shipped_hash_slot_tags_are_what_the_search_finds():
    shipped = keys._hash_slot_tags()
    assert shipped == keys.search_hash_slot_tags()  # regenerate the file from search_hash_slot_tags() if not


def test_every_slot_marker_hashes_to_its_own_slot():
    for slot in range(REDIS_CLUSTER_HASH_SLOTS):
        assert key_slot(keys.marker_key(slot).encode()) == slot
