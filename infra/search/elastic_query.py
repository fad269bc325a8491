"""Parsed queries compiled to a small, safe subset of the Elasticsearch query DSL.

Fields hold en_stem terms (analyzed on the client, see `infra.search.analysis`), so query text is
analyzed here the same way and each leaf mirrors what the embedded engine builds: a term is a
match (a phrase of its terms when it has several, like IL-6), a phrase a match_phrase, a prefix
a prefix on the indexed stems, a fuzzy term one constant-score fuzzy query per stem. User text
never reaches `query_string`, scripts or other indexes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infra.search.analysis import analyze
from infra.search.query import Bool, Node, Phrase, Term, searched_fields

NOTHING: dict[str, Any] = {"match_none": {}}


def to_elasticsearch(
    node: Node, *, max_prefix_expansions: int, combined: bool = True
) -> dict[str, Any]:
    """Compile a parsed query to query DSL (bool, match, match_phrase, prefix, fuzzy).

    `combined`: title + abstract are searched as the one `text` field (False for an index made
    before it had one).
    """
    if isinstance(node, Bool):
        body: dict[str, Any] = {}
        for occur in ("must", "should", "must_not"):
            if clauses := getattr(node, occur):
                body[occur] = [
                    to_elasticsearch(
                        n, max_prefix_expansions=max_prefix_expansions, combined=combined
                    )
                    for n in clauses
                ]
        if node.should and not node.must:
            body["minimum_should_match"] = 1
        return {"bool": body}
    node = replace(node, fields=searched_fields(node.fields, combined))
    if isinstance(node, Term) and node.prefix:
        # Like embedded: the lowercased prefix, unstemmed, against the indexed stems. NOTE: past
        # the cap the two keep different terms (embedded: most frequent over all fields; here:
        # first in term order, per field), so very common prefixes may find different documents.
        rewrite = f"top_terms_{max_prefix_expansions}"
        return _per_field(node, "prefix", {"value": node.text.lower(), "rewrite": rewrite})
    tokens = analyze(node.text)
    if not tokens:
        return NOTHING
    if isinstance(node, Term) and node.fuzzy:
        return _fuzzy(node, tokens)
    if isinstance(node, Phrase):
        return _per_field(node, "match_phrase", {"query": " ".join(tokens), "slop": node.slop})
    if len(tokens) == 1:
        return _per_field(node, "match", {"query": tokens[0]})
    # A term of several words (IL-6, caspase-like) is those words in order, as embedded does.
    return _per_field(node, "match_phrase", {"query": " ".join(tokens)})


def _fuzzy(term: Term, tokens: list[str]) -> dict[str, Any]:
    """Every stem within `fuzzy` edits in some field, each match scoring 1 (tantivy's score)."""
    params = {"fuzziness": term.fuzzy, "transpositions": True, "rewrite": "constant_score"}
    per_token = [_per_field(term, "fuzzy", {"value": token, **params}) for token in tokens]
    return per_token[0] if len(per_token) == 1 else {"bool": {"must": per_token}}


def _per_field(node: Term | Phrase, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Return one `kind` leaf per field of `node`, any of them matching."""
    if node.boost:
        params["boost"] = float(node.boost)
    leaves = [{kind: {field: dict(params)}} for field in node.fields]
    return (
        leaves[0] if len(leaves) == 1 else {"bool": {"should": leaves, "minimum_should_match": 1}}
    )
