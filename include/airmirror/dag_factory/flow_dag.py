"""One Airflow DAG per enabled replication flow of an MM2 config (``dags/airmirror_flows.py`` calls
:func:`register_flow_dags`).

Import is cheap: it reads the config file, builds DAG objects and registers each flow's secrets with
Airflow's secrets masker (:mod:`airmirror.dag_factory.masking`); Kafka, Spark and the metadata DB are only
touched when tasks run.  A broken config raises (Airflow shows it as an import error naming the key); a
config without enabled flows raises too, so a mistake never registers zero DAGs.

No secret appears in a DAG's ``doc_md``, in task logs, XComs or rendered template fields: the ``replicate``
task's Spark settings (``airmirror.spark.conf.X``) are rendered with their secret values as ``***``, and the
spark-submit form holds templates in their place (:func:`templated_secrets`), so that the DAG Airflow
serializes into its database holds no secret either.

Task graph of ``airmirror__{source}__{target}``::

    sync_topics -> plan_batch -> replicate -> record_batch -> emit_checkpoints (runs whatever happened)
                                                           -> verify (only with the ``verify`` param)
    emit_heartbeats (independent)

What each task hands the next through XCom is a typed value written and read back at the task boundary
(:mod:`airmirror.dag_factory.xcoms`).  A task returning a JSON object says ``multiple_outputs=True`` itself
(its keys are pushed as XComs of their own too), rather than have Airflow infer it from the return annotation.

With ``airmirror.live = true`` ``emit_checkpoints`` is independent too, and a live run's ``replicate`` and
emission tasks work for the length of the data interval (:mod:`airmirror.dag_factory.live`).

Time bound: scheduled, asset-triggered and manual runs copy up to the last stable offset; only backfill runs
(up to their data interval end) and runs with an explicit ``until`` param bound the batch by record time, so a
record stamped in the future never holds back the records after it beyond one schedule interval.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, AssetAlias, dag, get_current_context, get_parsing_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airmirror import names
from airmirror.config import FlowConfig, load_config
from airmirror.config.flow_settings import CheckpointSettings, HeartbeatSettings
from airmirror.config.secrets import is_secret_key
from airmirror.dag_factory import tasks
from airmirror.dag_factory.assets import alias_name, emit_asset_events
from airmirror.dag_factory.doc import flow_doc
from airmirror.dag_factory.emitter_tasks import is_due
from airmirror.dag_factory.lineage import report_lineage
from airmirror.dag_factory.live import live_seconds
from airmirror.dag_factory.masking import mask_flow_secrets
from airmirror.dag_factory.params import batch_options, flow_params, run_type_name
from airmirror.dag_factory.schedule import parse_schedule
from airmirror.dag_factory.xcoms import PlannedRun
from airmirror.errors import ConfigError, InputError
from airmirror.kafka.topics import TopicMapping
from airmirror.model import Json, JsonObject, from_json, json_object, to_json
from airmirror.replication.incarnations import TopicsStopped
from airmirror.replication.options import BatchOptions
from airmirror.replication.spark.defaults import copy_job_conf

log = logging.getLogger(__name__)

CONFIG_ENV = "AIRMIRROR_CONFIG"
SPARK_CONF_MACRO = "airmirror_spark_conf"
LIVE_SECONDS_MACRO = "airmirror_live_seconds"
RUN_LABEL = "airmirror_records_copied"
"""Context key ``record_batch`` sets to the run's copied-record count; its ``map_index_template`` renders it
as the task instance's label, which Airflow's task-instance lists show per run."""
LIVE_SUBMIT_ARGS = [
    "--live-seconds",
    f"{{{{ {LIVE_SECONDS_MACRO}(params=params, dag_run=dag_run, data_interval_start=data_interval_start, "
    "data_interval_end=data_interval_end) }}",
    "--topics",
    "{{ params.topics }}",
    "--max-records",
    "{{ params.max_records_per_partition or '' }}",
]
START_DATE = datetime(2020, 1, 1, tzinfo=UTC)
DEFAULT_ARGS: dict[str, Any] = {
    "retry_delay": timedelta(seconds=10),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=5),
}


def run_options_or_fail(context: Mapping[str, Any] | None = None) -> BatchOptions:
    """The running task's BatchOptions (from ``context``, default the current one); bad params fail the task
    at once, without retries.

    The run's type (``context["dag_run"].run_type``) decides the time bound: only backfill runs and an
    explicit ``until`` param bound the batch by time (:func:`airmirror.dag_factory.params.bounds_by_time`)."""
    context = get_current_context() if context is None else context
    try:
        return batch_options(
            context["params"], context.get("data_interval_end"), run_type=run_type_name(context.get("dag_run"))
        )
    except InputError as error:
        raise AirflowFailException(str(error)) from error


def build_flow_dag(config_path: str, flow: FlowConfig, spark_app: Path | None = None) -> DAG:
    """The DAG of one flow; tasks refer to the flow by name and re-read the config when they run."""
    mask_flow_secrets(flow)
    name, alias = flow.name, alias_name(flow)
    timetable = parse_schedule(flow.dag.schedule, line=flow.line_of("airmirror.schedule"))

    @dag(
        dag_id=names.dag_id(flow.source, flow.target),
        schedule=timetable,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["airmirror", f"source:{flow.source}", f"target:{flow.target}"],
        doc_md=flow_doc(flow),
        params=flow_params(),
        default_args={**DEFAULT_ARGS, "retries": flow.dag.task_retries},
        user_defined_macros={
            SPARK_CONF_MACRO: copy_job_conf(flow.spark.conf),
            LIVE_SECONDS_MACRO: lambda **context: live_seconds(flow.dag.live, context) or 0,
        },
    )
    def flow_dag() -> None:
        @task
        def sync_topics() -> Json:
            return to_json(tasks.sync_topics(config_path, name, run_options_or_fail()))

        @task(multiple_outputs=True)
        def plan_batch(mappings: object) -> JsonObject:
            synced = from_json(list[TopicMapping], mappings)
            return json_object(tasks.plan(config_path, name, synced, run_options_or_fail()))

        @task(
            trigger_rule="none_failed",
            map_index_template=f"{{{{ {RUN_LABEL} }}}}",
            outlets=[AssetAlias(alias)],
            multiple_outputs=True,
        )
        def record_batch(planned: object, _copied: object = None) -> JsonObject:
            """Commit what is left, then report everything this run's batches copied (read back from the DB,
            so a spark-submitted live run counts as one in this worker does)."""
            context = get_current_context()
            if run_options_or_fail(context).dry_run:
                raise AirflowSkipException("dry run")
            try:
                recorded = tasks.record(config_path, name, from_json(PlannedRun, planned).first_batch)
            except TopicsStopped as error:
                raise AirflowFailException(str(error)) from error
            emit_asset_events(context["outlet_events"], alias, recorded.copied, recorded.batch_id)
            report_lineage(name, recorded.copied)
            context[RUN_LABEL] = f"{recorded.records:,} records copied"  # type: ignore[literal-required]
            return json_object(recorded)

        @task
        def emit_heartbeats() -> None:
            run_emission("heartbeats", flow.heartbeats, flow.dag.live, config_path, name)

        @task(trigger_rule="all_done")
        def emit_checkpoints(_: Any = None) -> None:
            run_emission("checkpoints", flow.checkpoints, flow.dag.live, config_path, name)

        planned = plan_batch(sync_topics())
        copied = replicate_task(config_path, flow, spark_app)
        planned >> copied
        recorded = record_batch(planned, copied)
        if flow.dag.live:
            emit_checkpoints()
        else:
            emit_checkpoints(recorded)
        emit_heartbeats()
        verify_task(config_path, flow)(recorded)

    return flow_dag()


def run_emission(
    what: str, settings: HeartbeatSettings | CheckpointSettings, live: bool, config_path: str, name: str
) -> None:
    """Emit heartbeats or checkpoints if the flow enables them: in a live run every ``settings.interval_seconds``
    for its window (:mod:`airmirror.dag_factory.live`), otherwise once if this run's interval is due.  When they
    are off (``emit.{what}.enabled = false`` or a negative interval) the task is skipped, naming the key."""
    if settings.off_by is not None:
        raise AirflowSkipException(settings.off_by)
    interval_seconds = settings.interval_seconds
    context = get_current_context()
    window = live_seconds(live, context)
    if window is None and not is_due(
        interval_seconds, context.get("data_interval_start"), context.get("data_interval_end")
    ):
        raise AirflowSkipException(f"not due: emit.{what}.interval.seconds={interval_seconds}")
    emitted = tasks.emit(config_path, name, what, window)
    if window is not None:
        log.info("live run: %d %s emissions in %.0f s", emitted, what, window)


def skip_unless_records(config_path: str, name: str, live: bool) -> Callable[[Mapping[str, Any]], None]:
    """The ``replicate`` task's pre-execute check: a dry run, or a run that is not live and whose batch plans
    nothing to copy (no unfinished batch, or one that only sets cursors), is skipped before any Spark session
    or spark-submit starts.  ``record_batch`` still runs (trigger rule ``none_failed``) and commits such a
    batch.  A live run always replicates: records may arrive during its window."""

    def check(context: Mapping[str, Any]) -> None:
        if run_options_or_fail(context).dry_run:
            raise AirflowSkipException("dry run")
        if live_seconds(live, context) is not None:
            return
        planned = tasks.planned_records(config_path, name)
        if not planned:
            raise AirflowSkipException("nothing to copy: no Spark session started")

    return check


def replicate_task(config_path: str, flow: FlowConfig, spark_app: Path | None) -> Any:
    """The Spark copy: in the worker via the ``spark_default`` connection, or spark-submit of ``spark_apps/``.

    Either way it is skipped, before Spark starts, when there is nothing to copy (:func:`skip_unless_records`),
    and the result is the task's output (an XComArg), so that passing it to ``record_batch`` makes
    ``record_batch`` run after it.
    """
    skip = skip_unless_records(config_path, flow.name, flow.dag.live)
    if flow.spark.submit:
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

        if spark_app is None:
            raise ConfigError("spark-submit needs the spark_apps/ entry point", key="airmirror.spark.submit")
        return SparkSubmitOperator(
            task_id="replicate",
            application=str(spark_app),
            application_args=[
                config_path,
                "--flow",
                flow.name,
                "--holder",
                "Airflow dag {{ ti.dag_id }} run {{ run_id }} task {{ ti.task_id }} try {{ ti.try_number }}",
                *(LIVE_SUBMIT_ARGS if flow.dag.live else []),
            ],
            conn_id=flow.spark.conn_id,
            conf=templated_secrets(copy_job_conf(flow.spark.conf)),
            name=f"airmirror {flow.name}",
            pre_execute=skip,
        ).output
    name, live = flow.name, flow.dag.live

    @task.pyspark(
        task_id="replicate",
        conn_id=flow.spark.conn_id,
        config_kwargs=copy_job_conf(flow.spark.conf),
        pre_execute=skip,
        multiple_outputs=True,
    )
    def replicate(spark: Any = None, sc: Any = None) -> JsonObject:
        context = get_current_context()
        seconds = live_seconds(live, context)
        if seconds is None:
            return json_object(tasks.replicate(config_path, name, spark))
        return json_object(tasks.replicate_live(config_path, name, spark, run_options_or_fail(context), seconds))

    return replicate()


def skip_unless_verify(context: Mapping[str, Any]) -> None:
    """The ``verify`` task's pre-execute check: skipped, before any Spark session starts, unless the run's
    ``verify`` param is set (a dry run never verifies)."""
    if not context["params"].get("verify") or run_options_or_fail(context).dry_run:
        raise AirflowSkipException("verify param not set")


def verify_task(config_path: str, flow: FlowConfig) -> Any:
    """``airmirror verify`` as a task after ``record_batch`` (so after each backfill interval, too), in the
    worker's Spark session; it fails, without retries, when any partition differs."""
    name = flow.name

    @task.pyspark(
        task_id="verify",
        conn_id=flow.spark.conn_id,
        config_kwargs=copy_job_conf(flow.spark.conf),
        pre_execute=skip_unless_verify,
        retries=0,
        multiple_outputs=True,
    )
    def verify(_: object = None, spark: Any = None, sc: Any = None) -> JsonObject:
        verification = tasks.verify(config_path, name, spark, run_options_or_fail().topics_regex)
        if not verification.equal:
            raise AirflowFailException(f"verification {verification.id} of flow {name}: {verification.counts()}")
        return verification.as_dict()

    return verify


