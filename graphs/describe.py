"""The QA graph described for people: node labels, summaries, trace describers, answer words.

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
from nodes.describing import DESCRIPTIONS, confidence_text
from nodes.state import Call, Decision, QAState

LABELS = {name: described.label for name, described in DESCRIPTIONS.items()}
"""What a running node is doing, in a few words (`quorum ask`'s status, the page's progress)."""
DEMO_NOTICE = (
    "answering with the built-in SmolLM2-135M demo model, which proves the pipeline's wiring, "
    "not answer quality. Point quorum at a real model: see README, 'Models'."
)
"""Said wherever the demo model answers (the CLI, chat, the page)."""
EXACT_ANSWER = "Exact answer"
IDEAL_ANSWER = "Ideal answer"
CONFIDENCE = "Confidence"
CITED_EVIDENCE = "Cited evidence"
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


def describe_organize(update: QAState) -> list[str]:
    """Return readable lines for an organize update: the relation graph, then the groups."""
    lines: list[str] = []
    graph = update.get("relation_graph")
    if graph:
        pmids = graph.get("pmids", [])

        def name(i: int) -> str:
            return f"[{i + 1}] {pmids[i]}" if i < len(pmids) else f"[{i + 1}]"

        anchors = ", ".join(name(i) for i in graph.get("rounds", []))
        lines.append(
            f"relation graph: {graph['n']} contexts, {graph['calls']} relation calls for "
            f"{graph['naive_calls']} pairs; anchors {anchors or '-'}"
        )
        for edge in graph.get("edges", []):
            a, b = edge["pair"]
            how = edge["source"]
            if edge.get("via") is not None:
                how += f" via {name(edge['via'])}"
            if edge.get("error"):
                how += f" ({edge['error'][:80]})"
            lines.append(f"  {name(a)} ~ {name(b)}: {edge['label']} ({how})")
    elif update.get("relations"):
        for r in update["relations"]:
            state = "applied" if r.get("applied", True) else "not applied"
            lines.append(f"  {r['a']} ~ {r['b']}: {r['label']} ({state})")
    for number, group in enumerate(update.get("groups") or [], 1):
        lines.append(f"group {number}: {', '.join(group['pmids'])}")
        if group.get("question"):
            lines.append(f"  asks: {group['question']}")
        cited = f" [{', '.join(group['cited'])}]" if group.get("cited") else ""
        answer = group.get("answer") or f"(no answer: {group.get('error') or 'empty'})"
        lines.append(f"  answer: {answer}{cited}")
        if group.get("exact"):
            lines.append(f"  exact: {'; '.join(group['exact'])}")
        if len(group.get("covers") or []) > len(group["pmids"]):
            lines.append(f"  stands for: {', '.join(group['covers'])}")
    if decision := update.get("decision"):
        lines.append(f"aggregate ({decision['strategy']}): {decision['why']}")
        for rank, row in enumerate(decision["answers"], 1):
            text = row["answer"] if isinstance(row["answer"], str) else "; ".join(row["answer"])
            cites = f" [{', '.join(row['cited'])}]" if row["cited"] else ""
            lines.append(f"  {rank}. {text} (support {row['support']:.2f}){cites}")
        lines.append(f"  order: {', '.join(decision['order']) or '-'}")
        settings = ", ".join(f"{k}={v}" for k, v in decision["settings"].items())
        lines.append(f"  settings: {settings or '-'}")
    return lines


def describe_ensemble(update: QAState) -> list[str]:
    """Return readable lines for an ensemble update: members, the vote, then the decision."""
    votes = update.get("votes") or {}
    members = update.get("members") or []
    lines = [
        f"strategy {votes.get('strategy', '?')}: {len(members)} member call(s), agreement "
        f"{votes.get('agreement', 0):.2f}, {votes.get('distinct', 0)} distinct answer(s)"
    ]
    for m in members:
        said = "; ".join(m.get("answer") or []) or "-"
        cited = f" cites {', '.join(m['pmids'])}" if m.get("pmids") else ""
        outcome = f"ERROR {m['error']}" if m.get("error") else f"{said}{cited}"
        lines.append(
            f"  {m['model']} view {m['view']} [{' '.join(m['order'])}] "
            f"t={m.get('temperature', 0):g} {m.get('latency_s', 0):.2f}s: {outcome}"
        )
    lines.append("vote table:")
    for row in votes.get("table", []):
        variants = f" (as {', '.join(row['variants'])})" if row.get("variants") else ""
        lines.append(f"  {row['votes']:>3}  {row['answer']}{variants}")
    ccv = votes.get("ccv")
    if isinstance(ccv, str):  # a question type CCV cannot vote on, and why
        lines.append(f"citation-consistent vote: not used ({ccv})")
    elif ccv:
        lines.append(
            f"citation-consistent vote ({ccv['evidence']}): winner {ccv['winner']!r}, "
            f"citation agreement {ccv['citation_agreement']:.2f}"
        )
        for row in ccv["table"]:
            lines.append(
                f"  score {row['score']} (said {row['frequency']}x, cites {row['pmid']}): "
                f"{row['answer']}"
            )
    for name, fit in (votes.get("moi") or {}).items():
        weights = ", ".join(f"{w:.2f}" for w in fit["position_weights"])
        utilities = ", ".join(f"{p} {u:.2f}" for p, u in fit["utilities"].items())
        lines.append(f"MoI {name}: position weights [{weights}]; utilities {utilities}")
        if fit.get("orientation"):
            lines.append(f"  oriented by: {fit['orientation']}")
        lines.append(f"  debiased order: {' '.join(fit['order'])}")
    lines.append(f"ranked: {'; '.join(votes.get('ranked', [])) or '-'}")
    return lines + describe_decision(update.get("decision"))


def describe_decision(decision: Decision | None) -> list[str]:
    """Return readable lines for a decision: its answers and support, order, why, settings."""
    if not decision:
        return []
    lines = [f"decision ({decision['strategy']}, by {decision['source']}): {decision['why']}"]
    for rank, answer in enumerate(decision["answers"][:10], 1):
        said = answer["answer"]
        text = "; ".join(said) if isinstance(said, list) else said
        cited = f", cites {', '.join(answer['cited'])}" if answer["cited"] else ""
        lines.append(f"  {rank}. {text} (support {answer['support']:g}{cited})")
    if not decision["answers"]:
        lines.append("  (no answer)")
    if decision["order"]:
        lines.append(f"  evidence order: {' '.join(decision['order'])}")
    if decision["settings"]:
        settings = ", ".join(f"{k}={v}" for k, v in decision["settings"].items())
        lines.append(f"  settings: {settings}")
    return lines


def describe_synthesize(update: QAState) -> list[str]:
    """Return readable lines for a synthesis attempt: temperature, answer, confidence, why."""
    lines = []
    for attempt in update.get("attempts", []):
        answer = attempt.get("answer") or {}
        if answer.get("source") == "decision":
            head = "the decision is final (synthesis.mode vote, no model call)"
        else:
            again = " (again, at temperature 0)" if attempt["temperature"] == 0 else ""
            head = f"at temperature {attempt['temperature']:g}{again}"
        lines.append(
            f"attempt in round {attempt['round']} {head}: confidence "
            f"{confidence_text(answer)}, answer from {answer.get('source')}"
        )
        if attempt.get("error"):
            lines.append(f"  error: {attempt['error']}")
        if answer.get("overrode_decision"):
            lines.append("  overrode the ensemble's decision")
        if answer.get("extracted") and answer.get("extracted") != answer.get("exact"):
            lines.append(f"  extracted: {'; '.join(answer['extracted'])}")
        lines.append(f"  exact: {'; '.join(answer.get('exact') or []) or '-'}")
        lines.append(f"  ideal: {answer.get('ideal') or '-'}")
        if answer.get("rationale"):
            lines.append(f"  rationale: {answer['rationale']}")
        if answer.get("cited"):
            lines.append(f"  cites: {', '.join(answer['cited'])}")
    return lines


DESCRIBERS = {
    "organize": (
        describe_organize,
        frozenset({"relation_graph", "relations", "groups", "decision"}),
    ),
    "ensemble": (describe_ensemble, frozenset({"members", "votes", "decision"})),
    "synthesize": (describe_synthesize, frozenset({"attempts", "answer"})),
}
"""Nodes whose updates read better as lines than as raw JSON, and the keys the lines cover."""


# The answer in the same words wherever it is shown: ask, chat, the page and the HTML export.


def exact_text(exact: Any) -> str | None:
    """Return an exact answer as words ("yes"; "TNF; IL-6"), or None for a summary."""
    if exact is None:
        return None
    if isinstance(exact, list):
        names = [item[0] if isinstance(item, list) and item else item for item in exact]
        return "; ".join(str(n) for n in names if n) or "(none)"
    return str(exact)


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


def answer_lines(result: dict[str, Any], *, documents: int | None = None) -> list[str]:
    """Return the answer as plain lines: exact, ideal, confidence, cited evidence, retrieved.

    Args:
        result: The graph's final result.
        documents: Show at most this many retrieved documents (all when None).
    """
    lines = []
    exact = exact_text(result.get("exact_answer"))
    qtype = result.get("type") or "?"
    if exact is not None:
        lines.append(f"{EXACT_ANSWER} ({qtype}): {exact}")
    if result.get("ideal_answer"):
        label = IDEAL_ANSWER if exact is not None else f"{IDEAL_ANSWER} ({qtype})"
        lines.append(f"{label}: {result['ideal_answer']}")
    lines.append(f"{CONFIDENCE}: {confidence_text(result)}")
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
