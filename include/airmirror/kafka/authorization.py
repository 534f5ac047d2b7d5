"""Refusals that name the ACL a flow's user lacks.

A broker that enforces ACLs refuses a request with ``TOPIC_``, ``GROUP_``, ``TRANSACTIONAL_ID_`` or
``CLUSTER_AUTHORIZATION_FAILED`` and says neither which resource nor which operation it refused.  Every
airmirror call that reaches a cluster knows which topic, group and transactional id it uses, so it runs inside
:func:`naming_refusals` with them: a refusal becomes an :class:`AccessDenied` naming the cluster, the principal,
the resource, and the entry of :func:`~airmirror.kafka.acls.required_acls` that covers it, with the operations
that entry grants (the refused one is among them) as ``airmirror acls`` prints it.  Any other error passes
through unchanged.

An :class:`AccessScope` is plain data, so the driver hands one per cluster to the Spark tasks, which have no
config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from airmirror.errors import AccessDenied, AirmirrorError
from airmirror.kafka.acls import ALL, CLUSTER, AclRequirement, principal, required_acls, takeover_acls

if TYPE_CHECKING:
    from airmirror.config import FlowConfig

REFUSED_RESOURCE = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TRANSACTIONAL_ID",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
}
"""The resource type each refusal code is about."""


@dataclass(frozen=True)
class AccessScope:
    """Who a flow's clients are on ``cluster`` and the ACLs they need there (see the module docstring)."""

    cluster: str
    principal: str
    acls: tuple[AclRequirement, ...]

    def covering(self, resource_type: str, name: str) -> AclRequirement | None:
        """The required ACL that grants access to resource ``name`` of ``resource_type``, if any."""
        for acl in self.acls:
            if acl.resource_type != resource_type:
                continue
            if acl.name == ALL or name == acl.name or (acl.pattern_type == "PREFIXED" and name.startswith(acl.name)):
                return acl
        return None

    def denied(self, resource_type: str, name: str | None, code: str) -> AccessDenied:
        """The error for a refusal ``code`` about ``name`` (a resource of ``resource_type``)."""
        resource = f"{resource_type} '{name}'" if name else resource_type
        refusal = f"cluster '{self.cluster}' refuses {self.principal} access to {resource} ({code})"
        acl = self.covering(resource_type, name) if name else None
        if acl is None:
            return AccessDenied(f"{refusal}; 'airmirror acls' lists the ACLs the flow needs")
        return AccessDenied(
            f"{refusal}: grant {', '.join(acl.operations)} on {acl.resource_type} {acl.pattern_type} '{acl.name}' "
            f"({acl.purpose}), as 'airmirror acls' lists it"
        )


def access_scope(flow: FlowConfig, alias: str, *, takeover: bool = False) -> AccessScope:
    """The scope of cluster ``alias`` of ``flow``; with ``takeover``, the entries of
    :func:`~airmirror.kafka.acls.takeover_acls` come first, so that a refusal of MM2's topics names them."""
    acls = [*takeover_acls(flow), *required_acls(flow)] if takeover else required_acls(flow)
    return AccessScope(alias, principal(flow, alias), tuple(a for a in acls if a.cluster == alias))


def refusal(error: BaseException) -> KafkaError | None:
    """The broker's refusal behind ``error`` (a KafkaException, or an airmirror error raised from one), if any."""
    cause = error.__cause__ if isinstance(error, AirmirrorError) else error
    kafka_error = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
    if isinstance(kafka_error, KafkaError) and kafka_error.code() in REFUSED_RESOURCE:
        return kafka_error
    return None


def named(
    scope: AccessScope | None,
    error: Exception,
    *,
    topic: str | None = None,
    group: str | None = None,
    transactional_id: str | None = None,
) -> Exception:
    """``error``, or if it is a refusal, :meth:`AccessScope.denied` for the resource of the refused type among
    ``topic``, ``group`` and ``transactional_id`` (the ones the failed call used) or the cluster.  Without a
    scope, ``error``."""
    refused = refusal(error)
    if scope is None or refused is None or isinstance(error, AccessDenied):
        return error
    resource_type = REFUSED_RESOURCE[refused.code()]
    name = {"TOPIC": topic, "GROUP": group, "TRANSACTIONAL_ID": transactional_id, "CLUSTER": CLUSTER}[resource_type]
    return scope.denied(resource_type, name, refused.name())


@contextmanager
def naming_refusals(
    scope: AccessScope | None,
    *,
    topic: str | None = None,
    group: str | None = None,
    transactional_id: str | None = None,
) -> Iterator[None]:
    """Run the block; a refusal it raises becomes :func:`named` with these resources (the ones the block uses)."""
    try:
        yield
    except (KafkaException, AirmirrorError) as error:
        failure = named(scope, error, topic=topic, group=group, transactional_id=transactional_id)
        if failure is error:
            raise
        raise failure from error


def raise_first_refusal(scope: AccessScope | None, futures: Mapping[str, Future[Any]], resource: str) -> None:
    """Raise :class:`~airmirror.errors.AccessDenied` for the first of ``futures`` (one per ``resource``, ``topic``
    or ``group``, by name) that the cluster refused; any other error of a future (a topic or group that does not
    exist) is no error."""
    for name, future in futures.items():
        try:
            with naming_refusals(scope, **{resource: name}):
                future.result()
        except KafkaException:
            continue


def refuses_unused_group(error: KafkaError | None) -> bool:
    """True for the refusal of a reader's group: readers only assign partitions and never commit, so their group
    needs no ACL, but librdkafka still looks up its coordinator and reports the refusal among the records."""
    return error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def raise_queued_refusal(consumer: Consumer) -> None:
    """Raise the refusal waiting in the queue of ``consumer`` (which is assigned no partition), if any.

    A group coordinator lookup the cluster refuses is reported there, not by the call waiting for the
    coordinator (``committed()`` only times out)."""
    while (message := consumer.poll(0)) is not None:
        error = message.error()
        if error is not None and error.code() in REFUSED_RESOURCE:
            raise KafkaException(error)
