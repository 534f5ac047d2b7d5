"""docs/configuration.md is generated from the settings registry: the committed page must equal what it generates."""

from __future__ import annotations

from pathlib import Path

from airmirror.config.reference import render
from airmirror.config.settings_registry import all_keys

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_committed_reference_page_is_the_generated_one():
    assert PAGE.read_text() == render(), (
        "docs/configuration.md differs from the settings registry: regenerate it with "
        "`python -m airmirror.config.reference > docs/configuration.md`"
    )


def test_every_declared_key_has_a_row_with_its_default():
    page = render()
    for key in all_keys():
        names = (f"| `{key.name}`", f"| `{{alias}}.{key.name}`")
        row = next((line for line in page.splitlines() if line.split(" | ")[0] in names), None)
        assert row is not None, key.name
        assert key.described_default() in row, key.name
