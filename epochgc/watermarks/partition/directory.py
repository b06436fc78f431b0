"""Where each partition's leader is: the producers' routing table.

The reference implementation runs producers and leaders in one process, so
the directory is an in-process map that nodes update as they gain and lose
leases; producers wait on it when a partition has no leader (a failover in
progress) instead of failing. A networked deployment would put an RPC
client behind the same two methods.
"""

from __future__ import annotations

import asyncio

from epochgc.errors import NotLeaderError
from epochgc.watermarks.partition.leader import PartitionLeaderService

TopicPartition = tuple[str, int]


class LeaderDirectory:
    """Partition -> current ``PartitionLeaderService``."""

    def __init__(self) -> None:
        self._leaders: dict[TopicPartition, PartitionLeaderService] = {}
        self._changed = asyncio.Condition()

    async def register(self, service: PartitionLeaderService) -> None:
        """Announce ``service`` as the leader of its partition."""
        async with self._changed:
            self._leaders[(service.topic, service.partition)] = service
            self._changed.notify_all()

    async def unregister(self, service: PartitionLeaderService) -> None:
        """Withdraw ``service`` (if it is still the registered leader)."""
        async with self._changed:
            key = (service.topic, service.partition)
            if self._leaders.get(key) is service:
                del self._leaders[key]
            self._changed.notify_all()

    def current(self, topic: str, partition: int) -> PartitionLeaderService | None:
        """The registered leader, if any and still open."""
        service = self._leaders.get((topic, partition))
        return service if service is not None and service.is_open else None

    async def wait_for_leader(
        self, topic: str, partition: int, *, timeout_seconds: float = 60.0
    ) -> PartitionLeaderService:
        """The open leader of a partition, waiting for a failover to finish.

        Raises:
            NotLeaderError: no leader appeared within the timeout.
        """

        async def wait() -> PartitionLeaderService:
            async with self._changed:
                while True:
                    service = self.current(topic, partition)
                    if service is not None:
                        return service
                    await self._changed.wait()

        try:
            return await asyncio.wait_for(wait(), timeout_seconds)
        except TimeoutError as err:
            raise NotLeaderError(
                f"{topic}/{partition}: no leader within {timeout_seconds:.0f}s"
            ) from err
