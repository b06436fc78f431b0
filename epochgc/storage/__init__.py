"""Object-store access: the ``ObjectStore`` interface and its boto3
implementation, key codecs, the JSON document helpers and the one stored
time format, conditional (CAS) writes, the conditional-append log, the L0
object format, request accounting, the embedded S3 server and the probes.

Imports nothing from ``leases``, ``watermarks``, ``gc``, ``reconciler`` or
``ingest``.
"""
