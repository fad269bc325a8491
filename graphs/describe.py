"""The QA graph described for people: node labels, summaries, trace lines, answer words.

The answer is put in the same words wherever it is shown: ask, chat, the page and the HTML
export. `answer_view` and `call_view` describe a run's answer and a model call once, as
`nodes.trace_view` blocks that `block_lines` prints and `graphs.traces.blocks_html` draws; the
page reads the same parts (`confidence_text`, `cited_evidence`, `retrieved_documents`).

The nodes and their order are read from the compiled graph (`graphs.runtime.graph_nodes`),
never copied: a node added to graphs/qa.py needs a label here and nothing else.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from graphs.runtime import graph_nodes
from infra.bioasq.types import PHASES
from nodes.describing import DESCRIPTIONS, MARKS, confidence_text
from nodes.state import Call, QAState
from nodes.trace_view import (
    CITED_EVIDENCE,
    CONFIDENCE,
    EXACT_ANSWER,
    IDEAL_ANSWER,
    NO_EVIDENCE,
    RETRIEVAL_ORDER,
    RETRIEVED_DOCUMENTS,
    SUPPORT,
    Answer,
    Block,
    Cited,
    Facts,
    Lines,
    ModelCall,
    Retrieved,
    Table,
)

LABELS = {name: described.label for name, described in DESCRIPTIONS.items()}
"""What a running node is doing, in a few words (`quorum ask`'s status, the page's progress)."""
DEMO_NOTICE = (
    "answering with the built-in SmolLM2-135M demo model, which proves the pipeline's wiring, "
    "not answer quality. Point quorum at a real model: see docs/configuration.md, 'Models'."
)
"""Said wherever the demo model answers (ask, chat, the page, bioasq run)."""


@cache
def nodes(phase: str = "A+") -> tuple[str, ...]:
    """Return a phase's nodes in the order the graph adds them."""
    return graph_nodes(phase)


@cache
def node_names() -> tuple[str, ...]:
    """Return every node a QA graph of any phase can run, in the order they are added."""
    return tuple(dict.fromkeys(n for phase in PHASES for n in nodes(phase)))


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
        lines.append(f"{key}: {text if len(text) <= width else text[:width] + '…'}")
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
    if isinstance(block, Answer):
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
    rows = [
        tuple(v if len(v) <= CELL_CHARS else v[: CELL_CHARS - 1] + "…" for v in row)
        for row in (table.header, *table.rows)
    ]
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


def _answer_lines(answer: Answer) -> list[str]:
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
            if cited.sentence:
                lines.append(f'      "{cited.sentence}"')
    else:
        lines.append(f"{CITED_EVIDENCE}: {NO_EVIDENCE}")
    if answer.documents:
        lines.append(f"{RETRIEVED_DOCUMENTS} ({RETRIEVAL_ORDER}):")
        for rank, document in enumerate(answer.documents, 1):
            mark = " (cited)" if document.cited else ""
            lines.append(f"  {rank}. [{document.pmid}] {document.title or '(no title)'}{mark}")
        if answer.more:
            lines.append(f"  … {answer.more} more")
    return lines


# The answer in the same words wherever it is shown: ask, chat, the page and the HTML export.


def exact_text(exact: Any) -> str | None:
    """Return an exact answer as words ("yes"; "TNF; IL-6"), or None for a summary."""
    if exact is None:
        return None
    if isinstance(exact, list):
        names = [item[0] if isinstance(item, list) and item else item for item in exact]
        return "; ".join(str(n) for n in names if n) or "(none)"
    return str(exact)


def given_exact(result: dict[str, Any]) -> Any:
    """Return the exact answer a result gives: None when nothing was supported (insufficient).

    finalize gives none then; a result kept from before it did may hold an empty answer shaped
    as "no", which is no answer either.
    """
    return None if result.get("insufficient") else result.get("exact_answer")


def cited_evidence(result: dict[str, Any]) -> list[dict[str, str]]:
    """Return the passages the answer rests on: pmid, title and the sentence that supports it."""
    titles = result.get("titles") or {}
    rows = []
    for item in result.get("evidence") or []:
        if not isinstance(item, dict) or not item.get("pmid"):
            continue
        pmid = str(item["pmid"])
        title = item.get("title") or titles.get(pmid) or ""
        rows.append({"pmid": pmid, "title": title, "sentence": item.get("sentence") or ""})
    return rows


def retrieved_documents(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the retrieved documents in retrieval order: pmid, title, whether it is cited."""
    titles = result.get("titles") or {}
    cited = {row["pmid"] for row in cited_evidence(result)}
    return [
        {"pmid": str(p), "title": titles.get(p) or "", "cited": str(p) in cited}
        for p in result.get("documents") or []
    ]


def support_text(result: dict[str, Any]) -> str | None:
    """Return what the support check says of a given answer, or None (refused, or older)."""
    support = result.get("support") or {}
    if support.get("verdict") != "supported":
        return None
    verified = support.get("verified", "not verified")
    why = f" ({support['why']})" if support.get("why") else ""
    if "evidence" in result and not result["evidence"]:
        return f"carried by the passages it was made from (it cites none); {verified}{why}"
    return f"carried by the cited passages; {verified}{why}"


def answer_view(result: dict[str, Any], *, documents: int | None = None) -> Answer:
    """Return the answer as a block: exact, ideal, confidence, support, evidence, retrieved.

    Args:
        result: The graph's final result.
        documents: Keep at most this many retrieved documents (all when None).
    """
    retrieved = retrieved_documents(result)
    shown = retrieved if documents is None else retrieved[:documents]
    kept = "evidence" in result
    return Answer(
        qtype=result.get("type") or "?",
        exact=exact_text(given_exact(result)),
        ideal=result.get("ideal_answer") or "",
        insufficient=bool(result.get("insufficient")),
        confidence=confidence_text(result),
        support=support_text(result),
        evidence=tuple(Cited(**row) for row in cited_evidence(result)) if kept else None,
        documents=tuple(Retrieved(**row) for row in shown),
        more=len(retrieved) - len(shown),
    )


def answer_lines(result: dict[str, Any], *, documents: int | None = None) -> list[str]:
    """Return the answer as plain lines (ask, chat): `answer_view` as text.

    Args:
        result: The graph's final result.
        documents: Show at most this many retrieved documents (all when None).
    """
    return block_lines(answer_view(result, documents=documents))
