"""Test and benchmark helper: write objects straight into the in-process
moto backend, 100x faster than PUT over HTTP.

Not product code and not a public moto API: only fixtures and benchmark
set-up use it, and everything measured or asserted still goes over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable

MOTO_ACCOUNT_ID = "123456789012"


def seed_objects(bucket: str, keys: Iterable[str], body: bytes = b"x") -> int:
    """Create ``keys`` in ``bucket`` of the embedded server running in this
    process; return how many were written."""
    from moto.s3.models import s3_backends  # noqa: PLC0415 - only with moto running

    backend = s3_backends[MOTO_ACCOUNT_ID]["aws"]
    count = 0
    for key in keys:
        backend.put_object(bucket, key, body)
        count += 1
    return count


def stored_keys(bucket: str) -> set[str]:
    """The keys ``bucket`` holds now, read from the backend (a LIST over
    HTTP would cost the server seconds per check at benchmark sizes)."""
    from moto.s3.models import s3_backends  # noqa: PLC0415 - only with moto running

    return set(s3_backends[MOTO_ACCOUNT_ID]["aws"].get_bucket(bucket).keys.keys())


def stored_bytes(bucket: str, prefix: str) -> int:
    """Bytes of the objects under ``prefix`` in ``bucket``, from the backend."""
    from moto.s3.models import s3_backends  # noqa: PLC0415 - only with moto running

    keys = s3_backends[MOTO_ACCOUNT_ID]["aws"].get_bucket(bucket).keys
    return sum(keys[k].size for k in keys if k.startswith(prefix))


def drop_bucket(bucket: str) -> None:
    """Delete ``bucket`` and everything in it (frees a benchmark's memory).

    Each key is disposed of first: moto warns about every key collected
    undisposed, which at exit took 12 s per 60,000 keys."""
    from moto.s3.models import s3_backends  # noqa: PLC0415 - only with moto running

    backend = s3_backends[MOTO_ACCOUNT_ID]["aws"]
    keys = backend.get_bucket(bucket).keys
    for _name, versions in keys.lists():
        for version in versions:
            version.dispose()
    keys.clear()
    backend.delete_bucket(bucket)
