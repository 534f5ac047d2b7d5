"""The demo's sample producer: a steady trickle of orders into the source cluster until it is stopped.

``python -m airmirror.devtools.demo.producer BOOTSTRAP [RATE]`` produces RATE orders per second (default 20).
"""

from __future__ import annotations

import sys
import time

from airmirror.devtools.demo.sample_data import produce_orders


def main(argv: list[str]) -> int:
    bootstrap = argv[0]
    rate = int(argv[1]) if len(argv) > 1 else 20
    first = 0
    while True:
        produce_orders(bootstrap, first, rate)
        first += rate
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
