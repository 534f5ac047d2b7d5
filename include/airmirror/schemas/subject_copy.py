"""Copying subjects from a source registry to a target registry, and the schema-id map that results.

Contract (``airmirror.schema.ids``, :class:`~airmirror.config.schema_registries.SchemaIds`):

1. **Names.**  A subject named after a replicated topic (TopicNameStrategy: ``{topic}-key``, ``{topic}-value``) is
   registered on the target under the remote topic's subject, by the flow's replication policy; every other subject
   (RecordNameStrategy and the like, and referenced subjects of no replicated topic) keeps its name
   (:class:`SubjectNames`).  Whether a topic is replicated is the flow's whole rule (:class:`TopicNaming`), not the
   topics a batch or a sync happens to cover, so a schema met mid-run is named as the next sync names it.
2. **Order.**  A subject's versions are copied oldest first, also when a version is met first in a record: copying v3
   copies v1 and v2 before it, so concurrent copiers (the tasks of a run) register a subject's versions in the source's
   order (the registry is the arbiter: each registers what it lacks, then reads back the id and version the registry
   holds).  A version's referenced schemas are copied before it (recursively), and its references then name the
   referenced subjects' names and versions on the target.
3. **Compatibility.**  Each target subject gets the level in force for its source subject (its own, else the source
   registry's global level: :meth:`RegistryClient.compatibility`), set before its versions are registered unless the
   target already has that level in force for it, so whatever the source accepted the target accepts: a source at
   ``NONE`` beside a target at ``BACKWARD`` never dead-ends on an evolution the source allowed.  A target subject the
   flow does not own is never changed: one under the source's own name (the replication policy does not rename it) that
   already holds versions on the target.
4. **translate**: the target assigns its own ids (registering is idempotent: a schema already under the subject keeps
   its id); each copied version adds ``source id -> target id`` to :attr:`SubjectCopier.ids`.
5. **keep**: before anything is written on the target, a probe checks that the target registry keeps the ids of IMPORT
   mode (a scratch subject, put in IMPORT mode, registers a schema under an unused id and is deleted for good at once);
   one that does not (Apicurio 3.3's Confluent API) is an error naming the registry, with nothing written but the probe,
   which is gone.  Then the target subject is put in IMPORT mode and each version registered under the source's id and
   version.  An id the target already holds with another schema is an error naming the id, both subjects and both
   registries; one it holds with the same schema is taken as copied.  A registry that registers the schema under another
   id (it ignores IMPORT mode's ids, as Apicurio 3.3 does) is an error naming both ids.  The map is the identity.  The
   target subjects stay in IMPORT mode (producers cannot register schemas there meanwhile); set them to READWRITE when
   producers move to the target.
6. **Dry run**: nothing is written; :meth:`SubjectCopier.copy_subject` reports what it would register.
7. Copying is safe to repeat and to interrupt: a version already on the target is found, not registered again, so a run
   that died half way is completed by the next.
8. **An id met in a record** (:meth:`SubjectCopier.copy_id`) is copied through a subject that holds it, the record
   topic's subject first.  When no live version holds it (a soft-deleted version: the registry still serves the
   schema by id), it is registered on the target under a subject of its own, :func:`deleted_subject` (the target
   name of the subject that held it, else of the record topic's, then ``.airmirror-deleted-{source id}``), and
   soft-deleted there at once: the record decodes on the target by its id, no subject's latest version (the one
   producers with ``use.latest.version`` take) changes, and no compatibility rule of the target subject can refuse
   the old schema.  One found there, soft-deleted, is not registered again.
9. **Refusals.**  A version the target registry refuses to register (409 or 422: the compatibility rules of a target
   subject the flow does not own, say) is a :class:`~airmirror.errors.SchemaRefused` naming the source subject and
   version, the target subject, both registries and the settings that resolve it; later versions of the subject wait
   behind it (rule 2).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from airmirror.config.schema_registries import SchemaIds
from airmirror.config.transforms import TransformChain, routed_remote_topic
from airmirror.errors import RegistryRefusal, ReplicationFailure, SchemaRefused
from airmirror.mm2.policy import RegexFilter, ReplicationPolicy, should_replicate_topic
from airmirror.schemas.framing import Side
from airmirror.schemas.registry_client import Reference, RegistryClient, SchemaText

SUFFIXES = tuple(f"-{side.value}" for side in Side)
REFUSED = frozenset({409, 422})
"""The HTTP statuses of a registration the registry refuses for the schema itself (rule 9)."""
DELETED_SUBJECT = ".airmirror-deleted-"
"""What :func:`deleted_subject` appends to a target subject's name (rule 8)."""
PROBE_IDS = (1 << 30, 1 << 31)
"""The range the keep probe's id is drawn from (rule 5): far above the ids registries give."""


def topic_of(subject: str) -> tuple[str, Side] | None:
    """The topic and side a TopicNameStrategy subject names, ``None`` for another subject."""
    for side in Side:
        suffix = f"-{side.value}"
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)], side
    return None


