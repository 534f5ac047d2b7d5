"""``airmirror validate --explain``: each flow's effective setting, its value (secrets masked) and its source."""

from __future__ import annotations

import json
from pathlib import Path

from airmirror.cli import main
from airmirror.config import load_config
from airmirror.config.explain import explain_flow

FILE = """clusters = a, b
a.bootstrap.servers = a:9092
b.airflow.conn.id = kafka_b
a->b.enabled = true
airmirror.transaction.max.records = 10
a->b.airmirror.transaction.max.records = 20
airmirror.metadata.db.url = postgresql+psycopg://mirror:s3cret-pw@db/airmirror
a->b.airmirror.spark.conf.spark.ui.enabled = false
"""


def explained(tmp_path: Path) -> dict[str, tuple[str, str]]:
    path = tmp_path / "mm2.properties"
    path.write_text(FILE)
    config = load_config(path, env={"AIRMIRROR_HOME": str(tmp_path)})
    return {row.key: (row.value, row.source) for row in explain_flow(config, config.flow("a->b"))}


def test_each_setting_names_its_source_line_its_default_or_the_airflow_connection(tmp_path):
    rows = explained(tmp_path)
    assert rows["airmirror.transaction.max.records"] == ("20", "line 6 (a->b.airmirror.transaction.max.records)")
    assert rows["airmirror.transaction.max.bytes"] == ("268435456", "default")
    assert rows["airmirror.batch.max.records.per.partition"] == ("", "unset")
    assert rows["a.bootstrap.servers"] == ("a:9092", "line 2 (a.bootstrap.servers)")
    assert rows["b.bootstrap.servers"] == ("", "Airflow connection 'kafka_b' (read when a task runs)")
    assert rows["airmirror.spark.conf.spark.ui.enabled"] == (
        "false",
        "line 8 (a->b.airmirror.spark.conf.spark.ui.enabled)",
    )


def test_secrets_are_masked(tmp_path):
    rows = explained(tmp_path)
    assert rows["airmirror.metadata.db.url"][0] == "postgresql+psycopg://mirror:***@db/airmirror"
    assert all("s3cret-pw" not in value for value, _ in rows.values())


def test_the_cli_prints_every_flow_as_json_and_refuses_explain_flags_alone(tmp_path, capsys):
    path = tmp_path / "mm2.properties"
    path.write_text(FILE)
    assert main(["validate", str(path), "--explain", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {row["key"]: row for row in document["flows"]["a->b"]}
    assert rows["airmirror.transaction.max.records"]["source"].startswith("line 6")
    assert main(["validate", str(path), "--json"]) == 2
    assert "--flow and --json: only with --explain" in capsys.readouterr().err
    assert main(["validate", str(path), "--explain", "--flow", "b->a"]) == 2
    assert "no enabled flow 'b->a'" in capsys.readouterr().err
