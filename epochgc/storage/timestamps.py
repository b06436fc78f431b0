"""A faster reader of the timestamps in S3 responses, with botocore's own
reader behind it for everything it does not recognise. Pure: no I/O.

Why: botocore reads every timestamp with ``dateutil``'s general-purpose
parser, about 25 microseconds each. A LIST page carries one
``LastModified`` per key, so on a 1000-key page that parser was about half
the client CPU the page cost (issue 28). S3 and the S3-compatible stores
write those times in one shape, ISO 8601 in UTC
(``2026-11-25T10:00:00.000Z``), which ``datetime.fromisoformat`` reads in a
fraction of a microsecond.

The rule: read the fast way only a string that *exactly* matches the
UTC ISO forms (``YYYY-MM-DDTHH:MM:SS``, an optional fraction of 1 to 6
digits, then ``Z`` or ``+00:00``), and hand everything else (HTTP dates in
headers, epoch numbers, other offsets, more than 6 fractional digits,
garbage, and any matching string ``fromisoformat`` refuses, such as hour
24) to botocore's ``parse_timestamp``. So a value is either the same
instant botocore would give or botocore's own answer, and an invalid one
raises botocore's own error: never a guess.

One difference, on purpose: the fast path's ``tzinfo`` is
``datetime.UTC``. botocore's is a ``dateutil`` zone, and which one depends
on the host: ``tzlocal()`` where the local zone is named UTC, ``tzutc()``
elsewhere. Aware datetimes compare, order and hash by instant, so nothing
that compares or subtracts times can tell; nothing in epochgc looks at the
zone object itself.

Example::

    parse_timestamp("2026-11-25T10:00:00.123Z")
    # datetime(2026, 11, 25, 10, 0, 0, 123000, tzinfo=UTC)
"""

from __future__ import annotations

import re
from datetime import datetime

from botocore.utils import parse_timestamp as botocore_parse_timestamp

_UTC_ISO = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|\+00:00)"
)
"""The only strings read without botocore: dateutil and ``fromisoformat``
agree on every one of them that either accepts (see the property tests).
Looser shapes ``fromisoformat`` also takes (``10:00:00.Z``, week dates,
a space for ``T``) are not all read the same way by dateutil."""


def parse_timestamp(value: str) -> datetime:
    """A timestamp from an S3 response, as the instant botocore's default
    reader would give, aware and in UTC.

    Installed as the timestamp parser of every client ``make_s3_client``
    builds (``storage.client``); botocore calls it with the text of an XML
    element or a header.

    Raises:
        ValueError: ``value`` is no timestamp (botocore's own error, raised
            by botocore's own reader).
    """
    # botocore's JSON protocols hand over numbers; S3's XML always text.
    if isinstance(value, str) and _UTC_ISO.fullmatch(value):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass  # e.g. month 13 or hour 24: botocore raises its own error
    return botocore_parse_timestamp(value)
