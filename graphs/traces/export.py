"""A run's trace as one self-contained HTML page: timeline, calls, relation graph, votes, costs.

Everything a run recorded (documents, prompts, model outputs) is untrusted text: it is escaped
wherever it lands, and the page loads nothing from anywhere (inline CSS and a few lines of JS).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime
from html import escape
from typing import Any

from graphs.describe import (
    CITED_EVIDENCE,
    CONFIDENCE,
    DESCRIBERS,
    EXACT_ANSWER,
    IDEAL_ANSWER,
    NO_EVIDENCE,
    RETRIEVAL_ORDER,
    RETRIEVED_DOCUMENTS,
    cited_evidence,
    confidence_text,
    exact_text,
    retrieved_documents,
)
from graphs.traces.read import Step
from nodes.state import Call, QAState, RelationEdge, call_tokens

LABEL_COLOURS = {
    "duplicated": "#6a3d9a",
    "counterfactual": "#d62728",
    "distracting": "#ff7f0e",
    "ambiguous": "#1f9bb4",
    "none": "#a0a0a0",
}
OTHER_COLOUR = "#2ca02c"

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;
padding:1rem 1.5rem;color:#1d1d1f;background:#fff}
h1{font-size:1.3rem;margin:.2rem 0 .4rem}h2{font-size:1.1rem;margin:1.6rem 0 .5rem;
border-bottom:1px solid #ddd;padding-bottom:.2rem}h3{font-size:1rem;margin:1rem 0 .4rem}
.meta{color:#555}.meta code{color:#333}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;border:1px solid #e4e7eb;
border-radius:4px;padding:.5rem .7rem;margin:.3rem 0;font:12px/1.4 ui-monospace,Menlo,monospace}
table{border-collapse:collapse;margin:.4rem 0;font-size:13px}
th,td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.total td{font-weight:600;background:#fafafa}
details{margin:.15rem 0}summary{cursor:pointer}
details.step>summary{display:grid;grid-template-columns:14rem 1fr 5rem;gap:.6rem;
align-items:center;padding:.15rem 0}
.track{position:relative;height:18px;background:#f1f3f5;border-radius:3px}
.bar{position:absolute;top:2px;height:10px;background:#4c78a8;border-radius:2px;min-width:2px}
.tick{position:absolute;top:13px;height:4px;background:#f58518;min-width:2px}
.key{display:inline-block;width:18px;vertical-align:middle;margin-right:4px}
.bar-key{height:10px;background:#4c78a8;border-radius:2px}.tick-key{height:4px;background:#f58518}
.docs{margin:0;padding-left:1.4rem}
.sentence{margin:.15rem 0 .35rem;padding-left:.6rem;border-left:3px solid #2ca02c;font-style:italic}
.cited{font-size:11px;color:#1a7f37;margin-left:.3rem}
.dur{text-align:right;color:#555;font-variant-numeric:tabular-nums}
.body{margin:.3rem 0 .8rem 1.2rem}
.call{border-left:3px solid #f58518;padding-left:.6rem;margin:.4rem 0}
.role{font-weight:600;color:#555;font-size:12px;margin-top:.3rem}
.error{color:#b00020}.chip{display:inline-block;width:.8em;height:.8em;border-radius:2px;
margin-right:.3em;vertical-align:-1px}
.legend span{margin-right:1rem}svg text{font:11px sans-serif}
.tools button{font:inherit;margin-right:.4rem}
"""

SCRIPT = """
function setAll(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
"""


