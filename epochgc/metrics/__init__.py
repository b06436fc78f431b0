"""Metrics: every epochgc metric is defined in ``instruments``, registered
on a registry the composition root passes in (never the global one), and
served by ``server``. The only package that imports ``prometheus_client``."""
