"""epochgc: garbage collection of temporary (L0) objects in object storage by
epoch watermarks instead of reference counts. See docs/architecture.md for the map."""

__version__ = "0.1.0"
"""The one place the version is written (pyproject.toml reads it)."""
