"""``airmirror local-registry start|stop NAME``: real schema registries (Apicurio Registry, Confluent's API) on
127.0.0.1 for tests and the demo.  Registered through the ``airmirror.cli`` entry-point group, so the product CLI never
imports it."""

from __future__ import annotations

import argparse
from pathlib import Path

from airmirror.devtools.local_kafka.broker import airmirror_home
from airmirror.devtools.local_registry import start_registry, stop_registry


def run(args: argparse.Namespace) -> int:
    home = airmirror_home()
    if args.action == "start":
        data_dir = None if args.data_dir is None else Path(args.data_dir)
        registry = start_registry(args.name, args.port, home, data_dir)
        print(f"registry '{registry.name}' running at {registry.url} (pid {registry.pid})")
    else:
        stopped = stop_registry(args.name, home)
        print(f"registry '{args.name}' {'stopped' if stopped else 'was not running'}")
    return 0


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``local-registry`` verb to the ``airmirror`` command line."""
    local_registry = verbs.add_parser("local-registry", help="run a real schema registry (Apicurio) on 127.0.0.1")
    actions = local_registry.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start")
    start.add_argument("name")
    start.add_argument("--port", type=int, required=True, help="port of its HTTP API")
    start.add_argument("--data-dir", help="keep its schemas in an H2 file there (default: in memory)")
    stop = actions.add_parser("stop")
    stop.add_argument("name")
    local_registry.set_defaults(run=run)
