"""A run's trace as one self-contained HTML page: timeline, calls, relation graph, votes, costs.

Everything a run recorded (documents, prompts, model outputs) is untrusted text: it is escaped
wherever it lands, and the page loads nothing from anywhere (inline CSS and a few lines of JS).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from graphs.describe import call_view, trace_blocks
from graphs.traces.blocks_html import blocks_html, table
from graphs.traces.blocks_html import e as _e
from graphs.traces.read import Step
from nodes.answer_view import answer_view
from nodes.state import Call, Result, call_tokens
from nodes.trace_view import AnswerBlock

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
    final = _result(steps)
    for step in steps:  # what each node's trace blocks show, as the text views show them
        blocks, _ = trace_blocks(step["node"], step["update"])
        shown = blocks_html(blocks) if blocks else ""
        if final and step["update"].get("result") is final:  # finalize's: once, at the top
            kept = [b for b in blocks if not isinstance(b, AnswerBlock)]
            shown = '<p class="meta">The answer it made is at the top of this page.</p>'
            shown += blocks_html(kept) if kept else ""
        if shown:
            parts += [f"<h2>{_e(step['node'])} · step {_e(step.get('step'))}</h2>", shown]
    parts += ["<h2>Costs</h2>", _costs(steps), "</body></html>"]
    return "\n".join(parts) + "\n"


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


def _result(steps: list[Step]) -> Result | None:
    return next((s["update"]["result"] for s in reversed(steps) if s["update"].get("result")), None)


def _answer(steps: list[Step]) -> str:
    result = _result(steps)
    if not result:
        return '<p class="meta">No final answer: the run did not finish.</p>'
    return f"<h2>Answer</h2>{blocks_html([answer_view(result)])}"


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
    rest = {k: v for k, v in update.items() if k != "calls"}
    parts.append(f"<details><summary>state update</summary><pre>{_json(rest)}</pre></details>")
    calls = _calls(step)
    for number, call in enumerate(calls, 1):
        parts.append(blocks_html([call_view(call, label=f"call {number}/{len(calls)}")]))
    return "\n".join(parts)


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
    return table(header, rows, numeric=set(range(1, 8)), total=cells("total", total))
