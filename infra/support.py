"""Whether an answer is carried by the passages it cites, decided without a model.

The answer contract (infra/bioasq/contract.py) says what counts as an answer at all; this
module says whether the evidence in hand carries it:

- only a cited passage that addresses the question is evidence (infra/relevance.py judges it):
  an answer resting only on passages off the question is refused, an item carried only there
  is dropped, and a yes/no or summary answer's prose must address the question too;
- a factoid or list entity (or one of its synonyms) must occur in a passage the answer cites,
  compared as terms: case, hyphens and spaces inside names ("IL-6", "IL 6", "IL6"), Greek
  letters ("TNF-α", "TNF-alpha"), plurals, and an abbreviation against the expansion a passage
  defines for it ("cystic fibrosis transmembrane conductance regulator (CFTR)");
- an entity of several content words ("inhibition of mTOR signalling") is also carried by a
  sentence that holds every one of its content words, in any order;
- a list keeps only the items that are carried (refused when none is); a factoid keeps the
  candidates that are (refused when none is);
- yes/no and summary answers cannot be looked up in a text: without a model they need cited
  passages that exist and share words with the answer (the verifier, nodes/synthesize/verify.py,
  judges what those passages say);
- an answer with no passage behind it is never given;
- a passage that addresses the model ("Ignore the question", "System:") is no evidence, and an
  answer whose words do so is refused (infra/injection.py).

Nothing here reads the question's gold: `quorum eval support` measures how often this check
refuses the organizers' own answers against their own snippets, and how often it accepts
another question's answer (docs/measured.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.bioasq.contract import degenerate_item, degenerate_prose
from infra.embeddings import Embedder
from infra.injection import screened
from infra.records import Check, Passage, PassageRelevance, SupportCheck
from infra.relevance import judge_prose
from infra.snippets import sentences
from infra.terms import DEFINITION, STOPWORDS, content, definitions, roots, terms


def _holds(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """Tell whether `needle` is a run of consecutive terms of `haystack`, spaced or not.

    "non coding DNA" and "noncoding DNA", "chromosomeX" and "chromosome X" are one run: the
    same letters, split where one text puts a space or a hyphen and the other does not.
    """
    n = len(needle)
    if not n:
        return False
    first = needle[0]
    if n <= len(haystack) and any(
        haystack[i] == first and list(haystack[i : i + n]) == list(needle)
        for i in range(len(haystack) - n + 1)
    ):
        return True
    wanted = "".join(needle)
    return any(
        _whole_prefix(haystack[i:], wanted)
        for i, term in enumerate(haystack)
        if wanted.startswith(term)
    )


def _whole_prefix(run: Sequence[str], wanted: str) -> bool:
    """Tell whether the first terms of `run`, joined, spell exactly `wanted` (never a part)."""
    joined = ""
    for term in run:
        joined += term
        if joined == wanted:
            return True
        if len(joined) >= len(wanted) or not wanted.startswith(joined):
            return False
    return False


def _trimmed(words: list[str]) -> list[str]:
    """Return terms without the words that join at either end ("in membranes", "the nucleus")."""
    start, end = 0, len(words)
    while start < end and words[start] in STOPWORDS:
        start += 1
    while end > start and words[end - 1] in STOPWORDS:
        end -= 1
    return words[start:end]


def variants(entity: str) -> list[list[str]]:
    """Return the term sequences an entity may stand as: itself, and its parenthesised parts.

    "Tumour necrosis factor (TNF)" stands as the whole, as "tumour necrosis factor" and as "TNF";
    "the nucleus" also as "nucleus".
    """
    found = [terms(entity)]
    for match in DEFINITION.finditer(entity):
        found.append(terms(match.group(1)))
        outside = entity[: match.start()] + entity[match.end() :]
        found.append(terms(outside))
    found += [_trimmed(v) for v in found]
    unique: list[list[str]] = []
    for v in found:
        if v and v not in unique:
            unique.append(v)
    return unique


@dataclass(frozen=True)
class Carrier:
    """Where a passage carries an answer: its document, section, sentence and offset."""

    pmid: str
    section: str
    offset: int
    sentence: str
    how: str
    """"verbatim" (its terms in a row), "abbreviation" (a form the passage defines), or
    "content words" (every content word of the entity in this sentence)."""


def _sentences(passage: Passage) -> list[tuple[str, int, str]]:
    out = []
    for section in ("title", "abstract"):
        text = passage.get(section) or ""
        spans = sentences(text) or ([(0, len(text))] if text.strip() else [])
        out.extend((section, begin, text[begin:end]) for begin, end in spans)
    return out


def _forms(entity: str, passage: Passage) -> tuple[list[list[str]], list[list[str]]]:
    """Return the entity's own term sequences, and the forms this passage defines for them."""
    forms = variants(entity)
    whole = f"{passage.get('title') or ''}\n{passage.get('abstract') or ''}"
    extra: list[list[str]] = []
    for long_form, short_form in definitions(whole):
        if any(form == long_form for form in forms):
            extra.append(short_form)
        if any(form == short_form for form in forms):
            extra.append(long_form)
    return forms, extra


