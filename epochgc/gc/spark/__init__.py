"""The Spark deletion job (``epochgc gc spark``): the driver, the executor
tasks, the session and its configuration, the packaged environment
shipped to executors, credentials handed over, and the inventory filter.

Executors import only ``tasks``, ``inventory_filter`` and what they import.
"""
