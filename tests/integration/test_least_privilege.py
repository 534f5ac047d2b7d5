"""Least privilege against brokers that enforce ACLs (KRaft's StandardAuthorizer, started with
``airmirror local-kafka start --authorizer``): the flow's user holds exactly the ACLs ``airmirror acls`` lists,
created by a super user, and every feature runs: replicate (exactly-once) with topic ACL sync, status, heartbeat,
checkpoint with group offset sync, translate; the target equals the source record for record, and holds the
source's topic ACLs per MM2's rules.  Then, for each listed entry in
turn, a fresh user holds every other one: a verb fails with exit 1 naming the refused resource and the entry to
grant, operations included.  A takeover from MM2 with only those ACLs fails closed: it cannot prove MM2's worker
group stopped, nor read MM2's topics, and says which ACL (``airmirror acls --takeover``) or flag unblocks it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from airmirror.cli import main
from airmirror.devtools.local_kafka import LocalBroker, User, free_port, start_broker, stop_broker
from airmirror.mm2.wire_formats import Checkpoint
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.kafka_helpers import Record, sample_records
from tests.polling import wait_until
from tests.secured_clusters import (
    PARTITIONS,
    commit_offsets,
    create_topic,
    group_offsets,
    produce,
    read_partition,
    source_topic,
)

pytestmark = pytest.mark.integration

NAMES = ("acl-a", "acl-b")
ADMIN, MIRROR = ("admin", "admin-Secret1"), ("mirror", "mirror-Secret2")


@pytest.fixture(scope="module")
def guarded(test_home: Path) -> Iterator[dict[str, LocalBroker]]:
    """Clusters ``a`` and ``b`` with ACLs enforced: ``admin`` is a super user, ``mirror`` has no ACL yet."""

    def start(name: str) -> LocalBroker:
        return start_broker(
            name,
            free_port(),
            security="SASL_PLAINTEXT",
            users=[ADMIN, MIRROR],
            authorizer=True,
            super_users=[ADMIN[0]],
            home=test_home,
        )

    try:
        with ThreadPoolExecutor(2) as pool:
            a, b = pool.map(start, NAMES)
        yield {"a": a, "b": b}
    finally:
        for name in NAMES:
            stop_broker(name, home=test_home)


airmirror = airmirror_process


def run_json(*args: str) -> dict:
    result = airmirror(*args, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def mirror_config(tmp_path: Path, guarded: dict[str, LocalBroker], prefix: str) -> Path:
    """Flow a->b of the ``prefix`` topics, logging in to both clusters as ``mirror`` with MM2's own keys."""
    login = guarded["a"].security.jaas_config(guarded["a"].security.user(MIRROR[0]))
    body = "\n".join(
        [
            "security.protocol = SASL_PLAINTEXT",
            "sasl.mechanism = SCRAM-SHA-512",
            f"sasl.jaas.config = {login}",
            "a->b.enabled = true",
            f"topics = {prefix}.*",
            "sync.group.offsets.enabled = true",
            "airmirror.spark.master = local[2]",
        ]
    )
    return write_config(tmp_path / "mm2.properties", guarded, body)


RESOURCE_TYPES = {"CLUSTER": ResourceType.BROKER}  # confluent-kafka's name of Kafka's Cluster resource


def grant(broker: LocalBroker, principal: str, acls: list[dict]) -> None:
    """Create ``acls`` (as ``airmirror acls --json`` lists them) for ``principal``, as the super user."""
    bindings = [
        AclBinding(
            RESOURCE_TYPES.get(acl["resource_type"]) or ResourceType[acl["resource_type"]],
            acl["name"],
            ResourcePatternType[acl["pattern_type"]],
            principal,
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for acl in acls
        for operation in acl["operations"]
    ]
    admin = AdminClient(broker.client_config(ADMIN[0]))
    for future in admin.create_acls(bindings).values():
        future.result()


SOURCE_TOPIC_ACLS = [
    ("User:alice", "READ", "ALLOW"),
    ("User:alice", "WRITE", "ALLOW"),
    ("User:bob", "ALL", "ALLOW"),
    ("User:eve", "READ", "DENY"),
]
SYNCED_TOPIC_ACLS = {  # MM2's rules: ALLOW WRITE dropped, ALLOW ALL read as READ, DENY copied; the target's own kept
    ("User:alice", "READ", "ALLOW"),
    ("User:bob", "READ", "ALLOW"),
    ("User:eve", "READ", "DENY"),
    ("User:dave", "DESCRIBE", "ALLOW"),
}


def create_acl(
    broker: LocalBroker, topic: str, principal: str, operation: str, permission: str, pattern: str = "LITERAL"
) -> None:
    binding = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType[pattern],
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType[permission],
    )
    admin = AdminClient(broker.client_config(ADMIN[0]))
    for future in admin.create_acls([binding]).values():
        future.result()


