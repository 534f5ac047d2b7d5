"""The schema step of a batch (``airmirror.schema.ids``): subjects copied to the target registry before the copy,
and what the copy tasks need to rewrite ids.

Contract:

1. :func:`sync_schemas` runs after the topic sync and before planning (step 1 of
   :mod:`airmirror.replication.pipeline`, and ``airmirror schemas``).  It copies the subjects of the flow's
   replicated topics (``{topic}-key``, ``{topic}-value``) and those matching ``airmirror.schema.record.subjects``
   (:mod:`airmirror.schemas.subject_copy`), then stores the id map and the synced subjects in ONE call each; a dry
   run writes nothing anywhere.  A sync that fails half way leaves what it registered, which the next sync finds.
2. :func:`record_ids` is read when the copy job is planned: the stored id map and, per source topic of the job, the
   sides its records are framed on (a subject of the topic on the source registry, or both sides for a topic
   matching ``airmirror.schema.topics``).  ``None`` when the flow's mode is ``off``.
3. :func:`store_new_ids` stores the ids the copy tasks mapped in-run, which the batch log's runs records carry
   (:class:`~airmirror.replication.spark.batch_log.RunsRecord`): a batch's at its commit, a live stream's at each
   recording, however the stream ends (a dead driver's, when the next run closes its stream).
4. **Cost per run.**  A run's sync asks the source for its subjects and each selected subject's versions; a subject
   whose version count and target name the store already holds is left alone, so a run without new schemas registers
   nothing and reads nothing more.  ``airmirror schemas`` always copies every selected subject (a compatibility level
   changed on the source, or a subject deleted on the target, is copied again then).
5. **A refused version never stops the run** (:class:`~airmirror.errors.SchemaRefused`): the sync reports it
   (:attr:`SchemaSyncReport.refused`, a warning naming subject, version, both registries and the settings that
   resolve it), leaves the subject unsynced (the next sync tries again) and goes on with the other subjects; the
   records that name it are then handled by ``airmirror.schema.unknown`` in the copy tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airmirror.config import FlowConfig
from airmirror.config.schema_registries import SchemaIds
from airmirror.config.settings_registry import SCHEMA_IDS, SCHEMA_RECORD_SUBJECTS, SCHEMA_TOPICS, SCHEMA_UNKNOWN
from airmirror.config.transforms import reschemaed_sides
from airmirror.errors import ConfigError, SchemaRefused
from airmirror.kafka.clients import shared_clients, source_admin
from airmirror.kafka.topics import TopicMapping, replicated_topics
from airmirror.model import SyncedSubject
from airmirror.replication.spark.batch_log import RunsRecord
from airmirror.schemas.framing import Side
from airmirror.schemas.record_ids import RecordIds, subject_sides
from airmirror.schemas.registry_client import RegistryClient
from airmirror.schemas.subject_copy import SubjectCopier, SubjectNames, SubjectReport, TopicNaming, topic_of
from airmirror.store import MetadataStore
from airmirror.store.rows import utcnow

log = logging.getLogger(__name__)


@dataclass
class SchemaSyncReport:
    """What a schema sync did (or, in a dry run, would do): per subject, and the id map it found."""

    mode: SchemaIds
    subjects: list[SubjectReport] = field(default_factory=list)
    ids: dict[int, int] = field(default_factory=dict)
    unchanged: int = 0
    """Subjects left alone: an earlier sync copied every version they have (rule 4)."""
    refused: list[str] = field(default_factory=list)
    """Why each subject the target registry refused a version of stopped there (rule 5)."""

    @property
    def registered(self) -> int:
        """Versions registered on the target (a dry run: that would be)."""
        return sum(s.registered for s in self.subjects)

    def as_dict(self) -> dict[str, object]:
        """The report as ``airmirror schemas --json`` prints it."""
        return {
            "mode": self.mode.value,
            "registered": self.registered,
            "unchanged": self.unchanged,
            "refused": list(self.refused),
            "subjects": [
                {
                    "subject": s.subject,
                    "target_subject": s.target_subject,
                    "compatibility": s.compatibility,
                    "versions": [
                        {
                            "version": v.source_version,
                            "source_id": v.source_id,
                            "target_version": v.target_version,
                            "target_id": v.target_id,
                            "registered": v.registered,
                        }
                        for v in s.versions
                    ],
                }
                for s in self.subjects
            ],
            "ids": {str(source): target for source, target in sorted(self.ids.items())},
        }


def subject_names(flow: FlowConfig, mappings: Mapping[str, str]) -> SubjectNames:
    """Source subject -> target subject by the flow's whole rule (``schemas.subject_copy`` rule 1): ``mappings``
    (source -> remote topic) and every other topic the flow replicates, so a sync and a copy task name a subject
    alike whatever topics they cover."""
    naming = TopicNaming(
        flow.policy, flow.topics, flow.source, flow.target, flow.heartbeats.replication_enabled, flow.transforms
    )
    return SubjectNames(dict(mappings), naming)


def selected_subjects(flow: FlowConfig, subjects: Iterable[str], mappings: Iterable[TopicMapping]) -> list[str]:
    """The source subjects a sync copies (rule 1), sorted: never that of a side whose every record the flow's chain
    gives a derived schema (:func:`derived_sides`)."""
    derived = {m.source_topic: derived_sides(flow, m.source_topic) for m in mappings}
    record_subjects = flow.value(SCHEMA_RECORD_SUBJECTS)
    chosen = []
    for subject in subjects:
        named = topic_of(subject)
        if named is not None and named[0] in derived and named[1] in derived[named[0]]:
            continue
        if (named is not None and named[0] in derived) or record_subjects.matches(subject):
            chosen.append(subject)
    return sorted(chosen)


def derived_sides(flow: FlowConfig, topic: str) -> frozenset[Side]:
    """The sides of source topic ``topic`` whose every Avro record the flow's chain writes with a derived schema, on
    the target's registry (:mod:`airmirror.schemas.avro_fields` rule 5): the copy neither maps their ids nor needs
    their source subjects there."""
    return frozenset(Side(side.value.lower()) for side in reschemaed_sides(flow.transform_steps(topic)))


def sync_schemas(
    flow: FlowConfig,
    store: MetadataStore | None,
    mappings: list[TopicMapping],
    *,
    dry_run: bool = False,
    full: bool = False,
) -> SchemaSyncReport | None:
    """Copy the flow's subjects to the target registry (rule 1); ``None`` when ``airmirror.schema.ids = off``.
    ``store`` may be ``None`` only for a dry run.  Unless ``full``, a subject whose versions the store says an
    earlier sync copied, under the same target subject, is left alone (rule 4)."""
    if flow.schema_ids is SchemaIds.OFF:
        return None
    synced = {} if full or store is None else {s.subject: s for s in store.schema_subjects(flow.name)}
    with RegistryClient(flow.registry(flow.source)) as source, RegistryClient(flow.registry(flow.target)) as target:
        names = subject_names(flow, {m.source_topic: m.remote_topic for m in mappings})
        copier = SubjectCopier(source, target, flow.schema_ids, names, dry_run=dry_run)
        report = SchemaSyncReport(flow.schema_ids)
        for subject in selected_subjects(flow, source.subjects(), mappings):
            versions = source.versions(subject)
            known = synced.get(subject)
            if known is not None and (known.versions, known.target_subject) == (
                len(versions),
                copier.names.target(subject),
            ):
                report.unchanged += 1
                continue
            try:
                report.subjects.append(copier.copy_subject(subject, versions))
            except SchemaRefused as refused:
                log.warning("schema sync of %s: %s", flow.name, refused)
                report.refused.append(str(refused))
        report.ids = dict(copier.ids)
    if not dry_run:
        if store is None:
            raise ValueError("a schema sync that writes needs the flow's store")
        now = utcnow()
        store.record_schema_ids(flow.name, report.ids)
        store.record_schema_subjects(
            flow.name, [SyncedSubject(s.subject, s.target_subject, len(s.versions), now) for s in report.subjects]
        )
    return report


def schemas_verb(flow: FlowConfig, store: MetadataStore, *, dry_run: bool) -> SchemaSyncReport:
    """``airmirror schemas``: the schema sync of the flow's replicated topics on its own (rule 1); an
    :class:`~airmirror.errors.InputError` naming the key when the flow's ids are ``off``."""
    if flow.schema_ids is SchemaIds.OFF:
        raise ConfigError(
            f"flow {flow.name} does not sync schemas: give both clusters a registry "
            f"({flow.source}.schema.registry.url, {flow.target}.schema.registry.url) and leave it unset, or set it to "
            "translate or keep",
            key=SCHEMA_IDS.name,
            line=flow.line_of(SCHEMA_IDS.name),
        )
    with shared_clients():
        mappings = replicated_topics(flow, source_admin(flow))
    report = sync_schemas(flow, None if dry_run else store, mappings, dry_run=dry_run, full=True)
    if report is None:
        raise AssertionError("schema ids are not off")
    return report


