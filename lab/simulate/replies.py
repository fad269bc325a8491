"""What the planted reader writes back to a chat completion, by the kind of prompt.

The kind comes from the requested schema's top-level fields, the passages from the prompt:

- relation (fields first, second, label; CORG's organize_relation): the planted relation of
  the two passages and each one's planted (answer, entity, descriptor).
- duplicates (field duplicates; the dedupe organizer): every shown passage planted as a
  duplicate of an earlier shown one, as {index, same_as}.
- plural question (field question, no answer field; organize_pluralize): the question in a
  plural form ("What is the X" → "What are the Xs", else "What are all the answers to …").
- reading (any other prompt showing numbered passages of a planted question): the reader
  draws ONE passage (see `reader.py`; at a temperature above 0 perhaps another, see
  `sampling.py`) and answers with that passage's answer, citing its number and PMID and
  quoting it verbatim (a member may cite and quote another shown passage, `cite_mismatch`, or
  misquote it, `misquote`),
  with the answer's weight share as confidence.
  A synthesis prompt (fields ideal_answer or exact_answer) that states a decision follows it
  (unless the `override` draw says otherwise) and cites the shown passages supporting it. A
  group prompt (a system message naming a "group", or the question in the plural form above)
  gives every distinct answer of its relevant passages, heaviest first.

Known field names are filled with meaning (answer/exact_answer/exact, ideal_answer, pmids/
cited_pmids, passage, quote, confidence, rationale); any other field gets `schema_instance`'s
value, so the reply always validates. None means the reader has nothing to say (no planted
passage shown): the endpoint then answers as it does without plants.
"""

from __future__ import annotations

import re
from typing import Any

from lab.simulate.planted import PlantedPassage
from lab.simulate.prompt_text import decision_of, numbered_passages, pair_passages, quote
from lab.simulate.prompt_text import question_of as asked_question
from lab.simulate.reader import PlantedReader, Reading, Seen
from lab.simulate.sampling import cited, misquoted, sampled
from lab.simulate.schema_instance import MISSING, fitted, resolved, schema_instance

ANSWER_FIELDS = ("answer", "exact_answer", "exact", "answers")
IDEAL_FIELDS = ("ideal_answer", "ideal")
PMID_FIELDS = ("pmids", "cited_pmids", "citations", "cited", "supporting_pmids")
NUMBER_FIELDS = ("passage", "passage_number", "document", "doc")
QUOTE_FIELDS = ("quote", "evidence", "span")
CONFIDENCE_FIELDS = ("confidence", "probability")
RATIONALE_FIELDS = ("rationale", "reasoning", "explanation")
QUOTE_CHARS = 200
"""Longest quote the reader gives (shorter when the schema bounds it)."""
PLURAL = re.compile(r"^(what|which|who|where|when|how)\s+(is|was|does|has)\s+(the\s+)?(\S+)(.*)$")
VERBS = {"is": "are", "was": "were", "does": "do", "has": "have"}


def pluralized(question: str) -> str:
    """Return a question in plural form, the way the reader rewrites one for CORG."""
    text = " ".join(question.split())
    match = PLURAL.match(text[:1].lower() + text[1:]) if text else None
    if match is None:
        return f"What are all the answers to the question: {text}"
    wh, verb, the, noun, rest = match.groups()
    if the:
        noun = _plural_noun(noun)
    return f"{wh.capitalize()} {VERBS[verb]} {the or ''}{noun}{rest}"


def chat_reply(
    reader: PlantedReader,
    messages: list[tuple[str, str]],
    schema: dict | None,
    temperature: float | None = None,
) -> Any | None:
    """Return the reader's reply (an instance of the schema, or text), or None.

    Args:
        reader: The planted reader.
        messages: (role, text) of every message, in order.
        schema: The JSON schema asked for; None for a plain-text reply.
        temperature: The request's sampling temperature; None or 0 reads greedily.
    """
    text = "\n\n".join(t for _, t in messages)
    defs = {**(schema or {}).get("definitions", {}), **(schema or {}).get("$defs", {})}
    properties = resolved(schema, defs).get("properties", {}) if schema else {}
    fields = set(properties)
    # A quote cut to fit its field would lose the answer at its end: quote within the bound.
    bounds = [resolved(properties[f], defs).get("maxLength") for f in QUOTE_FIELDS if f in fields]
    limit = min([QUOTE_CHARS, *(b for b in bounds if isinstance(b, int))])
    if {"first", "second", "label"} <= fields:
        values = _relation(reader, text)
    elif "duplicates" in fields:
        values = _duplicates(reader, text)
    elif "question" in fields and not fields & {*ANSWER_FIELDS, *IDEAL_FIELDS}:
        values = {"question": pluralized(asked_question(text) or "")}
    else:
        values = _reading(reader, messages, text, fields, limit, temperature)
    if values is None:
        return None
    if schema is None:
        answer = values.get("answer")
        return ", ".join(answer) if isinstance(answer, list) else answer
    return _filled(schema, defs, values)


