"""One partition's replicated state machine: its state and commands (pure),
the epoch window and fence, the JSON codec of its log, the replica that
replays the log, the leader that appends to it, and the operator's skip.
"""