def delete_acl(broker: LocalBroker, topic: str, principal: str, operation: str, permission: str) -> None:
    found = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType[permission],
    )
    admin = AdminClient(broker.client_config(ADMIN[0]))
    for future in admin.delete_acls([found]).values():
        future.result()


def topic_acls(broker: LocalBroker, topic: str) -> set[tuple[str, str, str]]:
    """Every ACL on topic resource ``topic`` (LITERAL), as (principal, operation, permission)."""
    admin = AdminClient(broker.client_config(ADMIN[0]))
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result()
    return {(b.principal, b.operation.name, b.permission_type.name) for b in found}


def test_every_feature_runs_with_exactly_the_listed_acls(
    guarded: dict[str, LocalBroker], prefix: str, tmp_path: Path
) -> None:
    topic, sent = source_topic(guarded, prefix)
    group = f"{prefix}-billing"
    commit_offsets(guarded["a"], group, {(topic, 0): 100, (topic, 1): 200})
    config = str(mirror_config(tmp_path, guarded, prefix))

    listed = run_json("acls", config, "--flow", "a->b")
    assert listed["principals"] == {"a": "User:mirror", "b": "User:mirror"}
    for alias in ("a", "b"):
        grant(guarded[alias], listed["principals"][alias], [acl for acl in listed["acls"] if acl["cluster"] == alias])
    for principal, operation, permission in SOURCE_TOPIC_ACLS:
        create_acl(guarded["a"], topic, principal, operation, permission)
    create_acl(guarded["a"], prefix, "User:carol", "READ", "ALLOW", "PREFIXED")
    create_acl(guarded["b"], f"a.{topic}", "User:dave", "DESCRIBE", "ALLOW")

    run_json("replicate", config, "--flow", "a->b")
    for partition, records in sent.items():
        assert read_partition(guarded["b"], f"a.{topic}", partition) == records
    assert topic_acls(guarded["b"], f"a.{topic}") == SYNCED_TOPIC_ACLS
    assert run_json("status", config, "--flow", "a->b")["total_lag"] == 0
    assert run_json("heartbeat", config, "--flow", "a->b")["heartbeat"] is not None
    checkpoints = run_json("checkpoint", config, "--flow", "a->b")
    assert checkpoints["written"] == PARTITIONS and not checkpoints["skipped_groups"], checkpoints
    translated = run_json("translate", config, "--flow", "a->b", "--group", group)
    expected = {p["partition"]: p["target_offset"] for p in translated["partitions"]}
    assert group_offsets(guarded["b"], group, f"a.{topic}", PARTITIONS) == expected


VERBS = ("replicate", "status", "heartbeat", "checkpoint", "translate")
LISTED = (
    "a-topics",
    "a-heartbeats",
    "a-progress-group",
    "a-groups",
    "a-cluster",
    "a-offset-syncs",
    "b-remote-topics",
    "b-batch-log",
    "b-transactional-ids",
    "b-anchor-group",
    "b-cluster",
    "b-heartbeats",
    "b-synced-groups",
)


def login_as(guarded: dict[str, LocalBroker], user: str, password: str) -> None:
    """Create SCRAM user ``user`` on both clusters, as the super user, and wait until it can log in (airmirror
    takes a refused login as final)."""
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    for broker in guarded.values():
        admin = AdminClient(broker.client_config(ADMIN[0]))
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result()
        wait_until(
            lambda broker=broker: can_log_in(broker, User(user, password)), 30, f"{user} to log in to {broker.name}"
        )


