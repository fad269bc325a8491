"""Sentence-level snippets with exact character offsets into a document's title or abstract."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infra.bioasq.urls import pubmed_url
from infra.embeddings import Embedder
from infra.records import Passage, Snippet
from infra.rerankers import Reranker
from infra.settings import SettingsError, SnippetSettings

SHIPPED = SnippetSettings()
"""The snippet settings' shipped defaults, the functions' own: a caller that passes none chooses
as finalize does with nothing configured."""

_BOUNDARY = re.compile(r"[.!?](?=\s+[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    {"al", "vs", "e.g", "i.e", "fig", "dr", "st", "approx", "ca", "no", "ref", "cf"}
)


def sentences(text: str) -> list[tuple[int, int]]:
    """Return (start, end) character spans of the sentences of `text`, trimmed of spaces."""
    spans, start = [], 0
    for match in _BOUNDARY.finditer(text):
        before = text[start : match.start()].rsplit(None, 1)
        word = before[-1].lower().lstrip("(") if before else ""
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
            continue  # "et al." or an initial such as "A. madagascariensis"
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    out = []
    for begin, end in spans:
        while begin < end and text[begin].isspace():
            begin += 1
        while end > begin and text[end - 1].isspace():
            end -= 1
        if end - begin >= 20:
            out.append((begin, end))
    return out


def _candidates(docs: Sequence[Passage]) -> list[tuple[str, str, int, int, str]]:
    out = []
    for doc in docs:
        for section in ("title", "abstract"):
            text = doc.get(section) or ""
            for begin, end in sentences(text):
                out.append((doc["pmid"], section, begin, end, text[begin:end]))
    return out


def prefetch_sentences(docs: Sequence[Passage], embedder: Embedder) -> int:
    """Embed the sentences snippets may come from ahead of time; return how many.

    Worth it only with an embedder that remembers recent texts (HuggingFaceEmbedder does).
    """
    texts = [c[4] for c in _candidates(docs)]
    if texts:
        embedder.embed_documents(texts)
    return len(texts)


@dataclass(frozen=True)
class ScoredSentence:
    """A candidate snippet: one sentence of a document, scored against the question."""

    rank: int
    """The document's place among those given (0: the best ranked)."""
    pmid: str
    section: str
    begin: int
    end: int
    text: str
    score: float
    source: str = field(default="", repr=False, compare=False)
    """The whole section the sentence is in (a shared reference): a span of sentences that
    are chosen side by side is cut from it."""


def score_sentences(
    question: str,
    docs: Sequence[Passage],
    embedder: Embedder,
    *,
    scorer: Reranker | None = None,
) -> list[ScoredSentence]:
    """Score every sentence of `docs` against the question, in document order.

    With a `scorer` (a cross-encoder over question × sentence) its scores rank the sentences;
    without one, their cosine with the question does.
    """
    candidates = _candidates(docs)
    if not candidates:
        return []
    texts = [c[4] for c in candidates]
    if scorer is not None:
        scores = np.asarray(scorer.score(question, texts), dtype=np.float32)
    else:
        scores = embedder.embed_documents(texts) @ embedder.embed_query(question)
    rank = {}
    for doc in docs:
        rank.setdefault(doc["pmid"], len(rank))
    by_pmid = {doc["pmid"]: doc for doc in docs}
    return [
        ScoredSentence(
            rank[pmid], pmid, section, begin, end, text, float(score), by_pmid[pmid][section]
        )
        for (pmid, section, begin, end, text), score in zip(candidates, scores, strict=True)
        if by_pmid[pmid].get(section, "")[begin:end] == text
    ]


def choose_snippets(
    scored: Sequence[ScoredSentence],
    *,
    limit: int = SHIPPED.limit,
    per_doc: int = SHIPPED.per_document,
    documents: int | None = None,
    min_score: float | None = SHIPPED.min_score,
    merge: bool = SHIPPED.merge,
) -> list[Snippet]:
    """Return the best sentences as BioASQ snippets, best first.

    At most `limit` snippets in all and `per_doc` from one document, from the first `documents`
    documents (all when None). Sentences scoring below `min_score` are left out, except the
    best one: a question with candidates always gets a snippet. With `merge`, a sentence chosen
    next to one already chosen (the neighbouring candidate of the same section) widens that
    snippet instead of taking a new one: a BioASQ snippet is any span of a section, and the
    organizers cap snippets per question, not sentences.
    """
    pool = [s for s in scored if documents is None or s.rank < documents]
    neighbours = _neighbours(pool) if merge else {}
    spans: list[list[ScoredSentence]] = []
    per: dict[str, int] = {}
    for s in sorted(pool, key=lambda s: -s.score):  # sorted() is stable: ties keep doc order
        if spans and min_score is not None and s.score < min_score:
            break
        beside = [
            span for span in spans if any(n in span for n in neighbours.get(s, ()))
        ]  # at most two: the spans ending just before it and starting just after it
        if beside:
            beside[0].append(s)
            if len(beside) == 2:  # it bridges two snippets of the document: one now
                beside[0].extend(beside[1])
                spans.remove(beside[1])
                per[s.pmid] -= 1
            continue
        if len(spans) >= limit:
            break  # the best sentence left would need a snippet of its own
        if per.get(s.pmid, 0) >= per_doc:
            continue
        per[s.pmid] = per.get(s.pmid, 0) + 1
        spans.append([s])
    return [_snippet(span) for span in spans]


