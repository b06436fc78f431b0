"""S3 Inventory reports in AWS's published layout: finding the newest
manifest, checking it, reading its data files into Arrow, and writing one
(for S3-compatible stores without an inventory feature, tests and the demo).

Layout (destination bucket)::

    {prefix}/{source-bucket}/{config-id}/{YYYY-MM-DDTHH-MMZ}/manifest.json
    {prefix}/{source-bucket}/{config-id}/{YYYY-MM-DDTHH-MMZ}/manifest.checksum
    {prefix}/{source-bucket}/{config-id}/data/{name}.csv.gz | .parquet

``manifest.checksum`` is the MD5 of ``manifest.json``; each ``files`` entry
carries its data file's MD5. CSV data files are gzip'd, without a header,
with the columns ``fileSchema`` names and URL-encoded keys; Parquet files
have snake_case columns (``key``, ``size``, ``last_modified_date``).

Every data file is normalised to one Arrow schema, ``key`` (string),
``size`` (int64), ``last_modified`` (timestamp ms, UTC), so the filter that
follows has one shape to handle. The pure parts (manifest codec, schema
parsing, normalisation) take bytes or a file; the I/O parts take an
``ObjectStore``.

Memory: a data file is read in row batches (``iter_data_batches``: Parquet
row groups through ``iter_batches``, CSV through Arrow's streaming reader),
after ``download_data_file`` copied it to a local file in ranged GETs while
checking its MD5. So a reader holds one chunk or one batch at a time,
whatever the file's size; nothing is read from a file whose checksum does
not match.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from epochgc.errors import InventoryError, MalformedRecordError, NotFoundError
from epochgc.storage import documents
from epochgc.storage.object_store import ObjectInfo, ObjectStore
from epochgc.storage.s3 import S3ObjectStore

MANIFEST_VERSION = "2016-11-30"
FORMATS = ("CSV", "Parquet")
NORMALISED = pa.schema(
    [
        ("key", pa.string()),
        ("size", pa.int64()),
        ("last_modified", pa.timestamp("ms", tz="UTC")),
    ]
)
CSV_SCHEMA = "Bucket, Key, Size, LastModifiedDate, ETag"
PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); "
    "optional binary e_tag (STRING);}"
)
_TIMESTAMP_FOLDER = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}Z")
_PARQUET_FIELD = re.compile(r"(?:required|optional|repeated)\s+\w+\s+(\w+)")
# fileSchema column -> (normalised name) for each format.
_CSV_COLUMNS = {"Key": "key", "Size": "size", "LastModifiedDate": "last_modified"}
_PARQUET_COLUMNS = {"key": "key", "size": "size", "last_modified_date": "last_modified"}
_DELETE_MARKER = {"CSV": "IsDeleteMarker", "Parquet": "is_delete_marker"}


@dataclass(frozen=True)
class InventoryLocation:
    """Where an inventory configuration delivers its reports."""

    bucket: str
    prefix: str
    source_bucket: str
    config_id: str

    @property
    def base(self) -> str:
        """``{prefix}/{source-bucket}/{config-id}/`` (no leading slash when
        the prefix is empty)."""
        parts = [p for p in (self.prefix.strip("/"), self.source_bucket, self.config_id) if p]
        return "/".join(parts) + "/"


def store_for_bucket(store: ObjectStore, bucket: str) -> ObjectStore:
    """The store to reach ``bucket`` through: ``store`` itself when it is
    that bucket's (or not an S3 store: an in-memory store stands for every
    bucket), else an S3 store for ``bucket`` on ``store``'s client. An
    inventory's source and destination buckets need not be the collected
    one (``[inventory] bucket``, ``source_bucket``)."""
    if not isinstance(store, S3ObjectStore) or store.bucket == bucket:
        return store
    return S3ObjectStore(store.client, bucket)


@dataclass(frozen=True)
class InventoryFile:
    """One data file listed by a manifest."""

    key: str
    size: int
    md5: str


@dataclass(frozen=True)
class InventoryManifest:
    """A parsed ``manifest.json``."""

    key: str
    source_bucket: str
    destination_bucket: str
    file_format: str
    columns: tuple[str, ...]
    files: tuple[InventoryFile, ...]
    created_at: datetime


def parse_manifest(data: bytes, key: str) -> InventoryManifest:
    """Parse and check a manifest.

    Raises:
        InventoryError: not JSON, a field missing, an unsupported format, or
            a schema without a key column.
    """
    try:
        doc = documents.load_json_object(data, f"inventory manifest {key}")
        raw_files = documents.get_list(doc, "files", key, non_empty=True, objects=True)
    except MalformedRecordError as err:
        raise InventoryError(str(err)) from err
    file_format = _field(doc, "fileFormat", key)
    if file_format not in FORMATS:
        raise InventoryError(
            f"{key}: fileFormat {file_format!r} is not supported (use {' or '.join(FORMATS)})"
        )
    columns = parse_file_schema(_field(doc, "fileSchema", key), file_format)
    wanted = "Key" if file_format == "CSV" else "key"
    if wanted not in columns:
        raise InventoryError(
            f"{key}: fileSchema has no {wanted!r} column ({', '.join(columns)}); "
            "an inventory without object keys cannot drive deletion"
        )
    files = []
    for entry in raw_files:
        size = entry.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InventoryError(f"{key}: a 'files' entry has no valid size")
        files.append(
            InventoryFile(_field(entry, "key", key), size, _field(entry, "MD5checksum", key))
        )
    created_ms = doc.get("creationTimestamp", "0")
    try:
        created = datetime.fromtimestamp(int(created_ms) / 1000, UTC)
    except (TypeError, ValueError) as err:
        raise InventoryError(f"{key}: creationTimestamp {created_ms!r} is not a number") from err
    except (OverflowError, OSError) as err:  # beyond what the platform's time can hold
        raise InventoryError(f"{key}: creationTimestamp {created_ms!r} is out of range") from err
    return InventoryManifest(
        key=key,
        source_bucket=_field(doc, "sourceBucket", key),
        destination_bucket=_field(doc, "destinationBucket", key),
        file_format=file_format,
        columns=columns,
        files=tuple(files),
        created_at=created,
    )


def parse_file_schema(schema: str, file_format: str) -> tuple[str, ...]:
    """Column names of a ``fileSchema``: a comma list for CSV, a Parquet
    message type for Parquet."""
    if file_format == "CSV":
        return tuple(c.strip() for c in schema.split(",") if c.strip())
    return tuple(_PARQUET_FIELD.findall(schema))


def verify_checksum(manifest: bytes, checksum: bytes, key: str) -> None:
    """``manifest.checksum`` must be the MD5 of ``manifest.json``.

    Raises:
        InventoryError: it is not.
    """
    expected = checksum.decode("ascii", errors="replace").strip().lower()
    actual = hashlib.md5(manifest, usedforsecurity=False).hexdigest()
    if expected != actual:
        raise InventoryError(
            f"{key}: manifest.checksum says {expected!r} but manifest.json hashes to "
            f"{actual!r}; the report is incomplete or altered, refusing it"
        )


def find_newest_manifest(store: ObjectStore, location: InventoryLocation) -> str:
    """The key of the newest ``manifest.json`` under ``location``.

    Timestamp folders sort before ``data/`` and ``hive/`` (digits before
    letters), so the listing stops as soon as it leaves them.

    Raises:
        InventoryError: no manifest there.
    """
    base = location.base
    newest: str | None = None
    for info in store.list_objects(base):
        rest = info.key[len(base) :]
        if rest[:1] > "9":
            break
        folder, _, name = rest.partition("/")
        if name == "manifest.json" and _TIMESTAMP_FOLDER.fullmatch(folder):
            newest = info.key  # keys come in order: the last one is the newest
    if newest is None:
        raise InventoryError(
            f"no inventory manifest under s3://{location.bucket}/{base} "
            "(expected {timestamp}/manifest.json): S3 Inventory writes one a day or a week "
            "once the bucket has an inventory configuration delivering there, and "
            "`epochgc inventory build` writes one now from a live listing; "
            "or use --mode listing"
        )
    return newest


def load_manifest(store: ObjectStore, key: str) -> InventoryManifest:
    """Read, checksum and parse the manifest at ``key``.

    Raises:
        InventoryError: missing checksum, checksum mismatch, bad manifest.
    """
    data = store.get(key).body
    checksum_key = key[: -len("manifest.json")] + "manifest.checksum"
    try:
        checksum = store.get(checksum_key).body
    except NotFoundError as err:
        raise InventoryError(
            f"{checksum_key} is missing; refusing an unverifiable manifest"
        ) from err
    verify_checksum(data, checksum, key)
    return parse_manifest(data, key)


BATCH_ROWS = 64 * 1024
"""Rows per batch a data file is read in (a few MB of Arrow memory)."""
DOWNLOAD_CHUNK_BYTES = 8 * 2**20
"""Bytes per ranged GET when copying a data file to local disk."""


def download_data_file(
    store: ObjectStore,
    entry: InventoryFile,
    sink: IO[bytes],
    chunk_bytes: int = DOWNLOAD_CHUNK_BYTES,
) -> None:
    """Copy ``entry`` to ``sink`` in ranged GETs of ``chunk_bytes``,
    checking its MD5 against the manifest's on the way.

    Raises:
        InventoryError: MD5 mismatch (the file is not what the manifest
            lists: nothing of it may be used).
        StorageError: a GET failed.
    """
    digest = hashlib.md5(usedforsecurity=False)
    offset = 0
    while offset < entry.size:
        last = min(offset + chunk_bytes, entry.size) - 1
        chunk = store.get(entry.key, byte_range=(offset, last)).body
        if not chunk:
            break
        digest.update(chunk)
        sink.write(chunk)
        offset += len(chunk)
    actual = digest.hexdigest()
    if actual != entry.md5.lower():
        raise InventoryError(f"{entry.key}: MD5 {actual} does not match the manifest's")
    sink.flush()


def iter_data_batches(
    source: str | pa.NativeFile,
    manifest: InventoryManifest,
    entry: InventoryFile,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.Table]:
    """A data file (a local path or an Arrow file), already checked against
    its MD5, as normalised tables of at most about ``batch_rows`` rows each.

    Raises:
        InventoryError: unreadable contents (raised when the bad part is
            reached: earlier batches have been yielded).
    """
    try:
        if manifest.file_format == "CSV":
            yield from _csv_batches(source, manifest.columns)
        else:
            yield from _parquet_batches(source, manifest.columns, batch_rows)
    except (pa.ArrowInvalid, OSError) as err:
        raise InventoryError(f"{entry.key}: unreadable {manifest.file_format}: {err}") from err


_CSV_TYPES: dict[str, pa.DataType] = {
    "Key": pa.string(),
    "Size": pa.int64(),
    "LastModifiedDate": pa.timestamp("ms", tz="UTC"),
    "IsDeleteMarker": pa.bool_(),
}


def _csv_batches(source: str | pa.NativeFile, columns: tuple[str, ...]) -> Iterator[pa.Table]:
    wanted = [c for c in columns if c in _CSV_COLUMNS or c == _DELETE_MARKER["CSV"]]
    raw = pa.OSFile(source) if isinstance(source, str) else source
    reader = pcsv.open_csv(
        pa.CompressedInputStream(raw, "gzip"),
        read_options=pcsv.ReadOptions(column_names=list(columns), block_size=4 * 2**20),
        convert_options=pcsv.ConvertOptions(
            column_types={c: _CSV_TYPES[c] for c in wanted}, include_columns=wanted
        ),
    )
    for batch in reader:
        table = _drop_delete_markers(pa.Table.from_batches([batch]), _DELETE_MARKER["CSV"])
        keys = _url_decoded(table.column("Key"))
        table = table.set_column(table.schema.get_field_index("Key"), "Key", keys)
        yield _normalise(table, "CSV")


def _parquet_batches(
    source: str | pa.NativeFile, columns: tuple[str, ...], batch_rows: int
) -> Iterator[pa.Table]:
    wanted = [c for c in columns if c in _PARQUET_COLUMNS or c == _DELETE_MARKER["Parquet"]]
    parquet = pq.ParquetFile(source, buffer_size=2**20, pre_buffer=False)
    present = [c for c in wanted if c in parquet.schema_arrow.names]
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=present):
        table = pa.Table.from_batches([batch])
        yield _normalise(_drop_delete_markers(table, _DELETE_MARKER["Parquet"]), "Parquet")


def _url_decoded(keys: pa.ChunkedArray) -> pa.ChunkedArray:
    """URL-decode only the keys that need it (L0 keys never do, so the bulk
    of an inventory never touches Python)."""
    encoded = pc.match_substring_regex(keys, "[%+]")
    if not pc.any(encoded).as_py():
        return keys
    values = keys.to_pylist()
    flags = encoded.to_pylist()
    return pa.chunked_array(
        [
            [
                urllib.parse.unquote_plus(v) if flag and v is not None else v
                for v, flag in zip(values, flags, strict=True)
            ]
        ],
        pa.string(),
    )


def _drop_delete_markers(table: pa.Table, column: str) -> pa.Table:
    if column not in table.column_names:
        return table
    markers = pc.fill_null(table.column(column), False)
    return table.filter(pc.invert(markers)).drop_columns([column])


def _normalise(table: pa.Table, file_format: str) -> pa.Table:
    names = _CSV_COLUMNS if file_format == "CSV" else _PARQUET_COLUMNS
    rows = table.num_rows
    out: dict[str, Any] = {}
    for source, target in names.items():
        field = NORMALISED.field(target)
        if source in table.column_names:
            out[target] = pc.cast(table.column(source), field.type)
        else:
            out[target] = pa.nulls(rows, field.type)
    return pa.table(out, schema=NORMALISED)


# --- writing -----------------------------------------------------------------


def build_inventory(
    store: ObjectStore,
    destination: ObjectStore,
    location: InventoryLocation,
    objects: Iterable[ObjectInfo],
    *,
    file_format: str,
    rows_per_file: int = 1_000_000,
    now: datetime | None = None,
) -> str:
    """Write an inventory of ``objects`` in AWS's layout to ``destination``
    and return the manifest key. ``store`` is the source (for its bucket
    name in the rows).

    Raises:
        ValueError: an unknown format or rows_per_file < 1.
    """
    if file_format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {file_format!r}")
    if rows_per_file < 1:
        raise ValueError("rows_per_file must be >= 1")
    now = now or datetime.now(UTC)
    files = []
    for chunk in _chunks(objects, rows_per_file):
        body, suffix = (
            (_csv_bytes(location.source_bucket, chunk), "csv.gz")
            if file_format == "CSV"
            else (_parquet_bytes(location.source_bucket, chunk), "parquet")
        )
        key = f"{location.base}data/{uuid.uuid4()}.{suffix}"
        destination.put(key, body)
        files.append(
            {
                "key": key,
                "size": len(body),
                "MD5checksum": hashlib.md5(body, usedforsecurity=False).hexdigest(),
            }
        )
    manifest = {
        "sourceBucket": location.source_bucket,
        "destinationBucket": f"arn:aws:s3:::{location.bucket}",
        "version": MANIFEST_VERSION,
        "creationTimestamp": str(int(now.timestamp() * 1000)),
        "fileFormat": file_format,
        "fileSchema": CSV_SCHEMA if file_format == "CSV" else PARQUET_SCHEMA,
        "files": files,
    }
    data = json.dumps(manifest, indent=2).encode("utf-8")
    folder = f"{location.base}{now.astimezone(UTC).strftime('%Y-%m-%dT%H-%MZ')}/"
    destination.put(f"{folder}manifest.json", data)
    destination.put(
        f"{folder}manifest.checksum",
        hashlib.md5(data, usedforsecurity=False).hexdigest().encode("ascii"),
    )
    return f"{folder}manifest.json"


def _chunks(objects: Iterable[ObjectInfo], size: int) -> Iterator[list[ObjectInfo]]:
    """Lists of at most ``size``; one empty list when there is nothing (AWS
    delivers an empty data file for an empty bucket)."""
    chunk: list[ObjectInfo] = []
    yielded = False
    for info in objects:
        chunk.append(info)
        if len(chunk) >= size:
            yield chunk
            yielded = True
            chunk = []
    if chunk or not yielded:
        yield chunk


def _csv_bytes(bucket: str, objects: list[ObjectInfo]) -> bytes:
    lines = []
    for o in objects:
        modified = o.last_modified.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{o.last_modified.microsecond // 1000:03d}Z"
        )
        key = urllib.parse.quote_plus(o.key, safe="/")
        lines.append(f'"{bucket}","{key}","{o.size}","{modified}","{o.etag}"\n')
    return gzip.compress("".join(lines).encode("utf-8"))


def _parquet_bytes(bucket: str, objects: list[ObjectInfo]) -> bytes:
    table = pa.table(
        {
            "bucket": pa.array([bucket] * len(objects), pa.string()),
            "key": pa.array([o.key for o in objects], pa.string()),
            "size": pa.array([o.size for o in objects], pa.int64()),
            "last_modified_date": pa.array(
                [o.last_modified for o in objects], pa.timestamp("ms", tz="UTC")
            ),
            "e_tag": pa.array([o.etag for o in objects], pa.string()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _field(doc: dict[str, Any], name: str, where: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise InventoryError(f"{where}: field {name!r} is missing or not a string")
    return value
