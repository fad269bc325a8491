"""Text as normalised terms: what the support check and the answer contract compare.

Case, Unicode forms, Greek letters (by name), the boundary between letters and digits ("IL6",
"IL-6" and "IL 6" are the same terms) and plural endings are normalised; stopwords keep their
form. Snowball stems (`roots`) go further, for matching by content words only.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
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


def terms(text: str) -> list[str]:
    """Return the text as normalised terms: NFKC, case, Greek letters named, plurals stemmed."""
    text = _greek(unicodedata.normalize("NFKC", text).casefold())
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
    stemmer = _stemmer()
    return [stemmer.stem(w) for w in words]
