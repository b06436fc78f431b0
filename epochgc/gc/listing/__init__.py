"""listing."""
