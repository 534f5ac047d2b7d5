"""The ``airmirror`` verbs and flags.

Verbs that other packages provide (the developer tools' ``local-kafka``) are added through the
``airmirror.cli`` entry-point group: each entry point names a ``register(verbs)`` function that adds its
verb to the sub-parsers, so the product never imports them.  A tool's ``register`` is only called when the
command line runs its verb; otherwise the verb is listed by name.

Building the parser imports nothing but the standard library: a verb's code (:mod:`airmirror.cli.commands`, and
Spark or the metadata DB when the verb needs them) is imported when the verb runs, so ``--help`` and a bad flag
answer at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

PLUGIN_GROUP = "airmirror.cli"


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a whole number") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"'{value}' must be positive")
    return number


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """The verb ``name`` of :mod:`airmirror.cli.commands`, imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        from airmirror.cli import commands

        verb: Callable[[argparse.Namespace], int] = getattr(commands, name)
        return verb(args)

    return run


def flow_verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    run: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """A verb taking ``CONFIG --flow A->B [--json]``."""
    verb = verbs.add_parser(name, help=help_text)
    verb.add_argument("config")
    verb.add_argument("--flow", required=True, help="source->target")
    verb.add_argument("--json", action="store_true")
    verb.set_defaults(run=run)
    return verb


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of ``airmirror ARGV``: every product verb, and each developer tool's verb, whose flags (and
    imports) are only built when ``argv`` runs it."""
    parser = argparse.ArgumentParser(prog="airmirror", description="MirrorMaker 2 compatible replication on Spark")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    verbs = parser.add_subparsers(dest="verb", required=True)

    validate = verbs.add_parser("validate", help="check an MM2 properties file")
    validate.add_argument("config")
    validate.add_argument(
        "--explain", action="store_true", help="print each flow's effective settings and where each came from"
    )
    validate.add_argument("--flow", help="source->target: explain this flow only (default: every enabled flow)")
    validate.add_argument("--json", action="store_true", help="with --explain: JSON")
    validate.set_defaults(run=command("validate"))

    replicate = flow_verb(verbs, "replicate", "copy one bounded micro-batch of a flow", command("replicate"))
    replicate.add_argument("--max-records", type=positive_int, help="cap per partition")
    replicate.add_argument("--until", help="ISO-8601 time or 'now': copy records before it")
    replicate.add_argument("--topics", help="regex narrowing the flow's topics for this batch")
    replicate.add_argument(
        "--start-from", default="stored", help="stored (default), earliest, latest or an ISO-8601 time"
    )
    replicate.add_argument("--reset-cursor", action="store_true", help="allow --start-from to move existing cursors")
    once_or_continuous = replicate.add_mutually_exclusive_group()
    once_or_continuous.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    once_or_continuous.add_argument(
        "--continuous",
        action="store_true",
        help="copy batches back to back on one Spark session until --for has passed or SIGTERM/SIGINT",
    )
    replicate.add_argument(
        "--for", dest="for_", metavar="DURATION", help="with --continuous: stop after 30s, 5m, 2h, 1d"
    )

    schemas = flow_verb(
        verbs,
        "schemas",
        "copy the subjects of a flow's topics to the target's schema registry (airmirror.schema.ids)",
        command("schemas"),
    )
    schemas.add_argument("--dry-run", action="store_true", help="print what would be registered, change nothing")
    status = verbs.add_parser("status", help="every enabled flow's health, or one flow's partitions (--flow)")
    status.add_argument("config")
    status.add_argument(
        "--flow",
        help="source->target: this flow's cursor, lag and gaps per partition (default: every flow, one line each)",
    )
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=command("status"))
    flow_verb(verbs, "heartbeat", "write one MM2 heartbeat of a flow to its target", command("heartbeat"))
    flow_verb(
        verbs, "checkpoint", "write MM2 checkpoints of the source groups, sync group offsets", command("checkpoint")
    )
    translate = flow_verb(
        verbs, "translate", "a source group's committed offsets translated to the target", command("translate")
    )
    translate.add_argument("--group", required=True, help="consumer group id on the source")
    verify = flow_verb(
        verbs,
        "verify",
        "compare every replicated partition with its source, record by record (exit 1: differences)",
        command("verify"),
    )
    verify.add_argument("--topics", help="regex narrowing the flow's topics to verify")
    takeover = flow_verb(
        verbs, "takeover", "continue a flow exactly where a stopped MirrorMaker 2 left it", command("takeover")
    )
    takeover.add_argument(
        "--from-mm2",
        action="store_true",
        required=True,
        help="take over from MirrorMaker 2 (dedicated mode), which must be stopped",
    )
    takeover.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    takeover.add_argument(
        "--mm2-stopped",
        action="store_true",
        help=(
            "every MM2 worker of the flow is stopped: do not check its worker group (for a user who may not "
            "DESCRIBE it)"
        ),
    )
    acls = flow_verb(verbs, "acls", "the Kafka ACLs a flow's user needs on its source and target", command("acls"))
    acls.add_argument(
        "--takeover", action="store_true", help="add what 'takeover --from-mm2' needs (revocable after it)"
    )
    reset = flow_verb(verbs, "reset", "re-seed a topic stopped by a deleted or recreated topic", command("reset"))
    reset.add_argument("--topic", required=True, help="source topic to copy again from its start")

    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda point: point.name):
        if plugin.name == chosen:
            plugin.load()(verbs)
        else:  # listed by --help; its flags are only built when it is the verb run
            verbs.add_parser(plugin.name, help=f"developer tool: see 'airmirror {plugin.name} --help'")
    return parser
