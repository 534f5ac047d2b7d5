"""Exact translation rules, checked against a brute-force model of a replicated partition.

The model: a source partition whose offsets are records, aborted records, transaction markers or compacted
away, with a retention prefix; copied in batches (one commit marker after each batch's records on the target,
sometimes an aborted attempt before it).  For every committed offset, a consumer resuming at the translated
position must read exactly the records it had not consumed: checked record by record.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airmirror.checkpoints.translation import failback_position, forward_position, never_translates
from airmirror.config import load_config
from airmirror.config.routes import Route, route
from airmirror.migration.takeover_tail import imported_syncs
from airmirror.mm2.wire_formats import OffsetSync
from airmirror.model import OffsetRun
from airmirror.replication.offset_runs import build_runs
from airmirror.store.folding import merged


@dataclass
class Replica:
    """A source partition and what replication made of it on the target."""

    kinds: str
    log_start: int
    target_start: int
    cursor: int
    runs: list[OffsetRun] = field(default_factory=list)
    copied: dict[int, int] = field(default_factory=dict)

    def readable(self, offset: int) -> bool:
        return offset >= self.log_start and self.kinds[offset] == "r"

    def covering_upstream(self, offset: int) -> OffsetRun | None:
        return next((r for r in self.runs if r.upstream_end > offset), None)

    def covering_downstream(self, offset: int) -> OffsetRun | None:
        return next((r for r in self.runs if r.downstream_stop > offset), None)

    def forward(self, offset: int) -> int | None:
        last = self.runs[-1] if self.runs else None
        return forward_position(offset, self.cursor, self.covering_upstream(offset), last, self.target_start)

    def failback(self, offset: int, in_flight: bool = False) -> int | None:
        return failback_position(offset, self.cursor, self.covering_downstream(offset), in_flight, self.log_start)


def simulate(rng: random.Random) -> Replica:
    size = rng.randint(0, 40)
    kinds = "".join(rng.choice("rrrrrramc") for _ in range(size))
    log_start = rng.randint(0, size)
    replica = Replica(kinds, log_start, target_start=rng.randint(0, 4), cursor=log_start)
    downstream = replica.target_start
    for end in sorted(rng.sample(range(log_start, size + 1), rng.randint(1, size - log_start + 1))):
        downstream += rng.choice([0, 0, 0, 4])  # an aborted earlier attempt: records and an abort marker
        upstream = [o for o in range(replica.cursor, end) if replica.readable(o)]
        downstreams = list(range(downstream, downstream + len(upstream)))
        replica.runs += build_runs(upstream, downstreams)
        replica.copied.update(zip(upstream, downstreams, strict=True))
        downstream += len(upstream) + (1 if upstream else 0)  # the commit marker
        replica.cursor = end
    return replica


SCENARIOS = [simulate(random.Random(seed)) for seed in range(200)]


@pytest.mark.parametrize("replica", SCENARIOS)
def test_forward_resumes_exactly_after_what_was_consumed(replica: Replica):
    for committed in range(len(replica.kinds) + 3):
        position = replica.forward(committed)
        if committed > replica.cursor:
            assert position is None
            continue
        assert position is not None
        unconsumed = {o for o in range(committed, replica.cursor) if replica.readable(o)}
        read_on_target = {up for up, down in replica.copied.items() if down >= position}
        assert read_on_target == unconsumed, (replica, committed, position)
        later = [down for up, down in sorted(replica.copied.items()) if up >= committed]
        if later:
            assert position == later[0]


@pytest.mark.parametrize("replica", SCENARIOS)
def test_failback_resumes_exactly_after_what_was_consumed_downstream(replica: Replica):
    target_end = max(replica.copied.values(), default=replica.target_start) + 6
    for committed in range(target_end):
        position = replica.failback(committed)
        assert position is not None
        unconsumed = {up for up, down in replica.copied.items() if down >= committed}
        not_yet_copied = {o for o in range(replica.cursor, len(replica.kinds)) if replica.readable(o)}
        readable_from_position = {o for o in range(position, len(replica.kinds)) if replica.readable(o)}
        assert readable_from_position == unconsumed | not_yet_copied, (replica, committed, position)


def folded(replica: Replica, rng: random.Random) -> Replica:
    """The replica with its runs but the newest two folded, a few consecutive runs at a time, as retention does."""
    runs, old = [], replica.runs[:-2]
    while old:
        size = rng.randint(1, 4)
        runs.append(merged(old[:size]))
        old = old[size:]
    return Replica(
        replica.kinds, replica.log_start, replica.target_start, replica.cursor, runs + replica.runs[-2:], replica.copied
    )


FOLDED = [
    (replica, folded(replica, random.Random(seed))) for seed, replica in enumerate(SCENARIOS) if len(replica.runs) > 3
]


def slack(run: OffsetRun | None) -> int:
    """The most records a group may re-read when translated through ``run``: its offsets holding no copy."""
    return 0 if run is None else (run.length - run.copies) + (run.downstream_length - run.copies)


@pytest.mark.parametrize(("exact", "replica"), FOLDED)
def test_forward_through_folded_runs_is_at_or_before_the_exact_position_and_exact_in_the_newest(
    exact: Replica, replica: Replica
):
    newest = replica.runs[-2].upstream_start
    for committed in range(replica.cursor + 1):
        position, exact_position = replica.forward(committed), exact.forward(committed)
        assert position is not None and exact_position is not None and position <= exact_position
        unconsumed = {o for o in range(committed, replica.cursor) if replica.readable(o)}
        read_on_target = {up for up, down in replica.copied.items() if down >= position}
        assert read_on_target >= unconsumed, (replica, committed, position)
        assert len(read_on_target - unconsumed) <= slack(replica.covering_upstream(committed))
        assert committed < newest or position == exact_position


@pytest.mark.parametrize(("exact", "replica"), FOLDED)
def test_failback_through_folded_runs_is_at_or_before_the_exact_position_and_exact_in_the_newest(
    exact: Replica, replica: Replica
):
    newest = replica.runs[-2].downstream_start
    for committed in range(max(replica.copied.values()) + 3):
        position, exact_position = replica.failback(committed), exact.failback(committed)
        assert position is not None and exact_position is not None and position <= exact_position
        unconsumed = {up for up, down in replica.copied.items() if down >= committed}
        assert {o for o in unconsumed if o >= position} == unconsumed, (replica, committed, position)
        re_read = {up for up, down in replica.copied.items() if up >= position and down < committed}
        assert len(re_read) <= slack(replica.covering_downstream(committed))
        assert committed < newest or position == exact_position


def test_a_folded_run_translates_early_by_at_most_its_commit_markers():
    run = merged([OffsetRun(0, 10, 0), OffsetRun(10, 20, 11), OffsetRun(20, 30, 22)])  # a commit marker after each
    assert (run.downstream_end, run.records) == (32, 30)
    assert [forward_position(u, 30, run, run, 0) for u in (0, 5, 10, 15, 25, 29)] == [
        0,
        5,
        10,
        15,
        25,
        29,
    ]  # exact: 0 5 11 16 27 31
    assert forward_position(30, 30, None, run, 0) == 32
    assert [failback_position(d, 30, run, False, 0) for d in (0, 2, 3, 11, 31)] == [
        0,
        1,
        1,
        9,
        29,
    ]  # exact: 0 2 3 10 29


def test_failback_past_known_data_waits_for_an_unfinished_batch():
    runs = [OffsetRun(0, 10, 0)]
    assert failback_position(12, 10, None, in_flight=True, target_start=0) is None
    assert failback_position(12, 10, None, in_flight=False, target_start=0) == 10
    assert failback_position(5, 10, runs[0], in_flight=True, target_start=0) == 5
    assert failback_position(3, None, None, in_flight=False, target_start=0) is None


def test_forward_without_cursor_is_not_yet():
    assert forward_position(0, None, None, None, target_start=0) is None


def test_empty_partition_translates_to_the_target_log_start():
    assert forward_position(0, 0, None, None, target_start=0) == 0
    assert forward_position(25, 25, None, None, target_start=7) == 7


def test_compaction_hole_aborted_records_and_markers_map_to_the_next_copied_record():
    runs = [OffsetRun(0, 3, 0), OffsetRun(8, 10, 4)]  # 3..7 aborted + marker upstream; marker at 3 downstream
    assert [
        forward_position(u, 12, next((r for r in runs if r.upstream_end > u), None), runs[-1], 0) for u in range(13)
    ] == [
        0,
        1,
        2,
        4,
        4,
        4,
        4,
        4,
        4,
        5,
        6,
        6,
        6,
    ]


def test_positions_below_the_target_log_start_are_raised_to_it():
    run = OffsetRun(0, 100, 0)
    assert forward_position(10, 100, run, run, target_start=40) == 40
    assert forward_position(60, 100, run, run, target_start=40) == 60
    assert failback_position(10, 100, run, in_flight=False, target_start=30) == 30


def flow_config(tmp_path: Path, body: str):
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = a, b\na.bootstrap.servers = localhost:1\nb.bootstrap.servers = localhost:2\n"
        "a->b.enabled = true\nb->a.enabled = true\n" + body
    )
    return load_config(path).flow("a->b")


def test_routes_forward_and_failback_topics(tmp_path: Path):
    flow = flow_config(tmp_path, "topics = .*\n")
    assert route(flow, "orders") == Route("orders", "a.orders", "a->b", "orders", failback=False)
    assert route(flow, "b.orders") == Route("b.orders", "orders", "b->a", "orders", failback=True)
    assert route(flow, "b.c.orders") == Route("b.c.orders", "c.orders", "b->a", "c.orders", failback=True)
    assert route(flow, "c.orders") == Route("c.orders", "a.c.orders", "a->b", "c.orders", failback=False)
    assert route(flow, "__consumer_offsets") is None
    assert route(flow, "b.checkpoints.internal") is None


def test_routes_follow_the_topic_filter(tmp_path: Path):
    flow = flow_config(tmp_path, "topics = orders, b\\.orders\ntopics.exclude = .*secret\n")
    assert route(flow, "payments") is None
    assert route(flow, "b.payments") is None
    assert route(flow, "b.orders") is not None
    assert route(flow, "heartbeats") is not None  # heartbeats are replicated whatever the filter says


def test_identity_policy_has_no_failback_routes(tmp_path: Path):
    flow = flow_config(tmp_path, "replication.policy.class = IdentityReplicationPolicy\n")
    assert route(flow, "b.orders") == Route("b.orders", "b.orders", "a->b", "b.orders", failback=False)


def test_below_the_imported_mm2_syncs_a_group_translates_as_mm2_translates():
    sync = OffsetSync("orders", 0, 100, 250)
    run = OffsetRun(300, 400, 450)
    below_exact = {"cursor": 400, "covering": run, "last": None, "target_start": 0, "exact_from": 300}
    assert forward_position(100, mm2_sync=sync, **below_exact) == 250
    assert forward_position(150, mm2_sync=sync, **below_exact) == 251
    assert forward_position(50, mm2_sync=None, **below_exact) is None
    assert forward_position(320, mm2_sync=sync, **below_exact) == 470


def test_a_takeover_without_mm2_syncs_never_translates_past_mm2s_copies():
    """MM2 copied source 0..299 to target 0..299 and left no sync; airmirror continues at 300 (target 300 on):
    a group at 150 has no translation (as with MM2), not airmirror's first downstream offset 300."""
    first_batch = OffsetRun(300, 400, 300)
    taken_over = {"cursor": 400, "last": first_batch, "target_start": 0, "mm2_sync": None, "exact_from": 300}
    assert forward_position(150, covering=first_batch, **taken_over) is None
    assert forward_position(300, covering=first_batch, **taken_over) == 300
    assert forward_position(350, covering=first_batch, **taken_over) == 350


