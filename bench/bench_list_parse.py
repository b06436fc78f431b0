"""Client CPU to parse a 1000-key LIST page: epochgc's client against stock
botocore.

ListObjectsV2 pages of 1000 epochgc-like L0 keys are recorded once from the
embedded S3 over HTTP (the raw response botocore hands its parser: status,
headers, XML body, captured on the client's ``before-parse`` event). Then
the same recorded pages are parsed, in one run and interleaved round by
round, by stock botocore's rest-xml parser (``botocore.parsers.create_parser``,
dateutil timestamps) and by the parser an epochgc client makes for each
response (its endpoint's parser factory, with
``storage.timestamps.parse_timestamp``). Only parsing is measured, as
``time.process_time`` per 1000 keys: no HTTP, no moto. Both parses of every
page must give equal results.

Run from the repository root: ``python -m bench.bench_list_parse [--pages N]
[--rounds N]``.

Target (issue 28, item 5): epochgc's CPU per 1000 keys <= 0.5x stock's.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any

import botocore.parsers

from bench._harness import Progress, figures, setup_logging, verdict
from epochgc.storage.client import make_s3_client
from epochgc.storage.embedded import EmbeddedS3
from epochgc.storage.keys import encode_l0_key
from tests.support.moto_seed import drop_bucket, seed_objects

TARGET_RATIO = 0.5
BUCKET = "bench-list-parse"
PAGE_KEYS = 1000


def l0_keys(n: int) -> list[str]:
    """``n`` L0 keys as epochgc's producers write them, over many shards."""
    return [
        encode_l0_key("epochgc", i % 1000, 1_000 + i // 1000, str(uuid.uuid4())) for i in range(n)
    ]


def record_pages(client: Any, pages: int) -> list[dict[str, Any]]:
    """List the bucket page by page over HTTP; return each page's response
    as botocore's parser receives it."""
    recorded: list[dict[str, Any]] = []

    def record(response_dict: dict[str, Any], **_kwargs: Any) -> None:
        recorded.append({**response_dict, "body": bytes(response_dict["body"])})

    client.meta.events.register("before-parse.s3.ListObjectsV2", record)
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix="epochgc/l0/", PaginationConfig={"PageSize": PAGE_KEYS}
    ):
        assert page["KeyCount"] == PAGE_KEYS, f"a page of {page['KeyCount']} keys"
    client.meta.events.unregister("before-parse.s3.ListObjectsV2", record)
    assert len(recorded) == pages, f"recorded {len(recorded)} pages, wanted {pages}"
    return recorded


def cpu_seconds(parser: Any, shape: Any, pages: list[dict[str, Any]]) -> float:
    """CPU time to parse every page once."""
    started = time.process_time()
    for response in pages:
        parser.parse(response, shape)
    return time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=5, help="recorded 1000-key pages")
    parser.add_argument("--rounds", type=int, default=40, help="parses of every page, each side")
    args = parser.parse_args()
    setup_logging()

    with EmbeddedS3(bucket=BUCKET) as s3:
        client = make_s3_client(s3.client_settings())
        seed_objects(BUCKET, l0_keys(args.pages * PAGE_KEYS))
        pages = record_pages(client, args.pages)
        drop_bucket(BUCKET)

    shape = client.meta.service_model.operation_model("ListObjectsV2").output_shape
    stock = botocore.parsers.create_parser("rest-xml")
    # The parser the epochgc client makes for every response it receives.
    ours = client._endpoint._response_parser_factory.create_parser("rest-xml")
    for response in pages:
        stock_page, our_page = stock.parse(response, shape), ours.parse(response, shape)
        assert our_page == stock_page, "the two parsers disagree on a page"
        assert len(our_page["Contents"]) == PAGE_KEYS

    stock_cpu = ours_cpu = 0.0
    progress = Progress("parse rounds", args.rounds)
    for done in range(1, args.rounds + 1):
        stock_cpu += cpu_seconds(stock, shape, pages)
        ours_cpu += cpu_seconds(ours, shape, pages)
        progress.update(done)

    thousands = args.rounds * args.pages * PAGE_KEYS / 1000
    stock_ms = stock_cpu / thousands * 1000
    ours_ms = ours_cpu / thousands * 1000
    ratio = ours_ms / stock_ms
    print(f"pages recorded from moto    : {args.pages} x {PAGE_KEYS} keys, {args.rounds} rounds")
    print(f"stock botocore parser       : {stock_ms:8.2f} ms CPU per 1000 keys")
    print(f"epochgc client's parser     : {ours_ms:8.2f} ms CPU per 1000 keys")
    print(f"ratio (epochgc / stock)     : {ratio:8.2f}")
    figures(
        f"{ours_ms:.1f} ms/1000 keys",
        f"{stock_ms:.1f} ms/1000 keys (stock botocore)",
        f"{ratio:.2f}",
    )
    return verdict(
        "list_parse",
        f"{ratio:.2f} of stock botocore's CPU per 1000 keys "
        f"({ours_ms:.1f} ms vs {stock_ms:.1f} ms)",
        f"<= {TARGET_RATIO}",
        ratio <= TARGET_RATIO,
    )


if __name__ == "__main__":
    sys.exit(main())
