"""The verifier: one call reads the answer beside every cited passage; only verbatim quotes count."""

import json

import pytest

from graphs.describe import block_lines, call_view
from infra.models import ModelPool
from infra.settings import ModelSettings, ModelSpec, SettingsError, load_settings
from infra.structured import parse_json_reply
from lab.simulate.verify import verify_reply
from nodes.descriptions.synthesize import verification_lines
from nodes.records import verified_label
from nodes.synthesize.verify import (
    answer_authors,
    judge_of,
    same_model,
    verifier_enabled,
    verify_answer,
    verify_schema,
)
from tests.support.fakes import pmids_in, script

QUESTION = "Is losartan effective against brain atrophy in Alzheimer's disease?"
CONTRA = (
    "Losartan was not effective in reducing brain atrophy   in patients\nwith mild Alzheimer's."
)
PASSAGES = [
    {
        "pmid": "101",
        "title": "Losartan in Alzheimer's disease (RADAR)",
        "abstract": "We ran a trial of 211 patients. " + CONTRA + " It was well tolerated.",
        "score": 1.0,
    },
    {
        "pmid": "102",
        "title": "Angiotensin receptor blockers and dementia",
        "abstract": "Angiotensin receptor blockers were associated with less brain atrophy. "
        "The association held after adjustment.",
        "score": 0.9,
    },
    {
        "pmid": "103",
        "title": "CFTR and cystic fibrosis",
        "abstract": "The CFTR gene is mutated in cystic fibrosis.",
        "score": 0.8,
    },
]
SUPPORT_102 = "Angiotensin receptor blockers were associated with less brain atrophy."


def reply(*verdicts):
    return {"verdicts": [{"pmid": p, "quote": q, "verdict": v} for p, v, q in verdicts]}


@pytest.fixture
def uncached(make_context, settings):
    """Contexts whose models never answer from the reply cache: every call reaches the model."""
    models = settings.models.model_copy(update={"cache": "off"})
    return lambda model: make_context(
        model, settings_=settings.model_copy(update={"models": models})
    )


async def verified(
    make_context, answer, qtype="yesno", exact=("yes",), passages=PASSAGES, relevant=None
):
    model = answer if not isinstance(answer, dict | str | Exception) else script(verify=answer)
    ctx = make_context(model)
    verification, call = await verify_answer(
        ctx.models.first("verify"),
        QUESTION,
        qtype,
        list(exact),
        "Losartan reduces brain atrophy.",
        list(passages),
        authors=[ctx.models.first("synthesis")],
        relevant={p["pmid"] for p in passages} if relevant is None else relevant,
    )
    return verification, call, model


def test_schema_offers_the_shown_pmids_and_three_verdicts():
    schema = verify_schema(["101", "102"])
    raw = json.dumps(reply(("102", "supports", SUPPORT_102)))
    parsed = parse_json_reply(schema, raw)
    assert parsed.verdicts[0].pmid == "102" and parsed.verdicts[0].verdict == "supports"
    dumped = json.dumps(schema.model_json_schema())
    assert '"enum": ["101", "102"]' in dumped
    assert '"enum": ["supports", "contradicts", "unrelated"]' in dumped
    with pytest.raises(ValueError):
        parse_json_reply(schema, json.dumps(reply(("102", "agrees", SUPPORT_102))))


async def test_a_verbatim_quote_counts_whitespace_collapsed(make_context):
    # The model copies the sentence with its line break and double space flattened.
    quote = " ".join(CONTRA.split())
    v, _, _ = await verified(
        make_context, reply(("101", "supports", quote)), qtype="factoid", exact=["losartan"]
    )
    assert v["status"] == "supported" and v["why"] == "PMID 101 supports it"
    assert v["passages"][0] == {
        "pmid": "101",
        "verdict": "supports",
        "quote": quote,
        "quoted": True,
        "counts": True,
    }


