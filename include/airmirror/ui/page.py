"""HTML of the replication view: server-rendered, no scripts, every value escaped.

Each partition row carries ``data-topic`` and ``data-partition`` and each figure cell a ``data-field`` naming its
JSON field (``schemas.X`` for a field of the view's ``schemas`` object), so a browser test (or a person with the
page's source) can find a figure without guessing at layout.  The chart is an inline SVG of total lag (records)
and replication latency (ms) over time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from html import escape
from urllib.parse import quote

from airmirror.config.schema_registries import SchemaIds
from airmirror.model import utc_text
from airmirror.replication.health import FlowHealth, FlowState, worst_first
from airmirror.replication.status import SchemaFigures
from airmirror.ui.flow_view import FlowView, SeriesPoint
from airmirror.ui.topic_rows import TopicRow, topic_page

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1f2933; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 1.8rem; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border-bottom: 1px solid #d9e2ec; padding: 0.3rem 0.6rem; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
.skipped-active { background: #fde8e8; color: #9b1c1c; font-weight: 600; }
.stopped { color: #9b1c1c; } .muted { color: #829ab1; }
.state-failing, .state-stopped, .state-unavailable { color: #9b1c1c; font-weight: 600; }
.state-lagging, .state-not_running, .state-waiting { color: #b45309; font-weight: 600; }
.state-healthy { color: #047857; }
.overview th a { color: inherit; } details table { margin: 0.4rem 0 0.8rem 1rem; } .paging a { margin-right: 1rem; }
.figures span { margin-right: 2rem; } svg { background: #f8fafc; border: 1px solid #d9e2ec; }
"""


SORTS: dict[str, tuple[str, Callable[[list[FlowHealth]], list[FlowHealth]]]] = {
    "state": ("state", worst_first),
    "lag": ("lag (records)", lambda rows: sorted(rows, key=lambda h: (-h.lag_records, h.flow))),
    "age": ("oldest record", lambda rows: sorted(rows, key=lambda h: (-(h.oldest_record_age_ms or 0), h.flow))),
    "last": (
        "last copy",
        lambda rows: sorted(rows, key=lambda h: (h.last_success_at is not None, h.last_success_at or 0, h.flow)),
    ),
    "flow": ("flow", lambda rows: sorted(rows, key=lambda h: h.flow)),
}
"""The overview's sort orders (``?sort=KEY``): its column heading, and the order; ``state`` (worst first) unless
asked."""


