"""The Airflow side of airmirror: one DAG per enabled flow (:mod:`~airmirror.dag_factory.flow_dag`), its tasks
(:mod:`~airmirror.dag_factory.tasks`), trigger params, schedule, docs and secret masking."""

from airmirror.dag_factory.flow_dag import build_flow_dag, register_flow_dags

__all__ = ["build_flow_dag", "register_flow_dags"]
