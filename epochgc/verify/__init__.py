"""``epochgc verify``: randomized end-to-end safety runs under injected faults."""
