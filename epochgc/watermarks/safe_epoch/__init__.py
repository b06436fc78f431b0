"""safe_epoch."""
