"""The GC daemon (``epochgc daemon``): the scheduler that runs collection
and its housekeeping jobs under the ``gc`` lease, its ``/healthz`` view,
its presence document, and the leader's tidying of reports and runs.
"""
