"""The verifier: a model reads the answer beside every passage it cites, in one call.

For each cited passage it says supports, contradicts or unrelated, quoting the sentence it rests
on. A verdict counts only when its quote is a whole sentence of that passage, the passage
addresses the question, and the sentence says what the answer says (`quote_problem`): the model
cannot vouch for text it made up, for "the", or for a sentence about something else. A reply
that does not parse counts as no support: the verifier can refuse an answer, never wave one
through. An endpoint that fails says "not verified", which
leaves the decision to the model-free check and says so, rather than passing in silence.
`verify.enabled` "auto" turns it on for OpenAI-compatible endpoints only: the local demo model
(135M parameters) cannot judge entailment.

Who judged is part of the verdict: a verifier that is the model that wrote the answer
(`judge` "self") vouches for itself, and the answer says "self-verified", never just verified.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, create_model

from infra.injection import flagged
from infra.models import PROVIDERS, UNPARSEABLE, ChatModel, ModelPool
from infra.relevance import QUOTE_TERMS, key_terms
from infra.settings import Settings
from infra.support import carried_in, whole_sentences
from nodes.answer_fields import pmid_type
from nodes.passages import passages as numbered
from nodes.records import Answer, Call, Passage, PassageVerdict, Verification
from prompts import render

QUOTE_CHARS = 400
"""Longest quote the schema allows: a long sentence of an abstract, and a bound that stops a
run-on string inside a grammar."""


def verifier_enabled(settings: Settings) -> bool:
    """Tell whether answers are verified: verify.enabled, "auto" by the verify model's provider."""
    choice = settings.verify.enabled
    if choice == "auto":
        return settings.models.for_role("verify")[0].provider == "openai"
    return choice == "on"


def verify_schema(pmids: list[str]) -> type[BaseModel]:
    """Return the verifier's output: one verdict per shown passage, naming only these PMIDs.

    The quote comes before the verdict, so a model writes the evidence before it judges.
    """
    check = create_model(
        "PassageCheck",
        pmid=(pmid_type(pmids), Field(description="The abstract's PMID")),
        quote=(
            str,
            Field(
                description="The one sentence of this abstract the verdict rests on, copied "
                "exactly; empty when unrelated",
                max_length=QUOTE_CHARS,
            ),
        ),
        verdict=(
            Literal["supports", "contradicts", "unrelated"],
            Field(
                description="Whether this abstract supports the answer, contradicts it, or "
                "is unrelated to it"
            ),
        ),
    )
    return create_model(
        "Verdicts",
        verdicts=(
            list[check],
            Field(
                description="One verdict per abstract, in the order shown",
                max_length=max(1, len(pmids)),
            ),
        ),
    )


def answer_text(qtype: str, exact: list[str], ideal: str) -> str:
    """Return the answer as the verifier reads it: its type, exact answer and ideal answer."""
    lines = [f"Question type: {qtype}"]
    if qtype == "yesno":
        lines.append(f"Exact answer: {exact[0] if exact else '(none)'}")
    elif qtype != "summary":
        lines.append(f"Exact answer: {json.dumps(exact, ensure_ascii=False)}")
    lines.append(f"Ideal answer: {ideal.strip() or '(none)'}")
    return "\n".join(lines)


def same_model(first: ChatModel, second: ChatModel) -> bool:
    """Tell whether two chat models are one model: one instance, or specs naming one model.

    A model handed in for a role (tests) is known by its instance only: its spec is a stand-in.
    """
    if first.llm is second.llm:
        return True
    built = all(m.provider is PROVIDERS.get(m.spec.provider) for m in (first, second))
    return built and first.spec.same_model(second.spec)


def answer_authors(models: ModelPool, answer: Answer) -> list[ChatModel]:
    """Return the models that wrote an answer: synthesis's, or every member for the vote's."""
    if answer.get("source") in ("vote", "decision"):
        return models.role("ensemble")
    return [models.first("synthesis")]


def judge_of(verifier: ChatModel, authors: Sequence[ChatModel]) -> Literal["independent", "self"]:
    """Return "self" when the verifier is one of the answer's authors, else "independent"."""
    return "self" if any(same_model(verifier, a) for a in authors) else "independent"


