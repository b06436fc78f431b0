"""The GC daemon (``epochgc daemon``): the scheduler that runs collection
and its housekeeping jobs under the ``gc`` lease, its ``/healthz`` view,
its presence, and the leader's tidying of reports and runs.

* ``scheduler``: ``GcDaemon``, the APScheduler, the ``gc`` lease and which
  job fires when; ``parts`` builds its collaborators and jobs.
* The jobs, each with its subsystem: ``rounds`` (a collector round and the
  status document), ``control_poll``, ``report_ages``, ``presence_jobs``
  (this daemon's presence document, and tidying those of gone daemons),
  ``maintenance`` (the leader's tidying and controller compaction).
* ``contacts`` records each kind of store contact; ``health`` judges them
  and builds the ``/healthz`` answer (pure).
"""
