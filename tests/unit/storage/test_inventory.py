"""Inventory manifests and data files in AWS's format (pure parts)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from datetime import UTC, datetime

import pytest

from epochgc.errors import InventoryError
from epochgc.simulate.memory_store import MemoryStore, VirtualClock
from epochgc.storage.client import ClientSettings, make_s3_client
from epochgc.storage.inventory import (
    CSV_SCHEMA,
    PARQUET_SCHEMA,
    InventoryFile,
    InventoryLocation,
    _csv_bytes,
    _parquet_bytes,
    download_data_file,
    find_newest_manifest,
    parse_file_schema,
    parse_manifest,
    store_for_bucket,
    verify_checksum,
)
from epochgc.storage.object_store import ObjectInfo
from epochgc.storage.s3 import S3ObjectStore
from tests.support.inventory_files import read_data_file

WHEN = datetime(2026, 11, 22, 3, 4, 5, 678000, tzinfo=UTC)
OBJECTS = [
    ObjectInfo("epochgc/l0/001/000000000000000005/a", 10, "e1", WHEN),
    ObjectInfo("odd key+with%/chars é", 3, "e2", WHEN),
]


def manifest(file_format: str = "CSV", schema: str = CSV_SCHEMA, **extra: object) -> bytes:
    doc = {
        "sourceBucket": "src",
        "destinationBucket": "arn:aws:s3:::dst",
        "version": "2016-11-30",
        "creationTimestamp": "1763780645000",
        "fileFormat": file_format,
        "fileSchema": schema,
        "files": [{"key": "inv/src/cfg/data/1.csv.gz", "size": 5, "MD5checksum": "ab"}],
        **extra,
    }
    return json.dumps(doc).encode()


def test_a_manifest_parses() -> None:
    m = parse_manifest(manifest(), "k")
    assert m.file_format == "CSV" and m.source_bucket == "src"
    assert m.columns == ("Bucket", "Key", "Size", "LastModifiedDate", "ETag")
    assert m.files == (InventoryFile("inv/src/cfg/data/1.csv.gz", 5, "ab"),)


def test_parquet_schemas_name_their_columns() -> None:
    assert parse_file_schema(PARQUET_SCHEMA, "Parquet") == (
        "bucket",
        "key",
        "size",
        "last_modified_date",
        "e_tag",
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (manifest(schema="Bucket, Size, LastModifiedDate"), "no 'Key' column"),
        (manifest("Parquet", "message s3.inventory { optional int64 size; }"), "no 'key'"),
        (manifest("ORC"), "not supported"),
        (manifest(files=[]), "non-empty"),
        (b"{", "inventory manifest k: not UTF-8 JSON"),
        (manifest(creationTimestamp="soon"), "not a number"),
        (manifest(creationTimestamp=67768036191676796000), "out of range"),
    ],
)
def test_bad_manifests_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(InventoryError, match=message):
        parse_manifest(data, "k")


def test_the_checksum_must_match() -> None:
    data = manifest()
    verify_checksum(data, hashlib.md5(data).hexdigest().upper().encode() + b"\n", "k")
    with pytest.raises(InventoryError, match="refusing"):
        verify_checksum(data + b" ", hashlib.md5(data).hexdigest().encode(), "k")


@pytest.mark.parametrize(
    ("file_format", "schema", "encode"),
    [("CSV", CSV_SCHEMA, _csv_bytes), ("Parquet", PARQUET_SCHEMA, _parquet_bytes)],
)
def test_data_files_read_back_normalised(file_format: str, schema: str, encode: object) -> None:
    body = encode("src", OBJECTS)  # type: ignore[operator]
    m = parse_manifest(manifest(file_format, schema), "k")
    entry = InventoryFile("f", len(body), hashlib.md5(body).hexdigest())
    table = read_data_file(body, m, entry)
    assert table.column("key").to_pylist() == [o.key for o in OBJECTS]
    assert table.column("size").to_pylist() == [10, 3]
    assert table.column("last_modified").to_pylist() == [WHEN, WHEN]


def test_csv_keys_are_url_encoded_on_disk() -> None:
    text = gzip.decompress(_csv_bytes("src", OBJECTS)).decode()
    assert '"odd+key%2Bwith%25/chars+%C3%A9"' in text


def test_a_data_file_with_the_wrong_md5_is_refused() -> None:
    body = _csv_bytes("src", OBJECTS)
    store = MemoryStore()
    store.put("f", body)
    sink = io.BytesIO()
    with pytest.raises(InventoryError, match="MD5"):
        download_data_file(store, InventoryFile("f", len(body), "0" * 32), sink, chunk_bytes=7)


def test_delete_markers_are_not_objects() -> None:
    schema = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate"
    rows = (
        '"src","a","v1","true","false","1","2026-11-22T03:00:00.000Z"\n'
        '"src","b","v2","true","true","","2026-11-22T03:00:00.000Z"\n'
    )
    body = gzip.compress(rows.encode())
    m = parse_manifest(manifest(schema=schema), "k")
    table = read_data_file(body, m, InventoryFile("f", len(body), hashlib.md5(body).hexdigest()))
    assert table.column("key").to_pylist() == ["a"]


def test_garbage_in_a_data_file_is_an_inventory_error() -> None:
    body = gzip.compress(b'"src","only two"\n')
    m = parse_manifest(manifest(), "k")
    with pytest.raises(InventoryError, match="unreadable"):
        read_data_file(body, m, InventoryFile("f", len(body), hashlib.md5(body).hexdigest()))


def test_another_bucket_is_reached_on_the_same_client_and_the_same_bucket_is_the_store() -> None:
    # Building a client sends nothing: no server is needed.
    client = make_s3_client(ClientSettings(endpoint_url="http://127.0.0.1:9"))
    collected = S3ObjectStore(client, "a")
    assert store_for_bucket(collected, "a") is collected
    other = store_for_bucket(collected, "inventories")
    assert isinstance(other, S3ObjectStore)
    assert (other.bucket, other.client) == ("inventories", collected.client)
    memory = MemoryStore()
    assert store_for_bucket(memory, "inventories") is memory, "a memory store is every bucket"


def test_no_manifest_says_what_writes_one() -> None:
    """Run verbatim, docs' inventory recipe failed after a minute with only
    'no inventory manifest under ...': the error now says what produces one."""
    location = InventoryLocation("inv-bucket", "inventory", "data-bucket", "epochgc-l0")
    store = MemoryStore(VirtualClock())
    with pytest.raises(InventoryError) as refused:
        find_newest_manifest(store, location)
    message = str(refused.value)
    assert "s3://inv-bucket/inventory/data-bucket/epochgc-l0/" in message
    assert "S3 Inventory" in message and "epochgc inventory build" in message