def test_only_an_offset_in_mm2s_part_below_its_syncs_never_translates():
    """``translate`` says "never" for it and "not yet" for an offset past the cursor, which a later run copies."""
    sync = OffsetSync("orders", 0, 100, 250)
    assert never_translates(50, 400, None, 300)
    assert not never_translates(150, 400, sync, 300)  # MM2's rule translates it
    assert not never_translates(350, 400, None, 300)  # exact runs cover it
    assert not never_translates(450, 400, None, 300)  # not yet replicated
    assert not never_translates(50, 400, None, None)  # not taken over


@dataclass
class TakenOver:
    """A source partition of ``size`` records: MM2 copied a prefix (at least once: a restart copies again from
    its stored offset), airmirror took it over and copied the rest.  ``copies`` holds every target record as
    ``(upstream, downstream)``; ``runs``, ``syncs``, ``exact_from`` and ``cursor`` are what airmirror stored."""

    size: int
    copies: list[tuple[int, int]]
    runs: list[OffsetRun]
    syncs: list[OffsetSync]
    exact_from: int
    cursor: int
    target_start: int

    def forward(self, offset: int) -> int | None:
        covering = next((r for r in self.runs if r.upstream_end > offset), None)
        sync = max(
            (s for s in self.syncs if s.upstream_offset <= offset), key=lambda s: s.upstream_offset, default=None
        )
        last = self.runs[-1] if self.runs else None
        return forward_position(offset, self.cursor, covering, last, self.target_start, sync, self.exact_from)


