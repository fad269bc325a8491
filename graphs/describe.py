"""The QA graph described for people: node labels, summaries, trace lines, answer words.

Each node's words are its description, registered by its module in nodes/descriptions/ with
`describes(...)` (label, done line, summary, trace blocks, outcome) and read here by the node's
name; this module holds no node-by-node chain. Importing it loads the descriptions, never the
graph or a node's machinery, so reading a trace (`trace show`) needs neither.

The answer is put in the same words wherever it is shown: ask, chat, the page and the HTML
export. `answer_view` (nodes/answer_view.py, finalize's trace) and `call_view` describe a run's
answer and a model call once, as `nodes.trace_view` blocks that `block_lines` prints and
`graphs.traces.blocks_html` draws; the page reads the same parts (`confidence_text`,
`cited_evidence`, `retrieved_documents`).
"""

from __future__ import annotations

import json
from typing import Any

import nodes.descriptions  # noqa: F401  # registers every node's description
from infra.text import clip
from nodes.answer_view import answer_view
from nodes.describing import DESCRIPTIONS, MARKS
from nodes.state import Call, QAState, Result
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
    Table,
)

LABELS = {name: described.label for name, described in DESCRIPTIONS.items()}
"""What a running node is doing, in a few words (`quorum ask`'s status, the page's progress)."""
DEMO_NOTICE = (
    "answering with the built-in SmolLM2-135M demo model, which proves the pipeline's wiring, "
    "not answer quality. Point quorum at a real model: see docs/configuration.md, 'Models'."
)
"""Said wherever the demo model answers (ask, chat, the page, bioasq run)."""


def node_names() -> tuple[str, ...]:
    """Return every node a QA graph of any phase can run: the described ones, by name.

    tests/unit/test_describe.py holds them equal to the compiled graphs' nodes.
    """
    return tuple(sorted(DESCRIPTIONS))


NO_FIGURE = "–"
"""What a measure with no value shows (no question of its kind: None in JSON, NaN in the
evaluator), the same in `bioasq eval`, `bioasq report` and every `eval` report."""


def measure_text(value: Any) -> str:
    """Return a measure as printed: 4 decimals, NO_FIGURE for None or NaN, else as it is."""
    if value is None or (isinstance(value, float) and value != value):
        return NO_FIGURE
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def done_line(node: str, update: QAState) -> str:
    """Say what a finished node did, in a few words: the same on the CLI, in chat and the page."""
    described = DESCRIPTIONS.get(node)
    return described.done(dict(update)) if described is not None else node


def step_mark(node: str, update: QAState) -> str:
    """Return a finished step's mark: ✓ done, ✗ failed, – skipped."""
    described = DESCRIPTIONS.get(node)
    return MARKS[described.outcome(dict(update)) if described is not None else "done"]


def progress_line(node: str, update: QAState) -> str:
    """Return a finished step's mark and words, as the CLI and chat print them."""
    return f"{step_mark(node, update)} {done_line(node, update)}"


def summarize(node: str, update: QAState) -> str:
    """Return one short line on what a node's update says (the page's progress list)."""
    described = DESCRIPTIONS.get(node)
    parts = described.summary(dict(update)) if described is not None else []
    if not parts and update.get("notes"):
        parts = [str(update["notes"][0])[:200]]
    return "; ".join(parts)


def call_view(call: Call, *, label: str = "") -> ModelCall:
    """Return one model call as a block: model and cost, each prompt message, raw output, error."""
    temperature = call.get("temperature")
    facts = (
        call.get("model") or "?",
        f"kind {call['kind']}" if call.get("kind") else None,
        f"temperature {temperature:g}"
        if isinstance(temperature, int | float)
        else "default temperature",
        f"{call.get('latency_s') or 0:.2f}s",
        f"{call.get('input_tokens') or 0} in + {call.get('output_tokens') or 0} out tokens",
    )
    return ModelCall(
        facts=tuple(fact for fact in facts if fact),
        messages=tuple(
            (str(m.get("role", "?")), str(m.get("content", ""))) for m in call.get("prompt") or []
        ),
        raw=str(call.get("raw") or ""),
        error=str(call.get("error") or ""),
        label=label,
    )


def trace_blocks(node: str, update: QAState) -> tuple[list[Block], frozenset[str]]:
    """Return what a node's update shows in a trace, and the update keys those blocks cover.

    A trace recorded by an older quorum may lack a key a node's blocks expect: the blocks then
    say so and cover nothing, so the update is still shown whole.
    """
    described = DESCRIPTIONS.get(node)
    if described is None:
        return [], frozenset()
    try:
        return described.trace(dict(update)), described.covers
    except (KeyError, TypeError, ValueError) as exc:
        return [Facts(f"(could not describe: {type(exc).__name__} {exc})")], frozenset()


