"""Local Apache Kafka clusters (real KRaft JVMs, jars fetched with Maven) for development and tests."""

from airmirror.devtools.local_kafka.broker import (
    BrokerStatus,
    LocalBroker,
    NodeStatus,
    airmirror_home,
    broker_status,
    kill_broker,
    start_broker,
    stop_broker,
)
from airmirror.devtools.local_kafka.jars import KAFKA_VERSION, kafka_classpath, mm2_classpath, resolve_maven_artifacts
from airmirror.devtools.local_kafka.nodes import consecutive_free_ports, free_port
from airmirror.devtools.local_kafka.security import BrokerSecurity, User
from airmirror.devtools.local_kafka.tls import TlsMaterial

__all__ = [
    "KAFKA_VERSION",
    "BrokerSecurity",
    "BrokerStatus",
    "LocalBroker",
    "NodeStatus",
    "TlsMaterial",
    "User",
    "airmirror_home",
    "broker_status",
    "consecutive_free_ports",
    "free_port",
    "kafka_classpath",
    "kill_broker",
    "mm2_classpath",
    "resolve_maven_artifacts",
    "start_broker",
    "stop_broker",
]
