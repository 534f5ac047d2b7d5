"""``airmirror status`` as printed (:func:`airmirror.cli.render.print_status`): the schema line and JSON object."""

from __future__ import annotations

import json

import pytest

from airmirror.cli.render import print_status
from airmirror.config.schema_registries import SchemaIds
from airmirror.replication.status import FlowStatus, SchemaFigures

TRANSLATED = SchemaFigures(SchemaIds.TRANSLATE, subjects=3, ids_mapped=7, records_passed=0)


def printed(status: FlowStatus, capsys: pytest.CaptureFixture[str], *, as_json: bool) -> str:
    print_status(status, None, [], [], None, None, as_json)
    return capsys.readouterr().out


def test_the_text_names_mode_subjects_ids_and_records_passed(capsys):
    text = printed(FlowStatus("a->b", [], None, schemas=TRANSLATED), capsys, as_json=False)

    assert "schemas: translate, 3 subjects synced, 7 ids mapped, 0 records passed through\n" in text


def test_the_text_has_no_schema_line_when_off(capsys):
    assert "schemas" not in printed(FlowStatus("a->b", [], None), capsys, as_json=False)


def test_the_json_carries_the_four_figures(capsys):
    document = json.loads(printed(FlowStatus("a->b", [], None, schemas=TRANSLATED), capsys, as_json=True))

    assert document["schemas"] == {"mode": "translate", "subjects": 3, "ids_mapped": 7, "records_passed": 0}
