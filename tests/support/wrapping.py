"""Test helper: the base of the test stores that wrap an ``ObjectStore``
to change a few of its calls (inject a fault, record, race)."""

from __future__ import annotations

from typing import Any


class StoreWrapper:
    """Passes every call a subclass does not define to the wrapped store,
    ``_store``; ``bucket`` is the wrapped store's.

    Example::

        class CountingGets(StoreWrapper):
            def get(self, key: str, **kwargs: Any) -> Any:
                self.gets += 1
                return self._store.get(key, **kwargs)
    """

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def bucket(self) -> str:
        return str(self._store.bucket)