def overview_page(healths: Sequence[FlowHealth], unavailable: Sequence[tuple[str, str, str]], sort: str) -> str:
    """Every flow the user may read, one row each, in the ``sort`` order (:data:`SORTS`); ``unavailable`` lists the
    ``(flow, dag_id, reason)`` whose store cannot be read."""
    heading, order = SORTS.get(sort, SORTS["state"])
    headers = {key: f'<a href="?sort={key}">{escape(label)}</a>' for key, (label, _) in SORTS.items()}
    rows = "".join(overview_row(h) for h in order(list(healths)))
    rows += "".join(
        f'<tr data-flow="{escape(name)}" data-state="unavailable"><td class="text"><a href="flows/'
        f'{quote(name, safe="")}">{escape(name)}</a></td><td class="text state-unavailable" data-field="state">'
        f'unavailable</td><td class="text muted" colspan="11">{escape(reason)}</td></tr>'
        for name, _, reason in unavailable
    )
    table = (
        f'<table class="overview" data-sort="{escape(sort if sort in SORTS else "state")}"><thead><tr>'
        f"<th>{headers['flow']}</th><th>{headers['state']}</th><th>{headers['lag']}</th><th>{headers['age']}</th>"
        "<th>replication latency</th>"
        f"<th>{headers['last']}</th><th>running since</th><th>records filtered</th><th>records skipped</th>"
        "<th>gaps</th><th>stopped partitions</th>"
        "<th>schema ids</th><th>lag, last 6 h</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
    shown = table if healths or unavailable else "<p class=muted>No flow whose DAG you may read.</p>"
    title = f"<h1>airmirror replication</h1><p class=muted>sorted by {escape(heading)}</p>"
    return _document("airmirror replication", title + shown)


def overview_row(h: FlowHealth) -> str:
    """One flow's row of the overview; where latency cannot be measured, the cell's title says why."""
    if h.replication_latency_ms is not None:
        latency = f'<td data-field="replication_latency_ms">{h.replication_latency_ms:,} ms</td>'
    else:
        one_way = h.latency_note is not None and "not enabled" in h.latency_note
        latency = (
            f'<td class="text muted" data-field="replication_latency_ms" title="{escape(h.latency_note or "")}">'
            f"{'n/a (one-way flow)' if one_way else 'n/a'}</td>"
        )
    failure = ""
    if h.last_failure is not None and h.state is FlowState.FAILING:
        error = h.last_failure.error.splitlines()[0][:300] if h.last_failure.error else ""
        failure = f'<div class="muted">last run failed {escape(_when(h.last_failure.failed_at))}: {escape(error)}</div>'
    live = _when(h.live_run_since) if h.live_run_since is not None else ""
    return (
        f'<tr data-flow="{escape(h.flow)}" data-state="{escape(h.state.value)}">'
        f'<td class="text"><a href="flows/{quote(h.flow, safe="")}">{escape(h.flow)}</a>'
        f'<div class="muted">{escape(h.dag_id)}</div></td>'
        f'<td class="text state-{h.state.name.lower()}" data-field="state">'
        f"{escape(', '.join(state.value for state in h.states))}{failure}</td>"
        f"{_cell(h.lag_records, 'lag_records')}"
        f'<td data-field="oldest_record_age_ms">{escape(_age(h.oldest_record_age_ms))}</td>{latency}'
        f'<td class="text" data-field="last_success_at">{escape(_when(h.last_success_at))}</td>'
        f'<td class="text" data-field="live_run_since">{escape(live)}</td>'
        f"{_cell(h.records_filtered, 'records_filtered')}{_cell(h.records_skipped, 'records_skipped')}"
        f"{_cell(h.gaps, 'gaps')}{_cell(h.stopped_partitions, 'stopped_partitions')}"
        f'<td class="text" data-field="schemas.mode">{escape(_schemas(h.schemas))}</td>'
        f"<td>{sparkline(h.lag_sparkline)}</td></tr>"
    )


def sparkline(values: Sequence[int], width: int = 120, height: int = 24) -> str:
    """A small SVG line of ``values`` (total lag, oldest first); nothing before two samples."""
    if len(values) < 2:
        return '<span class="muted">-</span>'
    top = max(values) or 1
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 2 - v / top * (height - 4):.1f}" for i, v in enumerate(values))
    return (
        f'<svg class="sparkline" role="img" aria-label="lag, max {max(values):,} records" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}"><polyline fill="none" stroke="#2563eb" '
        f'stroke-width="1.5" points="{points}"/></svg>'
    )


def _when(moment: datetime | None) -> str:
    return "never" if moment is None else utc_text(moment)


