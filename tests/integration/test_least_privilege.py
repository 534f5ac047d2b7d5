"""Least privilege against brokers that enforce ACLs (KRaft's StandardAuthorizer, started with
``airmirror local-kafka start --authorizer``): the flow's user holds exactly the ACLs ``airmirror acls`` lists,
created by a super user, and every feature runs: replicate (exactly-once), status, heartbeat, checkpoint with
group offset sync, translate; the target equals the source record for record."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from airmirror.devtools.local_kafka import LocalBroker, free_port, start_broker, stop_broker
from tests.conftest import write_config
from tests.secured_clusters import PARTITIONS, commit_offsets, group_offsets, read_partition, source_topic

pytestmark = pytest.mark.integration

NAMES = ("acl-a", "acl-b")
ADMIN, MIRROR = ("admin", "admin-Secret1"), ("mirror", "mirror-Secret2")


@pytest.fixture(scope="module")
def guarded(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    """Clusters ``a`` and ``b`` with ACLs enforced: ``admin`` is a super user, ``mirror`` has no ACL yet."""
    def start(name: str) -> LocalBroker:
        return start_broker(name, free_port(), security="SASL_PLAINTEXT", users=[ADMIN, MIRROR], authorizer=True,
                            super_users=[ADMIN[0]], home=test_home)

    try:
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(start, NAMES)
        yield {"a": a, "b": b}
    finally:
        for name in NAMES:
            stop_broker(name, home=test_home)


def airmirror(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "airmirror.cli", *args], capture_output=True, text=True, timeout=600)


def run_json(*args: str) -> dict:
    result = airmirror(*args, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def mirror_config(tmp_path: Path, guarded: dict[str, LocalBroker], prefix: str) -> Path:
    """Flow a->b of the ``prefix`` topics, logging in to both clusters as ``mirror`` with MM2's own keys."""
    login = guarded["a"].security.jaas_config(guarded["a"].security.user(MIRROR[0]))
    body = "\n".join([
        "security.protocol = SASL_PLAINTEXT", "sasl.mechanism = SCRAM-SHA-512", f"sasl.jaas.config = {login}",
        "a->b.enabled = true", f"topics = {prefix}.*", "sync.group.offsets.enabled = true",
        "airmirror.spark.master = local[2]",
    ])
    return write_config(tmp_path / "mm2.properties", guarded, body)


def grant(broker: LocalBroker, principal: str, acls: list[dict]) -> None:
    """Create ``acls`` (as ``airmirror acls --json`` lists them) for ``principal``, as the super user."""
    bindings = [
        AclBinding(ResourceType[acl["resource_type"]], acl["name"], ResourcePatternType[acl["pattern_type"]],
                   principal, "*", AclOperation[operation], AclPermissionType.ALLOW)
        for acl in acls for operation in acl["operations"]
    ]
    admin = AdminClient(broker.client_config(ADMIN[0]))
    for future in admin.create_acls(bindings).values():
        future.result()


def test_every_feature_runs_with_exactly_the_listed_acls(guarded: dict[str, LocalBroker], prefix: str, tmp_path: Path) -> None:
    topic, sent = source_topic(guarded, prefix)
    group = f"{prefix}-billing"
    commit_offsets(guarded["a"], group, {(topic, 0): 100, (topic, 1): 200})
    config = str(mirror_config(tmp_path, guarded, prefix))

    listed = run_json("acls", config, "--flow", "a->b")
    assert listed["principals"] == {"a": "User:mirror", "b": "User:mirror"}
    for alias in ("a", "b"):
        grant(guarded[alias], listed["principals"][alias], [acl for acl in listed["acls"] if acl["cluster"] == alias])

    run_json("replicate", config, "--flow", "a->b")
    for partition, records in sent.items():
        assert read_partition(guarded["b"], f"a.{topic}", partition) == records
    assert run_json("status", config, "--flow", "a->b")["total_lag"] == 0
    assert run_json("heartbeat", config, "--flow", "a->b")["heartbeat"] is not None
    checkpoints = run_json("checkpoint", config, "--flow", "a->b")
    assert checkpoints["written"] == PARTITIONS and not checkpoints["skipped_groups"], checkpoints
    translated = run_json("translate", config, "--flow", "a->b", "--group", group)
    expected = {p["partition"]: p["target_offset"] for p in translated["partitions"]}
    assert group_offsets(guarded["b"], group, f"a.{topic}", PARTITIONS) == expected
