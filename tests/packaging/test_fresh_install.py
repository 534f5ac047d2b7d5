"""``pip install .`` (no extras, pinned by constraints.txt) into a fresh venv gives a working ``airmirror``:
it validates the demo's config and replicates between two real clusters, and Airflow is not part of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from airmirror.devtools.demo.environment import DEMO_CLUSTERS, demo_config_text
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records
from tests.packaging.venvs import REPO, new_venv, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# what a source checkout has besides the sources; build/ is left out too, as setuptools may pack stale files from it
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".airmirror", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"
)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with ``pip install <copy of the repo> -c constraints.txt`` (the pip cache keeps it quick).  The
    install is from a copy, so the build writes nothing into the working tree."""
    root = tmp_path_factory.mktemp("fresh-install")
    source = root / "src"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)
    return new_venv(root / "venv", str(source), cwd=root)


def test_validate_runs_from_the_installed_package(fresh_venv: Path, tmp_path: Path):
    config = tmp_path / "mm2.properties"
    config.write_text(demo_config_text(DEMO_CLUSTERS, tmp_path / "metadata.db"))
    result = run(fresh_venv, str(fresh_venv / "bin" / "airmirror"), "validate", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "a->b" in result.stdout

    where = run(
        fresh_venv,
        str(fresh_venv / "bin" / "python"),
        "-c",
        "import importlib.resources as r, airmirror; print(airmirror.__file__); "
        "print(r.files('airmirror').joinpath('devtools/local_kafka/kafka-pom.xml').is_file())",
        cwd=tmp_path,
    )
    assert where.returncode == 0, where.stderr
    module_file, has_pom = where.stdout.split()
    assert Path(module_file).is_relative_to(fresh_venv) and has_pom == "True"


def test_airflow_is_not_part_of_the_core_install(fresh_venv: Path, tmp_path: Path):
    result = run(fresh_venv, str(fresh_venv / "bin" / "python"), "-c", "import airflow", cwd=tmp_path)
    assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr, result.stdout + result.stderr


def test_replicate_copies_records_between_real_clusters(fresh_venv: Path, clusters, prefix: str, tmp_path: Path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.orders"
    create_topic(a, topic, 2)
    records = {p: sample_records(25, prefix=f"p{p}") for p in (0, 1)}
    for partition, batch in records.items():
        produce(a, topic, partition, batch)
    config = write_config(
        tmp_path / "mm2.properties",
        clusters,
        f"a->b.enabled = true\na->b.topics = {topic}\nairmirror.spark.master = local[1]",
    )

    result = run(
        fresh_venv, str(fresh_venv / "bin" / "airmirror"), "replicate", str(config), "--flow", "a->b", cwd=tmp_path
    )

    assert result.returncode == 0, result.stdout + result.stderr
    for partition, batch in records.items():
        assert records_of(b, f"a.{topic}", partition) == batch
