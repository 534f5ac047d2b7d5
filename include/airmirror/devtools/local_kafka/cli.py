"""``airmirror local-kafka start|stop|status``: real KRaft Kafka clusters on 127.0.0.1 for tests, the bench and
the demo.  Registered through the ``airmirror.cli`` entry-point group, so the product CLI never imports it."""

from __future__ import annotations

import argparse

from airmirror.cli.parser import positive_int
from airmirror.devtools.local_kafka import BrokerStatus, LocalBroker, broker_status, start_broker, stop_broker
from airmirror.devtools.local_kafka.security import PLAINTEXT, PROTOCOLS, SASL_MECHANISMS


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
    return ", ".join(f"node {node.node_id} {state}" for node, state in zip(status.nodes, states, strict=True))


def describe_security(broker: LocalBroker) -> str | None:
    """What a client needs to know of a secured cluster (passwords left out), or ``None`` for PLAINTEXT."""
    security = broker.security
    if security.protocol == PLAINTEXT:
        return None
    parts = [f"security {security.protocol}"]
    if security.uses_sasl:
        parts.append(f"{security.sasl_mechanism} users {', '.join(user.name for user in security.users)}")
    if security.authorizer:
        parts.append(f"ACLs required (super users {', '.join(security.super_users) or 'none but the brokers'})")
    if security.tls is not None:
        parts.append(f"CA certificate {security.tls.ca_certificate}, truststore {security.tls.truststore}")
    meta = broker.home / "kafka" / broker.name / "meta.json"
    return "; ".join(parts) + f" (passwords in {meta})"


def run(args: argparse.Namespace) -> int:
    if args.action == "start":
        broker = start_broker(
            args.name,
            args.port,
            brokers=args.brokers,
            broker_config=dict(args.broker_config),
            security=args.security,
            sasl_mechanism=args.sasl_mechanism,
            users=args.user,
            authorizer=args.authorizer,
            super_users=args.super_user,
        )
        pids = ", ".join(str(node.pid) for node in broker.status().nodes)
        print(f"kafka '{broker.name}' running on {broker.bootstrap} (pid{'s' if broker.brokers > 1 else ''} {pids})")
        security = describe_security(broker)
        if security is not None:
            print(security)
    elif args.action == "stop":
        stopped = stop_broker(args.name)
        print(f"kafka '{args.name}' {'stopped' if stopped else 'was not running'}")
    else:
        for status in broker_status():
            protocol = "" if status.protocol == PLAINTEXT else f"{status.protocol} "
            print(f"{status.name:<16} {status.bootstrap:<22} {protocol}{describe_nodes(status)}")
    return 0


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``local-kafka`` verb to the ``airmirror`` command line."""
    local_kafka = verbs.add_parser("local-kafka", help="run real KRaft Kafka clusters on 127.0.0.1")
    actions = local_kafka.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start")
    start.add_argument("name")
    start.add_argument("--port", type=int, required=True, help="client port of node 1")
    start.add_argument(
        "--brokers",
        type=positive_int,
        default=1,
        metavar="N",
        help="number of nodes, on ports PORT to PORT+N-1 (default 1)",
    )
    start.add_argument(
        "--broker-config",
        type=broker_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra setting for every node's server.properties (repeatable)",
    )
    start.add_argument(
        "--security",
        type=str.upper,
        choices=PROTOCOLS,
        default=PLAINTEXT,
        help="protocol of the client listener, also used between brokers (default PLAINTEXT)",
    )
    start.add_argument(
        "--sasl-mechanism",
        type=str.upper,
        choices=SASL_MECHANISMS,
        help="with SASL_PLAINTEXT or SASL_SSL (default SCRAM-SHA-512)",
    )
    start.add_argument(
        "--user",
        action="append",
        metavar="NAME:PASSWORD",
        help="a SASL user (repeatable; default airmirror:airmirror-secret)",
    )
    start.add_argument(
        "--authorizer",
        action="store_true",
        help="enforce ACLs with KRaft's StandardAuthorizer (SASL only): no ACL, no access",
    )
    start.add_argument(
        "--super-user",
        action="append",
        metavar="NAME",
        help="with --authorizer, a --user that ACLs do not restrict (repeatable)",
    )
    stop = actions.add_parser("stop")
    stop.add_argument("name")
    actions.add_parser("status")
    local_kafka.set_defaults(run=run)
