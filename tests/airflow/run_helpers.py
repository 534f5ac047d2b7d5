"""Helpers that run a flow DAG with ``dag.test()`` and read what the run left in Airflow's metadata DB."""

from __future__ import annotations


def asset_events(run) -> dict[str, dict]:
    """The asset events ``run`` emitted: asset URI -> the event's extra."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter_by(source_dag_id=run.dag_id, source_run_id=run.run_id).all()
        return {event.uri: dict(event.extra) for event in events}


def run_flow(dag_bag_for, config, conf: dict | None = None):
    """One ``dag.test()`` run of flow a->b, parsed afresh as every Airflow worker does (``dag.test``
    writes the run's conf into the parsed DAG's params)."""
    bag = dag_bag_for(config)
    assert bag.import_errors == {}
    return bag.dags["airmirror__a__b"].test(run_conf=conf)


def task_states(run) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}
