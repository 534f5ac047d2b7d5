"""The ``airmirror`` command line.  Exit codes: 0 ok, 1 run-time failure, 2 bad input.

:mod:`~airmirror.cli.parser` holds the verbs and flags, :mod:`~airmirror.cli.commands` runs them through the
same library functions the Airflow tasks call, and :mod:`~airmirror.cli.render` prints text or JSON.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from airmirror.cli.parser import build_parser
from airmirror.errors import AirmirrorError


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(arguments).parse_args(arguments)
    from airmirror.kafka.clients import shared_clients  # after parsing: --help and a bad flag import nothing more

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        with shared_clients():  # one admin client per cluster for the whole command
            run: Callable[[argparse.Namespace], int] = args.run
            return run(args)
    except AirmirrorError as error:
        print(f"airmirror: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if args.verbose:
            logging.exception("unexpected failure")
        print(f"airmirror: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