def _filled(schema: dict, defs: dict, values: dict[str, Any]) -> Any:
    instance = schema_instance(schema)
    root = resolved(schema, defs)
    if not isinstance(instance, dict):
        return instance
    for name, sub in root.get("properties", {}).items():
        if name in values:
            value = fitted(values[name], sub, defs)
            if value is not MISSING:
                instance[name] = value
    return instance


def _reading(
    reader: PlantedReader,
    messages: list[tuple[str, str]],
    text: str,
    fields: set[str],
    limit: int,
    temperature: float | None = None,
) -> dict[str, Any] | None:
    reading = reader.reading(text)
    if reading is None:
        return None
    # Common random numbers: the draw is seeded by what is read (the question and the passages
    # in their shown order), not by the instructions around them, so two strategies showing the
    # same view get the same reading and their comparison is paired, as a reader whose errors
    # come from its context would give (K = 20 CCV members start with permute_vote's 5 views).
    rng = reader.rng([reading.question.id, *(s.pmid for s in reading.seen)])
    kind, decided = "member", None
    if fields & {"ideal_answer", "exact_answer"}:
        kind = "synthesis"
        decided = decision_of(text)
        if decided is not None and rng.random() < reader.settings.override:
            kind, decided = "synthesis-override", None
    system = " ".join(t for role, t in messages if role in ("system", "developer"))
    plural = pluralized(reading.question.question)
    if kind == "member" and (re.search(r"\bgroup\b", system, re.I) or reading.asked == plural):
        kind = "group"
    if decided is not None:
        values = _decided(reading, decided, limit)
    elif kind == "group":
        values = _all_answers(reading, limit)
    else:
        read, salt = sampled(reader, reading, reading.draw(rng), temperature)
        cites = fields & {*PMID_FIELDS, *NUMBER_FIELDS, *QUOTE_FIELDS}
        shown = cited(reader, reading, read, salt) if kind == "member" and cites else read
        values = _one(reading, read, limit, shown)
        if kind == "member" and fields & set(QUOTE_FIELDS):
            said = misquoted(reader, reading, values["quote"], values["answer"], salt)
            values["misquoted"], values["quote"] = said != values["quote"], said
    read_pmids = values.pop("_read")
    reader.record(
        {
            "kind": kind,
            "question": reading.question.id,
            "shown": [s.pmid for s in reading.seen],
            "read": read_pmids,
            "answer": values["answer"],
            "share": values["confidence"],
            **({"cited": values["pmids"]} if values["pmids"] != read_pmids else {}),
            **({"misquoted": True} if values.pop("misquoted", False) else {}),
            **({"temperature": temperature} if temperature else {}),
            **({"decision": decided} if decided is not None else {}),
        }
    )
    # A group's answers stay apart where the schema asks a list (CORG's short answers).
    items = values.pop("_items", values["answer"])
    values["exact_answer"] = values["exact"] = values["answers"] = items
    for group, key in (
        (PMID_FIELDS, "pmids"),
        (NUMBER_FIELDS, "passage"),
        (QUOTE_FIELDS, "quote"),
        (CONFIDENCE_FIELDS, "confidence"),
        (RATIONALE_FIELDS, "rationale"),
        (IDEAL_FIELDS, "ideal_answer"),
    ):
        for name in group:
            values[name] = values[key]
    return values


def _one(reading: Reading, seen: Seen, limit: int, shown: Seen | None = None) -> dict[str, Any]:
    """Answer from one passage read, citing and quoting `shown` (default: the one read)."""
    shown = shown or seen
    answer = list(seen.passage.answer)
    said = quote(shown.body, answer, limit)
    share = reading.share(seen.passage.answer_text)
    return {
        "answer": answer,
        "pmids": [shown.pmid],
        "passage": shown.number,
        "quote": said,
        "confidence": round(share, 4),
        "rationale": f'Passage [{shown.number}] (PMID {shown.pmid}) says: "{said}"',
        "ideal_answer": f"{seen.passage.answer_text}. {said}",
        "_read": [seen.pmid],
    }