async def test_a_paraphrased_quote_is_not_counted_but_kept(make_context):
    paraphrase = "Losartan did not reduce brain atrophy in mild Alzheimer's."
    v, _, _ = await verified(
        make_context, reply(("101", "supports", paraphrase)), qtype="factoid", exact=["losartan"]
    )
    assert v["status"] == "refused"
    assert v["passages"][0] == {
        "pmid": "101",
        "verdict": "supports",  # what the model said, kept for the trace
        "quote": paraphrase,
        "quoted": False,
        "counts": False,
        "why_not": "the quote is not in this passage",
    }
    assert "PMID 101: the quote is not in this passage" in v["why"]


async def test_an_empty_quote_gives_no_support(make_context):
    v, _, _ = await verified(make_context, reply(("102", "supports", "")))
    assert v["status"] == "refused" and v["passages"][1]["quoted"] is False


async def test_a_yesno_answer_its_citation_contradicts_is_refused(make_context):
    answer = reply(
        ("101", "contradicts", " ".join(CONTRA.split())), ("102", "supports", SUPPORT_102)
    )
    v, _, _ = await verified(make_context, answer)
    assert v["status"] == "refused"
    assert v["why"].startswith("PMID 101 contradicts the answer 'yes': \"Losartan was not")
    lines = verification_lines(v)
    assert lines[0].startswith("verified: refused") and lines[2].startswith("  102 supports: ")


async def test_a_contradiction_without_a_verbatim_quote_does_not_refuse_yesno(make_context):
    answer = reply(("101", "contradicts", "Losartan failed."), ("102", "supports", SUPPORT_102))
    v, _, _ = await verified(make_context, answer)
    assert v["status"] == "supported" and v["why"] == "PMID 102 supports it"


async def test_an_answer_no_passage_supports_is_refused(make_context):
    for qtype, exact in (("yesno", ["yes"]), ("factoid", ["CFTR"]), ("summary", [])):
        v, _, _ = await verified(
            make_context, reply(("101", "unrelated", ""), ("103", "unrelated", "")), qtype, exact
        )
        assert v["status"] == "refused", qtype
        assert v["why"].startswith("no cited passage supports")
        assert [p["verdict"] for p in v["passages"]] == ["unrelated"] * 3  # 102 skipped


async def test_an_unparseable_reply_is_refused(make_context):
    v, call, _ = await verified(make_context, "][{")
    assert v["status"] == "refused" and "did not parse" in v["why"]
    assert call["raw"] == "][{" and call["error"].startswith("unparseable output")
    assert [p["quoted"] for p in v["passages"]] == [False] * 3


async def test_a_failed_endpoint_is_not_verified_never_a_pass(make_context):
    v, call, _ = await verified(make_context, ConnectionError("Connection refused"))
    assert v == {
        "status": "not verified",
        "passages": [],
        "why": "the verifier's call failed: ConnectionError: Connection refused",
        "judge": "self",  # who was asked, though it could not answer
    }
    assert call["error"] == "ConnectionError: Connection refused"


async def test_one_call_reads_every_cited_passage(uncached):
    answer = reply(
        ("999", "supports", "Invented."),  # not shown: ignored
        ("102", "supports", SUPPORT_102),
        ("102", "contradicts", SUPPORT_102),  # a second word on 102: the first stands
    )
    v, call, model = await verified(uncached, answer)
    assert len(model.calls) == 1
    messages = model.calls[0]["messages"]
    assert pmids_in(messages) == ["101", "102", "103"]
    prompt = messages[-1].content
    assert f"Question: {QUESTION}" in prompt
    assert "Question type: yesno\nExact answer: yes\nIdeal answer: Losartan reduces" in prompt
    assert model.calls[0]["kwargs"].get("temperature") == 0
    assert [p["pmid"] for p in v["passages"]] == ["101", "102", "103"]
    assert [p["verdict"] for p in v["passages"]] == ["unrelated", "supports", "unrelated"]
    assert v["status"] == "supported"
    # The call is recorded with its prompt and raw output, and a trace shows it.
    assert call["node"] == "verify" and call["prompt"][-1]["content"] == prompt
    shown = block_lines(call_view(call))
    assert any("Invented." in line for line in shown)


