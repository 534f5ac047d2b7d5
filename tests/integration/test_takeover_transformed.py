"""``airmirror takeover --from-mm2`` after a real MirrorMaker 2 ran SMTs: MM2 copies through ``Filter`` (a
``HasHeaderKey`` predicate) and ``DropHeaders`` (the classes MM2 can run on its bytes), is killed (kill -9), and
airmirror, reading the same SMT keys from its file, continues the copy exactly: the target equals the transformed
source, each kept record once, no dropped one."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid

import pytest

from airmirror.devtools.mm2 import mm2_command, write_mm2_files
from tests.cli_helpers import airmirror_in_process
from tests.conftest import write_config
from tests.integration.test_takeover import mm2_properties, take_over
from tests.kafka_helpers import Record, create_topic, end_offset, produce, read_partition, recent_ms
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T = "org.apache.kafka.connect.transforms."
SMTS = f"""\
a->b.transforms = dropPII, strip
a->b.transforms.dropPII.type = {T}Filter
a->b.transforms.dropPII.predicate = isPII
a->b.transforms.strip.type = {T}DropHeaders
a->b.transforms.strip.headers = authorization
a->b.predicates = isPII
a->b.predicates.isPII.type = {T}predicates.HasHeaderKey
a->b.predicates.isPII.name = pii
"""


def events(label: str, count: int) -> list[Record]:
    """Records with an ``authorization`` header, every seventh also with a ``pii`` one."""
    now = recent_ms()
    return [
        Record(
            f"{label}-{i}".encode(),
            f"{label} event {i}".encode(),
            (("authorization", b"Bearer t"), ("trace", b"%d" % i), *((("pii", b"1"),) if i % 7 == 0 else ())),
            now + i,
        )
        for i in range(count)
    ]


def transformed(records: list[Record]) -> list[Record]:
    """What the SMTs make of ``records``, written out by hand."""
    return [
        Record(r.key, r.value, tuple(h for h in r.headers if h[0] != "authorization"), r.timestamp)
        for r in records
        if not any(name == "pii" for name, _ in r.headers)
    ]


def test_takeover_continues_a_copy_mm2_made_through_the_same_smts_exactly(clusters, tmp_path):
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    prefix = f"t{uuid.uuid4().hex[:8]}"
    topic, remote = f"{prefix}.events", f"a.{prefix}.events"
    create_topic(a, topic)
    first = events("mm2", 200)
    produce(a, topic, 0, first)
    mm2_config, log_config = write_mm2_files(tmp_path, "mm2", mm2_properties(clusters, prefix) + SMTS)
    mm2 = subprocess.Popen(mm2_command(mm2_config, log_config, "b"), start_new_session=True)
    try:
        wait_until(
            lambda: end_offset(b, remote, 0, committed=True) == len(transformed(first)), 180, "MM2 to copy the topic"
        )
    finally:
        os.killpg(mm2.pid, signal.SIGKILL)
        mm2.wait(30)
    assert [record for _, record in read_partition(b, remote, 0)] == transformed(first), "MM2 ran the SMTs"
    later = events("later", 60)
    produce(a, topic, 0, later)
    config = write_config(
        tmp_path / "airmirror.properties", clusters, f"a->b.enabled = true\ntopics = {prefix}\\..*\n{SMTS}"
    )

    took = take_over(config)  # tried again while the killed worker is still in its group
    assert took.returncode == 0, took.stderr
    copied = airmirror_in_process("replicate", str(config), "--flow", "a->b")
    assert copied.returncode == 0, copied.stderr

    assert [record for _, record in read_partition(b, remote, 0)] == transformed(first + later), (
        "airmirror continued after MM2's last copy: each kept record once, no dropped one"
    )
