"""The collector never sends a key outside ``{root}/l0/`` to DeleteObjects,
even when the listing hands it such keys (a misbehaving store or proxy, a
prefix bug): the least-privilege policy in docs/operating.md relies on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from epochgc.gc.sweeper import Sweeper, SweepPolicy
from epochgc.storage.keys import encode_l0_key, parse_l0_key
from epochgc.storage.object_store import DeleteOutcome, ObjectInfo
from epochgc.storage.s3 import S3ObjectStore
from tests.support.moto_seed import seed_objects
from tests.support.wrapping import StoreWrapper

ROOT = "epochgc"
OLD = datetime(2020, 1, 1, tzinfo=UTC)
STRANGERS = [
    f"{ROOT}/l1/orders/1/0/{0:020d}-{9:020d}-{uuid.uuid4()}",
    f"{ROOT}/meta/controller/{1:020d}",
    f"{ROOT}2/l0/000/{1:018d}/{uuid.uuid4()}",
    f"{ROOT}/l0/000/{1:018d}/{uuid.uuid4()}/extra",
    f"{ROOT}/l0/000/{1:018d}/NOT-A-UUID",
    "other/l0/000/000000000000000001/x",
    f"{ROOT}/l0/../meta/controller/{1:020d}",
]


class LeakyListing(StoreWrapper):
    """A real store whose listings also return keys from elsewhere."""

    def __init__(self, store: S3ObjectStore) -> None:
        super().__init__(store)
        self.deleted: list[str] = []

    def list_pages(self, prefix: str, **kwargs: Any) -> Iterator[list[ObjectInfo]]:
        strangers = [ObjectInfo(k, 1, "e", OLD) for k in STRANGERS]
        for page in self._store.list_pages(prefix, **kwargs):
            yield sorted(strangers + list(page), key=lambda o: o.key)

    def delete_batch(self, keys: list[str]) -> DeleteOutcome:
        self.deleted += keys
        return self._store.delete_batch(keys)


def test_only_l0_keys_under_the_root_reach_delete_objects(
    store: S3ObjectStore, bucket: str
) -> None:
    ours = [encode_l0_key(ROOT, 0, e, str(uuid.uuid4())) for e in (1, 2, 3)]
    seed_objects(bucket, ours + STRANGERS)
    leaky = LeakyListing(store)
    sweeper = Sweeper(leaky, ROOT, SweepPolicy(min_object_age=timedelta(0)))  # type: ignore[arg-type]
    result = sweeper.sweep([0], safe_epoch=10, now=datetime.now(UTC))
    assert sorted(leaky.deleted) == sorted(ours)
    assert all(parse_l0_key(k, ROOT) is not None for k in leaky.deleted)
    assert result.deleted == 3 and result.skipped
    left = {o.key for o in store.list_objects("")}
    assert set(STRANGERS) <= left