async def test_no_cited_passage_is_refused_without_a_call(make_context):
    v, call, model = await verified(make_context, reply(), passages=[])
    assert v["status"] == "refused" and call is None and model.calls == []


def test_auto_verifies_endpoints_not_the_local_model(settings):
    assert verifier_enabled(settings) is False  # the demo model
    endpoint = {"provider": "openai", "model": "m", "base_url": "http://x/v1"}
    remote = load_settings(home=settings.home, models={"ensemble": [endpoint]})
    assert verifier_enabled(remote) is True
    local_verifier = load_settings(
        home=settings.home, models={"ensemble": [endpoint], "verify": {"provider": "local"}}
    )
    assert verifier_enabled(local_verifier) is False
    assert verifier_enabled(load_settings(home=settings.home, verify={"enabled": "on"})) is True
    off = load_settings(
        home=settings.home, models={"ensemble": [endpoint]}, verify={"enabled": "off"}
    )
    assert verifier_enabled(off) is False


def test_verify_enabled_reads_the_environment(settings, monkeypatch):
    monkeypatch.setenv("QUORUM_VERIFY__ENABLED", "off")
    assert load_settings(home=settings.home).verify.enabled == "off"
    monkeypatch.setenv("QUORUM_VERIFY__ENABLED", "maybe")
    with pytest.raises(SettingsError, match=r"invalid setting verify\.enabled"):
        load_settings(home=settings.home)


def test_the_verify_role_defaults_to_another_model_than_the_author():
    ensemble = [ModelSpec(model="e1"), ModelSpec(model="e2")]
    assert ModelSettings(ensemble=ensemble).for_role("verify")[0].model == "e2"
    models = ModelSettings(ensemble=ensemble, synthesis=ModelSpec(model="e2"))
    assert models.for_role("verify")[0].model == "e1"
    apart = ModelSettings(ensemble=[ModelSpec(model="e1")], query=ModelSpec(model="q"))
    assert apart.for_role("verify")[0].model == "q"  # no other member: a query-side model
    chosen = ModelSettings(synthesis=ModelSpec(model="s"), verify=ModelSpec(model="v"))
    assert chosen.for_role("verify")[0].model == "v"
    assert ("verify", chosen.verify) in chosen.by_role()


def test_with_one_model_in_every_role_the_author_judges_itself():
    one = ModelSettings()
    assert one.for_role("verify") == one.for_role("synthesis")
    assert one.independent_judge() is None
    # Another temperature or token budget is the same model: still no other judge.
    warm = ModelSpec(temperature=0.7, max_tokens=99)
    assert ModelSettings(ensemble=[ModelSpec(), warm]).independent_judge() is None


def test_a_local_model_never_judges_an_endpoints_answer():
    endpoint = ModelSpec(provider="openai", model="big", base_url="http://x/v1")
    models = ModelSettings(query=ModelSpec(model="tiny"), ensemble=[endpoint])
    assert models.for_role("verify") == [endpoint]  # the author: labelled self-verified
    other = ModelSpec(provider="openai", model="judge", base_url="http://y/v1")
    models = ModelSettings(query=ModelSpec(model="tiny"), ensemble=[endpoint, other])
    assert models.for_role("verify") == [other]


# --- who judged ---------------------------------------------------------------------------------


async def test_the_author_judging_its_own_answer_is_self_verified(make_context):
    v, _, _ = await verified(make_context, reply(("102", "supports", SUPPORT_102)))
    assert v["status"] == "supported" and v["judge"] == "self"
    assert verified_label(v) == "self-verified"
    assert verification_lines(v)[0].startswith(
        "verified: self-verified, judged by the model that wrote the answer (PMID 102"
    )


