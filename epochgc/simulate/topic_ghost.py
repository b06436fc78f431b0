"""What the simulation knows about topic incarnations that no process
does: every ``create_topic`` and ``delete_topic`` entry that reached the
controller log, folded by the rule the contract states (not by the
product's code), so that it can judge the product's view and the
janitor's deletions. Its invariant:

* ``incarnation ended without a delete naming it``: an incarnation
  ``topic@revision`` stops being live only through a ``delete_topic``
  entry that names that revision. Checked two ways: the product's own
  controller view, read after every topic entry that lands, holds every
  incarnation the rule holds live (a delete written before a recreate
  and landing after it must end nothing); and no deletion that reaches
  the bucket removes a key of an incarnation the rule holds live (the
  janitor's partition logs, snapshots, L1 objects and ownership records).
  A ``delete_topic`` entry naming no revision that ends an incarnation
  breaks it too: the contract lets such an entry (written before deletes
  named their revision) end whichever incarnation is live, but no writer
  in the simulation is that old, so one that lands is today's code
  writing what it must not.

The rule, as the contract states it: entries count in slot order; a
``create_topic`` of a name that is not live makes the incarnation
``name@offset`` live; a ``delete_topic`` ends the live incarnation of its
name only if it names that revision (an entry without a revision, from
before deletes named one, ends whichever is live).
"""

from __future__ import annotations

from collections.abc import Callable

from epochgc.storage.keys import (
    PartitionId,
    parse_l1_key,
    parse_owner_key,
    parse_partition_meta_key,
)
from epochgc.watermarks.controller import ControllerView
from epochgc.watermarks.controller_codec import ControllerEntry, CreateTopic, DeleteTopic

Incarnation = tuple[str, int]


class TopicGhost:
    """The live incarnations by the contract's rule (module docstring)."""

    def __init__(self, root: str, violation: Callable[[str, str], BaseException]) -> None:
        self._root = root
        self._violation = violation
        self._folded_to = -1
        """The offset of the last topic entry folded."""
        self.live: dict[str, Incarnation] = {}
        """Topic name -> its live incarnation."""
        self.partitions: dict[Incarnation, int] = {}
        """Every incarnation ever live -> its partition count."""
        self.ended: dict[Incarnation, int] = {}
        """Incarnation -> the offset of the delete that named it."""

    def entry_landed(self, offset: int, entry: ControllerEntry) -> bool:
        """A controller entry reached the bucket at ``offset``; whether it
        was a topic entry (the view is then worth checking).

        Entries land in slot order: a writer takes the slot after the tail
        it listed, and a conditional write never fills a slot twice. The
        one exception, a late write into a slot compaction truncated, is
        folded by no reader, so the caller drops it before it gets here.

        Raises:
            ValueError: a topic entry at or below one already folded.
        """
        if not isinstance(entry, CreateTopic | DeleteTopic):
            return False
        if offset <= self._folded_to:
            raise ValueError(
                f"topic entry at offset {offset} landed after one at {self._folded_to}: "
                "slots fill in order (a late write into a truncated slot is void)"
            )
        self._folded_to = offset
        if isinstance(entry, CreateTopic):
            if entry.topic not in self.live:
                incarnation = (entry.topic, offset)
                self.live[entry.topic] = incarnation
                self.partitions[incarnation] = entry.partitions
            return True
        live = self.live.get(entry.topic)
        if live is not None and entry.revision in (None, live[1]):
            del self.live[entry.topic]
            self.ended[live] = offset
            if entry.revision is None:
                raise self._violation(
                    "incarnation ended without a delete naming it",
                    f"a delete_topic entry naming no revision landed at offset {offset} and "
                    f"ended {live[0]}@{live[1]}",
                )
        return True

    def is_ended(self, pid: PartitionId) -> bool:
        """``pid``'s incarnation was ended by a delete that named it."""
        return (pid.topic, pid.revision) in self.ended

    def live_partitions(self) -> list[PartitionId]:
        """Every partition of every live incarnation, in order."""
        return [
            PartitionId(topic, revision, p)
            for topic, revision in sorted(self.live.values())
            for p in range(self.partitions[(topic, revision)])
        ]

    def check_view(self, view: ControllerView) -> None:
        """The product's view (``Controller.snapshot`` over exactly the
        entries seen so far) holds exactly the incarnations the rule holds
        live."""
        theirs = {name: (name, info.revision) for name, info in view.topics.items()}
        for name, incarnation in sorted(self.live.items()):
            if theirs.get(name) != incarnation:
                raise self._violation(
                    "incarnation ended without a delete naming it",
                    f"the product's controller view at offset {view.offset} does not hold "
                    f"{name}@{incarnation[1]} live (it holds "
                    f"{_named(theirs.get(name))}); no delete named that revision",
                )
        for name, incarnation in sorted(theirs.items()):
            if self.live.get(name) != incarnation:
                raise self._violation(
                    "incarnation ended without a delete naming it",
                    f"the product's controller view at offset {view.offset} holds "
                    f"{name}@{incarnation[1]} live; the entries that landed make "
                    f"{_named(self.live.get(name))} live",
                )

    def deleted(self, keys: tuple[str, ...], by: str) -> None:
        """A deletion reached the bucket: none of its keys may belong to a
        live incarnation."""
        for key in keys:
            incarnation = self._incarnation_of(key)
            if incarnation is not None and self.live.get(incarnation[0]) == incarnation:
                raise self._violation(
                    "incarnation ended without a delete naming it",
                    f"{by} deleted {key} of {incarnation[0]}@{incarnation[1]}, which is live "
                    "(no delete named it)",
                )

    def _incarnation_of(self, key: str) -> Incarnation | None:
        pid = parse_partition_meta_key(key, self._root) or parse_owner_key(key, self._root)
        if pid is not None:
            return pid.topic, pid.revision
        l1 = parse_l1_key(key, self._root)
        return None if l1 is None else (l1.topic, l1.revision)


def _named(incarnation: Incarnation | None) -> str:
    return "none" if incarnation is None else f"{incarnation[0]}@{incarnation[1]}"
