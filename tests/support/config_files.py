"""Configuration files for CLI tests that point a separate process at the
test session's embedded S3 server and a test's bucket, and the ``[gc]``
of tests that collect at once (no minimum object age)."""

from __future__ import annotations

from pathlib import Path

from epochgc.storage.embedded import EMBEDDED_ACCESS_KEY, EMBEDDED_SECRET_KEY


def write_server_config(path: Path, endpoint: str, bucket: str, extra: str = "") -> Path:
    """Write a TOML config for ``bucket`` at ``endpoint`` plus ``extra``
    sections; return ``path``."""
    path.write_text(
        f'[store]\nbucket = "{bucket}"\nendpoint_url = "{endpoint}"\n'
        f'access_key_id = "{EMBEDDED_ACCESS_KEY}"\nsecret_access_key = "{EMBEDDED_SECRET_KEY}"\n'
        'addressing_style = "path"\n' + extra
    )
    return path


def gc_sections(
    extra: str = "", *, shards: int | None = None, max_delete_fraction: float | None = 1.0
) -> str:
    """TOML: ``[layout] l0_shards`` (if ``shards``), then a ``[gc]`` with no
    minimum object age and ``max_delete_fraction`` (if not ``None``: the
    default otherwise); ``extra`` follows, inside ``[gc]``."""
    layout = f"[layout]\nl0_shards = {shards}\n" if shards is not None else ""
    guard = (
        f"max_delete_fraction = {max_delete_fraction}\n" if max_delete_fraction is not None else ""
    )
    return f"{layout}[gc]\nmin_object_age_seconds = 0.0\n{guard}{extra}"


def write_gc_config(
    path: Path,
    endpoint: str,
    bucket: str,
    extra: str = "",
    *,
    shards: int | None = None,
    max_delete_fraction: float | None = 1.0,
) -> Path:
    """``write_server_config`` with ``gc_sections``; return ``path``."""
    return write_server_config(
        path,
        endpoint,
        bucket,
        gc_sections(extra, shards=shards, max_delete_fraction=max_delete_fraction),
    )