def take_over(rng: random.Random) -> TakenOver:
    """MM2 copies, stops (its stored offset may lag), airmirror takes over one of three ways, then copies the rest."""
    size = rng.randint(1, 30)
    copied_by_mm2 = rng.randint(1, size)
    restart = rng.randint(0, copied_by_mm2 - 1)
    first_run = list(range(rng.randint(restart, copied_by_mm2)))
    copies, written = [], []
    for start, upstreams in ((0, first_run), (len(first_run), list(range(restart, copied_by_mm2)))):
        for downstream, upstream in enumerate(upstreams, start):
            copies.append((upstream, downstream))
            if downstream == start or rng.random() < 0.2:  # MM2 syncs a run's first record, then some others
                written.append(OffsetSync("orders", 0, upstream, downstream))
    anchor, imported = imported_syncs(written)
    case = rng.choice(["walk", "no syncs", "sync record gone"])
    target_start = anchor.downstream_offset + 1 if case == "sync record gone" else 0
    if case == "walk":
        mapped = [(u, d) for u, d in copies if d >= anchor.downstream_offset]
        runs, exact_from, cursor = (
            list(build_runs(*zip(*mapped, strict=True))),
            anchor.upstream_offset,
            mapped[-1][0] + 1,
        )
    else:
        stored = rng.randint(-1, copied_by_mm2 - 1)  # MM2's stored offset lags what it copied
        runs, exact_from, cursor = [], stored + 1, stored + 1
        imported = [] if case == "no syncs" else imported
    later = list(range(cursor, size))
    downstream = len(copies) + rng.choice([0, 1])
    runs += build_runs(later, list(range(downstream, downstream + len(later))))
    copies += zip(later, range(downstream, downstream + len(later)), strict=True)
    return TakenOver(size, copies, runs, imported, exact_from, size, target_start)


