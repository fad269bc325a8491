"""The answer contract: what counts as an answer at all, decided in this one place.

An exact answer has its type's shape and is not empty; an ideal answer is prose (at least one
sentence of three words or more, mostly words, not JSON or markup debris) and does not say
yes where the exact answer says no. Anything else is a failed answer, never a result: the
synthesizer that gave it is asked again, then the ensemble's decision stands in, then quorum
says plainly that the evidence is insufficient (`insufficient_answer`). The validator of
submissions holds files to the same rules, so what quorum refuses to give it also refuses to
pass.
"""

from __future__ import annotations

import json
import re
from typing import Any

from infra.terms import content, roots, terms

INSUFFICIENT_PREFIX = "Insufficient evidence:"
"""How an honest insufficient-evidence result begins (it is prose, so it passes the contract)."""
MIN_WORDS = 3
"""Words an ideal answer of quorum's needs at least: "Yes." or "Milk" answers no question.
Submissions are checked at one word (`SUBMISSION_MIN_WORDS`): the golden files themselves hold
39 ideal answers of one or two words ("Yes.", "MTH1") among 2,310."""
SUBMISSION_MIN_WORDS = 1
"""Words an ideal answer in a submission needs: "][{" or "} {{" has none."""
MIN_LETTER_SHARE = 0.5
"""Share of an ideal answer's non-space characters that must be letters or digits: prose, not
debris."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
"""A word: a run of letters or digits ("MTH1", "20", "β-catenin" is two)."""
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)

REPEAT_NGRAM = 3
"""Repetition is counted over word 3-grams: a model looping on a phrase repeats its 3-grams."""
MAX_REPEATED_SHARE = 0.6
"""Share of an ideal answer's word 3-grams that may repeat an earlier one before it is a loop,
not prose. The organizers' 5,826 ideal answers over the 2,310 golden questions reach at most
0.48 (one that restates its own first sentence); "a protein ty3, a protein ty3, …" is above 0.9.
Counted from REPEAT_MIN_WORDS words on: a short answer naming one thing twice is no loop."""
REPEAT_MIN_WORDS = 12
_DEBRIS = re.compile(
    r"[{}]|```|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?>|\"[A-Za-z_]+\"\s*:"
    r"|\b(?:the\s+)?(?:final\s+)?answer\s+is\s*:",
    re.IGNORECASE,
)
"""Markup and structure left in prose: braces, code fences, HTML tags, JSON keys, and an
"The answer is:" lead-in. None of them occurs in the organizers' 5,826 ideal answers (citation
markers such as "[7]" do, eight times, so they are not debris)."""
_DATE = re.compile(r"\b\d{1,2}[./]\d{1,2}[./]\d{4}\b|\b\d{4}-\d{2}-\d{2}\b")
MAX_NUMBER_ITEM = 24
"""Characters an entity with no letter may have: the golden files' 43 numeric answers ("1.1%",
"1:3500-1:5000", "14-3-3") are at most 13; a run of dates or numbers is debris."""
_CUT_END = re.compile(r"(?:[-(]|\b(?:of|and|the|in|with|to|for|or|an|by|from|on|at))$")
"""How an entity cut mid-phrase ends: a hyphen or an open parenthesis, or a joining word in
lower case. No golden entity among 3,051 ends so: "vitamin A" ends in "A" (so "a" is left out),
"Lipid Mini-On" in a capital "On", and a URL in "/" (so a slash is no cut)."""


def is_insufficient(ideal: Any) -> bool:
    """Tell whether an ideal answer is quorum's insufficient-evidence statement."""
    return isinstance(ideal, str) and ideal.strip().startswith(INSUFFICIENT_PREFIX)


def ideal_problem(ideal: Any, *, min_words: int = MIN_WORDS) -> str | None:
    """Return why an ideal answer is not prose, or None when it is."""
    if isinstance(ideal, list):  # BioASQ files may hold a list of ideal answers
        problems = [ideal_problem(item, min_words=min_words) for item in ideal]
        return next((p for p in problems if p), None) if problems else "no ideal answer"
    if not isinstance(ideal, str) or not ideal.strip():
        return "the ideal answer is empty"
    text = ideal.strip()
    words = _WORD.findall(text)
    if len(words) < min_words:
        return f"the ideal answer {_shown(text)} is not a sentence ({len(words)} word(s))"
    visible = [c for c in text if not c.isspace()]
    letters = sum(c.isalnum() for c in visible)
    if letters < MIN_LETTER_SHARE * len(visible):
        return f"the ideal answer {_shown(text)} is mostly symbols, not prose"
    if _is_json(text):
        return f"the ideal answer {_shown(text)} is JSON, not prose"
    return degenerate_prose(text)


def repeated_share(text: str, n: int = REPEAT_NGRAM) -> float:
    """Return the share of the text's word n-grams that repeat an earlier one."""
    words = [w.casefold() for w in _WORD.findall(text)]
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def degenerate_prose(text: str) -> str | None:
    """Return how prose is degenerate (a loop, markup or citation debris), or None."""
    shown = _shown(text)
    if len(_WORD.findall(text)) >= REPEAT_MIN_WORDS:
        share = repeated_share(text)
        if share > MAX_REPEATED_SHARE:
            return f"the text {shown} repeats itself ({share:.0%} of its 3-grams)"
    if match := _DEBRIS.search(text):
        return f"the text {shown} holds markup or debris ({match.group(0)!r})"
    return None


