"""Object-store access: the ``ObjectStore`` interface and its boto3
implementation, key codecs, the conditional-append log, pipelined appends,
request accounting, the embedded S3 server and the store probes.

Imports nothing from ``watermarks``, ``gc``, ``reconciler`` or ``ingest``.
"""