async def verify_answer(
    model: ChatModel,
    question: str,
    qtype: str,
    exact: list[str],
    ideal: str,
    passages: list[Passage],
    *,
    authors: Sequence[ChatModel],
    relevant: Collection[str] | None = None,
) -> tuple[Verification, Call | None]:
    """Ask the verifier about every cited passage at once; return its verification and call.

    Args:
        model: The verify role's model (`ctx.models.first("verify")`).
        question: The question answered.
        qtype: Its BioASQ type.
        exact: The exact answer (BioASQ-formatted items; empty for a summary).
        ideal: The ideal answer.
        passages: The passages the answer cites; none means refused without a call (None).
        authors: The models that wrote the answer (`answer_authors`): the verification says
            whether its judge is one of them.
        relevant: The PMIDs of the passages that address the question: a quote from any
            other counts as nothing (None: the caller shows only passages it judged on the
            question, as `judge_answer` does).
    """
    judge = judge_of(model, authors)
    # Evidence is data: a passage that addresses the model is never shown to the judge, and
    # counts as unrelated whatever the judge would have said of it.
    found = flagged(passages)
    shown = [p for p in passages if p["pmid"] not in found]
    left_out: dict[str, PassageVerdict] = {
        pmid: {**_skipped(pmid), "flagged": str(said)} for pmid, said in found.items()
    }
    if passages and not shown:
        why = "every cited passage addresses the model: none is evidence"
        verdicts = [left_out[p["pmid"]] for p in passages]
        return {"status": "refused", "passages": verdicts, "why": why, "judge": judge}, None
    on = {p["pmid"] for p in passages} if relevant is None else relevant
    verification, call = await _verification(
        model, question, qtype, exact, ideal, shown, relevant=on
    )
    if found:
        judged_ = {v["pmid"]: v for v in verification["passages"]}
        verification["passages"] = [judged_.get(p["pmid"]) or left_out[p["pmid"]] for p in passages]
    return {**verification, "judge": judge}, call


async def _verification(
    model: ChatModel,
    question: str,
    qtype: str,
    exact: list[str],
    ideal: str,
    passages: list[Passage],
    *,
    relevant: Collection[str],
) -> tuple[Verification, Call | None]:
    if not passages:
        return {"status": "refused", "passages": [], "why": "the answer cites no passage"}, None
    messages = render(
        "verify",
        passages=numbered(passages, model.context_chars),
        question=question,
        answer=answer_text(qtype, exact, ideal),
    )
    reply = await model.structured(
        verify_schema([p["pmid"] for p in passages]), messages, temperature=0
    )
    call = cast(Call, reply.record("verify"))  # node "verify": Call.kind is for likelihoods
    if reply.error is not None:
        if reply.error.startswith(UNPARSEABLE):
            why = f"the verifier's reply did not parse ({reply.error}): no passage supports it"
            return {"status": "refused", "passages": unjudged(passages), "why": why}, call
        why = f"the verifier's call failed: {reply.error}"
        return {"status": "not verified", "passages": [], "why": why}, call
    return judged(question, qtype, exact, reply.value, passages, relevant=relevant), call


def judged(
    question: str,
    qtype: str,
    exact: list[str],
    value: Any,
    passages: list[Passage],
    *,
    relevant: Collection[str],
) -> Verification:
    """Return the verification a parsed reply earns: only quotes that say the answer count.

    PMIDs the model names that were not shown are ignored (and a second verdict on one PMID);
    a passage it skipped is unrelated. `relevant`: the PMIDs of the passages that address the
    question (infra/relevance.py).
    """
    said: dict[str, Any] = {}
    for check in getattr(value, "verdicts", None) or []:
        said.setdefault(str(check.pmid), check)
    verdicts: list[PassageVerdict] = []
    for passage in passages:
        check = said.get(passage["pmid"])
        if check is None:
            verdicts.append(_skipped(passage["pmid"]))
            continue
        quote = str(check.quote)
        entry: PassageVerdict = {
            "pmid": passage["pmid"],
            "verdict": check.verdict,
            "quote": quote,
            "quoted": verbatim(quote, passage),
        }
        if check.verdict != "unrelated":
            problem = quote_problem(
                question, qtype, exact, quote, passage, passage["pmid"] in relevant
            )
            entry["counts"] = problem is None
            if problem is not None:
                entry["why_not"] = problem
        verdicts.append(entry)
    return _decided(qtype, exact, verdicts)


