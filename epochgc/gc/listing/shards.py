"""The requests of the listing decision (``plan``): which L0 shards are
present in the bucket, found with a delimiter listing of ``{root}/l0/``,
and the shard knowledge document.

Why not ``layout.l0_shards``: that setting says how many shards *writers*
spread their objects over. Another writer may use a larger count, or the
setting may have been lowered after objects were written; their old
objects are still ours to collect, and a round that never lists them never
deletes or counts them. One delimiter LIST page covers 1000 shards (all a
three-digit shard can be), however many objects sit below them.

A prefix under ``l0/`` that is not a shard (``0007/``, ``ab/``) is never
swept: nothing below it can parse as an L0 key. It is counted and logged,
because something is writing where it should not.

The shard knowledge (``knowledge``) is read and written here too: one GET
when a collector starts, one PUT after a round that listed shards (``plan``
says when). A missing or unreadable document reads as "nothing known", so
the next round lists every shard: it can cost a round its savings, never a
deletion.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from epochgc.errors import RecordError
from epochgc.gc.listing.knowledge import ShardKnowledge, decode_knowledge, encode_knowledge
from epochgc.storage.keys import gc_shard_state_key, l0_prefix
from epochgc.storage.object_store import ObjectStore, get_or_none

log = logging.getLogger(__name__)

_SHARD_SEGMENT = re.compile(r"[0-9]{3}/")


@dataclass(frozen=True)
class ShardListing:
    """The shards found under ``{root}/l0/`` and the prefixes there that are
    not shards."""

    shards: tuple[int, ...]
    foreign: tuple[str, ...] = ()


def parse_shard_prefixes(prefixes: list[str], root: str) -> ShardListing:
    """Split a delimiter listing of ``{root}/l0/`` into shards and the rest. Pure."""
    base = l0_prefix(root)
    shards: list[int] = []
    foreign: list[str] = []
    for prefix in prefixes:
        rest = prefix[len(base) :] if prefix.startswith(base) else None
        if rest is not None and _SHARD_SEGMENT.fullmatch(rest):
            shards.append(int(rest[:3]))
        else:
            foreign.append(prefix)
    return ShardListing(tuple(sorted(set(shards))), tuple(foreign))


def discover_shards(store: ObjectStore, root: str) -> ShardListing:
    """Every shard present in the bucket (one LIST page per 1000 prefixes).

    Raises:
        StorageError: the listing failed (a round must not go on with a
            partial idea of what exists).
    """
    found = parse_shard_prefixes(store.list_prefixes(l0_prefix(root)), root)
    if found.foreign:
        log.warning(
            "%d prefixes under %s are not L0 shards and are never swept: %s",
            len(found.foreign),
            l0_prefix(root),
            ", ".join(found.foreign[:5]),
        )
    return found


def load_knowledge(store: ObjectStore, root: str) -> ShardKnowledge:
    """The shard knowledge of ``{root}/gc/shards/state``; nothing known when
    it is absent or cannot be read (logged: the next round lists every
    shard).

    Raises:
        StorageError: the GET itself failed (the round fails and retries).
    """
    key = gc_shard_state_key(root)
    stored = get_or_none(store, key)
    if stored is None:
        return ShardKnowledge()
    try:
        return decode_knowledge(stored.body, key)
    except RecordError as err:
        log.warning("ignoring the shard knowledge (every shard will be listed): %s", err)
        return ShardKnowledge()


def save_knowledge(store: ObjectStore, root: str, knowledge: ShardKnowledge) -> None:
    """Write the shard knowledge (one PUT; last writer wins: every writer's
    facts come from its own listings, so any of them is true).

    Raises:
        StorageError: the PUT failed.
    """
    store.put(gc_shard_state_key(root), encode_knowledge(knowledge))
