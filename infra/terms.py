"""Text as normalised terms: what the support check and the answer contract compare.

Case, Unicode forms, Greek letters (by name), the boundary between letters and digits ("IL6",
"IL-6" and "IL 6" are the same terms) and plural endings are normalised; stopwords keep their
form. Snowball stems (`roots`) go further, for matching by content words only.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

GREEK = {
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "δ": "delta",
    "ε": "epsilon",
    "ζ": "zeta",
    "η": "eta",
    "θ": "theta",
    "ι": "iota",
    "κ": "kappa",
    "λ": "lambda",
    "μ": "mu",
    "ν": "nu",
    "ξ": "xi",
    "ο": "omicron",
    "π": "pi",
    "ρ": "rho",
    "σ": "sigma",
    "ς": "sigma",
    "τ": "tau",
    "υ": "upsilon",
    "φ": "phi",
    "χ": "chi",
    "ψ": "psi",
    "ω": "omega",
}
"""Greek letters by their names: "TNF-α" and "TNF-alpha" are one term."""

_STOP_TEXT = """a an the of in on at to for from by with without and or nor but as is are was were
    be been being it its this that these those which who whom whose what when where why how than
    then there their they them we our you your he she his her not no into onto over under via
    per each other such both all any some can could may might must shall should will would do
    does did has have had also only very more most less least well so too s"""
STOPWORDS = frozenset(_STOP_TEXT.split())
"""Words that carry no content of their own: ignored when an entity is matched by its words."""

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
DEFINITION = re.compile(r"\(([^()]{2,12})\)")
"""A parenthesised short form after its long form: "... regulator (CFTR)"."""
_SPLIT_CASE = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
"""Between a letter and a digit: "IL6" and "IL-6" are the terms "il 6" alike."""


def _greek(text: str) -> str:
    return "".join(f" {GREEK[c]} " if c in GREEK else c for c in text)


def stem(word: str) -> str:
    """Return a word without a plural ending: "mutations" and "mutation" are one term."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "os")):
        return word[:-1]
    return word


_MARKS = str.maketrans("", "", "™®©℠")
"""Trade marks: NFKC would spell "HercepTest™" as the one term "herceptesttm"."""


def terms(text: str) -> list[str]:
    """Return the text as normalised terms: NFKC, case, Greek letters named, plurals stemmed."""
    text = _greek(unicodedata.normalize("NFKC", text.translate(_MARKS)).casefold())
    text = _SPLIT_CASE.sub(" ", text)
    return [t if t in STOPWORDS else stem(t) for t in _TOKEN.findall(text)]


def words(text: str) -> list[str]:
    """Return the runs of letters or digits of a text, as written."""
    return _TOKEN.findall(text)


def content(words: Iterable[str]) -> list[str]:
    """Return the content words among terms."""
    return [w for w in words if w not in STOPWORDS]


@functools.cache
def _stemmer() -> Any:
    # NOTE: imported on first use: nltk's package import pulls in scipy.stats (1.6 s here),
    # which `quorum trace list` and every command that never matches a stem must not pay.
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


def roots(words: Iterable[str]) -> list[str]:
    """Return words by their Snowball stems: "inhibitory", "inhibits", "inhibition" alike.

    Used only where an entity is matched by its content words in one sentence, never for the
    verbatim match: a stem alone would carry too much.
    """
    return [_root(w) for w in words]


@functools.lru_cache(maxsize=65_536)
def _root(word: str) -> str:
    # Snowball walks its suffix rules on every call; a question's passages repeat their words,
    # and the rarity reference (infra/relevance.py) stems some 150,000 words once.
    return _stemmer().stem(word)


def initials_match(short: str, long_words: Sequence[str]) -> bool:
    """Tell whether a short form can abbreviate these words (Schwartz & Hearst's rule)."""
    letters = [c for c in short.casefold() if c.isalnum()]
    if len(letters) < 2 or not long_words:
        return False
    # The short form's letters, in order, each starting a word or inside the long form:
    # "CFTR" ~ "cystic fibrosis transmembrane conductance regulator" (Schwartz & Hearst's rule,
    # that the first letter starts the first word and the rest appear in order).
    joined = " ".join(long_words)
    return joined[:1] == letters[0] and in_order(letters, joined)


def in_order(letters: Sequence[str], text: str) -> bool:
    """Tell whether these letters all occur in `text`, in this order (not necessarily adjacent)."""
    at = 0
    for c in letters:
        at = text.find(c, at)
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
    for match in DEFINITION.finditer(text):
        short = match.group(1).strip()
        if not any(c.isalpha() for c in short) or len(short.split()) > 2:
            continue
        before = words(text[: match.start()])[-2 * len(short) - 1 :]
        for size in range(1, min(len(short) + 5, 2 * len(short), len(before)) + 1):
            long_form = [w.casefold() for w in before[-size:]]
            if initials_match(short, long_form):
                pairs.append((terms(" ".join(long_form)), terms(short)))
                break
    return pairs