def _content_forms(forms: Sequence[Sequence[str]]) -> list[list[str]]:
    """Return the entity's forms as content-word stems, for forms of two or more of them."""
    return [r for r in (roots(content(f)) for f in forms) if len(r) >= 2]


def carried_in(entity: str, passage: Passage, text: str) -> str | None:
    """Return how one sentence of a passage carries the entity, or None.

    The same term matching as `carrier`: verbatim, by a form the passage defines, or by every
    content word of an entity of two or more.
    """
    forms, extra = _forms(entity, passage)
    said = terms(text)
    if any(_holds(said, f) for f in forms):
        return "verbatim"
    if any(_holds(said, f) for f in extra):
        return "abbreviation"
    have = set(roots(said))
    if any(all(w in have for w in wanted) for wanted in _content_forms(forms)):
        return "content words"
    return None


def carrier(entity: str, passages: Sequence[Passage]) -> Carrier | None:
    """Return the first sentence of the passages that carries this entity, or None."""
    if not variants(entity):
        return None
    for passage in passages:
        forms, extra = _forms(entity, passage)
        found = []
        for section, offset, text in _sentences(passage):
            said = terms(text)
            if any(_holds(said, f) for f in forms):
                return Carrier(passage["pmid"], section, offset, text, "verbatim")
            if any(_holds(said, f) for f in extra):
                found.append(Carrier(passage["pmid"], section, offset, text, "abbreviation"))
        if found:
            return found[0]
    wanted_forms = _content_forms(variants(entity))
    if not wanted_forms:
        return None
    for passage in passages:
        for section, offset, text in _sentences(passage):
            have = set(roots(terms(text)))
            if any(all(w in have for w in wanted) for wanted in wanted_forms):
                return Carrier(passage["pmid"], section, offset, text, "content words")
    return None


_END = ".!?;:,"
"""Punctuation a copied sentence may lose or gain at its end."""


def whole_sentences(quote: str, passage: Passage) -> tuple[str, int, str] | None:
    """Return where a quote stands in a passage as whole sentences: section, offset, text.

    A quote counts only as one sentence of the passage, or a run of consecutive ones, by the
    project's sentence splitter (infra/snippets.py), whitespace collapsed and end punctuation
    aside; case is kept (a copied sentence keeps it, and "NO" is nitric oxide). None: a part of
    a sentence ("the"), words from two places, or text the passage does not hold.
    """
    wanted = _squashed(quote).rstrip(_END).rstrip()
    if not wanted:
        return None
    for section, spans in _section_spans(passage):
        text = passage.get(section) or ""
        for i, (begin, _) in enumerate(spans):
            run = ""
            for _, end in spans[i:]:
                run = _squashed(text[begin:end])
                if len(run.rstrip(_END).rstrip()) >= len(wanted):
                    break
            if run.rstrip(_END).rstrip() == wanted:
                return section, begin, text[begin:end]
    return None


def _section_spans(passage: Passage) -> list[tuple[str, list[tuple[int, int]]]]:
    out = []
    for section in ("title", "abstract"):
        text = passage.get(section) or ""
        spans = sentences(text) or ([(0, len(text))] if text.strip() else [])
        out.append((section, spans))
    return out


def _squashed(text: str) -> str:
    return " ".join(text.split())


Verdict = Literal["supported", "refused"]


@dataclass
class Support:
    """What the model-free check found: the verdict, why, and where each item stands."""

    verdict: Verdict
    reason: str | None
    """Which check failed and on what (None when supported)."""
    kept: list[str] = field(default_factory=list)
    """The exact answers carried by the evidence, in the answer's order."""
    dropped: list[str] = field(default_factory=list)
    """The exact answers no cited passage carries."""
    carriers: dict[str, Carrier] = field(default_factory=dict)
    """Where each kept answer is carried."""
    checks: list[Check] = field(default_factory=list)
    """Each check: {"check": name, "passed": bool, "detail": words}."""

    def record(self) -> SupportCheck:
        """Return the check as a plain record for the state and the trace."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "kept": list(self.kept),
            "dropped": list(self.dropped),
            "carriers": [{"answer": answer, **vars(c)} for answer, c in self.carriers.items()],
            "checks": list(self.checks),
        }


GROUNDING = 0.2
"""Share of a yes/no or summary ideal answer's content words ("yes", "no" and numbers aside)
that must occur in the passages it cites. Chosen on the golden files 7B-10B (1,996 questions),
not on 11B, which `quorum eval support` reports (docs/measured.md): of the organizers' own
ideal answers against their own snippets, 0.2 refuses 0.5% (yes/no, 7B-9B) and 0.3% (summary),
0.25 refuses 0.7-0.8%, 0.3 up to 1.6%; another question's summary shares less than 0.2 of its
words with these snippets 95% of the time (7B-9B) and 90% (10B). Prose is not matched word for
word against evidence any closer without a model: the verifier judges what it says."""


def grounding(ideal: str, passages: Sequence[Passage]) -> float:
    """Return the share of the ideal answer's content words found in the passages."""
    wanted = [w for w in content(terms(ideal)) if not w.isdigit() and w not in ("yes", "no")]
    if not wanted:
        return 1.0  # it claims nothing to look up ("Yes."): the contract judges its words
    have: set[str] = set()
    for passage in passages:
        have.update(terms(f"{passage.get('title') or ''} {passage.get('abstract') or ''}"))
    return sum(w in have for w in wanted) / len(wanted)


