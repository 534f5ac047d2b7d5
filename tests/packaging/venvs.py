"""Fresh virtual environments for the packaging tests: created, installed into and run in isolation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def isolated_env(venv: Path, **extra: str) -> dict[str, str]:
    """The caller's environment, without anything that would let the venv see the test run's packages, plus
    ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = str(venv / "bin" / "python")
    return {**env, **extra}


def run(venv: Path, *args: str, cwd: Path, timeout: float = 600, **extra_env: str) -> subprocess.CompletedProcess:
    """``args`` run in ``venv``'s isolated environment (plus ``extra_env``)."""
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=isolated_env(venv, **extra_env)
    )


def new_venv(venv: Path, *requirements: str, cwd: Path) -> Path:
    """A new venv at ``venv`` with ``pip install requirements -c constraints.txt`` (the pip cache keeps it quick)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    constraints = str(REPO / "constraints.txt")
    install = run(venv, python, "-m", "pip", "install", "-q", "-c", constraints, *requirements, cwd=cwd, timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    return venv
