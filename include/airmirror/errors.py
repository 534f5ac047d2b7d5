"""Error types shared by the library and the CLI.

Contract: every error a user can fix by changing their input (config file, flags, params) is an
``InputError`` and maps to exit code 2; everything else that fails at run time is a
``ReplicationFailure`` (exit code 1).  Messages always name the offending key, line, topic or flag.
"""

from __future__ import annotations


class AirmirrorError(Exception):
    """Base class of every error airmirror raises on purpose."""

    exit_code = 1


class InputError(AirmirrorError):
    """Bad user input: a config key, a flag, a param.  Exit code 2."""

    exit_code = 2


class ConfigError(InputError):
    """An invalid MM2 properties file.  ``key`` and ``line`` locate the problem when known."""

    def __init__(self, message: str, *, key: str | None = None, line: int | None = None) -> None:
        self.key = key
        self.line = line
        where = []
        if key is not None:
            where.append(f"key '{key}'")
        if line is not None:
            where.append(f"line {line}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(prefix + message)


class ReplicationFailure(AirmirrorError):
    """A run-time failure (broker unreachable, Spark job failed, DB down).  Exit code 1."""


class AccessDenied(ReplicationFailure):
    """A cluster refused the flow's user an operation its ACLs do not grant; the message names the ACL to grant
    (:mod:`airmirror.kafka.authorization`).  Exit code 1."""


class RegistryUnavailable(ReplicationFailure):
    """A schema registry could not be reached, or kept failing, for the client's whole retry window
    (:mod:`airmirror.schemas.registry_client`).  Exit code 1."""


class RegistryRefusal(ReplicationFailure):
    """A schema registry refused a request; ``status`` and Confluent's ``error_code`` say why.  Exit code 1."""

    def __init__(self, message: str, *, status: int = 0, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status, self.error_code = status, error_code


class SchemaRefused(ReplicationFailure):
    """The target schema registry refused to register a source version (its compatibility rules, 409 or 422); the
    message names the source subject and version, the target subject, both registries and the settings that resolve
    it.  Exit code 1."""


class UnknownSchemaId(ReplicationFailure):
    """A copied record names a schema id its source registry does not know, under ``airmirror.schema.unknown =
    fail``; the message names topic, partition, offset and id.  Exit code 1."""
