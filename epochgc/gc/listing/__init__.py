"""Which L0 shards a round lists: discovering shards in the bucket, what
is known about each from earlier listings, and the cost-aware schedule
that decides which are worth listing now.
"""