async def test_another_model_judging_is_independent(make_context):
    author, judge = script(), script(verify=reply(("102", "supports", SUPPORT_102)))
    ctx = make_context(author, verify=judge)
    v, _ = await verify_answer(
        ctx.models.first("verify"),
        QUESTION,
        "yesno",
        ["yes"],
        "Yes.",
        PASSAGES,
        authors=answer_authors(ctx.models, {"source": "synthesis"}),
    )
    assert v["status"] == "supported" and v["judge"] == "independent"
    assert verified_label(v) == "supported"
    assert author.calls == [] and len(judge.calls) == 1


def test_the_votes_stand_in_is_written_by_every_member(make_context):
    member, judge = script(), script()
    ctx = make_context(script(), ensemble=[member, judge], verify=judge)
    verifier = ctx.models.first("verify")
    assert judge_of(verifier, answer_authors(ctx.models, {"source": "synthesis"})) == "independent"
    assert judge_of(verifier, answer_authors(ctx.models, {"source": "vote"})) == "self"


def test_one_model_at_another_temperature_is_the_same_model(settings):
    endpoint = {"provider": "openai", "model": "m", "base_url": "http://x/v1"}
    models = {
        "ensemble": [endpoint],
        "verify": endpoint | {"temperature": 0.7},
        "query": endpoint | {"model": "other"},
    }
    pool = ModelPool(load_settings(home=settings.home, models=models))
    verifier = pool.first("verify")
    assert verifier is not pool.first("synthesis")  # two instances (two specs) of one model
    assert same_model(verifier, pool.first("synthesis"))
    assert not same_model(verifier, pool.first("query"))


def test_a_support_record_from_before_the_judge_reads_as_it_did():
    assert verified_label({"status": "supported"}) == "supported"
    assert verified_label({"status": "refused", "judge": "self"}) == "refused"
    assert verified_label({}) == "not verified"


# --- the simulator's rule (a wiring harness, not evidence the verifier works) ------------------


async def test_the_scripted_model_answers_verify_by_the_simulators_rule(make_context):
    v, _, _ = await verified(make_context, script())  # no verify reply scripted
    assert v["status"] == "refused"
    assert v["passages"][0]["verdict"] == "contradicts" and v["passages"][0]["quoted"]


async def test_the_simulators_rule_supports_an_entity_it_finds(make_context):
    v, _, _ = await verified(make_context, script(), qtype="factoid", exact=["CFTR"])
    assert v["status"] == "supported" and v["why"] == "PMID 103 supports it"
    assert v["passages"][2]["quote"] == "CFTR and cystic fibrosis"  # the title line


def test_the_simulators_rule_reads_polarity_from_negation_cues():
    text = (
        "[1] PMID 1\nLosartan was not effective against brain atrophy.\n\n"
        "[2] PMID 2\nLosartan reduced brain atrophy in mice.\n\n"
        f"Question: {QUESTION}\n\nQuestion type: yesno\nExact answer: no\nIdeal answer: No."
    )
    found = verify_reply([("user", text)])
    assert [v["verdict"] for v in found["verdicts"]] == ["supports", "contradicts"]


# --- a quote counts only when it says what the answer says (issue 55, item 2) -------------------

WHOLE_102 = SUPPORT_102
"""A whole sentence of 102, on the question's key terms (brain atrophy)."""


async def test_a_one_word_quote_counts_as_nothing(uncached):
    # A separate verifier answering `supports` with the quote "the" verified a wrong gene.
    v, _, _ = await verified(uncached, reply(("102", "supports", "with")))
    assert v["status"] == "refused"
    assert v["passages"][1]["quoted"] is True  # "with" does stand in 102 …
    assert v["passages"][1]["counts"] is False  # … but is no sentence of it
    assert "not a whole sentence" in v["passages"][1]["why_not"]
    assert "not a whole sentence" in v["why"]
    # Control: the whole sentence counts.
    v, _, _ = await verified(uncached, reply(("102", "supports", WHOLE_102)))
    assert v["status"] == "supported" and v["passages"][1]["counts"] is True


