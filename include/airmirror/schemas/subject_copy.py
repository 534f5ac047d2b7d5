"""Copying subjects from a source registry to a target registry, and the schema-id map that results.

Contract (``airmirror.schema.ids``, :class:`~airmirror.config.schema_registries.SchemaIds`):

1. **Names.**  A subject named after a replicated topic (TopicNameStrategy: ``{topic}-key``, ``{topic}-value``) is
   registered on the target under the remote topic's subject, by the flow's replication policy; every other subject
   (RecordNameStrategy and the like, and referenced subjects of no replicated topic) keeps its name
   (:class:`SubjectNames`).  Whether a topic is replicated is the flow's whole rule (:class:`TopicNaming`), not the
   topics a batch or a sync happens to cover, so a schema met mid-run is named as the next sync names it.
2. **Order.**  A subject's versions are copied oldest first; a version's referenced schemas are copied before it
   (recursively), and its references then name the referenced subjects' names and versions on the target.
3. **Compatibility.**  Each target subject gets the level in force for its source subject (its own, else the source
   registry's global level: :meth:`RegistryClient.compatibility`), set before its versions are registered unless
   the target already has that level in force for it, so whatever the source accepted the target accepts: a source
   at ``NONE`` beside a target at ``BACKWARD`` never dead-ends on an evolution the source allowed.  A target subject
   the flow does not own is never changed: one under the source's own name (the replication policy does not rename
   it) that already holds versions on the target.
4. **translate**: the target assigns its own ids (registering is idempotent: a schema already under the subject keeps
   its id); each copied version adds ``source id -> target id`` to :attr:`SubjectCopier.ids`.
5. **keep**: the target subject is put in IMPORT mode and each version registered under the source's id and
   version.  An id the target already holds with another schema is an error naming the id, both subjects and both
   registries; one it holds with the same schema is taken as copied.  A registry that registers the schema under
   another id (it ignores IMPORT mode's ids, as Apicurio 3.3 does) is an error naming both ids.  The map is the
   identity.  The target subjects stay in IMPORT mode (producers cannot register schemas there meanwhile); set them
   to READWRITE when producers move to the target.
6. **Dry run**: nothing is written; :meth:`SubjectCopier.copy_subject` reports what it would register.
7. Copying is safe to repeat and to interrupt: a version already on the target is found, not registered again, so a
   run that died half way is completed by the next.
8. **An id met in a record** (:meth:`SubjectCopier.copy_id`) is copied through a subject that holds it, the record
   topic's subject first; when no live subject holds it (all of them soft-deleted: the registry still serves the
   schema by id), it is registered under the record topic's target subject, as a serializer would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from airmirror.config.schema_registries import SchemaIds
from airmirror.errors import RegistryRefusal, ReplicationFailure
from airmirror.mm2.policy import RegexFilter, ReplicationPolicy, should_replicate_topic
from airmirror.schemas.framing import Side
from airmirror.schemas.registry_client import Reference, RegistryClient, SchemaText

SUFFIXES = tuple(f"-{side.value}" for side in Side)


def topic_of(subject: str) -> tuple[str, Side] | None:
    """The topic and side a TopicNameStrategy subject names, ``None`` for another subject."""
    for side in Side:
        suffix = f"-{side.value}"
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)], side
    return None


@dataclass(frozen=True)
class TopicNaming:
    """A flow's topic selection and replication policy (MM2's rule:
    :func:`~airmirror.mm2.policy.should_replicate_topic`) as plain data that pickles to Spark executors: which source
    topics it replicates, under which remote names."""

    policy: ReplicationPolicy
    topics: RegexFilter
    source: str
    target: str
    heartbeats_replication: bool

    def remote_topic(self, topic: str) -> str | None:
        """The remote topic of source ``topic``; ``None`` when the flow does not replicate it."""
        replicated = should_replicate_topic(
            self.policy,
            self.topics,
            self.source,
            self.target,
            topic,
            heartbeats_replication=self.heartbeats_replication,
        )
        return self.policy.format_remote_topic(self.source, topic) if replicated else None


@dataclass(frozen=True)
class SubjectNames:
    """Source subject -> target subject (rule 1): ``remote_topics`` maps source topics to their remote topics, and
    ``naming``, when given, names every other topic the flow replicates; plain data, so it pickles to Spark
    executors."""

    remote_topics: Mapping[str, str]
    naming: TopicNaming | None = None

    def target(self, subject: str) -> str:
        named = topic_of(subject)
        if named is None:
            return subject
        topic, side = named
        remote = self.remote_topics.get(topic)
        if remote is None and self.naming is not None:
            remote = self.naming.remote_topic(topic)
        return subject if remote is None else f"{remote}-{side.value}"


@dataclass(frozen=True)
class CopiedVersion:
    """One source version as it stands on the target: the target subject's version and the target id."""

    source_subject: str
    source_version: int | None
    source_id: int
    target_subject: str
    target_version: int | None
    target_id: int | None
    registered: bool


