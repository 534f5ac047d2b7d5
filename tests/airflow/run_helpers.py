"""Helpers that read what a finished Airflow run left in Airflow's metadata DB."""

from __future__ import annotations


def asset_events(run) -> dict[str, dict]:
    """The asset events ``run`` emitted: asset URI -> the event's extra."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter_by(source_dag_id=run.dag_id, source_run_id=run.run_id).all()
        return {event.uri: dict(event.extra) for event in events}
