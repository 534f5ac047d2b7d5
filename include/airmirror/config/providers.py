"""Kafka config providers: ``${env:NAME}`` and ``${file:/path/file.properties:key}`` references in values.

Contract: references use Kafka's ``ConfigTransformer`` syntax ``${provider:[path:]key}`` and are replaced in
a single pass (a resolved value is not scanned again).  ``env`` reads a variable from the given environment;
``file`` reads ``key`` from a properties file (relative paths are relative to the working directory, each
file is read once per resolution).  Any reference that cannot be resolved - unknown provider, missing
variable, unreadable file, missing key - raises :class:`ConfigError` naming the key and line that hold it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from airmirror.config.properties import Setting, load_properties
from airmirror.errors import ConfigError

_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")


def resolve_references(settings: Mapping[str, Setting], env: Mapping[str, str]) -> dict[str, Setting]:
    """Return ``settings`` with every ``${...}`` reference in their values replaced."""
    files: dict[str, dict[str, Setting]] = {}

    def lookup(setting: Setting, match: re.Match[str]) -> str:
        provider, path, name = match.group(1), match.group(2) or "", match.group(3)
        if provider == "env":
            if name not in env:
                raise ConfigError(f"environment variable {name!r} is not set", key=setting.key, line=setting.line)
            return env[name]
        if provider == "file":
            if path not in files:
                try:
                    files[path] = load_properties(path)
                except ConfigError as exc:
                    raise ConfigError(f"{match.group(0)}: {exc}", key=setting.key, line=setting.line) from exc
            if name not in files[path]:
                raise ConfigError(f"key {name!r} not found in {path!r}", key=setting.key, line=setting.line)
            return files[path][name].value
        raise ConfigError(
            f"unsupported config provider in {match.group(0)!r} (supported: env, file)",
            key=setting.key,
            line=setting.line,
        )

    return {
        key: replace(setting, value=_REFERENCE.sub(partial(lookup, setting), setting.value))
        if "${" in setting.value
        else setting
        for key, setting in settings.items()
    }
