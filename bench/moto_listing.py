"""Benchmark helper: make the embedded server's LIST safe against deletes
running at the same time, as S3's is.

moto walks a bucket for a LIST by copying its key names, then reading each
key; a key deleted in between makes the whole LIST fail with a 500
(``KeyError`` in ``_VersionedKeyStore``), and so does a listed key deleted
before its ETag, computed from the body on first use, is read
(``ValueError``: the body is closed). S3 has no such race. On the
embedded server it punishes exactly the clients that list and delete at
once (epochgc's sweeper, ``aws s3 rm``, ``rclone``): each failed LIST costs
a walk of the bucket and a retry, and under load the walk is slower, so
more LISTs fail. ``bench_sweep`` measures clients, not this bug, so it runs
the server with the walk skipping keys deleted since the copy (what S3's
listing shows: a key deleted during the LIST may or may not appear).

Patches moto's private ``_VersionedKeyStore``; ``race_free_listing`` says
``False`` and changes nothing when that class is not as expected.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def race_free_listing() -> Iterator[bool]:
    """While inside, LIST walks skip keys deleted since they began; yields
    whether the patch applied."""
    try:
        from moto.s3.utils import _VersionedKeyStore  # noqa: PLC0415 - private, may move
    except ImportError:
        yield False
        return
    names = ("_iteritems", "items", "iteritems", "_itervalues", "values", "itervalues")
    if not all(hasattr(_VersionedKeyStore, n) for n in (*names, "_self_iterable")):
        yield False
        return
    saved = {n: _VersionedKeyStore.__dict__[n] for n in names}

    def items(self: Any) -> Iterator[tuple[str, Any]]:
        for key in self._self_iterable():
            try:
                value = self[key]
                if getattr(value, "_etag", "") is None:
                    # moto computes an ETag from the body when first asked,
                    # which fails once a delete has closed the body: ask now.
                    _ = value.etag
            except (KeyError, IndexError, ValueError):
                continue  # deleted since the walk began
            yield key, value

    def values(self: Any) -> Iterator[Any]:
        for _key, value in items(self):
            yield value

    for name in ("_iteritems", "items", "iteritems"):
        setattr(_VersionedKeyStore, name, items)
    for name in ("_itervalues", "values", "itervalues"):
        setattr(_VersionedKeyStore, name, values)
    try:
        yield True
    finally:
        for name, original in saved.items():
            setattr(_VersionedKeyStore, name, original)