def export_html(steps: list[Step], *, thread_id: str, question: str) -> str:
    """Return the trace of a run as one self-contained HTML page.

    Args:
        steps: The run's node updates, as `graphs.traces.read.node_updates` returns them.
        thread_id: The run's thread.
        question: The question the run answered.
    """
    calls = [c for s in steps for c in _calls(s)]
    tokens = sum(call_tokens(c) for c in calls)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No network at all, even if some escaped text were ever misread as markup.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">",
        f"<title>quorum trace {_e(thread_id)}</title>",
        f"<style>{CSS}</style><script>{SCRIPT}</script></head><body>",
        f"<h1>{_e(question)}</h1>",
        f'<p class="meta">thread <code>{_e(thread_id)}</code> · {len(steps)} node step(s) · '
        f"{len(calls)} model call(s) · {tokens:,} tokens · {_e(_span(steps))}</p>",
        _answer(steps),
        "<h2>Timeline</h2>",
        '<p class="legend"><span><i class="key bar-key"></i> time in the node</span>'
        '<span><i class="key tick-key"></i> one model call</span>'
        "<span>open a step for its prompts, raw outputs and update</span></p>",
        '<p class="tools"><button type="button" onclick="setAll(true)">expand all</button>'
        '<button type="button" onclick="setAll(false)">collapse all</button></p>',
        _timeline(steps),
    ]
    for step in steps:
        update = step["update"]
        where = f"{_e(step['node'])} (step {_e(step.get('step'))})"
        if update.get("relation_graph"):
            parts += [f"<h2>Relation graph · {where}</h2>", _relation_graph(update)]
        if update.get("votes") or update.get("members"):
            parts += [f"<h2>Ensemble · {where}</h2>", _ensemble(update)]
    parts += ["<h2>Costs</h2>", _costs(steps), "</body></html>"]
    return "\n".join(parts) + "\n"


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _json(value: Any) -> str:
    return _e(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _calls(step: Step) -> list[Call]:
    return [c for c in step["update"].get("calls") or [] if isinstance(c, dict)]


def _epoch(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def _span(steps: list[Step]) -> str:
    first = steps[0].get("started") if steps else None
    wall = sum(s.get("seconds") or 0 for s in steps)
    return f"started {first or '?'}, {wall:.2f}s in nodes"


def _answer(steps: list[Step]) -> str:
    result = next((s["update"]["result"] for s in reversed(steps) if s["update"].get("result")), {})
    if not result:
        return '<p class="meta">No final answer: the run did not finish.</p>'
    exact = exact_text(result.get("exact_answer"))
    rows = [(f"{EXACT_ANSWER} ({result.get('type') or '?'})", _e(exact or "-"))]
    ideal = _e(result.get("ideal_answer") or "-")
    if result.get("insufficient"):
        ideal += ' <span class="error">(insufficient evidence)</span>'
    rows += [(IDEAL_ANSWER, ideal), (CONFIDENCE, _e(confidence_text(result)))]
    if "evidence" in result:
        evidence = "".join(
            f"<li><code>{_e(row['pmid'])}</code> {_e(row['title'] or '(no title)')}"
            + (
                f'<blockquote class="sentence">{_e(row["sentence"])}</blockquote>'
                if row["sentence"]
                else ""
            )
            + "</li>"
            for row in cited_evidence(result)
        )
        rows.append(
            (
                CITED_EVIDENCE,
                f'<ol class="docs evidence">{evidence}</ol>' if evidence else _e(NO_EVIDENCE),
            )
        )
    documents = "".join(
        f"<li><code>{_e(row['pmid'])}</code> {_e(row['title'] or '(no title)')}"
        + (' <span class="cited">cited</span>' if row["cited"] else "")
        + "</li>"
        for row in retrieved_documents(result)
    )
    listed = f'<ol class="docs">{documents}</ol>' if documents else "<p>-</p>"
    rows.append((f"{RETRIEVED_DOCUMENTS} ({RETRIEVAL_ORDER})", listed))
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<h2>Answer</h2><table>{body}</table>"


def _timeline(steps: list[Step]) -> str:
    spans = [(_epoch(s.get("started")), s.get("seconds") or 0.0) for s in steps]
    calls = [(c.get("started"), c.get("latency_s") or 0.0) for s in steps for c in _calls(s)]
    known = [(start, took) for start, took in [*spans, *calls] if start]
    base = min((start for start, _ in known), default=0.0)
    total = max((start + took for start, took in known), default=base) - base or 1.0
    rows = []
    for step, (start, seconds) in zip(steps, spans, strict=True):
        offset = (start - base) if start is not None else 0.0
        bar = _bar("bar", offset, seconds, total)
        ticks = "".join(
            _bar("tick", c["started"] - base, c.get("latency_s") or 0, total)
            for c in _calls(step)
            if c.get("started")
        )
        title = f"starts +{offset:.3f}s, takes {seconds:.3f}s"
        rows.append(
            '<details class="step"><summary>'
            f"<span><b>{_e(step.get('step'))}</b> {_e(step['node'])}</span>"
            f'<span class="track" title="{_e(title)}">{bar}{ticks}</span>'
            f'<span class="dur">{seconds:.2f}s</span></summary>'
            f'<div class="body">{_step_body(step)}</div></details>'
        )
    return "\n".join(rows)


def _bar(kind: str, offset: float, seconds: float, total: float) -> str:
    left = max(0.0, min(100.0, offset / total * 100))
    width = max(0.0, min(100.0 - left, seconds / total * 100))
    return f'<span class="{kind}" style="left:{left:.2f}%;width:{width:.2f}%"></span>'


def _step_body(step: Step) -> str:
    update = step["update"]
    parts = [f'<p class="meta">started {_e(step.get("started"))}</p>']
    describe, _ = DESCRIBERS.get(step["node"], (None, None))
    if describe is not None:
        try:
            lines = describe(update)
        except (KeyError, TypeError, ValueError):  # a summary is a nicety; the JSON follows
            lines = []
        if lines:
            parts.append(f"<pre>{_e(chr(10).join(lines))}</pre>")
    rest = {k: v for k, v in update.items() if k != "calls"}
    parts.append(f"<details><summary>state update</summary><pre>{_json(rest)}</pre></details>")
    calls = _calls(step)
    for number, call in enumerate(calls, 1):
        parts.append(_call(call, number, len(calls)))
    return "\n".join(parts)


def _call(call: Call, number: int, count: int) -> str:
    temperature = call.get("temperature")
    facts = [
        f"call {number}/{count}",
        str(call.get("model") or "?"),
        f"kind {call['kind']}" if call.get("kind") else "",
        f"t={temperature:g}" if isinstance(temperature, int | float) else "",
        f"{call.get('latency_s') or 0:.2f}s",
        f"{call.get('input_tokens') or 0} in + {call.get('output_tokens') or 0} out tokens",
        "ERROR" if call.get("error") else "",
    ]
    parts = [f'<details class="call"><summary>{_e(" · ".join(f for f in facts if f))}</summary>']
    for message in call.get("prompt") or []:
        parts.append(f'<div class="role">{_e(message.get("role"))}</div>')
        parts.append(f"<pre>{_e(message.get('content'))}</pre>")
    parts.append('<div class="role">raw output</div>')
    parts.append(f"<pre>{_e(call.get('raw') or '')}</pre>")
    if call.get("error"):
        parts.append(f'<p class="error">{_e(call["error"])}</p>')
    parts.append("</details>")
    return "\n".join(parts)


def _relation_graph(update: QAState) -> str:
    graph = update["relation_graph"]
    pmids = [str(p) for p in graph.get("pmids") or []]
    n = int(graph.get("n") or 0)
    n = max([n, *(i + 1 for e in graph.get("edges", []) for i in e["pair"])])

    def name(i: Any) -> str:
        if not isinstance(i, int):
            return "-"
        return f"[{i + 1}] {pmids[i]}" if i < len(pmids) else f"[{i + 1}]"

    size, radius = 360, 140
    centre = size / 2
    points = [
        (
            centre + radius * math.cos(2 * math.pi * i / max(n, 1) - math.pi / 2),
            centre + radius * math.sin(2 * math.pi * i / max(n, 1) - math.pi / 2),
        )
        for i in range(n)
    ]
    shapes = []
    for edge in graph.get("edges", []):
        a, b = edge["pair"]
        (x1, y1), (x2, y2) = points[a], points[b]
        colour = LABEL_COLOURS.get(edge.get("label"), OTHER_COLOUR)
        dash = ' stroke-dasharray="6 4"' if edge.get("mirrored") else ""
        faint = ' stroke-opacity="0.45"' if edge.get("label") == "none" else ""
        tip = f"{name(a)} ~ {name(b)}: {edge.get('label')} ({_how(edge, name)})"
        shapes.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{colour}" stroke-width="2"{dash}{faint}><title>{_e(tip)}</title></line>'
        )
    for i, (x, y) in enumerate(points):
        shapes.append(
            f'<g><title>{_e(name(i))}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="13" '
            f'fill="#fff" stroke="#333"/><text x="{x:.1f}" y="{y + 4:.1f}" '
            f'text-anchor="middle">{i + 1}</text></g>'
        )
    svg = (
        f'<svg width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}" role="img" aria-label="relation graph">'
        + "".join(shapes)
        + "</svg>"
    )
    used = dict.fromkeys(e.get("label") for e in graph.get("edges", []))
    legend = "".join(
        f'<span><i class="chip" style="background:{LABEL_COLOURS.get(label, OTHER_COLOUR)}"></i>'
        f"{_e(label)}</span>"
        for label in used
    )
    anchors = ", ".join(name(i) for i in graph.get("rounds") or []) or "-"
    summary = (
        f"{n} contexts, {graph.get('calls')} relation calls for {graph.get('naive_calls')} pairs; "
        f"anchors {anchors}"
    )
    rows = [
        [str(k), name(e["pair"][0]), name(e["pair"][1]), e.get("label"), _how(e, name)]
        for k, e in enumerate(graph.get("edges", []), 1)
    ]
    table = _table(["#", "context", "context", "label", "how"], rows)
    return (
        f'<p class="meta">{_e(summary)}</p>{svg}'
        f'<p class="legend">{legend} <span>dashed: mirrored</span></p>{table}'
    )


def _how(edge: RelationEdge, name: Callable[[Any], str]) -> str:
    how = str(edge.get("source") or "")
    if edge.get("via") is not None:
        how += f" via {name(edge['via'])}"
    if edge.get("error"):
        how += f" ({edge['error']})"
    return how


def _ensemble(update: QAState) -> str:
    votes = update.get("votes") or {}
    parts = []
    if votes:
        facts = [f"strategy {votes.get('strategy', '?')}"]
        if isinstance(votes.get("agreement"), int | float):
            facts.append(f"agreement {votes['agreement']:.2f}")
        facts += [f"{votes.get('distinct', '?')} distinct answer(s)"]
        if votes.get("failed"):
            facts.append(f"{votes['failed']} failed member(s)")
        parts.append(f'<p class="meta">{_e(", ".join(facts))}</p>')
        table = [r for r in votes.get("table") or [] if isinstance(r, dict)]
        extra = list(dict.fromkeys(k for r in table for k in r if k not in ("answer", "votes")))
        rows = [[r.get("answer"), r.get("votes"), *(_cell(r.get(k)) for k in extra)] for r in table]
        parts += ["<h3>Vote table</h3>", _table(["answer", "votes", *extra], rows, numeric={1})]
        if votes.get("ranked"):
            parts.append(f'<p class="meta">ranked: {_e("; ".join(map(str, votes["ranked"])))}</p>')
    members = [m for m in update.get("members") or [] if isinstance(m, dict)]
    if members:
        rows = [
            [
                m.get("model"),
                m.get("view"),
                " ".join(map(str, m.get("order") or [])),
                "; ".join(map(str, m.get("answer") or [])) or "-",
                ", ".join(map(str, m.get("pmids") or [])),
                m.get("error") or "",
                f"{m.get('latency_s') or 0:.2f}",
                m.get("tokens"),
            ]
            for m in members
        ]
        header = ["model", "view", "order", "answer", "cites", "error", "latency s", "tokens"]
        parts += ["<h3>Members</h3>", _table(header, rows, numeric={6, 7})]
    return "\n".join(parts)


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _costs(steps: list[Step]) -> str:
    by_node: dict[str, dict[str, float]] = {}
    for step in steps:
        row = by_node.setdefault(
            step["node"],
            {"steps": 0, "wall": 0.0, "calls": 0, "in": 0, "out": 0, "latency": 0.0},
        )
        row["steps"] += 1
        row["wall"] += step.get("seconds") or 0.0
        for call in _calls(step):
            row["calls"] += 1
            row["in"] += int(call.get("input_tokens") or 0)
            row["out"] += int(call.get("output_tokens") or 0)
            row["latency"] += float(call.get("latency_s") or 0.0)
    total = {
        k: sum(r[k] for r in by_node.values()) for k in ("steps", "wall", "calls", "in", "out")
    }
    total["latency"] = sum(r["latency"] for r in by_node.values())

    def cells(name: str, r: dict[str, float]) -> list[Any]:
        return [
            name,
            int(r["steps"]),
            f"{r['wall']:.3f}",
            int(r["calls"]),
            f"{int(r['in']):,}",
            f"{int(r['out']):,}",
            f"{int(r['in'] + r['out']):,}",
            f"{r['latency']:.3f}",
        ]

    header = ["node", "steps", "wall s", "calls", "input tokens", "output tokens", "tokens"]
    header.append("call latency s")
    rows = [cells(name, r) for name, r in by_node.items()]
    return _table(header, rows, numeric=set(range(1, 8)), total=cells("total", total))


def _table(
    header: list[str],
    rows: list[list[Any]],
    *,
    numeric: set[int] | frozenset[int] = frozenset(),
    total: list[Any] | None = None,
) -> str:
    def row(values: list[Any], css: str = "") -> str:
        tds = "".join(
            f'<td class="n">{_e(v)}</td>' if i in numeric else f"<td>{_e(v)}</td>"
            for i, v in enumerate(values)
        )
        return f'<tr class="{css}">{tds}</tr>' if css else f"<tr>{tds}</tr>"

    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(row(r) for r in rows) + (row(total, "total") if total else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
