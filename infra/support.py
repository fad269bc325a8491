"""Whether an answer is carried by the passages it cites, decided without a model.

The answer contract (infra/bioasq/contract.py) says what counts as an answer at all; this
module says whether the evidence in hand carries it:

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

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.bioasq.contract import degenerate_item, degenerate_prose
from infra.injection import screened
from infra.snippets import sentences
from infra.terms import STOPWORDS, content, roots, terms, words

_DEFINITION = re.compile(r"\(([^()]{2,12})\)")
"""A parenthesised short form after its long form: "... regulator (CFTR)"."""


def _holds(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """Tell whether `needle` is a run of consecutive terms of `haystack`."""
    n = len(needle)
    if not n or n > len(haystack):
        return False
    first = needle[0]
    return any(
        haystack[i] == first and list(haystack[i : i + n]) == list(needle)
        for i in range(len(haystack) - n + 1)
    )


def _initials_match(short: str, long_words: Sequence[str]) -> bool:
    letters = [c for c in short.casefold() if c.isalnum()]
    if len(letters) < 2 or not long_words:
        return False
    # The short form's letters, in order, each starting a word or inside the long form:
    # "CFTR" ~ "cystic fibrosis transmembrane conductance regulator" (Schwartz & Hearst's rule,
    # that the first letter starts the first word and the rest appear in order).
    joined = " ".join(long_words)
    if joined[:1] != letters[0]:
        return False
    at = 0
    for c in letters:
        at = joined.find(c, at)
        if at < 0:
            return False
        at += 1
    return True


def definitions(text: str) -> list[tuple[list[str], list[str]]]:
    """Return the (long form, short form) pairs a text defines: "... regulator (CFTR)".

    The long form is the fewest words before the parenthesis whose initials spell the short
    form (Schwartz & Hearst, 2003: at most min(|A| + 5, 2|A|) words for a short form of |A|
    letters).
    """
    pairs = []
    for match in _DEFINITION.finditer(text):
        short = match.group(1).strip()
        if not any(c.isalpha() for c in short) or len(short.split()) > 2:
            continue
        before = words(text[: match.start()])[-2 * len(short) - 1 :]
        for size in range(1, min(len(short) + 5, 2 * len(short), len(before)) + 1):
            long_form = [w.casefold() for w in before[-size:]]
            if _initials_match(short, long_form):
                pairs.append((terms(" ".join(long_form)), terms(short)))
                break
    return pairs


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
    for match in _DEFINITION.finditer(entity):
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


def _sentences(passage: dict[str, Any]) -> list[tuple[str, int, str]]:
    out = []
    for section in ("title", "abstract"):
        text = passage.get(section) or ""
        spans = sentences(text) or ([(0, len(text))] if text.strip() else [])
        out.extend((section, begin, text[begin:end]) for begin, end in spans)
    return out


def carrier(entity: str, passages: Sequence[dict[str, Any]]) -> Carrier | None:
    """Return the first sentence of the passages that carries this entity, or None."""
    forms = variants(entity)
    if not forms:
        return None
    for passage in passages:
        whole = f"{passage.get('title') or ''}\n{passage.get('abstract') or ''}"
        extra: list[list[str]] = []
        for long_form, short_form in definitions(whole):
            if any(form == long_form for form in forms):
                extra.append(short_form)
            if any(form == short_form for form in forms):
                extra.append(long_form)
        sents = _sentences(passage)
        found = []
        for section, offset, text in sents:
            said = terms(text)
            if any(_holds(said, f) for f in forms):
                return Carrier(passage["pmid"], section, offset, text, "verbatim")
            if any(_holds(said, f) for f in extra):
                found.append(Carrier(passage["pmid"], section, offset, text, "abbreviation"))
        if found:
            return found[0]
    wanted_forms = [r for r in (roots(content(f)) for f in forms) if len(r) >= 2]
    if not wanted_forms:
        return None
    for passage in passages:
        for section, offset, text in _sentences(passage):
            have = set(roots(terms(text)))
            if any(all(w in have for w in wanted) for wanted in wanted_forms):
                return Carrier(passage["pmid"], section, offset, text, "content words")
    return None


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
    checks: list[dict[str, Any]] = field(default_factory=list)
    """Each check: {"check": name, "passed": bool, "detail": words}."""

    def record(self) -> dict[str, Any]:
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


def grounding(ideal: str, passages: Sequence[dict[str, Any]]) -> float:
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
    cited: Sequence[dict[str, Any]],
) -> Support:
    """Return whether the cited passages carry the answer, checked without a model.

    Args:
        qtype: The question type.
        exact: The exact answers as given (factoid candidates best first, list items, or
            ["yes"]/["no"]; a summary: []).
        ideal: The ideal answer's prose ("" when only the exact answer is checked).
        cited: The passages the answer cites (dicts with pmid, title, abstract).
    """
    checks: list[dict[str, Any]] = []

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
    if ideal and (problem := degenerate_prose(ideal)):
        return failed("debris", problem)
    if qtype in ("factoid", "list"):
        kept, dropped, carriers = [], [], {}
        for item in exact:
            if problem := degenerate_item(item):
                checks.append({"check": "debris", "passed": False, "detail": problem})
                dropped.append(item)
                continue
            where = carrier(item, cited)
            if where is None:
                dropped.append(item)
            else:
                kept.append(item)
                carriers[item] = where
        detail = f"{len(kept)} of {len(exact)} carried" + (
            f"; not in the cited passages: {', '.join(repr(d) for d in dropped[:5])}"
            if dropped
            else ""
        )
        if not kept:
            return failed("carried", detail, dropped=dropped)
        checks.append({"check": "carried", "passed": True, "detail": detail})
        return Support("supported", None, kept, dropped, carriers, checks)
    if ideal:
        share = grounding(ideal, cited)
        detail = f"{share:.0%} of the answer's content words are in the cited passages"
        if share < GROUNDING:
            return failed("grounded", detail)
        checks.append({"check": "grounded", "passed": True, "detail": detail})
    return Support("supported", None, list(exact), [], {}, checks)