def _age(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "none waiting"
    return f"{milliseconds / 1000:,.1f} s" if milliseconds < 120_000 else f"{milliseconds / 60_000:,.1f} min"


def _schemas(figures: SchemaFigures) -> str:
    if figures.mode is SchemaIds.OFF:
        return "off"
    return f"{figures.mode.value}: {figures.ids_mapped:,} ids mapped, {figures.records_passed:,} passed through"


def not_a_flow_page(dag_id: str) -> str:
    return _document(
        "airmirror replication",
        f"<h1>{escape(dag_id)}</h1><p>This DAG replicates no airmirror flow of the configuration.</p>",
    )


def store_unavailable_page(flow: str, reason: str) -> str:
    """Why ``flow``'s view cannot be shown (``reason`` names no file or URL)."""
    return _document(f"airmirror {flow}", f"<h1>Flow {escape(flow)}</h1><p>{escape(reason)}</p>")


def flow_page(view: FlowView, topic: str | None = None, page: int = 1) -> str:
    """The whole view of one flow; its topics filtered by the regular expression ``topic`` and paged
    (:mod:`airmirror.ui.topic_rows`)."""
    latency = "n/a" if view.heartbeat_latency_ms is None else f"{view.heartbeat_latency_ms:,} ms"
    body = [
        f"<h1>Flow {escape(view.flow)}</h1>",
        f'<p class="figures"><span>DAG <b>{escape(view.dag_id)}</b></span>'
        f'<span>heartbeat latency <b data-field="heartbeat_latency_ms">{escape(latency)}</b></span>'
        + (
            f"<span class=muted>as of {escape(view.heartbeat_latency_at)}</span></p>"
            if view.heartbeat_latency_at is not None
            else f'</p><p class="muted" data-field="latency_note">{escape(view.latency_note or "")}</p>'
        ),
        schemas_paragraph(view.schemas),
        "<h2>Lag and latency over time</h2>",
        chart(view.series),
        "<h2>Topics</h2>",
        topics_section(view, topic, page),
        "<h2>Consumer groups</h2>",
        _table(
            ["group", "checkpointed partitions", "last checkpoint", "group sync", "synced", "detail"],
            (
                (
                    f'<tr data-group="{escape(g.group)}" class="{"skipped-active" if g.skipped_active else ""}">',
                    [
                        _text(g.group),
                        _cell(g.partitions, "partitions"),
                        _text(g.last_checkpoint_at),
                        _text(g.sync_outcome),
                        _text(g.synced_at),
                        _text(g.sync_detail),
                    ],
                )
                for g in view.groups
            ),
        ),
        "<h2>Recent batches</h2>",
        _table(
            ["batch", "state", "planned", "seconds", "records", "bytes", "records/s"],
            (
                (
                    f'<tr data-batch="{b.batch_id}">',
                    [
                        _cell(b.batch_id, "batch_id"),
                        _text(b.state),
                        _text(b.created_at),
                        _cell(_round(b.seconds), "seconds"),
                        _cell(b.records, "records"),
                        _cell(b.bytes, "bytes"),
                        _cell(_round(b.records_per_second), "records_per_second"),
                    ],
                )
                for b in view.batches
            ),
        ),
    ]
    return _document(f"airmirror {view.flow}", "".join(body))


PARTITION_HEADERS = (
    "partition",
    "records copied",
    "records filtered",
    "records skipped",
    "bytes copied",
    "cursor",
    "lag (records)",
    "record age (ms)",
    "sampled",
    "gaps",
    "gap offsets",
    "source resets",
    "stopped",
)


def topics_section(view: FlowView, topic: str | None, page: int) -> str:
    """The filter form, one row per topic of the page (worst first) that expands to its partitions, and paging."""
    try:
        shown = topic_page(view.partitions, topic, page)
        problem = ""
    except ValueError as error:
        shown, problem = topic_page(view.partitions, None, page), f'<p class="stopped">{escape(str(error))}</p>'
    form = (
        '<form method="get" class="figures"><label>topics matching <input name="topic" '
        f'value="{escape(topic or "")}" placeholder="regular expression"></label> <button>filter</button></form>'
    )
    counts = (
        f'<p class="muted" data-field="topics">{shown.matching:,} of {shown.total:,} topics; '
        f"page {shown.number} of {shown.pages}</p>"
    )
    rows = "".join(topic_row(row) for row in shown.rows)
    rows = rows or '<tr><td class=muted colspan="8">none yet</td></tr>'
    table = (
        '<table class="topics"><thead><tr><th>topic (expand for its partitions)</th><th>partitions</th>'
        "<th>lag (records)</th><th>oldest record (ms)</th><th>records filtered</th><th>records skipped</th>"
        "<th>gaps</th><th>stopped</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
    return form + problem + counts + table + paging(shown.number, shown.pages, topic)


def topic_row(row: TopicRow) -> str:
    """A topic's row; its first cell expands to the table of its partitions."""
    partitions = _table(
        PARTITION_HEADERS,
        (
            (
                f'<tr data-topic="{escape(p.topic)}" data-partition="{p.partition}">',
                [
                    _cell(p.partition, "partition"),
                    _cell(p.records, "records"),
                    _cell(p.filtered, "filtered"),
                    _cell(p.skipped, "skipped"),
                    _cell(p.bytes, "bytes"),
                    _cell(p.cursor, "cursor"),
                    _cell(p.lag_records, "lag_records"),
                    _cell(p.record_age_ms, "record_age_ms"),
                    _text(p.sampled_at),
                    _cell(p.gap_count, "gap_count"),
                    _cell(p.gap_offsets, "gap_offsets"),
                    _cell(p.resets, "resets"),
                    f'<td class="text stopped">{escape(p.stopped or "")}</td>',
                ],
            )
            for p in row.partitions
        ),
    )
    return (
        f'<tr data-topic-row="{escape(row.topic)}"><td class="text"><details><summary>{escape(row.topic)} '
        f'<span class="muted">&rarr; {escape(row.remote_topic)}</span></summary>{partitions}</details></td>'
        f"{_cell(len(row.partitions), 'partitions')}{_cell(row.lag_records, 'lag_records')}"
        f"{_cell(row.oldest_record_age_ms, 'oldest_record_age_ms')}{_cell(row.filtered, 'filtered')}"
        f"{_cell(row.skipped, 'skipped')}{_cell(row.gap_count, 'gap_count')}{_cell(row.stopped, 'stopped')}</tr>"
    )


def paging(number: int, pages: int, topic: str | None) -> str:
    """Links to the previous and next pages, keeping the filter."""
    if pages == 1:
        return ""
    keep = f"&topic={quote(topic, safe='')}" if topic else ""
    previous = f'<a rel="prev" href="?page={number - 1}{keep}">previous</a>' if number > 1 else ""
    following = f'<a rel="next" href="?page={number + 1}{keep}">next</a>' if number < pages else ""
    return f'<p class="paging">{previous} {following}</p>'


def schemas_paragraph(figures: SchemaFigures) -> str:
    """The flow's schema ids mode, and unless it is ``off`` subjects synced, ids mapped and records passed through."""

    def figure(label: str, field: str, value: int | str) -> str:
        shown = f"{value:,}" if isinstance(value, int) else value
        return f'<span>{escape(label)} <b data-field="schemas.{field}">{escape(shown)}</b></span>'

    shown = [figure("schema ids", "mode", figures.mode.value)]
    if figures.mode is not SchemaIds.OFF:
        shown += [
            figure("subjects synced", "subjects", figures.subjects),
            figure("ids mapped", "ids_mapped", figures.ids_mapped),
            figure("records passed through", "records_passed", figures.records_passed),
        ]
    return f'<p class="figures">{"".join(shown)}</p>'


def chart(points: Sequence[SeriesPoint], width: int = 900, height: int = 220) -> str:
    """Total lag (blue, left scale) and replication latency (orange, right scale) as polylines."""
    if len(points) < 2:
        return '<p class="muted">Not enough samples yet: each committed batch adds one.</p>'
    times = [datetime.fromisoformat(p.at).timestamp() for p in points]
    lags = [float(p.lag_records) for p in points]
    latencies = [float(p.replication_latency_ms) if p.replication_latency_ms is not None else None for p in points]
    span = (max(times) - min(times)) or 1.0

    def line(values: Sequence[float | None], color: str, label_y: int) -> str:
        known = [v for v in values if v is not None]
        if not known:
            return ""
        top = max(known) or 1.0
        coords = " ".join(
            f"{40 + (t - min(times)) / span * (width - 80):.1f},{height - 20 - v / top * (height - 40):.1f}"
            for t, v in zip(times, values, strict=True)
            if v is not None
        )
        return (
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>'
            f'<text x="{width - 120}" y="{label_y}" fill="{color}" font-size="11">max {max(known):,.0f}</text>'
        )

    return (
        f'<svg role="img" aria-label="lag and latency over time" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
        f"{line(lags, '#2563eb', 14)}{line(latencies, '#ea580c', 28)}"
        f'<text x="40" y="{height - 4}" font-size="11" fill="#52606d">{escape(points[0].at)}</text>'
        f'<text x="{width - 200}" y="{height - 4}" font-size="11" fill="#52606d">{escape(points[-1].at)}</text>'
        '<text x="40" y="14" font-size="11" fill="#2563eb">lag (records)</text>'
        '<text x="140" y="14" font-size="11" fill="#ea580c">replication latency (ms)</text></svg>'
    )


def _table(headers: Sequence[str], rows: Iterable[tuple[str, Sequence[str]]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(f"{opening}{''.join(cells)}</tr>" for opening, cells in rows)
    body = body or f"<tr><td class=muted colspan={len(headers)}>none yet</td></tr>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: object, field: str) -> str:
    shown = "" if value is None else f"{value:,}" if isinstance(value, int) else str(value)
    return f'<td data-field="{field}">{escape(shown)}</td>'


def _text(value: object) -> str:
    return f'<td class="text">{escape("" if value is None else str(value))}</td>'


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _document(title: str, body: str) -> str:
    head = f"<meta charset=utf-8><title>{escape(title)}</title><style>{STYLE}</style>"
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"
