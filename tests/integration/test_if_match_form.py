"""The form of the ETag in ``If-Match``: S3 and moto take the quoted ETag the
store returned; Ceph RGW 16 (and DigitalOcean Spaces) answer 412 to it and
honour only the bare one. The probes find which form a store honours, the
store layer then sends that form, and every probe is still required: a store
that honours neither form, or ignores the bare one, is refused.

The RGW behaviour is reproduced by an HTTP proxy in front of the embedded
S3 (moto honours both forms), so ``make test`` covers the logic;
``tests/rgw/`` runs the same against a real RADOS Gateway."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from epochgc.config import load_config
from epochgc.errors import ConfigError, PreconditionFailedError, StoreCapabilityError
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.probe import ensure_store_capable, run_probes
from epochgc.storage.request_stats import RequestStats
from epochgc.storage.s3 import S3ObjectStore
from epochgc.wiring.store import CapabilityCache, open_store
from tests.conftest import FAST_RETRIES
from tests.support.config_files import write_server_config
from tests.support.s3_proxy import (
    S3FaultProxy,
    drop_bare_if_match,
    reject_every_if_match,
    rgw16_if_match,
    s3_fault_proxy,
)

CAS_MATCH = "CAS put, current etag (If-Match)"
CAS_STALE = "CAS put, stale etag (If-Match)"


def through(proxy: S3FaultProxy, server: EmbeddedS3, bucket: str) -> S3ObjectStore:
    settings = replace(server.client_settings(), endpoint_url=proxy.endpoint)
    return S3ObjectStore(make_s3_client(settings), bucket, retry_policy=FAST_RETRIES)


def test_s3_semantics_keep_the_quoted_form(store: S3ObjectStore) -> None:
    results = {r.name: r for r in run_probes(store, "epochgc")}
    assert all(r.passed for r in results.values())
    assert store.if_match_form == "quoted"
    assert "quoted" in results[CAS_MATCH].detail


def test_the_probes_find_the_bare_form_and_the_store_then_uses_it(
    s3_server: EmbeddedS3, bucket: str
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, rgw16_if_match) as proxy:
        store = through(proxy, s3_server, bucket)
        results = {r.name: r for r in run_probes(store, "epochgc")}
        assert [n for n, r in results.items() if not r.passed] == []
        assert store.if_match_form == "bare"
        assert "bare" in results[CAS_MATCH].detail
        assert proxy.answered >= 1, "the quoted form was tried first and refused"
        # Callers keep passing the ETag exactly as the store returned it.
        etag = store.put_if_absent("epochgc/meta/leases/x", b"1")
        assert etag.startswith('"')
        store.put_if_match("epochgc/meta/leases/x", b"2", etag)
        with pytest.raises(PreconditionFailedError):
            store.put_if_match("epochgc/meta/leases/x", b"3", etag)
        assert store.get("epochgc/meta/leases/x").body == b"2"
        ensure_store_capable(store, "epochgc")


@pytest.mark.parametrize(
    ("faults", "passes", "fails", "detail", "refusal"),
    [
        pytest.param(
            (reject_every_if_match,),
            (),
            CAS_MATCH,
            "quoted and bare",
            r"rejected \(412\) the ETag",
            id="honours-neither-form",
        ),
        pytest.param(
            (rgw16_if_match, drop_bare_if_match),
            (CAS_MATCH,),  # the bare form writes...
            CAS_STALE,  # ...but a stale bare ETag overwrites
            "ignores If-Match",
            "ignores If-Match",
            id="ignores-the-bare-form",
        ),
    ],
)
def test_a_store_whose_if_match_does_not_hold_is_refused_naming_why(
    s3_server: EmbeddedS3,
    bucket: str,
    faults: tuple[Callable[..., Any], ...],
    passes: tuple[str, ...],
    fails: str,
    detail: str,
    refusal: str,
) -> None:
    """A store that honours neither form is refused naming both; one that
    ignores the bare form is refused for that."""
    with s3_fault_proxy(s3_server.endpoint_url, *faults) as proxy:
        store = through(proxy, s3_server, bucket)
        results = {r.name: r for r in run_probes(store, "epochgc")}
        assert all(results[name].passed for name in passes)
        assert not results[fails].passed
        assert detail in results[fails].detail
        with pytest.raises(StoreCapabilityError, match=refusal):
            ensure_store_capable(store, "epochgc")


def test_a_configured_form_is_used_as_is_without_detection(
    s3_server: EmbeddedS3, bucket: str
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, rgw16_if_match) as proxy:
        quoted = through(proxy, s3_server, bucket)
        with pytest.raises(StoreCapabilityError, match=r"rejected \(412\)"):
            ensure_store_capable(quoted, "epochgc", detect_if_match_form=False)
        assert quoted.if_match_form == "quoted"
        refused = proxy.answered
        bare = through(proxy, s3_server, bucket)
        bare.use_if_match_form("bare")
        ensure_store_capable(bare, "epochgc", detect_if_match_form=False)
        assert proxy.answered == refused, "the quoted form was never sent"
        results = {r.name: r for r in run_probes(bare, "epochgc", detect_if_match_form=False)}
        assert results[CAS_MATCH].detail.endswith("If-Match form: bare (configured)")


def test_the_capability_cache_hands_the_found_form_to_later_stores(
    s3_server: EmbeddedS3, bucket: str
) -> None:
    cache = CapabilityCache()
    with s3_fault_proxy(s3_server.endpoint_url, rgw16_if_match) as proxy:
        cache.ensure(through(proxy, s3_server, bucket), "epochgc", proxy.endpoint)
        later = through(proxy, s3_server, bucket)
        stats = RequestStats()
        stats.attach(later.client)
        cache.ensure(later, "epochgc", proxy.endpoint)
        assert stats.total() == 0, "no second probe"
        assert later.if_match_form == "bare"


@pytest.mark.parametrize(
    ("setting", "form", "quoted_tries"), [("auto", "bare", 1), ("bare", "bare", 0)]
)
def test_open_store_applies_store_if_match_form(
    s3_server: EmbeddedS3, bucket: str, tmp_path: Path, setting: str, form: str, quoted_tries: int
) -> None:
    with s3_fault_proxy(s3_server.endpoint_url, rgw16_if_match) as proxy:
        path = write_server_config(
            tmp_path / "c.toml", proxy.endpoint, bucket, f'if_match_form = "{setting}"\n'
        )
        config = load_config(path)
        with open_store(config, capabilities=CapabilityCache()) as handle:
            assert handle.store.if_match_form == form
        assert proxy.answered == quoted_tries


def test_store_if_match_form_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[store]\nif_match_form = "unquoted"\n')
    with pytest.raises(ConfigError, match=r"store\.if_match_form"):
        load_config(path)
