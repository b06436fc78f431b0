"""Probing a bucket for the S3 semantics epochgc's safety depends on.

Many S3-compatible stores and proxies accept ``If-None-Match`` / ``If-Match``
headers and silently ignore them. On such a store two log writers can both
"win" a slot and two lease holders can both hold a lease, so epochgc refuses
to run there. Each probe writes under ``{root}/meta/probe/{run}/`` and cleans
up after itself.

A probe's verdict says what the store actually did ("the store rejected
(412) the ETag it had just returned"), not only which feature failed. A
permanent store error (no such bucket, access denied, bad credentials) is
not a missing feature: it propagates as itself, so ``check-store`` says
"bucket missing" rather than "the store lacks what epochgc needs".

The CAS probe also finds the form of the ETag the store honours in
``If-Match``: S3 takes the quoted ETag it returned; Ceph RGW 16 and
DigitalOcean Spaces answer 412 to it and take only the bare one. The probe
tries the quoted form, then the bare one, and leaves the store sending the
form that worked; the stale-ETag probe that follows then proves the store
really enforces that form, so detection never weakens a probe.

``ensure_store_capable`` is the gate every writing command and process
passes once (``wiring.open_store`` caches the verdict per endpoint and
bucket). It runs the same probes, leaner (one race round, three list
keys): about 25 requests, a fraction of a second.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from epochgc.errors import (
    BucketMissingError,
    EpochGCError,
    NotFoundError,
    PermanentStorageError,
    PreconditionFailedError,
    StoreCapabilityError,
    StoreUnreachableError,
)
from epochgc.storage.object_store import ObjectStore
from epochgc.storage.s3 import IfMatchForm


@dataclass(frozen=True)
class ProbeResult:
    """The outcome of one probe."""

    name: str
    passed: bool
    detail: str


class _ProbeFailedError(Exception):
    pass


class _IfMatchFormAware(Protocol):
    """A store that can send the ETag in ``If-Match`` in either form."""

    @property
    def if_match_form(self) -> IfMatchForm: ...

    def use_if_match_form(self, form: IfMatchForm) -> None: ...


def _form_aware(store: ObjectStore) -> _IfMatchFormAware | None:
    if hasattr(store, "use_if_match_form") and hasattr(store, "if_match_form"):
        return cast(_IfMatchFormAware, store)
    return None


def run_probes(
    store: ObjectStore,
    root: str,
    *,
    race_rounds: int = 5,
    list_keys: int = 5,
    detect_if_match_form: bool = True,
) -> list[ProbeResult]:
    """Run every probe against ``store``; a store that lacks a feature is a
    failed probe, never an exception.

    With ``detect_if_match_form`` the CAS probe finds the ETag form the
    store honours and leaves ``store`` using it; without, the store's
    current form (``store.if_match_form`` in the config) is tested as is.

    Raises:
        PermanentStorageError: the bucket cannot be used at all (missing,
            access denied, credentials): that is not a missing feature.
        StoreUnreachableError: nothing answers at the endpoint.
    """
    base = f"{root}/meta/probe/{uuid.uuid4()}/"
    probes: list[tuple[str, Callable[[], str]]] = [
        ("create-only put (If-None-Match: *)", lambda: _probe_create_only(store, base)),
        (
            "CAS put, current etag (If-Match)",
            lambda: _probe_cas_match(store, base, detect_if_match_form),
        ),
        ("CAS put, stale etag (If-Match)", lambda: _probe_cas_stale(store, base)),
        ("create-only race, two writers", lambda: _probe_race(store, base, race_rounds)),
        ("DeleteObjects of a missing key", lambda: _probe_delete_missing(store, base)),
        ("list order and pagination", lambda: _probe_list_order(store, base, list_keys)),
    ]
    results = []
    for name, probe in probes:
        try:
            results.append(ProbeResult(name, True, probe()))
        except _ProbeFailedError as failure:
            results.append(ProbeResult(name, False, str(failure)))
        except (PermanentStorageError, StoreUnreachableError):
            raise
        except EpochGCError as err:
            results.append(ProbeResult(name, False, f"{type(err).__name__}: {err}"))
    _clean_up(store, base)
    return results


def wait_until_reachable(
    store: ObjectStore,
    root: str,
    seconds: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Poll with one LIST until the store answers with its bucket or
    ``seconds`` passed (a server started a moment ago, as in the
    quickstart, may listen before it has created its bucket). Any other
    answer counts, an error of the bucket included: the probes report those.

    Raises:
        StoreUnreachableError: still nothing answers after ``seconds``.
        BucketMissingError: it answers, but the bucket is still not there.
    """
    if seconds <= 0:
        return  # the probes' first request finds out
    deadline = monotonic() + seconds
    while True:
        try:
            next(iter(store.list_pages(f"{root}/meta/probe/")), None)
            return
        except (StoreUnreachableError, BucketMissingError):
            if monotonic() >= deadline:
                raise
            sleep(0.5)
        except EpochGCError:
            return


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise _ProbeFailedError(message)


