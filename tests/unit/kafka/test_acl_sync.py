"""MM2's topic ACL sync rules: which source ACLs reach the target, and as what."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from airmirror.config import FlowConfig, load_config
from airmirror.kafka.acl_sync import remote_acl, unique, warn_without_authorizer

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


@pytest.fixture
def flow(tmp_path: Path) -> FlowConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = us, dr\nus.bootstrap.servers = h:1\ndr.bootstrap.servers = h:2\nus->dr.enabled = true\n"
        "topics = orders.*\ntopics.exclude = orders.secret\n"
    )
    return load_config(path, env={}).flow("us->dr")


def topic_acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    pattern: ResourcePatternType = LITERAL,
    principal: str = "User:alice",
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "10.0.0.1", operation, permission)


@pytest.mark.parametrize(
    ("operation", "permission", "copied"),
    [
        (AclOperation.READ, ALLOW, (AclOperation.READ, ALLOW)),
        (AclOperation.DESCRIBE, ALLOW, (AclOperation.DESCRIBE, ALLOW)),
        (AclOperation.ALL, ALLOW, (AclOperation.READ, ALLOW)),
        (AclOperation.WRITE, ALLOW, None),
        (AclOperation.WRITE, DENY, (AclOperation.WRITE, DENY)),
        (AclOperation.ALL, DENY, (AclOperation.ALL, DENY)),
    ],
)
def test_allow_write_is_dropped_allow_all_becomes_read_and_the_rest_is_copied(
    flow: FlowConfig, operation: AclOperation, permission: AclPermissionType, copied: tuple | None
) -> None:
    remote = remote_acl(flow, topic_acl("orders.eu", operation, permission))
    if copied is None:
        assert remote is None
        return
    assert remote is not None
    assert (remote.restype, remote.name, remote.resource_pattern_type) == (ResourceType.TOPIC, "us.orders.eu", LITERAL)
    assert (remote.principal, remote.host, remote.operation, remote.permission_type) == (
        "User:alice",
        "10.0.0.1",
        *copied,
    )


@pytest.mark.parametrize(
    "binding",
    [
        topic_acl("orders", AclOperation.READ, pattern=PREFIXED),
        topic_acl("*", AclOperation.READ),
        topic_acl("payments", AclOperation.READ),
        topic_acl("orders.secret", AclOperation.READ),
        AclBinding(ResourceType.GROUP, "orders.eu", LITERAL, "User:alice", "*", AclOperation.READ, ALLOW),
    ],
    ids=["prefixed", "wildcard", "not-replicated", "excluded", "group"],
)
def test_only_literal_acls_of_replicated_topics_are_copied(flow: FlowConfig, binding: AclBinding) -> None:
    assert remote_acl(flow, binding) is None


def test_allow_all_and_allow_read_of_one_principal_are_copied_once(flow: FlowConfig) -> None:
    copies = [remote_acl(flow, topic_acl("orders.eu", op)) for op in (AclOperation.ALL, AclOperation.READ)]
    assert len(unique(copies)) == 1


def test_a_cluster_without_authorizer_is_warned_about_once_per_flow_and_cluster(flow: FlowConfig, caplog) -> None:
    with caplog.at_level("DEBUG", logger="airmirror.kafka.acl_sync"):
        for _ in range(3):
            warn_without_authorizer(flow, "dr", "target")
        warn_without_authorizer(flow, "us", "source")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        "us->dr: the target cluster 'dr' has no ACL authorizer (SECURITY_DISABLED), so no topic ACLs are synced; "
        "set sync.topic.acls.enabled = false to stop trying",
        "us->dr: the source cluster 'us' has no ACL authorizer (SECURITY_DISABLED), so no topic ACLs are synced; "
        "set sync.topic.acls.enabled = false to stop trying",
    ]
    assert len([r for r in caplog.records if r.levelname == "DEBUG"]) == 2


def test_a_routed_topics_acls_go_to_its_routed_remote_topic(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    t = "org.apache.kafka.connect.transforms."
    path.write_text(
        "clusters = us, dr\nus.bootstrap.servers = h:1\ndr.bootstrap.servers = h:2\nus->dr.enabled = true\n"
        f"us->dr.transforms = route\nus->dr.transforms.route.type = {t}RegexRouter\n"
        "us->dr.transforms.route.regex = us\\\\.(.*)\nus->dr.transforms.route.replacement = restricted.$1\n"
    )
    routed = load_config(path, env={}).flow("us->dr")
    remote = remote_acl(routed, topic_acl("payments", AclOperation.READ))
    assert remote is not None and remote.name == "restricted.payments"
