"""Run the demo: ``python -m airmirror.demo`` (what ``make demo`` does)."""

from __future__ import annotations

import sys

from airmirror.cli import main as cli_main
from airmirror.demo.environment import prepare_demo


def main() -> int:
    config = prepare_demo()
    print(f"\n== replicating one batch: airmirror replicate {config} --flow a->b")
    code = cli_main(["replicate", str(config), "--flow", "a->b"])
    if code != 0:
        return code
    print(f"\n== airmirror status {config} --flow a->b")
    code = cli_main(["status", str(config), "--flow", "a->b"])
    print("\nStop the demo clusters with: make stop")
    return code


if __name__ == "__main__":
    sys.exit(main())