def quote_problem(
    question: str,
    qtype: str,
    exact: list[str],
    quote: str,
    passage: Passage,
    relevant: bool,
) -> str | None:
    """Return why a verdict's quote counts as nothing, or None when it says what the answer says.

    A quote counts only when it is a whole sentence of that passage (infra/snippets.py's
    splitter; a run of whole sentences too), the passage addresses the question (item 1 of
    issue 55), and the sentence holds the answer's entity (a factoid's first candidate, any
    list item: infra/support.py's term matching) or, for yes/no and summary, the question's
    key terms. "the" is no sentence; a sentence of another passage is not in this one.
    """
    if not verbatim(quote, passage):
        return "the quote is not in this passage"
    found = whole_sentences(quote, passage)
    if found is None:
        return "the quote is not a whole sentence of this passage"
    if not relevant:
        return "the passage does not address the question"
    sentence = found[2]
    if qtype in ("factoid", "list"):
        wanted = exact[:1] if qtype == "factoid" else exact
        if not any(carried_in(item, dict(passage), sentence) for item in wanted):
            return "the quoted sentence does not hold the answer"
        return None
    share, _ = key_terms(question).share(sentence)
    if share < QUOTE_TERMS:
        return f"the quoted sentence holds {share:.0%} of the question's key terms"
    return None


def verbatim(quote: str, passage: Passage) -> bool:
    """Tell whether a quote is non-empty and stands in the passage's title or abstract.

    Whitespace is collapsed on both sides (line breaks and double spaces differ between how an
    abstract is stored, shown and copied); case is kept: a copied sentence keeps its case, and
    in this text case carries meaning (gene symbols against words: "NO" is nitric oxide).
    """
    wanted = _squashed(quote)
    if not wanted:
        return False
    return wanted in _squashed(f"{passage.get('title') or ''}\n{passage.get('abstract') or ''}")


def counted(verdict: PassageVerdict) -> str:
    """Return the verdict as it counts: unrelated unless its quote says what the answer says.

    A record from before quotes were held to `quote_problem` counts when its quote is verbatim.
    """
    return verdict["verdict"] if verdict.get("counts", verdict["quoted"]) else "unrelated"


def _decided(qtype: str, exact: list[str], verdicts: list[PassageVerdict]) -> Verification:
    supports = [v for v in verdicts if counted(v) == "supports"]
    contradicts = [v for v in verdicts if counted(v) == "contradicts"]
    unquoted = [
        f"PMID {v['pmid']}: {v.get('why_not') or 'not found verbatim'}"
        for v in verdicts
        if v["verdict"] != "unrelated" and counted(v) == "unrelated"
    ]
    shown = f"the answer {exact[0]!r}" if qtype == "yesno" and exact else "the answer"
    if qtype == "yesno" and contradicts:
        first = contradicts[0]
        why = f'PMID {first["pmid"]} contradicts {shown}: "{first["quote"]}"'
        return {"status": "refused", "passages": verdicts, "why": why}
    if not supports:
        why = f"no cited passage supports {shown}"
        if unquoted:
            why += f" (quotes that count as nothing: {'; '.join(unquoted)})"
        return {"status": "refused", "passages": verdicts, "why": why}
    why = f"PMID {', '.join(v['pmid'] for v in supports)} support{'s' * (len(supports) == 1)} it"
    return {"status": "supported", "passages": verdicts, "why": why}


def unjudged(passages: list[Passage]) -> list[PassageVerdict]:
    """Return every passage as unrelated: nothing the verifier said can be read."""
    return [_skipped(p["pmid"]) for p in passages]


def _skipped(pmid: str) -> PassageVerdict:
    return {"pmid": pmid, "verdict": "unrelated", "quote": "", "quoted": False}


def _squashed(text: str) -> str:
    return " ".join(text.split())