@dataclass(frozen=True)
class TopicNaming:
    """A flow's topic selection, replication policy (MM2's rule:
    :func:`~airmirror.mm2.policy.should_replicate_topic`) and routers (``chain``) as plain data that pickles to Spark
    executors: which source topics it replicates, under which remote names."""

    policy: ReplicationPolicy
    topics: RegexFilter
    source: str
    target: str
    heartbeats_replication: bool
    chain: TransformChain = field(default_factory=TransformChain)

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
        return routed_remote_topic(self.policy, self.chain, self.source, topic) if replicated else None


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


@dataclass(frozen=True)
class Placement:
    """One source version on its way to the target: the source subject, version and id, the target subject, the
    schema to register there (references named as on the target), and whether it is rule 8's soft-deleted one."""

    subject: str
    version: int | None
    source_id: int
    target_subject: str
    schema: SchemaText
    deleted: bool = False


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
        self._versions: dict[str, list[int]] = {}
        """The source subjects' versions, as listed once (rule 2)."""
        self._keeps_ids = False
        """Whether rule 5's probe found that the target keeps the ids of IMPORT mode."""

    def copy_subject(self, subject: str, versions: list[int] | None = None) -> SubjectReport:
        """Copy every version of ``subject`` (rules 2-7); ``versions`` when the caller has just listed them."""
        if versions is not None:
            self._versions[subject] = versions
        report = SubjectReport(subject, self.names.target(subject))
        report.compatibility = self._prepare(subject)
        for version in self._source_versions(subject):
            report.versions.append(self.copy_version(subject, version))
        return report

    def copy_version(self, subject: str, version: int) -> CopiedVersion:
        """Copy one version of ``subject``, the subject's earlier versions and its references first (rule 2);
        returns where it stands on the target."""
        if (subject, version) in self._copied:
            return self._copied[(subject, version)]
        for earlier in self._source_versions(subject):
            if earlier >= version:
                break
            self.copy_version(subject, earlier)
        found = self.source.version(subject, version)
        references = tuple(self._copy_reference(reference) for reference in found.schema.references)
        schema = replace(found.schema, references=references)
        self._prepare(subject)
        target_subject = self.names.target(subject)
        copied = self._place(Placement(subject, version, found.schema_id, target_subject, schema))
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

        def hint_first(held: tuple[str, int]) -> bool:
            return held[0] != subject_hint

        for subject, version in sorted(self.source.subject_versions(schema_id), key=hint_first):
            try:
                return self.copy_version(subject, version).target_id
            except RegistryRefusal as refusal:
                if refusal.status != 404:  # a soft-deleted subject still lists the id but no longer serves the version
                    raise
        schema = self.source.schema(schema_id)
        if schema is None:
            return None
        deleted = sorted(self.source.subject_versions(schema_id, deleted=True), key=hint_first)
        holder: tuple[str | None, int | None] = deleted[0] if deleted else (subject_hint, None)
        if holder[0] is None:
            raise ReplicationFailure(
                f"schema id {schema_id} of the schema registry of cluster {self.source.alias!r} belongs to no subject, "
                "so it cannot be registered on the target"
            )
        return self._copy_deleted(schema_id, schema, holder[0], holder[1]).target_id

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
                self._check_keeps_ids()
                self.target.set_mode(target_subject, "IMPORT")
            if (
                level is not None
                and self.target.compatibility(target_subject) != level
                and (target_subject != subject or not self.target.versions(target_subject))
            ):
                self.target.set_compatibility(target_subject, level)
        return level

    def _copy_deleted(self, schema_id: int, schema: SchemaText, subject: str, version: int | None) -> CopiedVersion:
        """A schema that no live version holds, registered under a subject of its own and soft-deleted there
        (rule 8)."""
        references = tuple(self._copy_reference(reference) for reference in schema.references)
        schema = replace(schema, references=references)
        target_subject = deleted_subject(self.names.target(subject), schema_id)
        keep = self.mode is SchemaIds.KEEP and not self.dry_run
        if keep and self.target.lookup(target_subject, schema, deleted=True) is None:
            self._check_keeps_ids()
            self.target.set_mode(target_subject, "IMPORT")
        copied = self._place(Placement(subject, version, schema_id, target_subject, schema, deleted=True))
        if copied.target_id is not None:
            self.ids[schema_id] = copied.target_id
        return copied

    def _check_keeps_ids(self) -> None:
        """Rule 5's probe, once per copier, before its first write: a :class:`ReplicationFailure` when the target
        registry does not keep the ids of IMPORT mode."""
        if self._keeps_ids:
            return
        probe = f"airmirror-keep-probe-{uuid.uuid4().hex}"
        schema = SchemaText(f'{{"type":"record","name":"P{uuid.uuid4().hex}","namespace":"airmirror","fields":[]}}')
        wanted = next(i for i in iter(lambda: random.randrange(*PROBE_IDS), None) if self.target.schema(i) is None)
        try:
            self.target.set_mode(probe, "IMPORT")
            given = self.target.register(probe, schema, schema_id=wanted, version=1)
        finally:
            self.target.delete_subject(probe)
        if given != wanted:
            raise ReplicationFailure(
                f"airmirror.schema.ids = keep: the schema registry of cluster {self.target.alias!r} does not keep the "
                f"ids of IMPORT mode (a probe registered under id {wanted} got id {given}, and was deleted); nothing "
                "else was written on it. Use airmirror.schema.ids = translate with this registry"
            )
        self._keeps_ids = True

    def _source_versions(self, subject: str) -> list[int]:
        if subject not in self._versions:
            self._versions[subject] = self.source.versions(subject)
        return self._versions[subject]

    def _copy_reference(self, reference: Reference) -> Reference:
        copied = self.copy_version(reference.subject, reference.version)
        version = copied.target_version if copied.target_version is not None else reference.version
        return Reference(reference.name, copied.target_subject, version)

    def _place(self, placing: Placement) -> CopiedVersion:
        """Rule 5 (keep) or rule 4 (translate) for one version."""
        return self._import(placing) if self.mode is SchemaIds.KEEP else self._register(placing)

    def _register(self, placing: Placement) -> CopiedVersion:
        """Rule 4 (a ``deleted`` placing: rule 8)."""
        target = self.target
        found = target.lookup(placing.target_subject, placing.schema, deleted=placing.deleted)
        registered = found is None
        if registered and not self.dry_run:
            self._register_refusable(placing)
            found = self._soft_delete_if(placing)
        target_id, target_version = found if found is not None else (None, None)
        return CopiedVersion(
            placing.subject,
            placing.version,
            placing.source_id,
            placing.target_subject,
            target_version,
            target_id,
            registered,
        )

    def _import(self, placing: Placement) -> CopiedVersion:
        """Rule 5 (a ``deleted`` placing: rule 8)."""
        subject, version, source_id, target_subject = (
            placing.subject,
            placing.version,
            placing.source_id,
            placing.target_subject,
        )
        held = self.target.schema(source_id)
        if held is not None and not same_schema(held, placing.schema):
            holders = ", ".join(f"{s} v{v}" for s, v in self.target.subject_versions(source_id)) or "no subject"
            raise ReplicationFailure(
                f"airmirror.schema.ids = keep: schema id {source_id} ({subject} v{version} on the registry of cluster "
                f"{self.source.alias!r}) is taken on the registry of cluster {self.target.alias!r} by another schema "
                f"({holders}); keep needs a target registry without that id (or use translate)"
            )
        found = self.target.lookup(target_subject, placing.schema, deleted=placing.deleted)
        present = found is not None and found[0] == source_id
        if not present and not self.dry_run:
            self._check_keeps_ids()
            given = self._register_refusable(placing, keep_id=True)
            self._soft_delete_if(placing)
            if given != source_id:
                raise ReplicationFailure(
                    f"airmirror.schema.ids = keep: the registry of cluster {self.target.alias!r} registered {subject} "
                    f"v{version} as {target_subject} under id {given}, not under the source's id {source_id}: it does "
                    "not keep the ids of IMPORT mode; use airmirror.schema.ids = translate with this registry"
                )
        target_id = source_id if present or not self.dry_run else None
        return CopiedVersion(subject, version, source_id, target_subject, version, target_id, not present)

    def _soft_delete_if(self, placing: Placement) -> tuple[int, int] | None:
        """The id and version the target gives the placed schema, that version soft-deleted when ``placing`` is
        rule 8's."""
        found = self.target.lookup(placing.target_subject, placing.schema)
        if placing.deleted and found is not None:
            self.target.delete_version(placing.target_subject, found[1])
        return found

    def _register_refusable(self, placing: Placement, *, keep_id: bool = False) -> int:
        """Register the placed schema on the target (under the source's id and version with ``keep_id``); a refusal
        of the schema itself is rule 9's :class:`SchemaRefused`."""
        version = placing.version
        try:
            return self.target.register(
                placing.target_subject,
                placing.schema,
                schema_id=placing.source_id if keep_id else None,
                version=version if keep_id else None,
            )
        except RegistryRefusal as refusal:
            if refusal.status not in REFUSED:
                raise
            raise SchemaRefused(
                f"{refusal}. It is {placing.subject} v{version if version is not None else '?'} of the schema "
                f"registry of cluster {self.source.alias!r}, registered as {placing.target_subject} on the registry "
                f"of cluster {self.target.alias!r}. Set airmirror.schema.unknown = pass to copy the records that name "
                f"it unchanged (they are counted), or let {placing.target_subject} accept it on cluster "
                f"{self.target.alias!r} (its compatibility level), and run again"
            ) from refusal


def deleted_subject(target_subject: str, source_id: int) -> str:
    """The target subject that holds source id ``source_id``'s schema, a soft-deleted version's (rule 8)."""
    return f"{target_subject}{DELETED_SUBJECT}{source_id}"


def same_schema(a: SchemaText, b: SchemaText) -> bool:
    """Whether two registries hold the same schema: same type and text (whitespace aside), references by name."""
    return (
        a.schema_type == b.schema_type
        and "".join(a.schema.split()) == "".join(b.schema.split())
        and [r.name for r in a.references] == [r.name for r in b.references]
    )