def can_log_in(broker: LocalBroker, user: User) -> bool:
    try:
        AdminClient(broker.client_config(user)).list_topics(timeout=2)
    except KafkaException:
        return False
    return True


def delete_every_topic(broker: LocalBroker) -> None:
    admin = AdminClient(broker.client_config(ADMIN[0]))
    topics = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    for future in admin.delete_topics(topics, operation_timeout=30).values() if topics else ():
        future.result()


@pytest.mark.parametrize("removed", range(len(LISTED)), ids=LISTED)
def test_each_missing_acl_is_named_with_its_resource_and_operations(
    guarded: dict[str, LocalBroker], prefix: str, tmp_path: Path, removed: int
) -> None:
    """Every entry is needed: without it, the verb that needs it first (then the others, in order) fails naming
    it.  The target starts empty, so every topic is created anew."""
    user, password = f"mirror{removed}", f"pw-{prefix}"
    login_as(guarded, user, password)
    topic, _ = source_topic(guarded, prefix, records=5)
    group = f"{prefix}-billing"
    commit_offsets(guarded["a"], group, {(topic, 0): 2, (topic, 1): 3})
    login = guarded["a"].security.jaas_config(User(user, password))
    config = str(
        write_config(
            tmp_path / "mm2.properties",
            guarded,
            "\n".join(
                [
                    "security.protocol = SASL_PLAINTEXT",
                    "sasl.mechanism = SCRAM-SHA-512",
                    f"sasl.jaas.config = {login}",
                    "a->b.enabled = true",
                    f"topics = {topic}",
                    f"groups = {group}",
                    "sync.group.offsets.enabled = true",
                    "airmirror.spark.master = local[1]",
                ]
            ),
        )
    )
    listed = run_json("acls", config, "--flow", "a->b")
    assert len(listed["acls"]) == len(LISTED)
    missing = listed["acls"][removed]
    for alias in ("a", "b"):
        grant(
            guarded[alias],
            f"User:{user}",
            [acl for i, acl in enumerate(listed["acls"]) if acl["cluster"] == alias and i != removed],
        )
    delete_every_topic(guarded["b"])

    needed_by = missing["purpose"].split(":")[0].split(",")[0]  # the first verb that needs it, tried first
    for verb in (needed_by, *VERBS):
        extra = ("--group", group) if verb == "translate" else ()
        result = airmirror(verb, config, "--flow", "a->b", *extra)
        if result.returncode != 0:
            break
    assert result.returncode == 1, f"every verb succeeded without {missing}"
    operations = ", ".join(missing["operations"])
    acl = f"{operations} on {missing['resource_type']} {missing['pattern_type']} '{missing['name']}'"
    assert f"refuses User:{user} access to {missing['resource_type']} '" in result.stderr, result.stderr
    assert f"grant {acl}" in result.stderr, result.stderr


def test_a_copied_topic_that_a_revoked_acl_hides_fails_the_run_naming_it_and_is_not_taken_for_deleted(
    guarded: dict[str, LocalBroker], prefix: str, tmp_path: Path
) -> None:
    """A cluster leaves a topic its user may not DESCRIBE out of its listings, as if it were deleted: a run of a
    flow that selects topics by regex and has copied this one fails naming the ACL, and copies nothing, while the
    ACL is denied, and ``status`` names the ACL too instead of calling the topic deleted; once it is allowed again
    the copy goes on where it stood."""
    topic, sent = source_topic(guarded, prefix)
    config = str(mirror_config(tmp_path, guarded, prefix))
    listed = run_json("acls", config, "--flow", "a->b")
    for alias in ("a", "b"):
        grant(guarded[alias], listed["principals"][alias], [acl for acl in listed["acls"] if acl["cluster"] == alias])
    run_json("replicate", config, "--flow", "a->b")
    more = {p: sample_records(3, prefix=f"{prefix}-more-{p}") for p in sent}
    for partition, records in more.items():
        produce(guarded["a"], topic, partition, records)
    create_acl(guarded["a"], topic, "User:mirror", "DESCRIBE", "DENY")

    hidden = airmirror("replicate", config, "--flow", "a->b")

    status = airmirror("status", config, "--flow", "a->b")

    for refused in (hidden, status):
        assert refused.returncode == 1, refused.stderr[-3000:]
        assert f"refuses User:mirror access to TOPIC '{topic}'" in refused.stderr, refused.stderr[-3000:]
    for partition, records in sent.items():
        assert read_partition(guarded["b"], f"a.{topic}", partition) == records
    delete_acl(guarded["a"], topic, "User:mirror", "DESCRIBE", "DENY")
    run_json("replicate", config, "--flow", "a->b")
    for partition, records in sent.items():
        assert read_partition(guarded["b"], f"a.{topic}", partition) == records + more[partition]


