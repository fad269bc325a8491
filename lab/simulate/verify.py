"""What the simulated endpoint answers to the verifier's prompt (prompts/verify.md).

The verifier judges from the same facts the simulated members answer from, so a run against
the simulator verifies its own answers the way a consistent reader would (not evidence that
the verifier works: `quorum eval support` measures that on gold). For each numbered passage of
the prompt (recognised by the schema's `verdicts` field):

- Planted (the prompt shows passages of a planted question): the passage's planted answer
  decides. It supports an answer it gives (any exact item; a summary: a relevant passage), a
  relevant passage giving another answer contradicts it (a hard distractor, about another
  entity, is unrelated), an irrelevant one is unrelated. The quote is cited as the members cite:
  the sentence naming the answer (`prompt_text.quote`), misquoted at the reader's calibrated
  `misquote` rate (then it no longer stands in the passage, and quorum counts the verdict as
  unrelated), each draw seeded by the view and the passage.
- Without plants, the simulator's members answer in its own placeholder words (the schema's
  first choice, `schema_instance.PLACEHOLDER`, the `PROSE` ideal answer) from whatever passages
  they are shown, and cite them: an answer in those words is the one it drew from these
  passages, so every passage supports it, quoted by its opening sentence as a member quotes.
  Any other answer (a scripted or real model's) is judged by a word rule, sentence by
  sentence (a title line is a sentence): factoid and list answers are supported by the first
  sentence holding an exact item (any case), else unrelated; yes/no and summary answers rest on
  the sentence sharing the most content words (four letters or more) with the question and the
  ideal answer, at least two of them, else unrelated; a summary is supported by it, a yes/no
  answer supported when the sentence's polarity matches it (negation cues: not, no, never,
  without, failed to, … make it "no") and contradicted otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from infra.bioasq.answers import normalize_answer
from infra.snippets import sentences
from lab.simulate.prompt_text import numbered_passages, question_of, quote
from lab.simulate.reader import PlantedReader, Reading, Seen
from lab.simulate.sampling import misquoted
from lab.simulate.schema_instance import PLACEHOLDER, PROSE, resolved

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


def verify_reply(
    messages: list[tuple[str, str]], reader: PlantedReader | None = None
) -> dict[str, Any] | None:
    """Return the verdicts for a verify prompt, by the rules above; None without passages.

    Args:
        messages: (role, text) of every message, in order.
        reader: The endpoint's planted reader, when it has plants.
    """
    text = "\n\n".join(t for _, t in messages)
    blocks = numbered_passages(text)
    if not blocks:
        return None
    qtype, exact, ideal = answer_of(text)
    reading = reader.reading(text) if reader is not None else None
    if reader is not None and reading is not None:
        said = [planted_verdict(reader, reading, s, qtype, exact, ideal) for s in reading.seen]
        reader.record(
            {
                "kind": "verify",
                "question": reading.question.id,
                "shown": [s.pmid for s in reading.seen],
                "verdicts": [v["verdict"] for v in said],
            }
        )
        return {FIELD: said}
    if own_answer(qtype, exact, ideal):
        asked = content_words(question_of(text) or "")
        return {FIELD: [own_verdict(b.pmid, b.body, asked) for b in blocks]}
    words = content_words(f"{question_of(text) or ''} {ideal}")
    return {FIELD: [verdict(b.pmid, b.body, qtype, exact, words) for b in blocks]}


def planted_verdict(
    reader: PlantedReader, reading: Reading, seen: Seen, qtype: str, exact: list[str], ideal: str
) -> dict[str, str]:
    """Return one planted passage's verdict on the answer, quoted as a member quotes."""
    passage = seen.passage
    answer = exact or ([ideal] if ideal else [])
    keys = {normalize_answer(a) for a in answer} - {""}
    relevant = passage.role != "irrelevant"
    if (qtype == "summary" and relevant) or seen.keys & keys:
        label, named = "supports", [*answer, *passage.answer]
    elif relevant and passage.role != "distractor":
        label, named = "contradicts", list(passage.answer)
    else:
        return {"pmid": seen.pmid, "quote": "", "verdict": "unrelated"}
    body = seen.body.removesuffix(CLIPPED)
    said = whole(body, quote(body, named, QUOTE_CHARS))
    said = misquoted(reader, reading, said, named, f"verify {seen.pmid}")
    return {"pmid": seen.pmid, "quote": said, "verdict": label}


def own_answer(qtype: str, exact: list[str], ideal: str) -> bool:
    """Tell whether an answer is in the simulator's own placeholder words (no plants)."""
    if qtype in ("factoid", "list") and exact and any(e != PLACEHOLDER for e in exact):
        return False
    return bool(ideal) and len(ideal) >= 20 and PROSE.startswith(ideal)


def own_verdict(pmid: str, body: str, asked: set[str] = frozenset()) -> dict[str, str]:
    """Return a passage's verdict on the simulator's own answer: it supports it.

    Quoted by the sentence most about the question (the most of its content words; the opening
    sentence when none holds any), as a reader quotes the sentence its answer rests on.
    """
    body = body.removesuffix(CLIPPED)
    said = whole(body, quote(body, [], QUOTE_CHARS))
    scored = [(len(asked & content_words(s)), -i, s) for i, s in enumerate(sentences_of(body))]
    best = max(scored, default=(0, 0, ""))
    if best[0] and len(best[2]) <= QUOTE_CHARS:
        said = best[2]
    return {"pmid": pmid, "quote": said, "verdict": "supports"}


def whole(body: str, said: str) -> str:
    """Return the quote widened to the sentence it stands in, as quorum splits sentences.

    quorum counts a quote only when it is a whole sentence (infra/snippets.py), and this
    simulator's own splitter breaks at every full stop ("Dr.", "U.S."): a consistent reader
    quotes the sentence quorum would show. A sentence longer than the schema allows stays cut.
    """
    wanted = " ".join(said.split())
    for sentence in sentences_of(body):
        if wanted and wanted in " ".join(sentence.split()) and len(sentence) <= QUOTE_CHARS:
            return sentence
    return said


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
    """Return the body's sentences as quorum splits them: the title line, then the abstract's.

    The verifier counts a quote only when it is a whole sentence by quorum's own splitter
    (infra/snippets.py), so the harness quotes those; a line break inside the abstract is a
    space, as quorum compares quotes with whitespace collapsed.
    """
    lines = body.split("\n")  # without the evidence frame: prompt_text.numbered_passages drops it
    title, abstract = (lines[0], " ".join(lines[1:])) if len(lines) > 1 else ("", " ".join(lines))
    out = [title.strip()] if title.strip() else []
    spans = sentences(abstract) or ([(0, len(abstract))] if abstract.strip() else [])
    out += [abstract[b:e] for b, e in spans]
    return [s for s in out if s]


def content_words(text: str) -> set[str]:
    """Return the words of four letters or more, lowercased."""
    return {w.lower() for w in WORD.findall(text)}