async def test_part_of_a_sentence_is_no_quote(uncached):
    part = "Angiotensin receptor blockers were associated with less brain atrophy"
    v, _, _ = await verified(uncached, reply(("102", "supports", part)))
    assert v["status"] == "supported"  # the end's full stop aside, it is the whole sentence
    v, _, _ = await verified(uncached, reply(("102", "supports", part.rsplit(" ", 2)[0])))
    assert v["status"] == "refused"


async def test_a_quote_from_another_cited_passage_counts_as_nothing(uncached):
    # 101's sentence, quoted as 102's verdict: verbatim in the prompt, not in 102.
    contra = " ".join(CONTRA.split())
    v, _, _ = await verified(uncached, reply(("102", "supports", contra)), exact=["no"])
    assert v["status"] == "refused" and v["passages"][1]["counts"] is False
    assert v["passages"][1]["why_not"] == "the quote is not in this passage"
    # Control: the same sentence as 101's verdict counts.
    v, _, _ = await verified(uncached, reply(("101", "supports", contra)), exact=["no"])
    assert v["status"] == "supported"


async def test_quotes_are_compared_with_their_case(uncached):
    v, _, _ = await verified(uncached, reply(("102", "supports", WHOLE_102.lower())))
    assert v["status"] == "refused" and v["passages"][1]["quoted"] is False
    v, _, _ = await verified(uncached, reply(("102", "supports", WHOLE_102)))
    assert v["status"] == "supported"


async def test_a_quote_from_a_passage_off_the_question_counts_as_nothing(uncached):
    answer = reply(("102", "supports", WHOLE_102))
    v, _, _ = await verified(uncached, answer, relevant={"101", "103"})
    assert v["status"] == "refused"
    assert v["passages"][1]["why_not"] == "the passage does not address the question"
    v, _, _ = await verified(uncached, answer, relevant={"101", "102"})
    assert v["status"] == "supported"


async def test_a_factoid_quote_must_hold_the_answer(uncached):
    # The cystic fibrosis liar's kind of quote: a sentence of a passage on the question that
    # does not name the answer given.
    beside = "The CFTR gene is mutated in cystic fibrosis."
    v, _, _ = await verified(
        uncached, reply(("103", "supports", beside)), qtype="factoid", exact=["MBL2"]
    )
    assert v["status"] == "refused"
    assert v["passages"][2]["why_not"] == "the quoted sentence does not hold the answer"
    v, _, _ = await verified(
        uncached, reply(("103", "supports", beside)), qtype="factoid", exact=["CFTR"]
    )
    assert v["status"] == "supported"
    # A list answer: the sentence holds one of its items.
    v, _, _ = await verified(
        uncached, reply(("103", "supports", beside)), qtype="list", exact=["MBL2", "CFTR"]
    )
    assert v["status"] == "supported"


async def test_a_yesno_quote_must_hold_the_question_s_key_terms(uncached):
    aside = "We ran a trial of 211 patients."
    v, _, _ = await verified(uncached, reply(("101", "supports", aside)))
    assert v["status"] == "refused" and "key terms" in v["passages"][0]["why_not"]
    v, _, _ = await verified(uncached, reply(("102", "supports", WHOLE_102)))
    assert v["status"] == "supported"


async def test_a_contradiction_must_be_a_whole_sentence_to_refuse(uncached):
    # "Losartan was not" would refuse a yes on three words: it is no sentence of 101.
    answer = reply(("101", "contradicts", "Losartan was not"), ("102", "supports", WHOLE_102))
    v, _, _ = await verified(uncached, answer)
    assert v["status"] == "supported"
