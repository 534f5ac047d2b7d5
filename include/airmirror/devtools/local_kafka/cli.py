"""``airmirror local-kafka start|stop|status``: real KRaft Kafka clusters on 127.0.0.1 for tests, the bench and
the demo.  Registered through the ``airmirror.cli`` entry-point group, so the product CLI never imports it."""

from __future__ import annotations

import argparse

from airmirror.cli.parser import positive_int
from airmirror.devtools.local_kafka import BrokerStatus, broker_status, start_broker, stop_broker


def broker_setting(value: str) -> tuple[str, str]:
    """``--broker-config KEY=VALUE`` -> ``(KEY, VALUE)``; the key is checked by ``start_broker``."""
    key, separator, setting = value.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"'{value}' is not KEY=VALUE")
    return key, setting


def describe_nodes(status: BrokerStatus) -> str:
    """``running (pid P)`` or ``stopped``; for several nodes, that of each node."""
    states = [f"running (pid {node.pid})" if node.running else "stopped" for node in status.nodes]
    if len(states) == 1:
        return states[0]
    return ", ".join(f"node {node.node_id} {state}" for node, state in zip(status.nodes, states))


def run(args: argparse.Namespace) -> int:
    if args.action == "start":
        broker = start_broker(args.name, args.port, brokers=args.brokers, broker_config=dict(args.broker_config))
        pids = ", ".join(str(node.pid) for node in broker.status().nodes)
        print(f"kafka '{broker.name}' running on {broker.bootstrap} (pid{'s' if broker.brokers > 1 else ''} {pids})")
    elif args.action == "stop":
        stopped = stop_broker(args.name)
        print(f"kafka '{args.name}' {'stopped' if stopped else 'was not running'}")
    else:
        for status in broker_status():
            print(f"{status.name:<16} {status.bootstrap:<22} {describe_nodes(status)}")
    return 0


def register(verbs: argparse._SubParsersAction) -> None:
    """Add the ``local-kafka`` verb to the ``airmirror`` command line."""
    local_kafka = verbs.add_parser("local-kafka", help="run real KRaft Kafka clusters on 127.0.0.1")
    actions = local_kafka.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start")
    start.add_argument("name")
    start.add_argument("--port", type=int, required=True, help="client port of node 1")
    start.add_argument(
        "--brokers", type=positive_int, default=1, metavar="N",
        help="number of nodes, on ports PORT to PORT+N-1 (default 1)",
    )
    start.add_argument(
        "--broker-config", type=broker_setting, action="append", default=[], metavar="KEY=VALUE",
        help="extra setting for every node's server.properties (repeatable)",
    )
    stop = actions.add_parser("stop")
    stop.add_argument("name")
    actions.add_parser("status")
    local_kafka.set_defaults(run=run)
