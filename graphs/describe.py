"""The QA graph described for people: node labels, summaries, trace lines, answer words.

The answer is put in the same words wherever it is shown: ask, chat, the page and the HTML
export (`answer_lines`, `confidence_text`, `cited_evidence`, `retrieved_documents`).

The nodes and their order are read from the compiled graph (`graphs.runtime.graph_nodes`),
never copied: a node added to graphs/qa.py needs a label here and nothing else.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from graphs.runtime import graph_nodes
from infra.bioasq.types import PHASES
from nodes.describing import DESCRIPTIONS, MARKS, confidence_text
from nodes.state import Call, QAState
from nodes.trace_view import Block, Facts, Lines, Table

LABELS = {name: described.label for name, described in DESCRIPTIONS.items()}
"""What a running node is doing, in a few words (`quorum ask`'s status, the page's progress)."""
DEMO_NOTICE = (
    "answering with the built-in SmolLM2-135M demo model, which proves the pipeline's wiring, "
    "not answer quality. Point quorum at a real model: see docs/configuration.md, 'Models'."
)
"""Said wherever the demo model answers (ask, chat, the page, bioasq run)."""
EXACT_ANSWER = "Exact answer"
IDEAL_ANSWER = "Ideal answer"
CONFIDENCE = "Confidence"
CITED_EVIDENCE = "Cited evidence"
SUPPORT = "Support"
"""The passages the answer rests on, each PMID with its title and supporting sentence."""
RETRIEVED_DOCUMENTS = "Retrieved documents"
"""The ranked list BioASQ scores in phase A: retrieval order, never re-ordered by citation."""
RETRIEVAL_ORDER = "retrieval order"
NO_EVIDENCE = "none: the answer cites no passage"


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


def describe_call(call: Call) -> list[str]:
    """Return readable lines for one model call: model and cost, each prompt message, raw output."""
    tokens = f"{call.get('input_tokens') or 0} in + {call.get('output_tokens') or 0} out tokens"
    temperature = call.get("temperature")
    head = [
        call.get("model") or "?",
        f"kind {call['kind']}" if call.get("kind") else None,
        f"temperature {temperature:g}" if temperature is not None else "default temperature",
        f"{call.get('latency_s') or 0:.2f}s",
        tokens,
    ]
    lines = [", ".join(part for part in head if part)]
    for message in call.get("prompt") or []:
        lines.append(f"[{message.get('role', '?')}]")
        lines.extend(f"  {line}" for line in str(message.get("content", "")).splitlines())
    if call.get("raw"):
        lines.append("[raw output]")
        lines.extend(f"  {line}" for line in str(call["raw"]).splitlines())
    if call.get("error"):
        lines.append(f"[error] {call['error']}")
    return lines


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


def block_lines(block: Block) -> list[str]:
    """Return one trace block as text: facts as a line, tables aligned, the graph's edges."""
    if isinstance(block, Facts):
        return [block.text]
    if isinstance(block, Lines):
        return list(block.lines)
    if isinstance(block, Table):
        return [f"{block.title.lower()}:", *_aligned(block)]
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


def answer_lines(result: dict[str, Any], *, documents: int | None = None) -> list[str]:
    """Return the answer as plain lines: exact, ideal, confidence, cited evidence, retrieved.

    Args:
        result: The graph's final result.
        documents: Show at most this many retrieved documents (all when None).
    """
    lines = []
    exact = exact_text(given_exact(result))
    qtype = result.get("type") or "?"
    if exact is not None:
        lines.append(f"{EXACT_ANSWER} ({qtype}): {exact}")
    if result.get("ideal_answer"):
        label = IDEAL_ANSWER if exact is not None else f"{IDEAL_ANSWER} ({qtype})"
        lines.append(f"{label}: {result['ideal_answer']}")
    lines.append(f"{CONFIDENCE}: {confidence_text(result)}")
    if (said := support_text(result)) is not None:
        lines.append(f"{SUPPORT}: {said}")
    evidence = cited_evidence(result)
    if "evidence" not in result:
        pass  # a result from before cited evidence was kept: nothing to say either way
    elif evidence:
        lines.append(f"{CITED_EVIDENCE}:")
        for row in evidence:
            lines.append(f"  [{row['pmid']}] {row['title'] or '(no title)'}")
            if row["sentence"]:
                lines.append(f'      "{row["sentence"]}"')
    else:
        lines.append(f"{CITED_EVIDENCE}: {NO_EVIDENCE}")
    retrieved = retrieved_documents(result)
    if retrieved:
        shown = retrieved if documents is None else retrieved[:documents]
        more = len(retrieved) - len(shown)
        lines.append(f"{RETRIEVED_DOCUMENTS} ({RETRIEVAL_ORDER}):")
        for rank, row in enumerate(shown, 1):
            mark = " (cited)" if row["cited"] else ""
            lines.append(f"  {rank}. [{row['pmid']}] {row['title'] or '(no title)'}{mark}")
        if more:
            lines.append(f"  … {more} more")
    return lines
