"""The boolean query language models write, parsed once and compiled to each search backend.

Syntax (a safe subset of Lucene's, plus PubMed field tags):
  terms and "quoted phrases", optional slop ("a b"~2) and boost (term^2);
  AND, OR, NOT (also +term / -term), parentheses; adjacent clauses mean OR;
  fields as title:term / abstract:"a phrase" / mesh:term or PubMed tags term[tiab], term[ti],
  term[ab], term[mh]; a trailing wildcard expands a prefix (mitochond*); term~ or term~2 matches
  words within 1 or 2 edits (approximate matching, for spelling variants).
Sentence punctuation at the end of a word (? ! . , ;) is text and dropped.
Rejected with a reason: unknown fields, leading wildcards, regular expressions, fuzzy prefixes or
distances over 2, boosts over MAX_BOOST, a query with no positive clause, nesting deeper than
MAX_DEPTH, more than MAX_CLAUSES clauses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_LENGTH = 2000
MAX_DEPTH = 8
MAX_CLAUSES = 256
MAX_BOOST = 100
FIELDS = ("title", "abstract", "mesh")
SENTENCE_END = "?!.,;"
"""Punctuation that ends a word in a sentence; dropped from the end of query words."""
TEXT_FIELDS = ("title", "abstract")
COMBINED = "text"
"""The field both engines index title and abstract into together: unqualified words (and [tiab])
are scored against it as one BM25 field, not as the sum of two."""
_FIELD_ALIASES = {
    "title": ("title",),
    "ti": ("title",),
    "abstract": ("abstract",),
    "ab": ("abstract",),
    "tiab": TEXT_FIELDS,
    "tw": TEXT_FIELDS,
    "all": TEXT_FIELDS,
    "all fields": TEXT_FIELDS,
    "mesh": ("mesh",),
    "mh": ("mesh",),
    "majr": ("mesh",),
    "mesh terms": ("mesh",),
}


class QueryError(ValueError):
    """A query that may not run, with the reason a model can act on."""


@dataclass(frozen=True)
class Term:
    """One word (a prefix when `prefix`; within `fuzzy` edits when > 0), in some fields."""

    text: str
    fields: tuple[str, ...] = TEXT_FIELDS
    prefix: bool = False
    boost: float | None = None
    fuzzy: int = 0


@dataclass(frozen=True)
class Phrase:
    """Quoted words in order, `slop` words apart at most."""

    text: str
    fields: tuple[str, ...] = TEXT_FIELDS
    slop: int = 0
    boost: float | None = None


@dataclass(frozen=True)
class Bool:
    """Clauses combined: every `must`, any `should` (at least one when no must), no `must_not`."""

    must: tuple[Node, ...] = ()
    should: tuple[Node, ...] = ()
    must_not: tuple[Node, ...] = ()


Node = Term | Phrase | Bool

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<phrase>"(?:[^"\\]|\\.)*")
    |(?P<regex>/[^/]*/)
    |(?P<lparen>\()|(?P<rparen>\))
    |(?P<tag>\[[^\]]*\])
    |(?P<mod>[\^~]\d*(?:\.\d+)?)
    |(?P<plus>\+)|(?P<minus>-(?=\S))
    |(?P<colon>:)
    |(?P<word>[^\s()"\[\]:^~+]+(?:-[^\s()"\[\]:^~+]+)*)
    )""",
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    text: str
    pos: int


