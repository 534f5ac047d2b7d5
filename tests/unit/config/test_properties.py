"""Java .properties parsing: separators, comments, continuations, escapes, line numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from airmirror.config.properties import Setting, load_properties, parse_properties
from airmirror.errors import ConfigError


def values(text: str) -> dict[str, str]:
    return {key: setting.value for key, setting in parse_properties(text).items()}


def test_separators_equals_colon_and_whitespace() -> None:
    text = "a=1\nb: 2\nc 3\nd   =   4\ne\tf\ng:=x\nh = = y\ni=\nj\n"
    assert values(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "f",
        "g": "=x",
        "h": "= y",
        "i": "",
        "j": "",
    }


def test_comments_blank_lines_and_leading_whitespace_are_skipped() -> None:
    text = "# comment\n! other comment\n\n   \n   key = value\n\t#indented comment\n"
    assert values(text) == {"key": "value"}


def test_trailing_whitespace_of_value_is_kept() -> None:
    assert values("key = value  \n") == {"key": "value  "}


def test_every_key_keeps_its_line_number() -> None:
    settings = parse_properties("# header\n\nfirst = 1\n\nsecond = 2\n")
    assert settings["first"] == Setting("first", "1", 3)
    assert settings["second"].line == 5


def test_backslash_continuation_joins_lines_and_drops_leading_whitespace() -> None:
    settings = parse_properties("x = 0\nlist = one, \\\n       two, \\\n   three\nafter = 1\n")
    assert settings["list"] == Setting("list", "one, two, three", 2)
    assert settings["after"].line == 5


def test_even_number_of_backslashes_does_not_continue() -> None:
    assert values("path = C:\\\\\nnext = 1\n") == {"path": "C:\\", "next": "1"}


def test_comment_line_never_continues_but_continued_text_may_start_with_hash() -> None:
    assert values("# comment \\\nkey = a\\\n  #b\n") == {"key": "a#b"}


def test_continuation_at_end_of_file() -> None:
    assert values("key = a\\") == {"key": "a"}


def test_escapes() -> None:
    text = "tab = a\\tb\nnl = a\\nb\nuni = \\u0041\\u00e9\nsep = x\\=y\\:z\nother = \\q\\#\n"
    assert values(text) == {"tab": "a\tb", "nl": "a\nb", "uni": "Aé", "sep": "x=y:z", "other": "q#"}


def test_escaped_separators_and_spaces_in_keys() -> None:
    assert values("my\\ key = 1\nk\\=v = 2\nk\\:w: 3\n") == {"my key": "1", "k=v": "2", "k:w": "3"}


def test_last_duplicate_wins_with_its_line() -> None:
    settings = parse_properties("key = first\nother = x\nkey = second\n")
    assert settings["key"] == Setting("key", "second", 3)


def test_crlf_and_cr_line_endings() -> None:
    settings = parse_properties("a = 1\r\nb = 2\rc = \\\r\n  3\r\n")
    assert {key: (s.value, s.line) for key, s in settings.items()} == {"a": ("1", 1), "b": ("2", 2), "c": ("3", 3)}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError) as error:
        parse_properties("ok = 1\nbad = \\u12G4\n")
    assert error.value.line == 2
    assert error.value.exit_code == 2


def test_load_properties_reads_utf8_and_falls_back_to_latin1(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_text("name = café\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name = café\n".encode("iso-8859-1"))
    assert load_properties(utf8)["name"].value == "café"
    assert load_properties(latin1)["name"].value == "café"


def test_load_properties_of_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_properties(tmp_path / "missing.properties")
    assert "missing.properties" in str(error.value)
    assert error.value.exit_code == 2