def record_ids(flow: FlowConfig, store: MetadataStore, mappings: dict[str, str]) -> RecordIds | None:
    """What the copy tasks of source topics ``mappings`` (source -> remote topic) need (rule 2)."""
    if flow.schema_ids is SchemaIds.OFF:
        return None
    source, target = flow.registry(flow.source), flow.registry(flow.target)
    with RegistryClient(source) as client:
        framed = subject_sides(client.subjects(), mappings)
    all_sides = flow.value(SCHEMA_TOPICS)
    derived = {topic: sides for topic in mappings if (sides := derived_sides(flow, topic))}
    for topic in mappings:
        if all_sides.matches(topic):
            framed[topic] = set(Side)
        if topic in framed:
            framed[topic] -= derived.get(topic, frozenset())
    return RecordIds(
        mode=flow.schema_ids,
        unknown=flow.value(SCHEMA_UNKNOWN),
        ids=store.schema_ids(flow.name),
        framed={topic: frozenset(sides) for topic, sides in framed.items()},
        derived=derived,
        names=subject_names(flow, mappings),
        source=source.resolved(),
        target=target.resolved(),
    )


def store_new_ids(flow: FlowConfig, store: MetadataStore, runs: Iterable[Iterable[RunsRecord]]) -> None:
    """Add the ids the copy tasks mapped in-run, as ``runs`` (runs records, per partition) carry them, to the
    flow's map (rule 3)."""
    found = {source: target for records in runs for record in records for source, target in record.schema_ids.items()}
    if found:
        store.record_schema_ids(flow.name, found)