TAKEOVER_RECORDS = 5


def mm2_left_a_copy(guarded: dict[str, LocalBroker], topic: str, sent: dict[int, list[Record]]) -> None:
    """What a stopped MM2 leaves on the target, in MM2's formats: the remote topic with the copied records, its
    stored source offsets (Connect offsets topic) and a checkpoint; no offset sync (written as the super user)."""
    target, remote, at = guarded["b"], f"a.{topic}", sent[0][0].timestamp
    create_topic(target, remote, PARTITIONS)
    for partition, records in sent.items():
        produce(target, remote, partition, records)
    create_topic(target, "mm2-offsets.a.internal", 1)
    stored = [
        Record(
            json.dumps(["MirrorSourceConnector", {"cluster": "a", "partition": p, "topic": topic}]).encode(),
            json.dumps({"offset": TAKEOVER_RECORDS - 1}).encode(),
            (),
            at,
        )
        for p in sent
    ]
    produce(target, "mm2-offsets.a.internal", 0, stored)
    try:  # the checkpoint verb of an earlier test may have created it
        create_topic(target, "a.checkpoints.internal", 1)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    checkpoint = Checkpoint(f"{topic}-readers", remote, 0, 2, 2)
    produce(target, "a.checkpoints.internal", 0, [Record(checkpoint.key(), checkpoint.value(), (), at)])


def active_member(broker: LocalBroker, group: str, topic: str) -> Consumer:
    """A real consumer joining ``group`` (a stand-in for MM2's running worker); it joins in the background."""
    consumer = Consumer({**broker.client_config(), "group.id": group, "enable.auto.commit": False})
    consumer.subscribe([topic])
    return consumer