def degenerate_item(item: Any, *, bound: int | None = None) -> str | None:
    """Return how an entity is debris (a run of dates or numbers, cut mid-phrase), or None.

    Args:
        item: One exact answer of a factoid or list question.
        bound: The longest entity the model could write (quorum's own answers: the schema's
            bound); an entity that long was cut there.
    """
    if not isinstance(item, str):
        return None
    text = item.strip()
    shown = _shown(text)
    if not text:
        return None
    if not any(c.isalpha() for c in text) and (_DATE.search(text) or len(text) > MAX_NUMBER_ITEM):
        return f"the entity {shown} is a run of dates or numbers, not a name"
    if _CUT_END.search(text):
        return f"the entity {shown} is cut mid-phrase"
    if bound is not None and len(text) >= bound:
        return f"the entity {shown} was cut at the schema's {bound} characters"
    return None


def exact_problem(qtype: str, exact: Any) -> str | None:
    """Return why an exact answer (BioASQ's shape for the type) is missing or empty, else None."""
    if qtype == "summary":
        return None
    if qtype == "yesno":
        if _yes_no(exact) is None:
            return f"the yes/no exact answer is {_shown(exact)}, not 'yes' or 'no'"
        return None
    if not isinstance(exact, list) or not exact:
        return f"the {qtype} exact answer is empty"
    items = [i for entry in exact for i in (entry if isinstance(entry, list) else [entry])]
    if not any(isinstance(i, str) and _WORD.search(i) for i in items):
        return f"the {qtype} exact answer {_shown(exact)} names nothing"
    problems = [degenerate_item(i) for i in items]
    if all(problems):  # one good synonym or item keeps the answer; the check drops the rest
        return problems[0]
    return None


_NEGATION = re.compile(
    r"\b(?:not|no|never|neither|nor|cannot|didn't|doesn't|don't|isn't|aren't|wasn't|weren't"
    r"|failed to|fail to|fails to)\b((?:\s+[\w-]+){1,3})",
    re.IGNORECASE,
)
"""A negation and the (up to three) words it governs: "was not effective", "did not reduce"."""


def negated(question: str, ideal: str) -> str | None:
    """Return the words of the ideal answer that negate the question's own words, or None.

    "Is losartan effective against brain atrophy?" answered "Yes. … losartan was not effective
    …" says no in its own words. Measured on the 25 golden files: no gold ideal answer of a
    'yes' question (0 of 395) negates its question's words so, while 43 of 223 of the 'no'
    questions' do ("without" and "lack of" were left out: they negated words in a 'yes' answer).
    """
    asked = set(roots(content(terms(question))))
    for match in _NEGATION.finditer(ideal):
        if asked & set(roots(content(terms(match.group(1))))):
            return match.group(0).strip()
    return None


def contradiction(qtype: str, exact: Any, ideal: Any, question: str | None = None) -> str | None:
    """Return how a yes/no ideal answer contradicts its exact answer, or None.

    The ideal answer's first word, and, with the question, a 'yes' whose prose negates the
    question's own words.
    """
    wanted = _yes_no(exact)
    if qtype != "yesno" or wanted is None or not isinstance(ideal, str):
        return None
    said = _YES_NO.match(ideal)
    if said and (word := said.group(1).lower()) != wanted:
        return f"the ideal answer says {word!r} where the exact answer says {wanted!r}"
    if wanted == "yes" and question and (words := negated(question, ideal)):
        return f"the ideal answer says {words!r} where the exact answer says 'yes'"
    return None


def answer_problem(
    qtype: str,
    exact: Any,
    ideal: Any,
    *,
    min_words: int = MIN_WORDS,
    question: str | None = None,
) -> str | None:
    """Return the first way an answer breaks the contract, or None when it is an answer.

    `exact` is BioASQ's shape (infra.bioasq.exact_answer_shape); an insufficient-evidence
    statement is an honest answer, so its (empty) exact answer is not held against it. With
    the question, a 'yes' whose prose negates the question's words contradicts itself.
    """
    if is_insufficient(ideal):
        return None
    return (
        ideal_problem(ideal, min_words=min_words)
        or exact_problem(qtype, exact)
        or contradiction(qtype, exact, ideal, question)
    )


def insufficient_answer(reason: str) -> str:
    """Return the ideal answer that says the evidence is insufficient, and why."""
    reason = " ".join(reason.split()).rstrip(".")
    return f"{INSUFFICIENT_PREFIX} {reason}."


def _is_json(text: str) -> bool:
    if text[0] not in "[{":
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _yes_no(exact: Any) -> str | None:
    word = exact.strip().lower() if isinstance(exact, str) else None
    return word if word in ("yes", "no") else None


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:40] + ("…" if len(text) > 40 else ""))
