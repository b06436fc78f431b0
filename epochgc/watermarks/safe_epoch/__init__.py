"""The safe epoch ``M``: node reports of ``M(p)``, their lifecycle, the
pure aggregation over live partitions, and the computation the collector
calls before every round.
"""
