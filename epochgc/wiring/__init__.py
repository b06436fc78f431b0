"""The composition root: where the configuration becomes the settings of
every component (``settings``), the store is opened (``store``), and the
long-running processes are assembled from several subsystems
(``reconciler_process``, ``daemon_process``).

The only package below the command line that reads ``config``.
"""
