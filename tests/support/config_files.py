"""Configuration files for CLI tests that point a separate process at the
test session's embedded S3 server and a test's bucket."""

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