def _neighbours(pool: Sequence[ScoredSentence]) -> dict[ScoredSentence, tuple[ScoredSentence, ...]]:
    """Return each candidate's previous and next candidate of the same document section."""
    by_section: dict[tuple[str, str], list[ScoredSentence]] = {}
    for s in pool:
        by_section.setdefault((s.pmid, s.section), []).append(s)
    out: dict[ScoredSentence, tuple[ScoredSentence, ...]] = {}
    for run in by_section.values():
        run.sort(key=lambda s: s.begin)
        for i, s in enumerate(run):
            out[s] = tuple(run[j] for j in (i - 1, i + 1) if 0 <= j < len(run))
    return out


def _snippet(span: list[ScoredSentence]) -> Snippet:
    """Return a BioASQ snippet covering a span's sentences (its best sentence's score)."""
    first = min(span, key=lambda s: s.begin)
    last = max(span, key=lambda s: s.end)
    text = first.source[first.begin : last.end] if len(span) > 1 else first.text
    return {
        "document": pubmed_url(first.pmid),
        "text": text,
        "offsetInBeginSection": first.begin,
        "offsetInEndSection": last.end,
        "beginSection": first.section,
        "endSection": first.section,
        "score": round(max(s.score for s in span), 4),
    }


def best_snippets(
    question: str,
    docs: Sequence[Passage],
    embedder: Embedder,
    *,
    limit: int = SHIPPED.limit,
    per_doc: int = SHIPPED.per_document,
    scorer: Reranker | None = None,
    min_score: float | None = SHIPPED.min_score,
    merge: bool = SHIPPED.merge,
) -> list[Snippet]:
    """Pick the sentences that best answer the question, as BioASQ snippets with verified offsets.

    With a `scorer` (a cross-encoder over question × sentence) its scores rank the sentences;
    without one, their cosine with the question does.
    """
    scored = score_sentences(question, docs, embedder, scorer=scorer)
    return choose_snippets(scored, limit=limit, per_doc=per_doc, min_score=min_score, merge=merge)


def chosen_snippets(
    question: str,
    docs: Sequence[Passage],
    embedder: Embedder,
    chosen: SnippetSettings,
    scorer: Reranker | None = None,
) -> list[Snippet]:
    """Return the snippets `chosen` (the snippet settings) picks, as finalize gives them.

    From the first `chosen.documents` documents, at most `chosen.limit` in all and
    `chosen.per_document` from one, above its floor, merged or not: `eval retrieval --snippets`
    scores the same choice.
    """
    return best_snippets(
        question,
        docs[: chosen.documents],
        embedder,
        limit=chosen.limit,
        per_doc=chosen.per_document,
        scorer=scorer,
        min_score=chosen.min_score,
        merge=chosen.merge,
    )


def supporting_sentences(
    question: str,
    answer: str,
    docs: Sequence[Passage],
    embedder: Embedder,
    *,
    holding: bool = False,
) -> dict[str, ScoredSentence]:
    """Return, per document, the sentence that best supports this answer to the question.

    A sentence holding the answer's words (normalised, whole words) beats one that does not,
    and a statement beats a question; among equals, cosine with "question answer" decides.
    What an answer's citation rests on, shown beside it. `holding`: only sentences that hold
    the answer (a document with none is left out).
    """
    scored = score_sentences(f"{question} {answer}".strip(), docs, embedder)
    wanted = " ".join(_norm(answer).split())
    best: dict[str, tuple[tuple[bool, bool, float], ScoredSentence]] = {}
    for sentence in scored:
        holds = bool(wanted) and f" {wanted} " in f" {_norm(sentence.text)} "
        if holding and not holds:
            continue
        # A question ("Does X cause Y?", as many PubMed titles are) asks, it does not support.
        key = (holds, not sentence.text.rstrip().endswith("?"), sentence.score)
        if sentence.pmid not in best or key > best[sentence.pmid][0]:
            best[sentence.pmid] = (key, sentence)
    return {pmid: sentence for pmid, (_, sentence) in best.items()}


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w%+.-]+", " ", text.casefold()).split())


def load_scorer(settings: SnippetSettings) -> Reranker | None:
    """Load the sentence scorer named by snippets.scorer_path; None when none is configured."""
    if settings.scorer_path is None:
        return None
    path = Path(settings.scorer_path)
    if not (path / "config.json").exists():
        raise SettingsError(
            f"invalid setting snippets.scorer_path: no model at {path} (a cross-encoder "
            "directory with config.json; `quorum train reranker --level sentence` makes one)"
        )
    from infra.rerankers import SentenceTransformersReranker

    return SentenceTransformersReranker(path, settings.batch_size, settings.max_length)


def located(snippet: Snippet, doc: Passage) -> Snippet | None:
    """Return a gold snippet with its offsets where its text is in `doc`; None when it is not.

    A corpus whose texts are not PubMed's (rebuilt from snippets, or another version of the
    abstract) has a snippet's text elsewhere than its offsets say.
    """
    section = "title" if "title" in str(snippet.get("beginSection", "")) else "abstract"
    text, wanted = doc.get(section) or "", str(snippet.get("text", ""))
    begin = int(snippet.get("offsetInBeginSection", -1))
    if not wanted:
        return None
    if text[begin : begin + len(wanted)] == wanted:
        return snippet
    at = text.find(wanted)
    if at < 0:
        return None
    return {**snippet, "offsetInBeginSection": at, "offsetInEndSection": at + len(wanted)}