def test_a_takeover_fails_closed_unless_mm2_is_proven_stopped_and_its_topics_are_readable(
    guarded: dict[str, LocalBroker], prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run in process (the ``airmirror`` main), with the dry run: nothing here needs a takeover recorded."""

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main([args[0], config, "--flow", "a->b", *args[1:]])
        printed = capsys.readouterr()
        return code, printed.out + printed.err

    def takeover(*flags: str) -> tuple[int, str]:
        return run("takeover", "--from-mm2", "--dry-run", *flags)

    user, password = "taker", f"pw-{prefix}"
    login_as(guarded, user, password)
    topic, sent = source_topic(guarded, prefix, records=TAKEOVER_RECORDS)
    mm2_left_a_copy(guarded, topic, sent)
    worker = active_member(guarded["b"], "a-mm2", f"a.{topic}")
    login = guarded["a"].security.jaas_config(User(user, password))
    config = str(
        write_config(
            tmp_path / "mm2.properties",
            guarded,
            "\n".join(
                [
                    "security.protocol = SASL_PLAINTEXT",
                    "sasl.mechanism = SCRAM-SHA-512",
                    f"sasl.jaas.config = {login}",
                    "a->b.enabled = true",
                    f"topics = {topic}",
                    "sync.topic.acls.enabled = false",
                ]
            ),
        )
    )
    flow_acls = json.loads(run("acls", "--json")[1])["acls"]
    for alias in ("a", "b"):
        grant(guarded[alias], f"User:{user}", [acl for acl in flow_acls if acl["cluster"] == alias])
    try:
        code, said = takeover()
        assert code == 1 and "cannot prove MirrorMaker 2 is stopped for flow a->b" in said, said
        assert "grant DESCRIBE on GROUP LITERAL 'a-mm2'" in said and "pass --mm2-stopped" in said, said

        code, said = takeover("--mm2-stopped")
        assert code == 1, said
        assert f"refuses User:{user} access to TOPIC 'mm2-offsets.a.internal'" in said, said
        assert "grant DESCRIBE, READ on TOPIC LITERAL 'mm2-offsets.a.internal'" in said, said

        takeover_acls = [
            acl for acl in json.loads(run("acls", "--takeover", "--json")[1])["acls"] if acl not in flow_acls
        ]
        assert {(acl["cluster"], acl["resource_type"], acl["name"]) for acl in takeover_acls} == {
            ("b", "GROUP", "a-mm2"),
            ("b", "TOPIC", "mm2-offsets.a.internal"),
            ("a", "TOPIC", "mm2-offset-syncs.b.internal"),
            ("b", "TOPIC", "a.checkpoints.internal"),
        }
        for alias in ("a", "b"):
            grant(guarded[alias], f"User:{user}", [acl for acl in takeover_acls if acl["cluster"] == alias])
        wait_until(
            lambda: worker.poll(0.2) is not None or bool(worker.assignment()), 60, "the stand-in worker to join 'a-mm2'"
        )
        code, said = takeover()
        assert (
            code == 1 and "MirrorMaker 2 is still running flow a->b: its worker group 'a-mm2' on cluster 'b'" in said
        ), said

        code, said = takeover("--mm2-stopped", "--json")
        assert code == 0, said
        plan = json.loads(said)
        assert [p["cursor"] for p in plan["partitions"]] == [TAKEOVER_RECORDS] * PARTITIONS and plan[
            "checkpoints_imported"
        ] == 1

        create_acl(guarded["b"], "a.checkpoints.internal", f"User:{user}", "READ", "DENY")
        code, said = takeover("--mm2-stopped")
        assert code == 1, said
        assert f"refuses User:{user} access to TOPIC 'a.checkpoints.internal'" in said, said
        assert "grant DESCRIBE, READ on TOPIC LITERAL 'a.checkpoints.internal'" in said, said
    finally:
        worker.close()


def test_topic_acls_towards_a_target_without_authorizer_warn_once_and_the_run_goes_on(
    guarded: dict[str, LocalBroker], clusters: dict[str, LocalBroker], prefix: str, tmp_path: Path, caplog
) -> None:
    """A source with topic ACLs and a target without an authorizer (the shared cluster ``b``, which answers
    SECURITY_DISABLED): topic sync goes on and warns once per flow in the process, over two runs, as MM2 only
    logs; the source cluster here is reached as the super user."""
    from airmirror.replication.options import BatchOptions
    from airmirror.replication.pipeline import sync_flow_topics
    from airmirror.store.opening import open_flow
    from tests.secured_clusters import create_topic

    source, target = f"{prefix}src", f"{prefix}dst"
    topic = f"{prefix}.acl"
    create_topic(guarded["a"], topic, 1)
    create_acl(guarded["a"], topic, "User:alice", "READ", "ALLOW")
    login = [f"{source}.{key} = {value}" for key, value in guarded["a"].security.client_properties(ADMIN[0]).items()]
    config = write_config(
        tmp_path / "mm2.properties",
        {source: guarded["a"], target: clusters["b"]},
        "\n".join([*login, f"{source}->{target}.enabled = true", f"topics = {prefix}.*"]),
    )
    with caplog.at_level("DEBUG", logger="airmirror.kafka.acl_sync"):
        for _ in range(2):
            with open_flow(config, f"{source}->{target}") as (flow, store):
                sync_flow_topics(flow, store, BatchOptions())
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        f"{source}->{target}: the target cluster '{target}' has no ACL authorizer (SECURITY_DISABLED), "
        "so no topic ACLs are synced; set sync.topic.acls.enabled = false to stop trying"
    ]
    assert (
        f"{source}.{topic}"
        in AdminClient({"bootstrap.servers": clusters["b"].bootstrap}).list_topics(timeout=30).topics
    )