def _lex(query: str) -> list[_Tok]:
    tokens, pos = [], 0
    while pos < len(query):
        if query[pos:].strip() == "":
            break
        match = _TOKEN.match(query, pos)
        if not match or match.end() == pos:
            raise QueryError(f"unexpected character {query[pos:].lstrip()[:1]!r} at position {pos}")
        group = match.lastgroup or ""
        kind, text = group, match.group(group)
        if kind == "word" and text in ("AND", "OR", "NOT", "&&", "||"):
            kind = {"&&": "AND", "||": "OR"}.get(text, text)
        elif kind == "word":
            # Sentence punctuation around a word is text, not an operator: a model that copies
            # "… prevention?" means the word (the language has no '?' or '!' operator).
            text = text.rstrip(SENTENCE_END).lstrip("¿¡")
            if not text:
                pos = match.end()
                continue
        tokens.append(_Tok(kind, text, match.start(group)))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, query: str):
        self.tokens = _lex(query)
        self.i = 0
        self.clauses = 0

    def peek(self, offset: int = 0) -> _Tok | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def parse(self) -> Node:
        if not self.tokens:
            raise QueryError("the query is empty")
        node = self.or_expr(0)
        if self.peek() is not None:
            tok = self.peek()
            raise QueryError(f"unexpected {tok.text!r} at position {tok.pos}")
        return node

    def or_expr(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise QueryError(f"the query nests deeper than {MAX_DEPTH} levels")
        clauses = [self.and_group(depth)]
        while (tok := self.peek()) is not None and tok.kind != "rparen":
            if tok.kind == "OR":
                self.take()
            clauses.append(self.and_group(depth))
        return _combine(clauses)

    def and_group(self, depth: int) -> tuple[str, Node]:
        occur, node = self.unary(depth)
        if (tok := self.peek()) is None or tok.kind != "AND":
            return occur, node
        must, must_not = [], []
        (must_not if occur == "must_not" else must).append(node)
        while (tok := self.peek()) is not None and tok.kind == "AND":
            self.take()
            occur, node = self.unary(depth)
            (must_not if occur == "must_not" else must).append(node)
        return "should", Bool(must=tuple(must), must_not=tuple(must_not))

    def unary(self, depth: int) -> tuple[str, Node]:
        tok = self.peek()
        if tok is None:
            raise QueryError("the query ends where a term was expected")
        if tok.kind in ("NOT", "minus", "plus"):
            self.take()
            return ("must" if tok.kind == "plus" else "must_not"), self.primary(depth)
        return "should", self.primary(depth)

    def primary(self, depth: int, fields: tuple[str, ...] = TEXT_FIELDS) -> Node:
        tok = self.peek()
        if tok is None:
            raise QueryError("the query ends where a term was expected")
        nxt = self.peek(1)
        if tok.kind == "word" and nxt is not None and nxt.kind == "colon":
            self.take()
            self.take()
            return self.primary(depth, _fields(tok.text))
        self.take()
        if tok.kind == "lparen":
            node = self.or_expr(depth + 1)
            closing = self.peek()
            if closing is None or closing.kind != "rparen":
                raise QueryError(f"unbalanced parenthesis opened at position {tok.pos}")
            self.take()
            return _with_fields(node, fields) if fields != TEXT_FIELDS else node
        if tok.kind == "regex":
            raise QueryError(f"regular expressions are not allowed ({tok.text})")
        if tok.kind == "rparen":
            raise QueryError(f"unbalanced ')' at position {tok.pos}")
        if tok.kind in ("phrase", "word"):
            return self.atom(tok, fields)
        raise QueryError(f"unexpected {tok.text!r} at position {tok.pos}")

    def atom(self, tok: _Tok, fields: tuple[str, ...]) -> Node:
        self.clauses += 1
        if self.clauses > MAX_CLAUSES:
            raise QueryError(f"the query has more than {MAX_CLAUSES} clauses")
        slop, boost, fuzzy = 0, None, 0
        while (mod := self.peek()) is not None and mod.kind in ("mod", "tag"):
            self.take()
            if mod.kind == "tag":
                fields = _fields(mod.text[1:-1])
            elif mod.text.startswith("~") and tok.kind == "phrase":
                slop = _count(mod.text[1:], tok.text + mod.text)
            elif mod.text.startswith("~"):
                fuzzy = _count(mod.text[1:], tok.text + mod.text)
                if not 1 <= fuzzy <= 2 or tok.text.endswith("*"):
                    raise QueryError(
                        f"fuzzy terms allow 1 or 2 edits on a whole word ({tok.text}{mod.text})"
                    )
            else:
                boost = float(mod.text[1:] or 1)
                if not (math.isfinite(boost) and 0 <= boost <= MAX_BOOST):
                    raise QueryError(
                        f"boosts must be between 0 and {MAX_BOOST:g} ({tok.text}{mod.text})"
                    )
        if tok.kind == "phrase":
            text = _clean(tok.text[1:-1].replace('\\"', '"'))
            if not text:
                raise QueryError(f"empty phrase at position {tok.pos}")
            return Phrase(text, fields, min(slop, 10), boost)
        text = tok.text
        if text.startswith(("*", "?")):
            raise QueryError(f"leading wildcards are not allowed ({text})")
        if "?" in text or "*" in text.rstrip("*"):
            raise QueryError(f"wildcards are only allowed at the end of a term ({text})")
        prefix = text.endswith("*")
        text = _clean(text.rstrip("*"))
        if not text:
            raise QueryError(f"empty term at position {tok.pos}")
        if prefix and len(text) < 3:
            raise QueryError(f"a prefix needs at least 3 characters ({tok.text})")
        return Term(text.lower() if prefix else text, fields, prefix, boost, fuzzy)


def _count(digits: str, where: str) -> int:
    """Read a slop or edit distance; absurdly long numbers are an error, not an overflow."""
    if len(digits) > 4:
        raise QueryError(f"the number after ~ is too large ({where[:40]})")
    return int(float(digits or 1))


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _fields(name: str) -> tuple[str, ...]:
    fields = _FIELD_ALIASES.get(name.strip().lower())
    if fields is None:
        allowed = ", ".join(FIELDS)
        raise QueryError(
            f"field {name!r} is not searchable (allowed: {allowed}, or [tiab]/[ti]/[ab]/[mh])"
        )
    return fields


def _combine(clauses: list[tuple[str, Node]]) -> Node:
    if len(clauses) == 1 and clauses[0][0] == "should":
        return clauses[0][1]
    groups: dict[str, list[Node]] = {"must": [], "should": [], "must_not": []}
    for occur, node in clauses:
        groups[occur].append(node)
    # Lucene semantics: beside a required clause, optional ones only add to the score.
    return Bool(
        must=tuple(groups["must"]),
        should=tuple(groups["should"]),
        must_not=tuple(groups["must_not"]),
    )


def _with_fields(node: Node, fields: tuple[str, ...]) -> Node:
    if isinstance(node, Term | Phrase):
        return type(node)(**{**node.__dict__, "fields": fields})
    return Bool(
        *(
            tuple(_with_fields(n, fields) for n in group)
            for group in (node.must, node.should, node.must_not)
        )
    )


def searched_fields(fields: tuple[str, ...], combined: bool) -> tuple[str, ...]:
    """Return the index fields a node's `fields` are searched in.

    Title + abstract together are the one `COMBINED` field where the index has it (`combined`);
    any other choice is itself.
    """
    return (COMBINED,) if combined and set(fields) == set(TEXT_FIELDS) else fields


def parse_query(query: str) -> Node:
    """Parse and check a query; raise QueryError with the reason when it may not run."""
    if not query or not query.strip():
        raise QueryError("the query is empty")
    if len(query) > MAX_LENGTH:
        raise QueryError(f"the query is longer than {MAX_LENGTH} characters")
    if "\x00" in query:
        raise QueryError("the query contains a NUL character")
    node = _Parser(query).parse()
    if not _has_positive(node):
        raise QueryError("every group needs a positive term: join NOT to one with AND")
    return node


def _has_positive(node: Node) -> bool:
    if isinstance(node, Term | Phrase):
        return True
    inner = (*node.must, *node.should, *node.must_not)
    if not all(_has_positive(n) for n in inner if isinstance(n, Bool)):
        return False
    return bool(node.must or node.should)


def to_text(node: Node) -> str:
    """Render a parsed query back into the canonical syntax (for traces and prompts)."""
    if isinstance(node, Term | Phrase):
        body = (
            '"' + node.text.replace('"', '\\"') + '"'
            if isinstance(node, Phrase)
            else node.text + ("*" if node.prefix else "")
        )
        if isinstance(node, Term) and node.fuzzy:
            body += f"~{node.fuzzy}"
        if isinstance(node, Phrase) and node.slop:
            body += f"~{node.slop}"
        if node.fields != TEXT_FIELDS:
            body = f"{'|'.join(node.fields)}:{body}" if len(node.fields) == 1 else body
        return body + (f"^{node.boost:g}" if node.boost else "")
    parts = [f"+{_group(n)}" for n in node.must] + [_group(n) for n in node.should]
    parts += [f"-{_group(n)}" for n in node.must_not]
    if node.must and not node.should and not node.must_not:
        return " AND ".join(_group(n) for n in node.must)
    if node.should and not node.must and not node.must_not:
        return " OR ".join(_group(n) for n in node.should)
    return " ".join(parts)


def _group(node: Node) -> str:
    return f"({to_text(node)})" if isinstance(node, Bool) else to_text(node)


def to_pubmed(node: Node) -> str:
    """Render a parsed query in PubMed's own syntax (for the E-utilities fallback)."""
    if isinstance(node, Term | Phrase):
        tag = (
            "mh"
            if node.fields == ("mesh",)
            else "ti"
            if node.fields == ("title",)
            else ("ab" if node.fields == ("abstract",) else "tiab")
        )
        # PubMed has no escape for a quote inside a phrase; a space keeps the words apart.
        words = node.text.replace('"', " ")
        body = f'"{words}"' if isinstance(node, Phrase) or " " in words else words
        return f"{body}{'*' if isinstance(node, Term) and node.prefix else ''}[{tag}]"
    positive = " AND ".join(_pm_group(n) for n in node.must)
    optional = " OR ".join(_pm_group(n) for n in node.should)
    text = positive or optional
    if positive and optional and not node.must:
        text = optional
    for negated in node.must_not:
        text = f"({text}) NOT {_pm_group(negated)}"
    return text


def _pm_group(node: Node) -> str:
    return f"({to_pubmed(node)})" if isinstance(node, Bool) else to_pubmed(node)
