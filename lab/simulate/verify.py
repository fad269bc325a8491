"""What the simulated endpoint answers to the verifier's prompt (prompts/verify.md).

A wiring harness, not evidence that the verifier works: it lets a run against the simulator go
through the verifier the way a run against a real endpoint does (one call, a reply that parses,
quotes that are verbatim), so the tests that run the simulator keep answering with the verifier
on. Whether a real model's verdicts are right is measured elsewhere (`quorum eval support`).

The rule, for each numbered passage of the prompt (recognised by the schema's `verdicts` field),
read sentence by sentence (a title line is a sentence):
- factoid and list answers: the first sentence that holds an exact answer item (any case)
  supports the answer, quoted verbatim; no such sentence: unrelated, empty quote.
- yes/no and summary answers: the sentence that shares the most content words (four letters or
  more, any case) with the question and the ideal answer, at least two of them, is the one the
  verdict rests on; none: unrelated. A summary is supported by it. A yes/no answer is supported
  when the sentence's polarity matches it and contradicted otherwise: the polarity is "no" when
  the sentence carries a negation cue (not, no, never, without, failed to, …), else "yes".
It answers with or without plants: a verify prompt needs no planted reader.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lab.simulate.prompt_text import SENTENCE_END, numbered_passages, question_of
from lab.simulate.schema_instance import resolved

FIELD = "verdicts"
"""The verifier's schema's one top-level field: how its prompt is recognised."""
QUOTE_CHARS = 400
TYPE_LINE = re.compile(r"^Question type:[ \t]*(\S+)[ \t]*$", re.MULTILINE)
EXACT_LINE = re.compile(r"^Exact answer:[ \t]*(.*?)[ \t]*$", re.MULTILINE)
IDEAL_LINE = re.compile(r"^Ideal answer:[ \t]*(.*?)[ \t]*$", re.MULTILINE)
WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{3,}")
NEGATION = re.compile(
    r"\b(?:not|no|never|neither|nor|without|cannot|unable|fail(?:s|ed)? to|lack(?:s|ed)?)\b|n't\b",
    re.IGNORECASE,
)
CLIPPED = " …"
"""How nodes/passages.py marks an abstract cut to the model's budget: never part of a quote."""


def is_verify_request(schema: dict | None) -> bool:
    """Tell whether a structured request is the verifier's (its schema's fields)."""
    if not schema:
        return False
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    return set(resolved(schema, defs).get("properties", {})) == {FIELD}


def verify_reply(messages: list[tuple[str, str]]) -> dict[str, Any] | None:
    """Return the verdicts for a verify prompt, by the rule above; None without passages."""
    text = "\n\n".join(t for _, t in messages)
    blocks = numbered_passages(text)
    if not blocks:
        return None
    qtype, exact, ideal = answer_of(text)
    words = content_words(f"{question_of(text) or ''} {ideal}")
    return {FIELD: [verdict(b.pmid, b.body, qtype, exact, words) for b in blocks]}


def answer_of(text: str) -> tuple[str, list[str], str]:
    """Return the question type, exact answer items and ideal answer a verify prompt states."""
    qtype = found[-1] if (found := TYPE_LINE.findall(text)) else "summary"
    exact: list[str] = []
    if said := EXACT_LINE.findall(text):
        try:
            parsed = json.loads(said[-1])
        except json.JSONDecodeError:
            parsed = said[-1]
        exact = [str(p) for p in (parsed if isinstance(parsed, list) else [parsed]) if str(p)]
    ideal = found[-1] if (found := IDEAL_LINE.findall(text)) else ""
    return qtype, exact, ideal


def verdict(pmid: str, body: str, qtype: str, exact: list[str], words: set[str]) -> dict[str, str]:
    """Return one passage's verdict and verbatim quote."""
    sentences = sentences_of(body.removesuffix(CLIPPED))
    if qtype in ("factoid", "list"):
        items = [e.lower() for e in exact if e.strip()]
        hit = next((s for s in sentences if any(i in s.lower() for i in items)), None)
        if hit is None:
            return {"pmid": pmid, "quote": "", "verdict": "unrelated"}
        return {"pmid": pmid, "quote": hit[:QUOTE_CHARS], "verdict": "supports"}
    shared = [(len(words & content_words(s)), -k, s) for k, s in enumerate(sentences)]
    best = max(shared, default=(0, 0, ""))
    if best[0] < min(2, len(words)) or best[0] == 0:
        return {"pmid": pmid, "quote": "", "verdict": "unrelated"}
    sentence = best[2]
    if qtype == "yesno" and exact:
        polarity = "no" if NEGATION.search(sentence) else "yes"
        said = "supports" if polarity == exact[0].strip().lower() else "contradicts"
    else:
        said = "supports"
    return {"pmid": pmid, "quote": sentence[:QUOTE_CHARS], "verdict": said}


def sentences_of(body: str) -> list[str]:
    """Return the body's sentences, each a verbatim span of it (a line break ends one too)."""
    out, start = [], 0
    for end in SENTENCE_END.finditer(body):
        out.append(body[start : end.end()].strip())
        start = end.end()
    out.append(body[start:].strip())
    return [s for s in out if s]


def content_words(text: str) -> set[str]:
    """Return the words of four letters or more, lowercased."""
    return {w.lower() for w in WORD.findall(text)}
