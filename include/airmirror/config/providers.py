"""Kafka config providers: ``${provider:[path:]key}`` references in values, as MM2 resolves them.

Contract: references use Kafka's ``ConfigTransformer`` syntax and are replaced in a single pass (a resolved value is
not scanned again).  The providers are the ones the file declares, as MM2 declares them: ``config.providers = file,
env`` names them and ``config.providers.{name}.class`` gives each its class, one of Kafka's
``FileConfigProvider`` (``${file:/path/file.properties:key}``), ``EnvVarConfigProvider`` (``${env:NAME}``) and
``DirectoryConfigProvider`` (``${dir:/path/dir:file}``, the content of a file of that folder).  Their restrictions
hold as in Kafka (KIP-993): ``config.providers.{name}.param.allowed.paths`` (file and directory providers: a
comma-separated list of absolute, existing paths; a path outside them is refused) and
``config.providers.{name}.param.allowlist.pattern`` (env provider: a variable whose name the regex does not match
is not visible).  A file without ``config.providers`` gets ``env`` and ``file`` unrestricted, so that a reference
is never passed on as a literal value.  Relative paths are relative to the working directory; each file is read
once per resolution.  Any reference that cannot be resolved (undeclared provider, missing or hidden variable, a
path not allowed, unreadable file, missing key) and any bad provider declaration raises :class:`ConfigError`
naming the key and line that hold it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import PurePath

from airmirror.config.properties import Setting, load_properties
from airmirror.config.setting_types import REGEX
from airmirror.errors import ConfigError

_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
PROVIDERS_KEY = "config.providers"
_PROVIDER_PACKAGE = "org.apache.kafka.common.config.provider."
FILE_PROVIDER = _PROVIDER_PACKAGE + "FileConfigProvider"
ENV_PROVIDER = _PROVIDER_PACKAGE + "EnvVarConfigProvider"
DIRECTORY_PROVIDER = _PROVIDER_PACKAGE + "DirectoryConfigProvider"
PROVIDER_PARAMS = {
    FILE_PROVIDER: "allowed.paths",
    DIRECTORY_PROVIDER: "allowed.paths",
    ENV_PROVIDER: "allowlist.pattern",
}
"""The one restriction each provider class takes (``config.providers.{name}.param.{param}``)."""


@dataclass(frozen=True)
class _Provider:
    """One declared provider: its class, and the setting of its restriction (if any)."""

    name: str
    class_name: str
    restriction: Setting | None = None


def declared_providers(settings: Mapping[str, Setting]) -> dict[str, _Provider]:
    """The providers the file declares (see the module docstring), or ``env`` and ``file`` when it declares none."""
    listing = settings.get(PROVIDERS_KEY)
    if listing is None:
        return {"env": _Provider("env", ENV_PROVIDER), "file": _Provider("file", FILE_PROVIDER)}
    providers = {}
    for name in (entry for entry in re.split(r"\s*,\s*", listing.value.strip()) if entry):
        class_key = f"{PROVIDERS_KEY}.{name}.class"
        class_setting = settings.get(class_key)
        if class_setting is None:
            raise ConfigError(f"config provider {name!r} has no '{class_key}'", key=listing.key, line=listing.line)
        class_name = class_setting.value.strip()
        if class_name not in PROVIDER_PARAMS:
            raise ConfigError(
                f"{class_name!r} is not supported (airmirror resolves Kafka's FileConfigProvider, EnvVarConfigProvider "
                "and DirectoryConfigProvider)",
                key=class_key,
                line=class_setting.line,
            )
        restriction = settings.get(f"{PROVIDERS_KEY}.{name}.param.{PROVIDER_PARAMS[class_name]}")
        providers[name] = _Provider(name, class_name, restriction)
    return providers


def resolve_references(settings: Mapping[str, Setting], env: Mapping[str, str]) -> dict[str, Setting]:
    """Return ``settings`` with every ``${...}`` reference in their values replaced."""
    resolvers = {name: _resolver(provider, env) for name, provider in declared_providers(settings).items()}

    def lookup(setting: Setting, match: re.Match[str]) -> str:
        name, path, key = match.group(1), match.group(2) or "", match.group(3)
        resolver = resolvers.get(name)
        if resolver is None:
            declared = ", ".join(resolvers) or "none"
            raise ConfigError(
                f"{match.group(0)!r}: config provider {name!r} is not declared ({PROVIDERS_KEY}: {declared})",
                key=setting.key,
                line=setting.line,
            )
        try:
            return resolver(path, key)
        except ConfigError as exc:
            raise ConfigError(f"{match.group(0)}: {exc}", key=setting.key, line=setting.line) from exc

    return {
        key: replace(setting, value=_REFERENCE.sub(partial(lookup, setting), setting.value))
        if "${" in setting.value
        else setting
        for key, setting in settings.items()
    }


def _resolver(provider: _Provider, env: Mapping[str, str]) -> Callable[[str, str], str]:
    """``(path, key) -> value`` for one provider; raises :class:`ConfigError` (its message is wrapped by the caller)."""
    if provider.class_name == ENV_PROVIDER:
        pattern = None if provider.restriction is None else REGEX.parse(provider.restriction)
        return partial(_environment_variable, env, pattern)
    allowed = None if provider.restriction is None else _allowed_paths(provider.restriction)
    files: dict[str, dict[str, Setting]] = {}
    if provider.class_name == DIRECTORY_PROVIDER:
        return partial(_directory_file, allowed)
    return partial(_properties_value, allowed, files)


def _environment_variable(env: Mapping[str, str], pattern: re.Pattern[str] | None, path: str, name: str) -> str:
    if path:
        raise ConfigError(f"a path is not supported by the env provider, got {path!r}")
    if pattern is not None and not pattern.fullmatch(name):
        raise ConfigError(f"environment variable {name!r} does not match the env provider's allowlist.pattern")
    if name not in env:
        raise ConfigError(f"environment variable {name!r} is not set")
    return env[name]


def _properties_value(allowed: list[PurePath] | None, files: dict[str, dict[str, Setting]], path: str, key: str) -> str:
    _check_allowed(allowed, path)
    if path not in files:
        files[path] = load_properties(path)
    if key not in files[path]:
        raise ConfigError(f"key {key!r} not found in {path!r}")
    return files[path][key].value


def _directory_file(allowed: list[PurePath] | None, path: str, name: str) -> str:
    _check_allowed(allowed, path)
    file = os.path.join(path, name)
    if os.path.dirname(os.path.normpath(file)) != os.path.normpath(path):
        raise ConfigError(f"{name!r} is not a file of directory {path!r}")
    try:
        with open(file, encoding="utf-8") as opened:
            return opened.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {file!r}: {exc.strerror or exc}") from exc


def _check_allowed(allowed: list[PurePath] | None, path: str) -> None:
    """Kafka's ``AllowedPaths.parseUntrustedPath``: the normalized path must lie inside an allowed path."""
    if allowed is not None and not any(PurePath(os.path.normpath(path)).is_relative_to(a) for a in allowed):
        raise ConfigError(f"path {path!r} is not in the provider's allowed.paths")


def _allowed_paths(setting: Setting) -> list[PurePath]:
    paths = []
    for entry in setting.value.split(","):
        path = os.path.normpath(entry.strip())
        if not os.path.isabs(path):
            raise ConfigError(f"path {path!r} is not absolute", key=setting.key, line=setting.line)
        if not os.path.exists(path):
            raise ConfigError(f"path {path!r} does not exist", key=setting.key, line=setting.line)
        paths.append(PurePath(path))
    return paths
