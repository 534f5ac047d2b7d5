"""The kinds of value a setting holds, each with the one parser that turns a :class:`Setting` into it.

Every parser strips surrounding blanks where MM2's ``ConfigDef`` does (numbers, booleans, choices, classes) and raises
:class:`~airmirror.errors.ConfigError` naming the setting's key and line when the text is not such a value.  A default
is declared as the text a user would write and parsed by the same parser (:mod:`airmirror.config.settings_registry`),
so a default can never be a value the parser refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Generic, TypeVar

from airmirror.config.durations import parse_duration
from airmirror.config.properties import Setting
from airmirror.errors import ConfigError
from airmirror.mm2.policy import PatternList

T = TypeVar("T")

BROKER_DEFAULT_REPLICATION_FACTOR = -1
"""A replication factor that leaves the choice to the target broker (``default.replication.factor``)."""


@dataclass(frozen=True)
class ValueType(Generic[T]):
    """A kind of value: ``name`` says it in the configuration reference, ``parse`` reads it from a setting."""

    name: str
    parse: Callable[[Setting], T]


def _integer(setting: Setting) -> int:
    if not re.fullmatch(r"[+-]?\d+", setting.value.strip()):
        raise ConfigError(f"value {setting.value!r} is not an integer", key=setting.key, line=setting.line)
    return int(setting.value)


def _boolean(setting: Setting) -> bool:
    value = setting.value.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"value {setting.value!r} is not true or false", key=setting.key, line=setting.line)
    return value == "true"


def _positive_integer(setting: Setting) -> int:
    value = _integer(setting)
    if value <= 0:
        raise ConfigError(f"value {value} must be positive", key=setting.key, line=setting.line)
    return value


def _interval(setting: Setting) -> int:
    """MM2's ``{task}.interval.seconds``: any integer but 0 (MM2's scheduler refuses a zero period; a negative one
    turns the task off)."""
    value = _integer(setting)
    if value == 0:
        raise ConfigError(
            "value 0 is not an interval: give a positive number of seconds, or a negative one to turn this "
            "off as MM2 does",
            key=setting.key,
            line=setting.line,
        )
    return value


def _replication_factor(setting: Setting) -> int:
    value = _integer(setting)
    if value < 1 and value != BROKER_DEFAULT_REPLICATION_FACTOR:
        raise ConfigError(
            f"value {value} must be positive, or {BROKER_DEFAULT_REPLICATION_FACTOR} for the broker default",
            key=setting.key,
            line=setting.line,
        )
    return value


def _positive_duration(setting: Setting) -> timedelta:
    duration = parse_duration(setting.value)
    if duration is None or duration <= timedelta(0):
        raise ConfigError(
            f"value {setting.value!r} is not a positive duration (30s, 5m, 2h, 7d)", key=setting.key, line=setting.line
        )
    return duration


def _patterns(setting: Setting) -> PatternList:
    return PatternList.parse(setting.value, key=setting.key, line=setting.line)


def _regex(setting: Setting) -> re.Pattern[str]:
    try:
        return re.compile(setting.value.strip())
    except re.error as exc:
        raise ConfigError(
            f"invalid regular expression {setting.value!r}: {exc}", key=setting.key, line=setting.line
        ) from exc


def _text(setting: Setting) -> str:
    return setting.value.strip()


def _non_empty_text(setting: Setting) -> str:
    value = setting.value.strip()
    if not value:
        raise ConfigError("the value must not be empty", key=setting.key, line=setting.line)
    return value


INTEGER = ValueType("integer", _integer)
BOOLEAN = ValueType("boolean", _boolean)
POSITIVE_INTEGER = ValueType("positive integer", _positive_integer)
INTERVAL_SECONDS = ValueType("seconds, not 0 (negative: off)", _interval)
REPLICA_COUNT = ValueType("replication factor (positive, or -1: the broker's default)", _replication_factor)
POSITIVE_DURATION = ValueType("duration (30s, 5m, 2h, 7d)", _positive_duration)
PATTERNS = ValueType("comma-separated regexes", _patterns)
REGEX = ValueType("regex", _regex)
TEXT = ValueType("text", _text)
NON_EMPTY_TEXT = ValueType("text, not empty", _non_empty_text)


def at_least(minimum: int, why: str) -> ValueType[int]:
    """A positive integer of at least ``minimum``; the error says ``why``."""

    def parse(setting: Setting) -> int:
        value = _positive_integer(setting)
        if value < minimum:
            raise ConfigError(f"value {value} is below {minimum}: {why}", key=setting.key, line=setting.line)
        return value

    return ValueType(f"integer, at least {minimum}", parse)


def one_of(*choices: str) -> ValueType[str]:
    """One of ``choices``, written exactly so."""

    def parse(setting: Setting) -> str:
        value = setting.value.strip()
        if value not in choices:
            raise ConfigError(
                f"value {setting.value!r} must be one of {', '.join(choices)}", key=setting.key, line=setting.line
            )
        return value

    return ValueType(" or ".join(f"`{choice}`" for choice in choices), parse)


def mm2_class(class_name: str) -> ValueType[str]:
    """A pluggable MM2 class of which airmirror implements only MM2's default, ``class_name`` (fully qualified).

    The whole name is compared, as Java loads a class by it: ``com.acme.mm2.DefaultTopicFilter`` is a custom class
    that MM2 would run, so it is refused."""
    simple_name = class_name.rsplit(".", 1)[-1]

    def parse(setting: Setting) -> str:
        value = setting.value.strip()
        if value != class_name:
            raise ConfigError(
                f"{setting.value!r} is not supported, airmirror only implements MM2's {class_name}",
                key=setting.key,
                line=setting.line,
            )
        return value

    return ValueType(f"class (only MM2's `{simple_name}`)", parse)
