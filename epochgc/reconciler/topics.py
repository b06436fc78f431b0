"""Which topics an epochgc reconciler leads: those epochgc reconciles.

A topic's ``create_topic`` config may name the system that reconciles it
(``"reconciler": "kafscale"``); another streaming system that shares the
controller log keeps its own partition logs and publishes its own
``M(p)``. An epochgc reconciler leading such a topic would find an empty,
idle partition and report an ``M(p)`` near the cluster epoch, and the
collector would delete objects the other system still needs. So a topic is
led only when the key is absent (every topic epochgc created before the
key existed) or says ``"epochgc"``; any other value, including one that is
not a string, means "not ours". Not leading is the safe side: a partition
nobody reports counts at its floor and holds ``M`` down.
"""

from __future__ import annotations

from collections.abc import Mapping

from epochgc.storage.keys import PartitionId
from epochgc.watermarks.controller import TopicInfo

RECONCILER_KEY = "reconciler"
EPOCHGC = "epochgc"


def reconciled_by_epochgc(topic: TopicInfo) -> bool:
    """True if epochgc's reconciler leads ``topic``."""
    value: object = topic.config.get(RECONCILER_KEY, EPOCHGC)
    return value == EPOCHGC


def epochgc_topics(topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
    """The live topics epochgc's reconciler leads, by name."""
    return {name: topic for name, topic in topics.items() if reconciled_by_epochgc(topic)}


def epochgc_partitions(topics: Mapping[str, TopicInfo]) -> frozenset[PartitionId]:
    """Every partition of the live topics epochgc's reconciler leads."""
    return frozenset(
        pid for topic in epochgc_topics(topics).values() for pid in topic.partition_ids()
    )