def templated_secrets(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """``spark_conf`` with each secret value replaced by a template that renders it, when the task runs, from
    the DAG's ``airmirror_spark_conf`` macro (macros are not serialized)."""
    return {
        key: f"{{{{ {SPARK_CONF_MACRO}[{key!r}] }}}}" if is_secret_key(key) else value
        for key, value in spark_conf.items()
    }


def flows_to_build(flows: list[FlowConfig]) -> list[FlowConfig]:
    """The flows whose DAGs this parse needs: a worker about to run one task (Airflow's parsing context names
    its DAG) builds only that flow's DAG; every other parse (the DAG processor, the CLI, tests) builds all."""
    wanted = get_parsing_context().dag_id
    chosen = [flow for flow in flows if names.dag_id(flow.source, flow.target) == wanted]
    return chosen or flows


def register_flow_dags(namespace: dict[str, Any], spark_app: Path | None = None) -> list[str]:
    """Build every enabled flow's DAG (or only the one a worker's parsing context names, see
    :func:`flows_to_build`) from ``$AIRMIRROR_CONFIG`` into ``namespace`` (a DAG file's globals)."""
    config_path = os.environ.get(CONFIG_ENV)
    if not config_path:
        raise ConfigError(f"set {CONFIG_ENV} to the MM2 properties file to build the flow DAGs", key=CONFIG_ENV)
    config = load_config(config_path)
    flows = config.enabled_flows()
    if not flows:
        raise ConfigError(f"{config_path} enables no flow: set '{{source}}->{{target}}.enabled = true'", key="enabled")
    for warning in config.warnings:
        log.warning("%s: %s", config_path, warning)
    built = [build_flow_dag(config_path, flow, spark_app) for flow in flows_to_build(flows)]
    for flow_dag in built:
        namespace[flow_dag.dag_id] = flow_dag
    return [d.dag_id for d in built]
