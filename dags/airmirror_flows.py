"""Airflow DAG file: one DAG per enabled flow of the MM2 config named by $AIRMIRROR_CONFIG.

The DAGs are built by ``airmirror.dag_factory``; this file only points it at ``spark_apps/``.
"""

from pathlib import Path

from airmirror.dag_factory import register_flow_dags

register_flow_dags(globals(), spark_app=Path(__file__).resolve().parent.parent / "spark_apps" / "replicate_batch.py")
