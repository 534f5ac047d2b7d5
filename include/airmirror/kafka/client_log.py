"""librdkafka's own log lines in Python logging, never on a terminal by themselves.

librdkafka prints what it logs to stderr unless a client names a logger.  Most of it is a client retrying what
airmirror retries anyway: a transaction coordinator still loading (``GETPID ... retrying``), a broker restarting
(``FAIL ... Connection refused``).  What cannot be cured reaches the user as airmirror's own error, naming the
cluster.  Contract of :func:`logged`, which every Kafka client airmirror builds goes through:

1. librdkafka's lines go to logger ``airmirror.librdkafka``: errors (and worse) at INFO, the rest at DEBUG.  So
   ``airmirror -v`` and an Airflow task log show its errors; a plain CLI run shows none of it.
2. The lines are served when the client is polled (confluent-kafka queues them), in the polling thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("airmirror.librdkafka")


class LibrdkafkaLog:
    """What confluent-kafka's ``logger`` setting calls (``log(level, format, *args)``, ``level`` a Python logging
    level); forwards to :data:`log` by rule 1.  Stateless, so a copy in each Spark worker behaves the same."""

    def log(self, level: int, message: str, *args: object) -> None:
        log.log(logging.INFO if level >= logging.ERROR else logging.DEBUG, message, *args)


CLIENT_LOG = LibrdkafkaLog()


def logged(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with librdkafka's log lines sent to Python logging (the module's rules)."""
    return {**config, "logger": CLIENT_LOG}
