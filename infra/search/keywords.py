"""Queries made from a question rather than written by a model: keywords and relaxations."""

from __future__ import annotations

import contextlib
import re

from infra.search.query import Bool, Node, Phrase, QueryError, Term, parse_query, to_text

_STOPWORDS = frozenset(
    " ".join(
        (
            "a about above after again against all am an and any are as at be because been",
            "before being below between both but by can could did do does doing down during",
            "each few for from further had has have having he her here hers him his how i if",
            "in into is it its itself just me more most my no nor not now of off on once only",
            "or other our out over own same she should so some such than that the their them",
            "then there these they this those through to too under until up very was we were",
            "what when where which while who whom why will with would you your yes describe",
            "list name please role effect",
        )
    ).split()
)


def keywords(question: str, limit: int = 12) -> list[str]:
    """Return a question's content words, in order, lower-cased, without duplicates.

    Stopwords go unless nothing else is left ("What is it?" still searches for something).
    """
    words = [
        w.lower() for w in re.findall(r"\w(?:[\w\-]*\w)?", question) if len(w) > 1 or w.isdigit()
    ]
    words = [w.strip("_") for w in words if w.strip("_")]
    content = [w for w in words if w not in _STOPWORDS] or words
    return list(dict.fromkeys(content))[:limit]


def loosen(node: Node) -> Node:
    """Return the query with every AND turned into OR and every NOT dropped."""
    if isinstance(node, Term | Phrase):
        return node
    parts = tuple(loosen(n) for n in (*node.must, *node.should))
    return parts[0] if len(parts) == 1 else Bool(should=parts)


def without_stopwords(node: Node) -> Node | None:
    """Return the query without its stop-word terms (phrases stay whole); None when none is left.

    PubMed's fallback search reads every term: `is[tiab] OR for[tiab]` matches most of it.
    """
    if isinstance(node, Term):
        return None if node.text.lower() in _STOPWORDS else node
    if isinstance(node, Phrase):
        return node
    must = tuple(n for n in (without_stopwords(c) for c in node.must) if n is not None)
    should = tuple(n for n in (without_stopwords(c) for c in node.should) if n is not None)
    must_not = tuple(n for n in (without_stopwords(c) for c in node.must_not) if n is not None)
    if not (must or should):
        return None
    if not must_not and len(must) + len(should) == 1:
        return (must or should)[0]
    return Bool(must=must, should=should, must_not=must_not)


def copied_question(query: str, question: str) -> bool:
    """Return whether `query` is the question copied: no operator, and the question's own words.

    Read as plain BM25 (every word OR-ed, stop words too) such a query matches nearly every
    document (998 of 1,000 in the demo, issue 28).
    """
    if re.search(r'\b(AND|OR|NOT)\b|["()\[\]:*~]', query):
        return False
    words = re.findall(r"\w+", query.lower())
    asked = re.findall(r"\w+", question.lower())
    return len(asked) >= 3 and (words == asked or set(words) == set(asked))


def relaxations(question: str, query: str | None = None) -> list[str]:
    """Return ever broader fallback queries: the query's AND as OR, keywords, prefixes, fuzzy."""
    out = []
    if query:
        with contextlib.suppress(QueryError):
            out.append(to_text(loosen(parse_query(query))))
    words = keywords(question)
    if not words:
        return out
    prefixes = {
        w[:5].lower() + "*" if len(w) > 5 and "-" not in w else (f'"{w}"' if "-" in w else w)
        for w in words
    }
    fuzzy = [f"{w}~1" for w in words if "-" not in w and len(w) > 4 and w.isalpha()]
    out += [keyword_query(question), " OR ".join(sorted(prefixes))]
    if fuzzy:
        out.append(" OR ".join([*fuzzy, *sorted(prefixes)]))
    return out


def keyword_query(question: str) -> str:
    """Return the fallback query: the question's keywords joined with OR."""
    words = keywords(question)
    if not words:
        raise QueryError("the question has no searchable words")
    return " OR ".join(f'"{w}"' if "-" in w else w for w in words)
