"""Every botocore session epochgc builds shares one loader of the service
models (per ``AWS_DATA_PATH``), and nothing else: credentials stay each
client's own."""

from __future__ import annotations

import pytest

from epochgc.storage.client import (
    ClientSettings,
    botocore_session_with_fast_timestamps,
    make_s3_client,
)


def test_sessions_share_the_model_loader() -> None:
    first, second = botocore_session_with_fast_timestamps(), botocore_session_with_fast_timestamps()
    assert first is not second
    assert first.get_component("data_loader") is second.get_component("data_loader")


def test_another_data_path_gets_a_loader_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    default = botocore_session_with_fast_timestamps().get_component("data_loader")
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    other = botocore_session_with_fast_timestamps().get_component("data_loader")
    assert other is not default
    assert str(tmp_path) in other.search_paths


def test_clients_keep_their_own_credentials() -> None:
    def client(key: str) -> object:
        return make_s3_client(
            ClientSettings(
                endpoint_url="http://127.0.0.1:9", access_key_id=key, secret_access_key="s"
            )
        )

    first, second = client("AKIAFIRST"), client("AKIASECOND")
    keys = [c._request_signer._credentials.access_key for c in (first, second)]  # type: ignore[attr-defined]
    assert keys == ["AKIAFIRST", "AKIASECOND"]
