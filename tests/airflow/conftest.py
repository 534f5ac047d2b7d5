"""Airflow test set-up: a private AIRFLOW_HOME with a migrated SQLite metadata DB, set before Airflow loads."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="airmirror-airflow-home-"))
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[2]"}',
    }
)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    from airflow.utils.db import initdb

    initdb()
    return AIRFLOW_HOME


@pytest.fixture
def dag_bag_for(monkeypatch):
    """Parse ``dags/`` with ``AIRMIRROR_CONFIG`` pointing at the given file, as the DAG processor would."""

    def parse(config: Path):
        from airflow.dag_processing.dagbag import DagBag

        monkeypatch.setenv("AIRMIRROR_CONFIG", str(config))
        return DagBag(dag_folder=str(REPO / "dags"))

    return parse
