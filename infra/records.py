"""Records infra's checks read and write, typed once here, at the lowest floor that uses them.

A document (what a search backend stores and fetches, and PubMed gives), a passage (what the
relevance judge, the support check, the snippet picker and the injection guard read), a BioASQ
snippet (what the picker writes), a passage's relevance verdict and the
support check's record. The nodes put them into the state: nodes/records.py imports them from
here, and the support record the nodes keep adds what only they know (the verifier's reading).
TypedDicts are plain dicts at runtime: checkpoints store and restore them unchanged.
"""

# NOTE: no `from __future__ import annotations`: under it, Python 3.11's TypedDict cannot
# see NotRequired and counts every field as required.
from typing import Literal, NotRequired, TypedDict


class Document(TypedDict, total=False):
    """An article as an index stores it and PubMed gives it (the fallback's pool keeps them)."""

    pmid: str
    """The article's PMID."""
    title: str
    """The article's title."""
    abstract: str
    """The article's abstract."""
    year: int | None
    """Publication year, when one could be read."""
    mesh: list[str]
    """MeSH descriptor names."""
    journal: str
    """The journal's name or abbreviation."""


class Passage(TypedDict):
    """A document the answering nodes read: written by rerank or given_evidence."""

    pmid: str
    """The document's PMID."""
    title: str
    """Its title ("" for phase B's given snippets)."""
    abstract: str
    """Its abstract (phase B: its given snippets, joined)."""
    year: NotRequired[int | None]
    """rerank: the publication year, when known."""
    score: float
    """rerank: the fused (or cross-encoder) score; given_evidence: list position, 1 first."""


class Snippet(TypedDict):
    """A BioASQ snippet: given with a phase B question, or picked by infra/snippets.py."""

    document: str
    """The PubMed URL of the snippet's document."""
    text: str
    """The snippet's text, exactly as it stands in the section."""
    offsetInBeginSection: int
    """Character offset of the text's start in beginSection."""
    offsetInEndSection: int
    """Character offset of the text's end in endSection."""
    beginSection: str
    """Section the text starts in: title or abstract."""
    endSection: str
    """Section the text ends in: title or abstract."""
    score: NotRequired[float]
    """finalize: cosine of the sentence to the question."""


class PassageRelevance(TypedDict):
    """Whether one passage addresses the question (infra/relevance.py `Relevance.record`)."""

    relevant: bool
    """Whether it does: only then can it be evidence for an answer."""
    terms: float
    """The share of the question's key terms it holds, each weighted by its rarity."""
    cosine: float | None
    """The embedder's cosine between the question and the passage."""
    cross_encoder: float | None
    """The cross-encoder's score of the pair (None: no cross-encoder is configured)."""
    missing: list[str]
    """The question's key terms (Snowball roots) it lacks."""
    subject: NotRequired[bool]
    """Whether it holds the question's heaviest key term (its subject)."""


class Carried(TypedDict):
    """Where a cited passage carries one exact answer (infra/support.py Carrier)."""

    answer: str
    """The exact answer carried."""
    pmid: str
    """The passage's document."""
    section: str
    """title or abstract."""
    offset: int
    """The sentence's first character in that section."""
    sentence: str
    """The sentence that carries it."""
    how: str
    """verbatim, abbreviation, or content words."""


class Check(TypedDict):
    """One check the support check ran on an answer."""

    check: str
    """Its name (relevance, carried, grounded, contract, …)."""
    passed: bool
    """Whether the answer passed it."""
    detail: str
    """What it found, in words."""


class SupportCheck(TypedDict):
    """The support check's verdict on one answer (infra/support.py `Support.record`)."""

    verdict: Literal["supported", "refused"]
    """Whether the cited passages carry the answer."""
    reason: str | None
    """Which check failed and on what (None when supported)."""
    kept: list[str]
    """The exact answers carried."""
    dropped: list[str]
    """The exact answers no cited passage carries."""
    carriers: list[Carried]
    """Where each kept answer is carried."""
    checks: list[Check]
    """Each check: check, passed, detail."""
