"""Answers as the models are asked for them: fields by question type, citations of shown PMIDs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, WithJsonSchema

# Short entity names; a bound also stops a small model's run-on strings inside the grammar.
Entity = Annotated[str, StringConstraints(min_length=1, max_length=80)]


def pmid_type(pmids: list[str]) -> Any:
    """Return the type of a citation: the schema offers only these PMIDs.

    Constrained decoding (local models, strict JSON-schema endpoints) then cannot produce
    another; a model that does anyway (function calling, JSON mode, a document telling it to)
    still parses, and `checked_citations` removes what was not shown and says so, rather than
    losing the whole answer.
    """
    if not pmids:
        return str
    return Annotated[str, WithJsonSchema({"type": "string", "enum": list(pmids)})]


def checked_citations(cited: list[str], shown: list[str], node: str) -> tuple[list[str], list[str]]:
    """Keep the citations of PMIDs the node showed; return them and notes on the rest."""
    allowed = set(shown)
    kept = list(dict.fromkeys(p for p in cited if p in allowed))
    removed = [p for p in dict.fromkeys(cited) if p not in allowed]
    notes = (
        [f"{node}: removed citation(s) of PMIDs not in its context: {', '.join(removed)}"]
        if removed
        else []
    )
    return kept, notes


def exact_field(qtype: str) -> tuple[Any, Any]:
    """Return the (type, Field) of the exact answer for a BioASQ question type."""
    if qtype == "yesno":
        return Literal["yes", "no"], Field(description="yes or no")
    if qtype == "factoid":
        return list[Entity], Field(
            description="Up to 5 short candidate answers (entity names), best first", max_length=5
        )
    if qtype == "list":
        return list[Entity], Field(
            description="Every entity that answers the question", max_length=12
        )
    return str, Field(description="A one-sentence answer", max_length=400)


def member_field(qtype: str) -> tuple[Any, Any]:
    """Return the (type, Field) of one ensemble member's answer: a factoid member names one.

    The papers vote one answer per member (CoBag's majority over normalized strings, CCV's
    citation vote); five candidates per member would turn the majority into an approval vote.
    """
    if qtype == "factoid":
        return Entity, Field(description="The one best short answer (an entity name)")
    return exact_field(qtype)


def as_answers(qtype: str, exact: Any) -> list[str]:
    """Return an exact answer as a list of answer strings."""
    if exact is None:
        return []
    if isinstance(exact, str):
        return [exact]
    return [str(a) for a in exact]


TYPE_INSTRUCTIONS = {
    "yesno": "Answer yes or no.",
    "factoid": "Give up to 5 short candidate answers (entity names), best first.",
    "list": "List every entity that answers the question, each as a short name.",
    "summary": "Answer in one or two sentences.",
}
"""What the synthesizer is asked for, by question type (BioASQ takes 5 factoid candidates)."""
MEMBER_INSTRUCTIONS = TYPE_INSTRUCTIONS | {
    "factoid": "Give the one best short answer (an entity name).",
}
"""What one ensemble member is asked for: one answer per member, so votes count members."""
