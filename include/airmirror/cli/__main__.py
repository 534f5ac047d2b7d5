"""``python -m airmirror.cli``: the same as the ``airmirror`` command."""

import sys

from airmirror.cli import main

sys.exit(main())
