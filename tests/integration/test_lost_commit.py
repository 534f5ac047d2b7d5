"""A metadata DB commit whose outcome was lost, on a real PostgreSQL server: "commit sent, reply lost".

The fault is made by :class:`~airmirror.devtools.commit_cutter.CommitCutter`, a proxy between airmirror and the
server that forwards a ``COMMIT`` and drops the server's answer, closing the connection: the transaction committed,
the client was told the connection broke.  A live run must reconcile (read back what the DB holds) and go on
(issue "never twice, never stuck", item 5).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import make_url

from airmirror.devtools.commit_cutter import CommitCutter, commit_cutter, updates
from airmirror.devtools.local_postgres import PostgresServer, postgres_server
from airmirror.replication.status import flow_status
from airmirror.store.schema import batch_ranges
from tests.cli_helpers import airmirror_process
from tests.conftest import write_config
from tests.integration.test_long_running import live_process
from tests.kafka_helpers import SteadyProducer, create_topic, end_offset, records_of
from tests.mirror_helpers import opened
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 2
STREAM_RECORDING = updates(batch_ranges.name)
"""What a stream recording's transaction runs: the cut of its commit is the issue's case."""


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture
def cutter(postgres: PostgresServer) -> Iterator[CommitCutter]:
    with commit_cutter(postgres.host, postgres.port) as proxy:
        yield proxy


def through(cutter: CommitCutter, url: str) -> str:
    """``url`` (of the cutter's server) reached through the cutter."""
    return make_url(url).set(port=cutter.port).render_as_string(hide_password=False)


def test_the_cutter_loses_the_reply_of_a_commit_that_took_effect(postgres: PostgresServer, cutter: CommitCutter):
    """What the fault is: the write committed, the client's commit raised; a reading transaction is never cut."""
    url = make_url(postgres.create_database(f"cut_{uuid.uuid4().hex}"))
    direct = {"host": postgres.host, "user": postgres.user, "password": postgres.password, "dbname": url.database}
    with psycopg.connect(**direct, port=postgres.port, autocommit=True) as setup:
        setup.execute("CREATE TABLE marks (n integer)")
    cutter.arm()
    with psycopg.connect(**direct, port=cutter.port) as reader:
        assert reader.execute("SELECT count(*) FROM marks").fetchone() == (0,)
        reader.commit()
    writer = psycopg.connect(**direct, port=cutter.port)
    writer.execute("INSERT INTO marks VALUES (1)")
    with pytest.raises(psycopg.OperationalError):
        writer.commit()
    writer.close()

    assert cutter.wait(1, 0) and cutter.cuts[0].statements == ("INSERT INTO marks VALUES (1)",)
    with psycopg.connect(**direct, port=postgres.port) as check:
        assert check.execute("SELECT count(*) FROM marks").fetchone() == (1,)


def test_a_live_run_whose_recording_commits_lost_their_reply_goes_on_and_copies_exactly(
    clusters, prefix, tmp_path, postgres: PostgresServer, cutter: CommitCutter
):
    """Two stream recordings' commits, then two more writes of any kind, lose their reply mid-window.  The run
    reconciles each, streams on and exits 0; the copy is the source record for record, each once, and the flow is
    left clean: its stream batch committed, nothing stopped."""
    a, b = clusters["a"].bootstrap, clusters["b"].bootstrap
    topic = f"{prefix}.orders"
    create_topic(a, topic, PARTITIONS)
    url = through(cutter, postgres.create_database(f"live_{uuid.uuid4().hex}"))
    body = f"a->b.enabled = true\ntopics = {topic}\nairmirror.spark.master = local[2]\n"
    body += f"airmirror.metadata.db.url = {url}"
    config = write_config(tmp_path / "mm2.properties", clusters, body)
    producer = SteadyProducer(a, topic, PARTITIONS, burst=4, pause=0.05)
    producer.start()
    try:
        with live_process(config, 90, tmp_path / "live.log") as live:
            wait_until(lambda: end_offset(b, f"a.{topic}", 0) > 50, 180, "the stream copies")
            cutter.arm(STREAM_RECORDING, cuts=2)
            wait_until(lambda: cutter.wait(2, 0), 60, "two stream recordings are cut")
            cutter.arm(cuts=2)
            wait_until(lambda: cutter.wait(4, 0), 60, "two more writes are cut")
            at_cuts = end_offset(b, f"a.{topic}", 0, committed=True)
            wait_until(lambda: live.poll() is not None, 400, "the live run ends")
    finally:
        producer.stop()
    log = (tmp_path / "live.log").read_text()

    assert live.returncode == 0, log[-4000:]
    assert "the failed recording committed after all" in log
    assert end_offset(b, f"a.{topic}", 0, committed=True) > at_cuts  # streamed on after the cuts
    last = airmirror_process("replicate", str(config), "--flow", "a->b")
    assert last.returncode == 0, last.stderr[-4000:]
    for partition in range(PARTITIONS):
        assert records_of(b, f"a.{topic}", partition) == records_of(a, topic, partition)
    with opened(config) as (flow, store):
        assert store.unfinished_batch(flow.name) is None
        assert flow_status(flow, store).stops == []
