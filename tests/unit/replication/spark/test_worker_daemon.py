"""Which of Spark's zipped Python packages the worker daemon drops from PYTHONPATH, and what it preloads."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from airmirror.replication.spark.worker_daemon import PRELOADED, is_redundant_zip

NOT_PRELOADED = (
    "sqlalchemy",
    "airmirror.config.mirror_config",
    "airmirror.store",
    "airmirror.replication.pipeline",
    "httpx",
)
"""Modules the preloaded copy path must not import, or every worker daemon would pay for them: what only the driver
runs, and httpx (a copy task imports it when its flow has a schema registry)."""


def spark_home(root: Path, installed_package: bool) -> Path:
    lib = root / "python" / "lib"
    lib.mkdir(parents=True)
    if installed_package:
        (root / "__init__.py").write_text("")
    return lib


def test_pip_installed_pyspark_zip_is_redundant(tmp_path: Path) -> None:
    lib = spark_home(tmp_path, installed_package=True)
    assert is_redundant_zip(str(lib / "pyspark.zip"))


def test_spark_distribution_keeps_its_pyspark_zip(tmp_path: Path) -> None:
    lib = spark_home(tmp_path, installed_package=False)
    assert not is_redundant_zip(str(lib / "pyspark.zip"))


def test_py4j_zip_is_redundant_only_at_the_installed_version(tmp_path: Path) -> None:
    lib = spark_home(tmp_path, installed_package=True)
    assert is_redundant_zip(str(lib / f"py4j-{version('py4j')}-src.zip"))
    assert not is_redundant_zip(str(lib / "py4j-0.0.1-src.zip"))


def test_other_entries_are_kept(tmp_path: Path) -> None:
    assert not is_redundant_zip(str(tmp_path / "pyspark.zip"))
    assert not is_redundant_zip(str(tmp_path / "site-packages"))
    assert not is_redundant_zip("")


def test_the_preloaded_copy_path_imports_only_what_every_copy_task_runs() -> None:
    check = f"import sys, {PRELOADED}; print(sorted(m for m in {NOT_PRELOADED!r} if m in sys.modules))"
    imported = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]"
