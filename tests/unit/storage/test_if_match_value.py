"""The ETag as the ``If-Match`` value a store wants: callers pass ETags as
the store returned them (quoted), or already bare; the header carries
exactly one form, never a doubled or half-stripped quote."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.s3 import IF_MATCH_FORMS, S3ObjectStore, if_match_value

ETAG_BODY = st.text(alphabet="0123456789abcdef-", min_size=1, max_size=40)


@given(ETAG_BODY, st.booleans())
def test_either_input_form_gives_the_wanted_form(body: str, quoted_input: bool) -> None:
    etag = f'"{body}"' if quoted_input else body
    assert if_match_value(etag, "bare") == body
    assert if_match_value(etag, "quoted") == f'"{body}"'


@given(ETAG_BODY, st.sampled_from(IF_MATCH_FORMS))
def test_converting_twice_changes_nothing(body: str, form: str) -> None:
    once = if_match_value(f'"{body}"', form)  # type: ignore[arg-type]
    assert if_match_value(once, form) == once  # type: ignore[arg-type]


def test_an_unknown_form_is_refused_by_the_store() -> None:
    # Building a client sends nothing: no server is needed.
    client = make_s3_client(ClientSettings(endpoint_url="http://127.0.0.1:9"))
    with pytest.raises(ValueError, match="if_match_form"):
        S3ObjectStore(client, "b", if_match_form="unquoted")  # type: ignore[arg-type]
