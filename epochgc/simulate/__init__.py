"""``epochgc simulate``: the product's own protocol code, whole clusters of
it, in one thread on virtual time, with the faults real stores and
processes produce; one seed replays a run exactly (docs/development.md,
"The deterministic simulation")."""
