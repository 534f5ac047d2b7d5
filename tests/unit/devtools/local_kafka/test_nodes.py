"""``free_port`` picks listening ports that outgoing connections cannot take first."""

from __future__ import annotations

import socket

from airmirror.devtools.local_kafka import free_port
from airmirror.devtools.local_kafka.nodes import _ephemeral_range_start


def test_picked_ports_lie_below_the_kernels_ephemeral_range() -> None:
    low = _ephemeral_range_start()
    assert all(free_port() < low for _ in range(50))


def test_a_picked_port_can_be_listened_on() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", free_port()))
        server.listen()


def test_avoided_and_busy_ports_are_not_picked() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", free_port()))
        busy.listen()
        taken = busy.getsockname()[1]
        avoid = set(range(10000, 20000))
        assert all(free_port(avoid) not in avoid | {taken} for _ in range(50))