def _expect_refused(write: Callable[[], object], message: str) -> None:
    """``write``, a conditional PUT that must not land, is refused (412);
    if it lands, the probe fails with ``message``."""
    try:
        write()
    except PreconditionFailedError:
        return
    raise _ProbeFailedError(message)


def _probe_create_only(store: ObjectStore, base: str) -> str:
    key = f"{base}create-only"
    store.put_if_absent(key, b"first")
    _expect_refused(
        lambda: store.put_if_absent(key, b"second"),
        "a second create-only PUT succeeded: the store ignores If-None-Match, so two "
        "log writers could both win one slot",
    )
    body = store.get(key).body
    _expect(body == b"first", f"the losing create-only PUT overwrote the object (body={body!r})")
    return "second writer got 412, body kept"


def _cas_with_fresh_etag(store: ObjectStore, key: str, body: bytes, etag: str) -> str:
    """A CAS with the ETag the store has just returned; a refusal is the
    store's fault, and the message says so."""
    try:
        return store.put_if_match(key, body, etag)
    except PreconditionFailedError:
        aware = _form_aware(store)
        form = f", sent {aware.if_match_form}" if aware else ""
        raise _ProbeFailedError(_rejected_own_etag(etag, form)) from None
    except NotFoundError:
        raise _ProbeFailedError(
            "the store answered 404 to If-Match on the object it had just written"
        ) from None


def _rejected_own_etag(etag: str, forms: str) -> str:
    return (
        f"the store rejected (412) the ETag it had just returned ({etag}) in If-Match{forms}: "
        "leases could never be renewed or released, nor snapshots replaced"
    )


def _probe_cas_match(store: ObjectStore, base: str, detect_form: bool) -> str:
    key = f"{base}cas-match"
    etag = store.put_if_absent(key, b"v1")
    aware = _form_aware(store) if detect_form else None
    if aware is None:
        new_etag = _cas_with_fresh_etag(store, key, b"v2", etag)
    else:
        new_etag = _detect_if_match_form(store, aware, key, etag)
    body = store.get(key).body
    _expect(body == b"v2", f"CAS with the current etag did not write (body={body!r})")
    _expect(new_etag != etag, "the etag did not change after a successful CAS")
    current = _form_aware(store)
    if current is None:
        return "replaced, new etag"
    if aware is None:
        return f"replaced, new etag; If-Match form: {current.if_match_form} (configured)"
    if current.if_match_form == "bare":
        return (
            "replaced, new etag; If-Match form: bare (the store answers 412 to the quoted "
            "ETag, as Ceph RGW 16 does)"
        )
    return f"replaced, new etag; If-Match form: {current.if_match_form}"


def _detect_if_match_form(store: ObjectStore, aware: _IfMatchFormAware, key: str, etag: str) -> str:
    """CAS ``key`` from ``etag`` to ``b"v2"``, quoted form first, then bare;
    leave ``aware`` sending the form that wrote. Return the new ETag."""
    aware.use_if_match_form("quoted")
    try:
        return store.put_if_match(key, b"v2", etag)
    except PreconditionFailedError:
        pass
    except NotFoundError:
        raise _ProbeFailedError(
            "the store answered 404 to If-Match on the object it had just written"
        ) from None
    body = store.get(key).body
    _expect(body == b"v1", f"a CAS the store refused (412) changed the object (body={body!r})")
    aware.use_if_match_form("bare")
    try:
        return store.put_if_match(key, b"v2", etag)
    except (PreconditionFailedError, NotFoundError):
        aware.use_if_match_form("quoted")
        raise _ProbeFailedError(_rejected_own_etag(etag, ", quoted and bare")) from None


def _probe_cas_stale(store: ObjectStore, base: str) -> str:
    key = f"{base}cas-stale"
    stale = store.put_if_absent(key, b"v1")
    _cas_with_fresh_etag(store, key, b"v2", stale)
    _expect_refused(
        lambda: store.put_if_match(key, b"v3", stale),
        "a CAS PUT with a stale etag succeeded: the store ignores If-Match, so two "
        "lease holders could both renew",
    )
    body = store.get(key).body
    _expect(body == b"v2", f"the rejected CAS changed the object (body={body!r})")
    return "stale writer got 412, body kept"