def _decided(reading: Reading, decided: list[str], limit: int) -> dict[str, Any]:
    """Answer what the ensemble decided, citing the shown passages that support it."""
    support = reading.supporting(decided)
    said = quote(support[0].body, [*decided, *support[0].passage.answer], limit) if support else ""
    pmids = [s.pmid for s in support]
    text = ", ".join(decided)
    return {
        "answer": decided,
        "pmids": pmids,
        "passage": (support[0] if support else reading.seen[0]).number,
        "quote": said,
        "confidence": round(reading.share(decided), 4),
        "rationale": f"The ensemble decided {text!r}; supported by "
        f"{', '.join(pmids) or 'no shown passage'}.",
        "ideal_answer": f"{text}. {said}".strip(),
        "_read": pmids,
    }


def _all_answers(reading: Reading, limit: int) -> dict[str, Any]:
    """Answer every distinct answer of the relevant shown passages, heaviest first."""
    relevant = [s for s in reading.seen if s.passage.role != "irrelevant"] or list(reading.seen)
    relevant.sort(key=lambda s: (-s.weight, s.position))
    chosen: dict[frozenset[str], Seen] = {}
    for seen in relevant:
        if not any(seen.keys & keys for keys in chosen):
            chosen[seen.keys] = seen
    parts = [
        s.passage.answer_text + (f" ({s.passage.descriptor})" if s.passage.descriptor else "")
        for s in chosen.values()
    ]
    cited = [s.pmid for s in relevant if any(s.keys & keys for keys in chosen)]
    top = relevant[0]
    said = quote(top.body, list(top.passage.answer), limit)
    share = sum(reading.share(s.passage.answer_text) for s in chosen.values())
    return {
        "answer": "; ".join(parts),
        "_items": [a for s in chosen.values() for a in s.passage.answer],
        "pmids": cited,
        "passage": top.number,
        "quote": said,
        "confidence": round(min(1.0, share), 4),
        "rationale": f"The passages give {len(parts)} answer(s): {'; '.join(parts)}.",
        "ideal_answer": "; ".join(parts),
        "_read": cited,
    }


def _relation(reader: PlantedReader, text: str) -> dict[str, Any]:
    """Label two passages by their planted relation, with each one's planted triple."""
    asked = asked_question(text) or ""
    question = reader.plants.by_text(asked)
    blocks = numbered_passages(text)
    if len(blocks) >= 2:
        question = reader.plants.locate([b.pmid for b in blocks[:2]], asked) or question
        found = [question.passages.get(b.pmid) if question else None for b in blocks[:2]]
    else:
        found = _pair_by_text(reader, text, question)
        if question is None and found[0] is not None:
            question = reader.plants.locate([p.pmid for p in found if p is not None], asked)
    first, second = found
    if question is None or first is None or second is None:
        reader.record({"kind": "relation", "question": None, "label": "none", "unplaced": True})
        empty = {"answer": "", "entity": "", "descriptor": ""}
        return {"first": empty, "second": empty, "label": "none"}
    label = reader.plants.relation(question, first.pmid, second.pmid)
    reader.record(
        {"kind": "relation", "question": question.id, "pair": [first.pmid, second.pmid]}
        | {"label": label}
    )
    return {"first": _triple(first), "second": _triple(second), "label": label}


def _pair_by_text(reader: PlantedReader, text: str, question: Any) -> list[PlantedPassage | None]:
    sections = pair_passages(text)
    if sections is None:
        return [None, None]
    options = []
    for shown in sections:
        by_id = re.search(r"\bPMID (\S+)", shown)
        known = question.passages.get(by_id[1]) if question is not None and by_id else None
        options.append([known] if known else reader.plants.match_text(shown, question))
    first = options[0][0] if options[0] else None
    rest = [p for p in options[1] if first is None or p.pmid != first.pmid] or options[1]
    return [first, rest[0] if rest else None]


def _triple(passage: PlantedPassage) -> dict[str, str]:
    return {
        "answer": passage.answer_text,
        "entity": passage.entity,
        "descriptor": passage.descriptor,
    }


def _duplicates(reader: PlantedReader, text: str) -> dict[str, Any] | None:
    """List each shown passage planted as a duplicate of an earlier shown one."""
    reading = reader.reading(text)
    if reading is None:
        return None
    question, seen = reading.question, reading.seen
    pairs = []
    for later, shown in enumerate(seen):
        for earlier in seen[:later]:
            if reader.plants.relation(question, earlier.pmid, shown.pmid) == "duplicated":
                pairs.append({"index": shown.number, "same_as": earlier.number})
                break
    reader.record({"kind": "duplicates", "question": question.id, "pairs": pairs})
    return {"duplicates": pairs}


def _plural_noun(word: str) -> str:
    noun = word.rstrip("?.!,;:")
    tail = word[len(noun) :]
    if not noun or not noun[-1].isalpha():
        return word
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es" + tail
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return noun[:-1] + "ies" + tail
    return noun + "s" + tail
