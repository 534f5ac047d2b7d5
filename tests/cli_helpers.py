"""The ``airmirror`` command as the integration tests run it: in a child process (as a user does), or in this
process (its ``main``, where a test also reads what the command printed without a process start-up)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from airmirror.cli import main

COMMAND_TIMEOUT_S = 600


def airmirror_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m airmirror.cli ARGS`` in a child process; whatever its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
    )


def airmirror_as_a_user(*args: str) -> subprocess.CompletedProcess[str]:
    """:func:`airmirror_process` with the user's environment: without the test session's JVM options, which the
    JVM announces on stderr."""
    env = {key: value for key, value in os.environ.items() if key != "JDK_JAVA_OPTIONS"}
    return subprocess.run(
        [sys.executable, "-m", "airmirror.cli", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env=env,
    )


@dataclass(frozen=True)
class Run:
    """What the command run in this process returned and printed."""

    returncode: int
    stdout: str
    stderr: str


def airmirror_in_process(*args: str) -> Run:
    """The ``airmirror`` command run in this process (its ``main``), with what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return Run(code, out.getvalue(), err.getvalue())
