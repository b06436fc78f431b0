"""``epochgc topic create|list|delete``: topics in the controller log."""

from __future__ import annotations

import argparse

from epochgc.cli.output import EXIT_FAILED, EXIT_OK, SubParsers, emit
from epochgc.config import Config
from epochgc.watermarks.controller import Controller
from epochgc.wiring.store import open_store
from epochgc.wording import counted


def register(sub: SubParsers, reporting: argparse.ArgumentParser) -> None:
    """``topic`` and its actions."""
    topic = sub.add_parser("topic", help="create, list and delete topics (controller log)")
    topic_sub = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")
    create = topic_sub.add_parser("create", parents=[reporting], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    create.set_defaults(handler=_cmd_topic_create)
    listing = topic_sub.add_parser("list", parents=[reporting], help="live topics")
    listing.set_defaults(handler=_cmd_topic_list)
    delete = topic_sub.add_parser("delete", parents=[reporting], help="delete a topic")
    delete.add_argument("name")
    delete.add_argument(
        "--revision",
        type=int,
        default=None,
        help="delete only this incarnation (as `topic list` shows it); refused if another is live",
    )
    delete.set_defaults(handler=_cmd_topic_delete)


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
