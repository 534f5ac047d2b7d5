"""Topic ACL sync with MM2's rules (``sync.topic.acls.enabled``, on by default), run at every topic sync.

Rules:
- Only ACLs on a TOPIC resource with a LITERAL pattern are copied, and only for a topic the flow replicates
  (not Kafka's ``*`` wildcard, which names no topic).
- ALLOW WRITE is dropped (only the replicator writes remote topics); ALLOW ALL becomes ALLOW READ; every other
  entry (DENY ones included) is copied as it is, with its principal and host.
- The copy names the remote topic, LITERAL.  ACLs are only added, never deleted: an ACL removed on the source
  stays on the target, and ACLs made on the target by hand stay too.  Creating an ACL the target already holds
  changes nothing.
- A cluster without an authorizer (Kafka answers SECURITY_DISABLED) on either side means no ACL is synced and
  the run goes on, as in MM2: one warning per flow and cluster in a process (a live or continuous run warns
  once, not at every batch), then debug lines.  MM2 logs the source's case once and the target's refusals at
  each sync, and goes on.  librdkafka (2.16) drops DescribeAcls' error code, so a source without an authorizer
  usually reads as one without topic ACLs: nothing to copy, nothing to warn about.
- With an authorizer, reading ACLs needs Cluster DESCRIBE on the source and creating them Cluster ALTER on the
  target (:func:`~airmirror.kafka.acls.required_acls` lists both while the sync is on); a refusal there fails
  the run, naming the missing ACL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from airmirror.config import FlowConfig
from airmirror.kafka.acls import ALL, CLUSTER
from airmirror.kafka.authorization import naming_refusals
from airmirror.kafka.clients import REQUEST_TIMEOUT_S, ClusterAdmin

log = logging.getLogger(__name__)

# confluent-kafka annotates the name, principal and host of AclBindingFilter as str, though it documents (and
# librdkafka takes) None as "match any value"
LITERAL_TOPIC_ACLS = AclBindingFilter(
    ResourceType.TOPIC,
    None,  # type: ignore[arg-type]
    ResourcePatternType.LITERAL,
    None,  # type: ignore[arg-type]
    None,  # type: ignore[arg-type]
    AclOperation.ANY,
    AclPermissionType.ANY,
)
"""Every ACL of the source cluster on a LITERAL topic resource."""
DESCRIBES_CLUSTER = {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL}
_WARNED_WITHOUT_AUTHORIZER: set[tuple[str, str]] = set()
"""(flow, cluster alias) pairs already warned about in this process: a cluster without an authorizer."""


def remote_acl(flow: FlowConfig, binding: AclBinding) -> AclBinding | None:
    """The ACL the rules put on the target for source ACL ``binding``, or ``None`` when it is not copied."""
    if binding.restype != ResourceType.TOPIC or binding.resource_pattern_type != ResourcePatternType.LITERAL:
        return None
    if binding.name == ALL or not flow.should_replicate(binding.name):
        return None
    allow = binding.permission_type == AclPermissionType.ALLOW
    if allow and binding.operation == AclOperation.WRITE:
        return None
    operation = AclOperation.READ if allow and binding.operation == AclOperation.ALL else binding.operation
    return AclBinding(
        ResourceType.TOPIC,
        flow.remote_topic(binding.name),
        ResourcePatternType.LITERAL,
        binding.principal,
        binding.host,
        operation,
        binding.permission_type,
    )


def source_topic_acls(source: ClusterAdmin) -> list[AclBinding] | None:
    """The source's ACLs on LITERAL topic resources; ``None`` when the cluster has no authorizer.

    A user without DESCRIBE on the cluster is answered with no ACL at all rather than refused, so that case is
    checked (:func:`may_describe_cluster`) and raised as :class:`~airmirror.errors.AccessDenied`."""
    with naming_refusals(source.access):
        try:
            found = list(source.describe_acls(LITERAL_TOPIC_ACLS, request_timeout=REQUEST_TIMEOUT_S).result())
        except KafkaException as error:
            if security_disabled(error):
                return None
            raise
        if not found and source.access is not None and not may_describe_cluster(source):
            raise source.access.denied("CLUSTER", CLUSTER, "its ACLs are hidden from a user without Cluster DESCRIBE")
    return found


def may_describe_cluster(admin: ClusterAdmin) -> bool:
    """True when the admin's user may DESCRIBE the cluster (ALTER and ALL imply DESCRIBE)."""
    described = admin.describe_cluster(include_authorized_operations=True, request_timeout=REQUEST_TIMEOUT_S).result()
    return bool(set(described.authorized_operations or ()) & DESCRIBES_CLUSTER)


def sync_topic_acls(flow: FlowConfig, source: ClusterAdmin, target: ClusterAdmin) -> list[AclBinding]:
    """Add to the target the copy of every source topic ACL the rules keep; returns the copies (most of them
    already there after the first sync)."""
    found = source_topic_acls(source)
    if found is None:
        warn_without_authorizer(flow, flow.source, "source")
        return []
    copies = unique(filter(None, (remote_acl(flow, b) for b in found)))
    if not copies:
        return []
    try:
        with naming_refusals(target.access):
            for future in target.create_acls(copies, request_timeout=REQUEST_TIMEOUT_S).values():
                future.result()
    except KafkaException as error:
        if not security_disabled(error):
            raise
        warn_without_authorizer(flow, flow.target, "target")
        return []
    log.info("%s: %d topic ACLs in sync on cluster '%s'", flow.name, len(copies), flow.target)
    return copies


def security_disabled(error: KafkaException) -> bool:
    """True when a cluster answered SECURITY_DISABLED: it runs no authorizer, so it keeps no ACLs."""
    cause = error.args[0] if error.args else None
    return isinstance(cause, KafkaError) and cause.code() == KafkaError.SECURITY_DISABLED


def warn_without_authorizer(flow: FlowConfig, alias: str, side: str) -> None:
    """Warn, once per flow and cluster in this process, that ``side`` cluster ``alias`` has no authorizer."""
    if (flow.name, alias) in _WARNED_WITHOUT_AUTHORIZER:
        log.debug("%s: cluster '%s' still has no ACL authorizer; no topic ACL sync", flow.name, alias)
        return
    _WARNED_WITHOUT_AUTHORIZER.add((flow.name, alias))
    log.warning(
        "%s: the %s cluster '%s' has no ACL authorizer (SECURITY_DISABLED), so no topic ACLs are synced; "
        "set sync.topic.acls.enabled = false to stop trying",
        flow.name,
        side,
        alias,
    )


def unique(bindings: Iterable[AclBinding]) -> list[AclBinding]:
    """``bindings`` without repeats (ALLOW ALL and ALLOW READ of one principal give the same copy), in order."""
    seen: dict[AclBinding, None] = {}
    for binding in bindings:
        seen.setdefault(binding, None)
    return list(seen)