def _probe_race(store: ObjectStore, base: str, rounds: int) -> str:
    for round_no in range(rounds):
        key = f"{base}race-{round_no}"
        wins, losses, errors = _race_once(store, key, (b"writer-a", b"writer-b"))
        _expect(
            not errors,
            f"round {round_no}: a racing create-only PUT failed with "
            f"{type(errors[0]).__name__ if errors else ''}: {errors[0] if errors else ''}",
        )
        _expect(
            len(wins) == 1 and len(losses) == 1,
            f"round {round_no}: {len(wins)} writers won a create-only race (expected exactly 1)",
        )
        body = store.get(key).body
        _expect(body == wins[0], f"round {round_no}: stored body is not the winner's")
    return f"{rounds} rounds, exactly one winner each"


def _race_once(
    store: ObjectStore, key: str, bodies: tuple[bytes, ...]
) -> tuple[list[bytes], list[bytes], list[BaseException]]:
    """Start one create-only PUT per body at the same instant; return the
    bodies that won, those that got 412, and any other errors."""
    barrier = threading.Barrier(len(bodies))
    lock = threading.Lock()
    wins: list[bytes] = []
    losses: list[bytes] = []
    errors: list[BaseException] = []

    def writer(body: bytes) -> None:
        barrier.wait()
        try:
            store.put_if_absent(key, body)
        except PreconditionFailedError:
            with lock:
                losses.append(body)
        except Exception as err:  # reported in the probe's verdict, not swallowed
            with lock:
                errors.append(err)
        else:
            with lock:
                wins.append(body)

    threads = [threading.Thread(target=writer, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wins, losses, errors


def _probe_delete_missing(store: ObjectStore, base: str) -> str:
    outcome = store.delete_batch([f"{base}never-written"])
    _expect(not outcome.failed, f"deleting a missing key failed: {dict(outcome.failed)}")
    return "no error (idempotent)"


def _probe_list_order(store: ObjectStore, base: str, count: int) -> str:
    # Written out of order, listed two per page: order and pagination at once.
    names = [f"{base}list/{i:05d}" for i in reversed(range(count))]
    for key in names:
        store.put(key, b"x")
    listed = [o.key for o in store.list_objects(f"{base}list/", page_size=2)]
    _expect(listed == sorted(names), f"listing not in key order or incomplete: {listed}")
    after = [o.key for o in store.list_objects(f"{base}list/", start_after=sorted(names)[1])]
    _expect(after == sorted(names)[2:], f"StartAfter not honoured: {after}")
    return "lexicographic, paginated, StartAfter honoured"


def _clean_up(store: ObjectStore, base: str) -> None:
    # Leftovers under meta/probe/ are harmless; never fail the verdict on them.
    with contextlib.suppress(EpochGCError):
        store.delete_many([o.key for o in store.list_objects(base)])


def format_probe_table(results: list[ProbeResult], bucket: str) -> str:
    """A human table of the probe results with a verdict line."""
    width = max(len(r.name) for r in results)
    lines = [f"{'probe'.ljust(width)}  result  detail", f"{'-' * width}  ------  ------"]
    lines += [
        f"{r.name.ljust(width)}  {'PASS' if r.passed else 'FAIL':6}  {r.detail}" for r in results
    ]
    failed = [r for r in results if not r.passed]
    if failed:
        lines.append(
            f"store NOT usable: bucket {bucket!r} failed {len(failed)} of {len(results)} "
            "probes; epochgc refuses to run on it"
        )
    else:
        lines.append(f"store OK: bucket {bucket!r} has what epochgc needs")
    return "\n".join(lines)


def ensure_store_capable(
    store: ObjectStore, root: str, *, endpoint: str = "", detect_if_match_form: bool = True
) -> None:
    """Run the (lean) probes and refuse a store that fails any: the gate
    every command and process that writes passes before its first write.
    On success ``store`` sends the ETag form it honours (see ``run_probes``).

    Raises:
        StoreCapabilityError: one line naming the first failed probe and what
            the store did; the full table is its ``table``.
        PermanentStorageError: the bucket cannot be used at all.
    """
    results = run_probes(
        store, root, race_rounds=1, list_keys=3, detect_if_match_form=detect_if_match_form
    )
    failed = [r for r in results if not r.passed]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more failed probes)" if len(failed) > 1 else ""
        where = f" at {endpoint}" if endpoint else ""
        raise StoreCapabilityError(
            f"bucket {store.bucket!r}{where} lacks what epochgc needs, refusing to write: "
            f"{first.name}: {first.detail}{more}; `epochgc check-store` shows the table",
            table=format_probe_table(results, store.bucket),
        )