def trace_text(node: str, update: QAState) -> tuple[list[str], frozenset[str]]:
    """Return a node's trace blocks as lines, and the update keys they cover.

    The lines of `quorum trace show`, chat's /trace and the page's step view.
    """
    blocks, covers = trace_blocks(node, update)
    return [line for block in blocks for line in block_lines(block)], covers


def step_lines(node: str, update: QAState, *, width: int, skip: tuple[str, ...] = ()) -> list[str]:
    """Return one step of a trace as lines (`trace show` and chat's /trace).

    The node's blocks first, then every key they do not cover as `key: JSON`, cut at `width`.
    """
    lines, shown = trace_text(node, update)
    for key, value in update.items():
        if key in shown or key in skip:
            continue
        text = json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"{key}: {clip(text, width)}")
    return lines


def block_lines(block: Block) -> list[str]:
    """Return one trace block as text: facts as a line, tables aligned, the graph's edges.

    The HTML export draws the same blocks (`graphs.traces.blocks_html`).
    """
    if isinstance(block, Facts):
        return [block.text]
    if isinstance(block, Lines):
        return list(block.lines)
    if isinstance(block, Table):
        return [f"{block.title.lower()}:", *_aligned(block)]
    if isinstance(block, AnswerBlock):
        return _answer_lines(block)
    if isinstance(block, ModelCall):
        return _call_lines(block)
    lines = [f"relation graph: {block.summary()}"]
    for edge in block.edges:
        a, b = edge["pair"]
        lines.append(f"  {block.name(a)} ~ {block.name(b)}: {edge['label']} ({block.how(edge)})")
    return lines


CELL_CHARS = 60
"""A table cell's width in text; longer values end in "…" (the HTML view shows them whole)."""


def _aligned(table: Table) -> list[str]:
    rows = [tuple(clip(v, CELL_CHARS) for v in row) for row in (table.header, *table.rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.header))]
    last = len(widths) - 1
    return [
        "  "
        + "  ".join(
            value.rjust(widths[i])
            if i in table.numeric
            else (value if i == last else value.ljust(widths[i]))
            for i, value in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def _call_lines(call: ModelCall) -> list[str]:
    head = ", ".join(call.facts)
    lines = [f"{call.label}: {head}" if call.label else head]
    for role, content in call.messages:
        lines.append(f"[{role}]")
        lines.extend(f"  {line}" for line in content.splitlines())
    if call.raw:
        lines.append("[raw output]")
        lines.extend(f"  {line}" for line in call.raw.splitlines())
    if call.error:
        lines.append(f"[error] {call.error}")
    return lines


def _answer_lines(answer: AnswerBlock) -> list[str]:
    lines = []
    if answer.exact is not None:
        lines.append(f"{EXACT_ANSWER} ({answer.qtype}): {answer.exact}")
    if answer.ideal:
        label = IDEAL_ANSWER if answer.exact is not None else f"{IDEAL_ANSWER} ({answer.qtype})"
        lines.append(f"{label}: {answer.ideal}")
    lines.append(f"{CONFIDENCE}: {answer.confidence}")
    if answer.support is not None:
        lines.append(f"{SUPPORT}: {answer.support}")
    if answer.evidence is None:
        pass  # a result from before cited evidence was kept: nothing to say either way
    elif answer.evidence:
        lines.append(f"{CITED_EVIDENCE}:")
        for cited in answer.evidence:
            lines.append(f"  [{cited.pmid}] {cited.title or '(no title)'}")
            if cited.relevance:
                lines.append(f"      {cited.relevance}")
            if cited.sentence:
                lines.append(f'      "{cited.sentence}"')
    else:
        lines.append(f"{CITED_EVIDENCE}: {NO_EVIDENCE}")
    if answer.documents:
        lines.append(f"{RETRIEVED_DOCUMENTS} ({RETRIEVAL_ORDER}):")
        for rank, document in enumerate(answer.documents, 1):
            mark = " (cited)" if document.cited else ""
            if document.relevance.startswith("off"):
                mark += " (off the question)"
            lines.append(f"  {rank}. [{document.pmid}] {document.title or '(no title)'}{mark}")
        if answer.more:
            lines.append(f"  … {answer.more} more")
    return lines


def answer_lines(result: Result, *, documents: int | None = None) -> list[str]:
    """Return the answer as plain lines (ask, chat): `answer_view` as text.

    Args:
        result: The graph's final result.
        documents: Show at most this many retrieved documents (all when None).
    """
    return block_lines(answer_view(result, documents=documents))
