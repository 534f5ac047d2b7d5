"""A Java ``.properties`` parser that remembers where every key was defined.

Contract (same as ``java.util.Properties.load``):

* natural lines end with ``\\n``, ``\\r`` or ``\\r\\n``; a line ending in an odd number of backslashes
  continues on the next natural line, whose leading whitespace is dropped;
* a logical line whose first non-blank character is ``#`` or ``!`` is a comment, blank lines are ignored;
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around the separator is
  skipped, and one ``=``/``:`` following whitespace is skipped too; trailing whitespace of a value is kept;
* escapes ``\\t \\n \\r \\f \\uXXXX`` are decoded, any other escaped character stands for itself
  (``\\=``, ``\\:``, ``\\ ``, ``\\\\``...);
* when a key appears more than once, the last definition wins.

Files are read as UTF-8, falling back to ISO-8859-1 (Java's encoding for properties streams) when they are
not valid UTF-8.  Every value is a :class:`Setting` carrying the key and the 1-based line where its logical
line starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from airmirror.config.secrets import mask_value
from airmirror.errors import ConfigError

_BLANKS = " \t\f"
_KEY_TERMINATORS = "=: \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Setting:
    """One ``key = value`` definition; ``line`` is ``None`` for values that do not come from a file."""

    key: str
    value: str
    line: int | None = None

    def describe(self) -> str:
        """``key 'k' (line n)``, for messages about this setting."""
        return f"key '{self.key}'" + (f" (line {self.line})" if self.line is not None else "")

    def __repr__(self) -> str:
        """Like the dataclass repr, with the value masked when the key is a secret one."""
        return f"Setting(key={self.key!r}, value={mask_value(self.key, self.value)!r}, line={self.line!r})"


def load_properties(path: str | PathLike[str]) -> dict[str, Setting]:
    """Parse the properties file at ``path``; raises :class:`ConfigError` if it cannot be read or parsed."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("iso-8859-1")
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, Setting]:
    """Parse properties ``text``; the result is in order of first definition, values from the last one."""
    settings: dict[str, Setting] = {}
    for line_number, logical in _logical_lines(text):
        key, value = _split_key_value(logical, line_number)
        settings[key] = Setting(key, value, line_number)
    return settings


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Return ``(first line number, raw logical line)`` for every non-blank, non-comment logical line."""
    natural = _NATURAL_LINE.split(text)
    result: list[tuple[int, str]] = []
    index = 0
    while index < len(natural):
        start = index
        line = natural[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if index >= len(natural):
                break
            line += natural[index].lstrip(_BLANKS)
            index += 1
        result.append((start + 1, line))
    return result


def _continues(line: str) -> bool:
    """True when ``line`` ends with an odd number of backslashes."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str, line_number: int) -> tuple[str, str]:
    """Split a raw logical line into its unescaped key and value."""
    position = 0
    while position < len(line) and line[position] not in _KEY_TERMINATORS:
        position += 2 if line[position] == "\\" else 1
    position = key_end = min(position, len(line))
    separator_seen = False
    if position < len(line):
        separator_seen = line[position] in "=:"
        position += 1
    while position < len(line):
        char = line[position]
        if char in _BLANKS:
            position += 1
        elif char in "=:" and not separator_seen:
            separator_seen = True
            position += 1
        else:
            break
    return _unescape(line[:key_end], line_number), _unescape(line[position:], line_number)


def _unescape(raw: str, line_number: int) -> str:
    """Decode Java properties escapes; a malformed ``\\uXXXX`` raises :class:`ConfigError`."""
    if "\\" not in raw:
        return raw
    out: list[str] = []
    position = 0
    while position < len(raw):
        char = raw[position]
        position += 1
        if char != "\\" or position >= len(raw):
            out.append(char)
            continue
        escaped = raw[position]
        position += 1
        if escaped == "u":
            digits = raw[position : position + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"malformed \\uxxxx escape: \\u{digits}", line=line_number)
            out.append(chr(int(digits, 16)))
            position += 4
        else:
            out.append(_ESCAPES.get(escaped, escaped))
    return "".join(out)