@dataclass
class SubjectReport:
    """What copying one subject did (or, in a dry run, would do)."""

    subject: str
    target_subject: str
    versions: list[CopiedVersion] = field(default_factory=list)
    compatibility: str | None = None

    @property
    def registered(self) -> int:
        return sum(1 for v in self.versions if v.registered)


class SubjectCopier:
    """Copies subjects between two registries (see the module docstring); keeps what it copied, so a version
    met again (a reference, or an id seen in a record) costs no request."""

    def __init__(
        self,
        source: RegistryClient,
        target: RegistryClient,
        mode: SchemaIds,
        names: SubjectNames,
        *,
        dry_run: bool = False,
    ) -> None:
        if mode is SchemaIds.OFF:
            raise ValueError("nothing to copy with airmirror.schema.ids = off")
        self.source, self.target, self.mode, self.names, self.dry_run = source, target, mode, names, dry_run
        self.ids: dict[int, int] = {}
        """Source id -> target id of every version copied (rules 4 and 5)."""
        self._copied: dict[tuple[str, int], CopiedVersion] = {}
        self._levels: dict[str, str | None] = {}
        """The source subjects prepared (rule 3), with the compatibility level in force for them."""
        self._global_level: str | None = None

    def copy_subject(self, subject: str, versions: list[int] | None = None) -> SubjectReport:
        """Copy every version of ``subject`` (rules 2-7); ``versions`` when the caller has just listed them."""
        report = SubjectReport(subject, self.names.target(subject))
        report.compatibility = self._prepare(subject)
        for version in self.source.versions(subject) if versions is None else versions:
            report.versions.append(self.copy_version(subject, version))
        return report

    def copy_version(self, subject: str, version: int) -> CopiedVersion:
        """Copy one version of ``subject`` (its references first); returns where it stands on the target."""
        if (subject, version) in self._copied:
            return self._copied[(subject, version)]
        found = self.source.version(subject, version)
        references = tuple(self._copy_reference(reference) for reference in found.schema.references)
        schema = replace(found.schema, references=references)
        self._prepare(subject)
        target_subject = self.names.target(subject)
        if self.mode is SchemaIds.KEEP:
            copied = self._import(subject, version, found.schema_id, target_subject, schema)
        else:
            copied = self._register(subject, version, found.schema_id, target_subject, schema)
        self._copied[(subject, version)] = copied
        if copied.target_id is not None:
            self.ids[found.schema_id] = copied.target_id
        return copied

    def copy_id(self, schema_id: int, subject_hint: str | None = None) -> int | None:
        """Copy the schema of source id ``schema_id`` (an id met in a record that the map does not hold yet) through
        one of the subjects that hold it, ``subject_hint`` if it is one of them; returns its target id, ``None``
        when the source registry does not know the id."""
        if schema_id in self.ids:
            return self.ids[schema_id]
        holders = sorted(self.source.subject_versions(schema_id), key=lambda held: held[0] != subject_hint)
        for subject, version in holders:
            try:
                return self.copy_version(subject, version).target_id
            except RegistryRefusal as refusal:
                if refusal.status != 404:  # a soft-deleted subject still lists the id but no longer serves the version
                    raise
        schema = self.source.schema(schema_id)
        if schema is None:
            return None
        if subject_hint is None:
            raise ReplicationFailure(
                f"schema id {schema_id} of the schema registry of cluster {self.source.alias!r} belongs to no subject, "
                "so it cannot be registered on the target"
            )
        return self._copy_orphan(schema_id, schema, subject_hint).target_id

    # -- rules 3, 4 and 5 ---------------------------------------------------------------------------------------------
    def _prepare(self, subject: str) -> str | None:
        """Once per subject: the target subject's compatibility (rule 3) and, for keep, IMPORT mode (rule 5); returns
        the level in force for the subject on the source (``None`` when the registry names none)."""
        if subject in self._levels:
            return self._levels[subject]
        if self._global_level is None:
            self._global_level = self.source.compatibility() or ""
        level = self.source.compatibility(subject) or self._global_level or None
        self._levels[subject] = level
        target_subject = self.names.target(subject)
        if not self.dry_run:
            if self.mode is SchemaIds.KEEP:
                self.target.set_mode(target_subject, "IMPORT")
            if (
                level is not None
                and self.target.compatibility(target_subject) != level
                and (target_subject != subject or not self.target.versions(target_subject))
            ):
                self.target.set_compatibility(target_subject, level)
        return level

    def _copy_orphan(self, schema_id: int, schema: SchemaText, subject: str) -> CopiedVersion:
        """A schema that no live subject holds (its subjects were soft-deleted), registered under ``subject``'s
        target name, as a serializer writing the record's topic would have (rule 8)."""
        references = tuple(self._copy_reference(reference) for reference in schema.references)
        schema = replace(schema, references=references)
        target_subject = self.names.target(subject)
        if self.mode is SchemaIds.KEEP:
            copied = self._import(subject, None, schema_id, target_subject, schema)
        else:
            copied = self._register(subject, None, schema_id, target_subject, schema)
        if copied.target_id is not None:
            self.ids[schema_id] = copied.target_id
        return copied

    def _copy_reference(self, reference: Reference) -> Reference:
        copied = self.copy_version(reference.subject, reference.version)
        version = copied.target_version if copied.target_version is not None else reference.version
        return Reference(reference.name, copied.target_subject, version)

    def _register(
        self, subject: str, version: int | None, source_id: int, target_subject: str, schema: SchemaText
    ) -> CopiedVersion:
        found = self.target.lookup(target_subject, schema)
        registered = found is None
        if registered and not self.dry_run:
            self.target.register(target_subject, schema)
            found = self.target.lookup(target_subject, schema)
        target_id, target_version = found if found is not None else (None, None)
        return CopiedVersion(subject, version, source_id, target_subject, target_version, target_id, registered)

    def _import(
        self, subject: str, version: int | None, source_id: int, target_subject: str, schema: SchemaText
    ) -> CopiedVersion:
        held = self.target.schema(source_id)
        if held is not None and not same_schema(held, schema):
            holders = ", ".join(f"{s} v{v}" for s, v in self.target.subject_versions(source_id)) or "no subject"
            raise ReplicationFailure(
                f"airmirror.schema.ids = keep: schema id {source_id} ({subject} v{version} on the registry of cluster "
                f"{self.source.alias!r}) is taken on the registry of cluster {self.target.alias!r} by another schema "
                f"({holders}); keep needs a target registry without that id (or use translate)"
            )
        found = self.target.lookup(target_subject, schema)
        present = found is not None and found[0] == source_id
        if not present and not self.dry_run:
            given = self.target.register(target_subject, schema, schema_id=source_id, version=version)
            if given != source_id:
                raise ReplicationFailure(
                    f"airmirror.schema.ids = keep: the registry of cluster {self.target.alias!r} registered {subject} "
                    f"v{version} as {target_subject} under id {given}, not under the source's id {source_id}: it does "
                    "not keep the ids of IMPORT mode; use airmirror.schema.ids = translate with this registry"
                )
        target_id = source_id if present or not self.dry_run else None
        return CopiedVersion(subject, version, source_id, target_subject, version, target_id, not present)


def same_schema(a: SchemaText, b: SchemaText) -> bool:
    """Whether two registries hold the same schema: same type and text (whitespace aside), references by name."""
    return (
        a.schema_type == b.schema_type
        and "".join(a.schema.split()) == "".join(b.schema.split())
        and [r.name for r in a.references] == [r.name for r in b.references]
    )
