"""Trace blocks (`nodes.trace_view`) as HTML: facts, tables, the relation graph, answer, calls.

The same blocks read as text in `quorum trace show`, ask and chat (`graphs.describe.block_lines`).
Every value is untrusted (documents, prompts, model outputs) and is escaped wherever it lands.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from nodes.trace_view import (
    CITED_EVIDENCE,
    CONFIDENCE,
    EXACT_ANSWER,
    IDEAL_ANSWER,
    NO_EVIDENCE,
    RETRIEVAL_ORDER,
    RETRIEVED_DOCUMENTS,
    SUPPORT,
    AnswerBlock,
    Block,
    Facts,
    Lines,
    ModelCall,
    RelationGraph,
    Table,
)

LABEL_COLOURS = {
    "duplicated": "#6a3d9a",
    "counterfactual": "#d62728",
    "distracting": "#ff7f0e",
    "ambiguous": "#1f9bb4",
    "none": "#a0a0a0",
}
OTHER_COLOUR = "#2ca02c"


def e(value: Any) -> str:
    """Escape a value for HTML text or a quoted attribute."""
    return escape("" if value is None else str(value), quote=True)


def blocks_html(blocks: Iterable[Block]) -> str:
    """Return trace blocks as HTML, in order."""
    parts = []
    for block in blocks:
        if isinstance(block, Facts):
            parts.append(f'<p class="meta">{e(block.text)}</p>')
        elif isinstance(block, Lines):
            parts.append(f"<pre>{e(chr(10).join(block.lines))}</pre>")
        elif isinstance(block, Table):
            parts += [
                f"<h3>{e(block.title)}</h3>",
                table(block.header, block.rows, numeric=block.numeric),
            ]
        elif isinstance(block, AnswerBlock):
            parts.append(_answer(block))
        elif isinstance(block, ModelCall):
            parts.append(_call(block))
        else:
            parts += ["<h3>Relation graph</h3>", _relation_graph(block)]
    return "\n".join(parts)


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: frozenset[int] | set[int] = frozenset(),
    total: Sequence[Any] | None = None,
) -> str:
    """Return an HTML table; `numeric` columns align right, `total` is a last, bold row."""

    def row(values: Sequence[Any], css: str = "") -> str:
        tds = "".join(
            f'<td class="n">{e(v)}</td>' if i in numeric else f"<td>{e(v)}</td>"
            for i, v in enumerate(values)
        )
        return f'<tr class="{css}">{tds}</tr>' if css else f"<tr>{tds}</tr>"

    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join(row(r) for r in rows) + (row(total, "total") if total else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _answer(answer: AnswerBlock) -> str:
    """The answer as a table of its parts; the parts it lacks as "-"."""
    rows = [(f"{EXACT_ANSWER} ({answer.qtype})", e(answer.exact or "-"))]
    ideal = e(answer.ideal or "-")
    if answer.insufficient:
        ideal += ' <span class="error">(insufficient evidence)</span>'
    rows += [(IDEAL_ANSWER, ideal), (CONFIDENCE, e(answer.confidence))]
    if answer.support is not None:
        rows.append((SUPPORT, e(answer.support)))
    if answer.evidence is not None:
        evidence = "".join(
            f"<li><code>{e(cited.pmid)}</code> {e(cited.title or '(no title)')}"
            + (f' <span class="muted">{e(cited.relevance)}</span>' if cited.relevance else "")
            + (
                f'<blockquote class="sentence">{e(cited.sentence)}</blockquote>'
                if cited.sentence
                else ""
            )
            + "</li>"
            for cited in answer.evidence
        )
        rows.append(
            (
                CITED_EVIDENCE,
                f'<ol class="docs evidence">{evidence}</ol>' if evidence else e(NO_EVIDENCE),
            )
        )
    documents = "".join(
        f"<li><code>{e(document.pmid)}</code> {e(document.title or '(no title)')}"
        + (' <span class="cited">cited</span>' if document.cited else "")
        + (
            f' <span class="muted">{e(document.relevance)}</span>'
            if document.relevance.startswith("off")
            else ""
        )
        + "</li>"
        for document in answer.documents
    )
    if answer.more:
        documents += f"<li>… {answer.more} more</li>"
    listed = f'<ol class="docs">{documents}</ol>' if documents else "<p>-</p>"
    rows.append((f"{RETRIEVED_DOCUMENTS} ({RETRIEVAL_ORDER})", listed))
    body = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _call(call: ModelCall) -> str:
    """A model call folded: its facts as the summary, each prompt message and the raw output."""
    summary = " · ".join(f for f in (call.label, *call.facts, "ERROR" if call.error else "") if f)
    parts = [f'<details class="call"><summary>{e(summary)}</summary>']
    for role, content in call.messages:
        parts.append(f'<div class="role">{e(role)}</div>')
        parts.append(f"<pre>{e(content)}</pre>")
    parts.append('<div class="role">raw output</div>')
    parts.append(f"<pre>{e(call.raw)}</pre>")
    if call.error:
        parts.append(f'<p class="error">{e(call.error)}</p>')
    parts.append("</details>")
    return "\n".join(parts)


def _relation_graph(graph: RelationGraph) -> str:
    """The contexts on a circle, an edge per relation coloured by label (dashed: mirrored)."""
    size, radius = 360, 140
    centre = size / 2
    points = [
        (
            centre + radius * math.cos(2 * math.pi * i / max(graph.n, 1) - math.pi / 2),
            centre + radius * math.sin(2 * math.pi * i / max(graph.n, 1) - math.pi / 2),
        )
        for i in range(graph.n)
    ]
    shapes = []
    for edge in graph.edges:
        a, b = edge["pair"]
        (x1, y1), (x2, y2) = points[a], points[b]
        colour = LABEL_COLOURS.get(edge.get("label"), OTHER_COLOUR)
        dash = ' stroke-dasharray="6 4"' if edge.get("mirrored") else ""
        faint = ' stroke-opacity="0.45"' if edge.get("label") == "none" else ""
        tip = f"{graph.name(a)} ~ {graph.name(b)}: {edge.get('label')} ({graph.how(edge)})"
        shapes.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{colour}" stroke-width="2"{dash}{faint}><title>{e(tip)}</title></line>'
        )
    for i, (x, y) in enumerate(points):
        shapes.append(
            f'<g><title>{e(graph.name(i))}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="13" '
            f'fill="#fff" stroke="#333"/><text x="{x:.1f}" y="{y + 4:.1f}" '
            f'text-anchor="middle">{i + 1}</text></g>'
        )
    svg = (
        f'<svg width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}" role="img" aria-label="relation graph">'
        + "".join(shapes)
        + "</svg>"
    )
    used = dict.fromkeys(edge.get("label") for edge in graph.edges)
    legend = "".join(
        f'<span><i class="chip" style="background:{LABEL_COLOURS.get(label, OTHER_COLOUR)}"></i>'
        f"{e(label)}</span>"
        for label in used
    )
    rows = [
        [
            str(k),
            graph.name(edge["pair"][0]),
            graph.name(edge["pair"][1]),
            edge.get("label"),
            graph.how(edge),
        ]
        for k, edge in enumerate(graph.edges, 1)
    ]
    edges = table(["#", "context", "context", "label", "how"], rows)
    return (
        f'<p class="meta">{e(graph.summary())}</p>{svg}'
        f'<p class="legend">{legend} <span>dashed: mirrored</span></p>{edges}'
    )
