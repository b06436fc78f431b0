"""Which L0 shards a round lists. Start at ``plan``: it makes the decision
and names the rest.

- ``plan``: the decision a round asks for, before and after it sweeps. Pure.
- ``schedule``: the cost-aware schedule ``plan`` asks (which shards are
  worth listing now, and what a round learnt). Pure.
- ``knowledge``: what earlier listings left known per shard, its document
  and the stored-time rule for reading it. Pure.
- ``shards``: the requests: finding the shards present (a delimiter
  listing), reading and writing the knowledge document.
"""
