"""Test-only: the ``epochgc`` command line, as a separate process, with a
bug injected into the listing of one prefix (the product's code is
unchanged; the store class is wrapped in this process only)::

    python -m tests.support.faulty_node AFTER PREFIX -- reconciler --config FILE ...

From the ``AFTER``-th listing of a prefix containing ``PREFIX`` on (say
``/meta/nodes/``, the reconciler's ownership round's first request, or
``/meta/reports/``, the daemon's reports job's), the listing raises
``RuntimeError``, as a bug would: not an ``EpochGCError``, so nothing in
the process expects it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from epochgc.cli import main as cli
from epochgc.storage.s3 import S3ObjectStore

INJECTED = "injected: a bug"


def inject(after: int, part: str) -> None:
    """Make ``S3ObjectStore.list_pages`` of prefixes containing ``part``
    fail from its ``after``-th call on."""
    real = S3ObjectStore.list_pages
    calls = 0

    def list_pages(self: S3ObjectStore, prefix: str, **kwargs: Any) -> Iterator[Any]:
        nonlocal calls
        if part in prefix:
            calls += 1
            if calls >= after:
                raise RuntimeError(INJECTED)
        return real(self, prefix, **kwargs)

    S3ObjectStore.list_pages = list_pages  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    after, part, separator, *rest = argv
    if separator != "--":
        raise SystemExit(
            "usage: python -m tests.support.faulty_node AFTER PREFIX -- EPOCHGC-ARGS..."
        )
    inject(int(after), part)
    return cli.main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