def check_support(
    qtype: str,
    exact: Sequence[str],
    ideal: str,
    cited: Sequence[Passage],
    *,
    question: str,
    relevance: Mapping[str, PassageRelevance],
    embedder: Embedder | None = None,
) -> Support:
    """Return whether the cited passages carry the answer, checked without a model.

    Args:
        qtype: The question type.
        exact: The exact answers as given (factoid candidates best first, list items, or
            ["yes"]/["no"]; a summary: []).
        ideal: The ideal answer's prose ("" when only the exact answer is checked).
        cited: The passages the answer cites (dicts with pmid, title, abstract).
        question: The question answered.
        relevance: Each passage's relevance verdict by PMID (infra/relevance.py); a cited
            passage with none is not evidence.
        embedder: Judges whether a yes/no or summary answer's prose addresses the question
            (None: by its key terms alone).
    """
    checks: list[Check] = []

    def failed(check: str, detail: str, **found: Any) -> Support:
        checks.append({"check": check, "passed": False, "detail": detail})
        return Support("refused", f"{check}: {detail}", checks=checks, **found)

    if not cited:
        return failed("evidence", "the answer cites no passage that was retrieved")
    checks.append({"check": "evidence", "passed": True, "detail": f"{len(cited)} cited"})
    # Evidence is data (infra/injection.py): a passage that addresses the model never counts as
    # support, and an answer whose words address one (repeating such a passage) is refused.
    cited, flagged, refusal = screened(ideal, exact, cited)
    if refusal is not None:
        return failed("injection", refusal)
    if flagged is not None:
        checks.append({"check": "injection", "passed": True, "detail": flagged})
    on = [p for p in cited if (relevance.get(p["pmid"]) or {}).get("relevant")]
    off = [p for p in cited if p not in on]
    off_detail = "; ".join(_off_question(p["pmid"], relevance) for p in off[:5])
    if not on:
        return failed("relevance", f"no cited passage addresses the question: {off_detail}")
    detail = f"{len(on)} of {len(cited)} cited address the question"
    checks.append(
        {
            "check": "relevance",
            "passed": True,
            "detail": detail + (f"; not evidence, off the question: {off_detail}" if off else ""),
        }
    )
    if ideal and (problem := degenerate_prose(ideal)):
        return failed("debris", problem)
    if qtype in ("factoid", "list"):
        kept, dropped, carriers = [], [], {}
        elsewhere: list[str] = []
        for item in exact:
            if problem := degenerate_item(item):
                checks.append({"check": "debris", "passed": False, "detail": problem})
                dropped.append(item)
                continue
            where = carrier(item, on)
            if where is None:
                dropped.append(item)
                if off and (there := carrier(item, off)) is not None:
                    elsewhere.append(f"{item!r} (only in PMID {there.pmid})")
            else:
                kept.append(item)
                carriers[item] = where
        detail = f"{len(kept)} of {len(exact)} carried" + (
            f"; not in the cited passages on the question: "
            f"{', '.join(repr(d) for d in dropped[:5])}"
            if dropped
            else ""
        )
        if elsewhere:
            detail += f"; carried only off the question: {', '.join(elsewhere[:5])}"
        if not kept:
            return failed("carried", detail, dropped=dropped)
        checks.append({"check": "carried", "passed": True, "detail": detail})
        return Support("supported", None, kept, dropped, carriers, checks)
    if ideal:
        share = grounding(ideal, on)
        detail = f"{share:.0%} of the answer's content words are in the cited passages"
        if share < GROUNDING:
            return failed("grounded", detail)
        checks.append({"check": "grounded", "passed": True, "detail": detail})
        said = judge_prose(question, ideal, embedder)
        detail = f"the answer's prose {_signals(said.record())}"
        if not said.relevant:
            return failed("addresses", f"{detail}: it is not about the question")
        checks.append({"check": "addresses", "passed": True, "detail": detail})
    return Support("supported", None, list(exact), [], {}, checks)


def _signals(record: PassageRelevance) -> str:
    """Return a relevance record's signals in words: its key-term share, cosine, cross-encoder."""
    parts = [f"holds {record.get('terms', 0.0):.0%} of the question's key terms"]
    if record.get("cosine") is not None:
        parts.append(f"cosine {record['cosine']:.2f}")
    if record.get("cross_encoder") is not None:
        parts.append(f"cross-encoder {record['cross_encoder']:.2f}")
    return ", ".join(parts)


def _off_question(pmid: str, relevance: Mapping[str, PassageRelevance]) -> str:
    record = relevance.get(pmid)
    return f"PMID {pmid} ({_signals(record)})" if record else f"PMID {pmid} (not judged)"