TAKEOVERS = [take_over(random.Random(seed)) for seed in range(300)]


@pytest.mark.parametrize("taken", TAKEOVERS)
def test_after_a_takeover_translation_never_skips_a_record(taken: TakenOver):
    """Whatever the origin of a position, a consumer resuming at the translation reads a copy of every source
    record at or after its committed offset (still on the target); from ``exact_from`` on, exactly there."""
    for committed in range(taken.size + 2):
        position = taken.forward(committed)
        if committed > taken.cursor:
            assert position is None
            continue
        if position is None:
            assert committed < taken.exact_from and not any(s.upstream_offset <= committed for s in taken.syncs), taken
            continue
        for upstream in range(committed, taken.size):
            kept = [d for u, d in taken.copies if u == upstream and d >= taken.target_start]
            assert not kept or max(kept) >= position, (taken, committed, position, upstream)
        if committed >= taken.exact_from:
            exact = [
                r.downstream_start + u - r.upstream_start
                for r in taken.runs
                for u in range(r.upstream_start, r.upstream_end)
                if u >= committed
            ]
            after_runs = taken.runs[-1].downstream_start + taken.runs[-1].length if taken.runs else taken.target_start
            assert position == max(exact[0] if exact else after_runs, taken.target_start), (taken, committed)
