"""A refusal becomes an error naming the cluster, the principal, the resource and the ACL entry to grant."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from airmirror.errors import AccessDenied, ReplicationFailure
from airmirror.kafka.acls import AclRequirement
from airmirror.kafka.authorization import AccessScope, named, naming_refusals, refusal, refuses_unused_group

SCOPE = AccessScope(
    "b",
    "User:mirror",
    (
        AclRequirement("b", "TOPIC", "PREFIXED", "a.", ("CREATE", "WRITE"), "replicate: remote topics"),
        AclRequirement("b", "TOPIC", "LITERAL", "heartbeats", ("CREATE", "DESCRIBE", "WRITE"), "heartbeat"),
        AclRequirement("b", "TRANSACTIONAL_ID", "PREFIXED", "airmirror-a-b-", ("DESCRIBE", "WRITE"), "replicate: eos"),
        AclRequirement("b", "GROUP", "LITERAL", "*", ("DESCRIBE", "READ"), "checkpoint: sync"),
    ),
)


def refused(code: int) -> KafkaException:
    return KafkaException(KafkaError(code, "Broker: authorization failed"))


@pytest.mark.parametrize(
    ("resource_type", "name", "entry"),
    [
        ("TOPIC", "a.orders", "CREATE, WRITE on TOPIC PREFIXED 'a.'"),
        ("TOPIC", "heartbeats", "CREATE, DESCRIBE, WRITE on TOPIC LITERAL 'heartbeats'"),
        ("TRANSACTIONAL_ID", "airmirror-a-b-orders-0", "DESCRIBE, WRITE on TRANSACTIONAL_ID PREFIXED 'airmirror-a-b-'"),
        ("GROUP", "billing", "DESCRIBE, READ on GROUP LITERAL '*'"),
    ],
)
def test_the_covering_entry_is_named_with_its_operations(resource_type: str, name: str, entry: str) -> None:
    message = str(SCOPE.denied(resource_type, name, "X_AUTHORIZATION_FAILED"))
    assert message.startswith(
        f"cluster 'b' refuses User:mirror access to {resource_type} '{name}' (X_AUTHORIZATION_FAILED)"
    )
    assert f"grant {entry} (" in message


def test_a_resource_no_entry_covers_still_points_at_the_acls_verb() -> None:
    message = str(SCOPE.denied("TOPIC", "other", "TOPIC_AUTHORIZATION_FAILED"))
    assert "access to TOPIC 'other'" in message and "'airmirror acls' lists the ACLs the flow needs" in message
    assert "access to CLUSTER (" in str(SCOPE.denied("CLUSTER", None, "CLUSTER_AUTHORIZATION_FAILED"))


def test_the_refused_type_picks_the_resource_the_call_used() -> None:
    resources = {"topic": "a.orders", "group": "billing", "transactional_id": "airmirror-a-b-orders-0"}
    for code, name in [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "TOPIC 'a.orders'"),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, "GROUP 'billing'"),
        (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "TRANSACTIONAL_ID 'airmirror-a-b-orders-0'"),
    ]:
        failure = named(SCOPE, refused(code), **resources)
        assert isinstance(failure, AccessDenied) and f"access to {name}" in str(failure)


def test_a_refusal_wrapped_in_an_airmirror_error_is_found_and_others_pass_through() -> None:
    wrapped = ReplicationFailure("cannot list the committed offsets of group 'billing'")
    wrapped.__cause__ = refused(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert refusal(wrapped) is not None
    other = KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert refusal(other) is None and named(SCOPE, other, topic="a.orders") is other
    assert named(None, refused(KafkaError.TOPIC_AUTHORIZATION_FAILED), topic="a.orders").__class__ is KafkaException


def test_naming_refusals_raises_access_denied_from_the_refusal() -> None:
    with (
        pytest.raises(AccessDenied, match="access to GROUP 'billing'") as caught,
        naming_refusals(SCOPE, group="billing"),
    ):
        raise refused(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert isinstance(caught.value.__cause__, KafkaException)
    with pytest.raises(KafkaException), naming_refusals(SCOPE, group="billing"):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


def test_a_readers_group_refusal_is_not_an_error_for_it() -> None:
    assert refuses_unused_group(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    assert not refuses_unused_group(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) and not refuses_unused_group(
        None
    )
