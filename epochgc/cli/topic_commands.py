"""``epochgc topic create|list|delete``: topics in the controller log."""

from __future__ import annotations

import argparse

from epochgc.cli.arguments import add_command, add_noun
from epochgc.cli.output import EXIT_FAILED, EXIT_OK, SubParsers, emit
from epochgc.config import Config
from epochgc.watermarks.controller import Controller
from epochgc.wiring.store import open_store
from epochgc.wording import counted


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``topic`` and its actions."""
    topic_sub = add_noun(sub, "topic", "create, list and delete topics (controller log)")
    create = add_command(topic_sub, "create", _cmd_topic_create, reporting, "create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    add_command(topic_sub, "list", _cmd_topic_list, reporting, "live topics")
    delete = add_command(topic_sub, "delete", _cmd_topic_delete, reporting, "delete a topic")
    delete.add_argument("name")
    delete.add_argument(
        "--revision",
        type=int,
        default=None,
        help="delete only this incarnation (as `topic list` shows it); refused if another is live",
    )


def _cmd_topic_create(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        info = Controller(handle.store, config.layout.root).create_topic(args.name, args.partitions)
    emit(
        {"topic": info.name, "partitions": info.partitions, "revision": info.revision},
        args,
        f"created topic {info.name!r}: {counted(info.partitions, 'partition')}, "
        f"revision {info.revision}",
    )
    return EXIT_OK


def _cmd_topic_delete(config: Config, args: argparse.Namespace) -> int:
    with open_store(config) as handle:
        outcome = Controller(handle.store, config.layout.root).delete_topic(
            args.name, revision=args.revision
        )
    emit(
        {
            "topic": outcome.topic,
            "revision": outcome.revision,
            "deleted_at": outcome.deleted_at,
            "entry_offset": outcome.entry_offset,
            "deleted_by_this_command": outcome.by_this_writer,
        },
        args,
        outcome.describe(),
    )
    return EXIT_OK if outcome.by_this_writer else EXIT_FAILED


def _cmd_topic_list(config: Config, args: argparse.Namespace) -> int:
    with open_store(config, writes=False) as handle:
        view = Controller(handle.store, config.layout.root).snapshot()
    rows = [
        {"topic": t.name, "partitions": t.partitions, "revision": t.revision}
        for t in sorted(view.topics.values(), key=lambda t: t.name)
    ]
    lines = [f"{'topic':30} {'partitions':>10} {'revision':>10}"]
    lines += [f"{r['topic']:30} {r['partitions']:>10} {r['revision']:>10}" for r in rows]
    lines.append(f"controller offset (cluster epoch): {view.offset}")
    emit({"controller_offset": view.offset, "topics": rows}, args, "\n".join(lines))
    return EXIT_OK
