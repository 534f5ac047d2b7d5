"""No secret of a flow shows in what Airflow and the CLI show: a real ``dag.test()`` run of a flow whose config
carries client secrets, secret Spark settings and a PostgreSQL metadata DB URL with passwords in its query
string, against the real test Kafka clusters, real Spark (in the task, and through spark-submit) and a real
PostgreSQL server.

The client secrets are ones the PLAINTEXT test brokers ignore but every task still resolves: a PLAIN JAAS
login (translated to ``sasl.username``/``sasl.password``) on the source and an ``ssl.key.password`` on the
target.  The DB URL's user-info password is a decoy: SQLAlchemy passes query parameters to the driver last,
so the run only works with the query-string password.

``dag.test()`` runs the tasks in the test process, whose console log Airflow does not mask; in a deployment the
supervisor writes each task log line through Airflow's masking processor, told about the flow's secrets by
the tasks.  The test passes the captured log through that same processor.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from airmirror.cli import main
from airmirror.devtools.local_postgres import PostgresServer, postgres_server
from tests.conftest import write_config
from tests.kafka_helpers import create_topic, produce, records_of, sample_records

pytestmark = pytest.mark.integration

DB_USER = "mirror_owner"


@dataclass(frozen=True)
class FlowSecrets:
    """Every secret the flow's config carries, each unique to this test run."""

    jaas_password: str
    key_password: str
    s3_secret_key: str
    azure_account_key: str
    db_password: str
    db_decoy_password: str
    db_ssl_password: str

    @classmethod
    def generate(cls) -> FlowSecrets:
        return cls(*(f"{name.replace('_', '')}{secrets.token_hex(8)}" for name in cls.__dataclass_fields__))

    def values(self) -> list[str]:
        return list(vars(self).values())


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


def owned_database(server: PostgresServer, password: str) -> str:
    """A new database owned by a new login role with ``password``; returns the database name."""
    name = f"mirror_{secrets.token_hex(4)}"
    with psycopg.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        dbname="postgres",
        autocommit=True,
    ) as connection:
        connection.execute(f"CREATE ROLE {DB_USER}_{name} LOGIN PASSWORD '{password}'")
        connection.execute(f'CREATE DATABASE "{name}" OWNER {DB_USER}_{name}')
    return name


def secret_config(
    path: Path, clusters, prefix: str, server: PostgresServer, flow_secrets: FlowSecrets, spark_submit: bool
) -> Path:
    database = owned_database(server, flow_secrets.db_password)
    db_url = (
        f"postgresql+psycopg://{DB_USER}_{database}:{flow_secrets.db_decoy_password}@{server.host}:{server.port}/"
        f"{database}?password={flow_secrets.db_password}&sslpassword={flow_secrets.db_ssl_password}"
    )
    body = f"""a->b.enabled = true
topics = {prefix}.*
airmirror.task.retries = 0
airmirror.spark.submit = {str(spark_submit).lower()}
airmirror.metadata.db.url = {db_url}
a.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="mirror" password="{flow_secrets.jaas_password}";
b.ssl.key.password = {flow_secrets.key_password}
airmirror.spark.conf.spark.hadoop.fs.s3a.secret.key = {flow_secrets.s3_secret_key}
airmirror.spark.conf.spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net = {flow_secrets.azure_account_key}
"""
    return write_config(path, clusters, body)


def stored_run_values(run) -> tuple[list, list]:
    """The XCom values and the rendered template fields Airflow stored for ``run``."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        xcoms = session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id).all()
        rendered = session.query(RenderedTaskInstanceFields).filter_by(dag_id=run.dag_id, run_id=run.run_id).all()
        return [x.value for x in xcoms], [(r.task_id, r.rendered_fields) for r in rendered]


def serialized(flow_dag) -> str:
    """The DAG as Airflow serializes it into its database."""
    from airflow.serialization.serialized_objects import DagSerialization

    return json.dumps(DagSerialization.to_dict(flow_dag))


def as_task_log(console: str) -> str:
    """``console`` output as Airflow's supervisor writes it to a task log: each line through its masking
    processor."""
    from airflow.sdk.log import mask_logs

    return "\n".join(mask_logs(None, "info", {"event": line})["event"] for line in console.splitlines())


@pytest.mark.parametrize("spark_submit", [False, True], ids=["pyspark-task", "spark-submit"])
def test_no_secret_shows_in_logs_xcom_rendered_fields_dag_or_cli(
    airflow_db, clusters, prefix, tmp_path, dag_bag_for, postgres, capfd, caplog, monkeypatch, spark_submit
):
    monkeypatch.setenv(
        "PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )  # PySpark's spark-submit
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    create_topic(a, f"{prefix}.orders")
    produce(a, f"{prefix}.orders", 0, sample_records(20))
    flow_secrets = FlowSecrets.generate()
    config = secret_config(tmp_path / "mm2.properties", clusters, prefix, postgres, flow_secrets, spark_submit)

    bag = dag_bag_for(config)
    assert bag.import_errors == {}
    flow_dag = bag.dags["airmirror__a__b"]
    run = flow_dag.test()

    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        **dict.fromkeys(
            ("sync_topics", "plan_batch", "replicate", "record_batch", "emit_heartbeats", "emit_checkpoints"), "success"
        ),
        "verify": "skipped",
    }
    assert records_of(b, f"a.{prefix}.orders", 0) == records_of(a, f"{prefix}.orders", 0)
    xcoms, rendered = stored_run_values(run)
    replicate_fields = dict(rendered)["replicate"]
    if spark_submit:
        assert replicate_fields["conf"]["spark.hadoop.fs.s3a.secret.key"] == "***"
        assert replicate_fields["conf"]["spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net"] == "***"
    else:
        assert "config_kwargs" not in replicate_fields
    assert "?password=***&sslpassword=***" in flow_dag.doc_md

    console = capfd.readouterr()
    task_log = as_task_log(console.out + console.err + caplog.text)
    assert "committed: 20 records" in task_log
    assert main(["validate", str(config)]) == 0
    assert main(["status", str(config), "--flow", "a->b"]) == 0
    cli = capfd.readouterr()
    assert f"{prefix}.orders-0" in cli.out
    shown = {
        "task logs": task_log,
        "cli": cli.out + cli.err,
        "xcom": json.dumps(xcoms, default=str),
        "rendered fields": json.dumps(rendered, default=str),
        "doc_md": flow_dag.doc_md,
        "serialized DAG": serialized(flow_dag),
    }
    leaks = {(where, secret) for where, text in shown.items() for secret in flow_secrets.values() if secret in text}
    assert leaks == set()
